//! Sampling: the server asks the client's model for a message (`sampling/createMessage`).
//! Numbers are kept as sent (`serde_json::Number`), so nothing changes in a round trip.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

pub use super::content::Role;
use super::{content::ContentBlock, tools::Tool};

/// One content block, or several (2025-11-25 with tools: `tool_use`/`tool_result` blocks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum SamplingContent {
    /// A single block.
    One(ContentBlock),
    /// Several blocks (a JSON array; 2025-11-25 and later).
    Many(Vec<ContentBlock>),
}

impl SamplingContent {
    /// The text blocks, joined with newlines.
    pub fn text(&self) -> String {
        match self {
            SamplingContent::One(block) => block.as_text().unwrap_or_default().to_owned(),
            SamplingContent::Many(blocks) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// One message of the conversation to continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who wrote it: `user` or `assistant`.
    pub role: Role,
    /// What it says.
    pub content: SamplingContent,
    /// The message's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A hint at which model to use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelHint {
    /// A model name or part of one (e.g. `sonnet`); the client may map it to a similar model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What matters to the server when the client picks a model (priorities from 0 to 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Model names to consider, in order of preference (advisory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<ModelHint>>,
    /// How much low cost matters, from 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_priority: Option<Number>,
    /// How much low latency matters, from 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_priority: Option<Number>,
    /// How much capability matters, from 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence_priority: Option<Number>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The params of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequest {
    /// The conversation so far.
    pub messages: Vec<SamplingMessage>,
    /// What the server prefers in a model; the client chooses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// A system prompt the server asks for; the client may change or drop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// `none`, `thisServer` or `allServers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<String>,
    /// The sampling temperature; `None` leaves it to the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<Number>,
    /// The most tokens to generate.
    pub max_tokens: Number,
    /// Sequences that end generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Provider-specific parameters, passed on as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Tools the model may call (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// `{"mode": "auto" | "required" | "none"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// The params' `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The client's answer to `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Who wrote the message (normally `assistant`).
    pub role: Role,
    /// The generated message.
    pub content: SamplingContent,
    /// The model that produced the message.
    pub model: String,
    /// `endTurn`, `stopSequence`, `maxTokens`, `toolUse`, or another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The result's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CreateMessageResult {
    /// An assistant's text message from `model`.
    pub fn text(model: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: SamplingContent::One(ContentBlock::text(text)),
            model: model.into(),
            stop_reason: Some("endTurn".into()),
            meta: None,
            extra: Map::new(),
        }
    }
}
