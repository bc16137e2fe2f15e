//! `completion/complete`: argument completion for prompts and resource templates.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What is being completed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type")]
pub enum CompletionReference {
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

impl CompletionReference {
    pub fn prompt(name: impl Into<String>) -> Self {
        CompletionReference::Prompt { name: name.into() }
    }

    pub fn resource(uri_template: impl Into<String>) -> Self {
        CompletionReference::Resource {
            uri: uri_template.into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteResult {
    pub completion: Completion,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
