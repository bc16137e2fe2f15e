//! JSON-RPC messages: error codes, responses, notifications, as newline-terminated lines.

use serde::Serialize;
use serde_json::{json, Value};

use crate::SERVER_NAME;

pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// MCP: `resources/read` of a uri the server does not have.
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2026-07-28: the request needs a client capability it did not declare
/// (`data.requiredCapabilities`).
pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

#[derive(Serialize)]
pub(crate) struct ResultMsg<'a> {
    pub(crate) jsonrpc: &'static str,
    pub(crate) id: &'a Value,
    pub(crate) result: &'a Value,
}

#[derive(Serialize)]
pub(crate) struct ErrorMsg<'a> {
    pub(crate) jsonrpc: &'static str,
    pub(crate) id: &'a Value,
    pub(crate) error: ErrorBody<'a>,
}

#[derive(Serialize)]
pub(crate) struct ErrorBody<'a> {
    pub(crate) code: i64,
    pub(crate) message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<&'a Value>,
}

/// Compact JSON plus the line terminator; empty if serialization fails (it cannot for
/// these types, but a failure must not take the server down).
pub(crate) fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    match serde_json::to_vec(message) {
        Ok(mut line) => {
            line.push(b'\n');
            line
        }
        Err(err) => {
            eprintln!("{SERVER_NAME}: cannot serialize message: {err}");
            Vec::new()
        }
    }
}

pub(crate) fn notification(method: &str, params: Value) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// A notification without `params` (the `list_changed` ones).
pub(crate) fn bare_notification(method: &str) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "method": method}))
}
