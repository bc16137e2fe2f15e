//! The 2025-11-25 handshake: `initialize` and what the server tells us about itself.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The version this client offers in `initialize`.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// Handshake versions we accept when a server counter-offers.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// `Implementation`: a name and a version, plus whatever else the peer sent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Implementation {
    pub name: String,
    pub version: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Implementation {
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeParams<'a> {
    pub protocol_version: &'a str,
    pub capabilities: &'a Value,
    pub client_info: &'a Implementation,
}

/// The server's answer to `initialize`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: String,
    #[serde(default)]
    pub capabilities: Value,
    pub server_info: Implementation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
