//! Tool listing and calling results. Unknown fields are kept, so a newer server loses nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    content::ContentBlock,
    results::{PageInfo, ResultType},
};

/// A tool the server offers. Fields this crate does not know are kept in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The name to call it by.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for a person or a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an object schema up to 2025-11-25, any JSON Schema in
    /// 2026-07-28); `Null` if absent.
    #[serde(default)]
    pub input_schema: Value,
    /// The JSON Schema its structured results follow; the client checks results against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints about the tool's behaviour (never to be trusted from an untrusted server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Icons a user interface may show for it (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// 2025-11-25: `{"taskSupport": "forbidden" | "optional" | "required"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ToolExecution>,
    /// The tool's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Tool {
    /// What the MCP Apps extension (`io.modelcontextprotocol/ui`) says of the tool in
    /// `_meta.ui`; `None` when it says nothing or says it in another shape.
    pub fn ui(&self) -> Option<ToolUi> {
        let ui = self.meta.as_ref()?.get("ui")?;
        serde_json::from_value(ui.clone()).ok()
    }

    /// Whether only an app may call the tool (`_meta.ui.visibility` is `["app"]`): a model is
    /// not to be offered it.
    pub fn app_only(&self) -> bool {
        self.ui()
            .and_then(|ui| ui.visibility)
            .is_some_and(|seen| !seen.is_empty() && seen.iter().all(|v| *v == UiVisibility::App))
    }
}

/// A tool's `_meta.ui` (MCP Apps): the `ui://` resource that renders it and who may call it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolUi {
    /// The `ui://` resource of the tool's app.
    pub resource_uri: Option<String>,
    /// Who may call the tool; absent: both.
    pub visibility: Option<Vec<UiVisibility>>,
}

/// Who may call a tool of an MCP App.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum UiVisibility {
    /// The model (the host offers the tool to it).
    Model,
    /// The app's page.
    App,
    /// A value this crate does not know.
    #[serde(other)]
    Other,
}

/// Hints about a tool's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not modify its environment (`None`: false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy, not only add (`None`: true; meaningful only when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no further effect (`None`: false; meaningful
    /// only when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches an open world of external entities, like the web (`None`: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An icon of a tool, resource, prompt or implementation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// The icon's URI: an HTTP(S) URL or a `data:` URI.
    pub src: String,
    /// Its MIME type (e.g. `image/png`), when the source's own is missing or generic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes it suits, as `WxH` (e.g. `48x48`) or `any`; `None`: any size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// `light` or `dark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How a tool may be run (2025-11-25 tasks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecution {
    /// Whether the tool may run as a task: `forbidden` (also when `None`), `optional` or
    /// `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A page of `tools/list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// This page of tools.
    pub tools: Vec<Tool>,
    /// Its cursor, caching hints, `_meta` and unknown fields, beside the items on the wire.
    #[serde(flatten)]
    pub page: PageInfo,
}

/// The answer to `tools/call`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// What the tool produced, for a person or a model.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// The structured result (tools with an `outputSchema`); read it as a type with
    /// [`structured`](Self::structured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// A tool failure is a successful call whose result says so ([`failed`](Self::failed)).
    /// Kept as sent: absent, `false` or `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// 2026-07-28: `complete` when present (absent means the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The result's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CallToolResult {
    /// Whether the tool reports a failure of its own (`isError: true`).
    pub fn failed(&self) -> bool {
        self.is_error == Some(true)
    }

    /// The structured content read as any type (for tools with an `outputSchema`).
    /// (`?` turns its error into [`Error::Protocol`](crate::Error::Protocol).)
    pub fn structured<T: serde::de::DeserializeOwned>(&self) -> Result<T, ContentError> {
        let value = self
            .structured_content
            .as_ref()
            .ok_or(ContentError::NoStructuredContent)?;
        T::deserialize(value).map_err(ContentError::UnexpectedStructuredContent)
    }

    /// The text blocks of the content, joined with newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        texts.join("\n")
    }
}

/// The empty result of `ping` (and other acknowledgements); extra fields are kept.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EmptyResult {
    /// Whatever the server sent, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Why a result's content could not be read as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
    /// [`CallToolResult::structured`]: the result has no `structuredContent`.
    #[error("the result has no structured content")]
    NoStructuredContent,
    /// [`CallToolResult::structured`]: the structured content is not of the type asked for.
    #[error("unexpected structured content: {0}")]
    UnexpectedStructuredContent(#[source] serde_json::Error),
    /// [`ResourceContents::bytes`](super::resources::ResourceContents::bytes): a blob that is
    /// not base64.
    #[error("invalid base64 blob for {uri}: {source}")]
    InvalidBlob {
        /// The resource's URI.
        uri: String,
        /// What is wrong with the base64.
        #[source]
        source: base64::DecodeError,
    },
}
