//! Tool listing and calling results. Unknown fields are kept, so a newer server loses nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::content::ContentBlock;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub input_schema: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    pub tools: Vec<Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// A tool failure is a successful call whose result says so.
    #[serde(default)]
    pub is_error: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CallToolResult {
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
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
