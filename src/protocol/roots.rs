//! Roots: the directories or files the client lets the server work in (`roots/list`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A directory or file the server may work in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The root's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Root {
    /// A root with this `file://` URI and an optional name.
    pub fn new(uri: impl Into<String>, name: Option<&str>) -> Self {
        Self {
            uri: uri.into(),
            name: name.map(str::to_owned),
            meta: None,
            extra: Map::new(),
        }
    }
}

/// The client's answer to `roots/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots the client exposes.
    pub roots: Vec<Root>,
    /// The result's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
