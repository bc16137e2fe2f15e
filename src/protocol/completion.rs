//! `completion/complete`: argument completion for prompts and resource templates.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What is being completed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum CompletionReference {
    /// An argument of a prompt (`ref/prompt`).
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
    },
    /// A variable of a resource template (`ref/resource`).
    #[serde(rename = "ref/resource")]
    Resource {
        /// The resource template's URI template (or a plain resource URI).
        uri: String,
    },
}

impl CompletionReference {
    /// An argument of the prompt `name`.
    pub fn prompt(name: impl Into<String>) -> Self {
        CompletionReference::Prompt { name: name.into() }
    }

    /// A variable of the resource template `uri_template`.
    pub fn resource(uri_template: impl Into<String>) -> Self {
        CompletionReference::Resource {
            uri: uri_template.into(),
        }
    }
}

/// The answer to `completion/complete`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteResult {
    /// The suggestions.
    pub completion: Completion,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Suggested values for one argument.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The suggestions, at most 100.
    #[serde(default)]
    pub values: Vec<String>,
    /// How many suggestions there are in all (can exceed those sent); `None` if not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether there are more suggestions than those sent; `None` if not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
