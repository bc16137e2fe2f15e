//! What the gateway answers downstream: results (with what the 2026-07-28 era asks of each),
//! errors, and the refusal a routed request ends in.

use actix_mcp::{Error, ServersError};
use serde_json::{json, Value};

/// JSON-RPC: the method is not one the gateway serves.
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// 2026-07-28: the request needs a client capability its `_meta` did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
pub const INTERNAL_ERROR: i64 = -32603;
/// The config's `access` rules do not let this caller use what the request names (its `data`
/// names the `scope` that would, if one would).
pub const FORBIDDEN: i64 = -32003;

pub fn error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// `result` for a 2026-07-28 client, with the cache hints its era asks of lists and reads: the
/// gateway's answers are made of upstream ones and may change with them, so none is for a
/// client to keep (`ttlMs` 0) or to share (`private`).
pub fn uncacheable(mut result: Value) -> Value {
    if let Some(object) = result.as_object_mut() {
        object.insert("ttlMs".into(), json!(0));
        object.insert("cacheScope".into(), json!("private"));
    }
    result
}

/// A result; for a 2026-07-28 client (`modern`) with what that era asks of every result
/// (`resultType`).
pub fn result(id: &Value, mut result: Value, modern: bool) -> Value {
    if let (true, Some(object)) = (modern, result.as_object_mut()) {
        object
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A downstream error: code, message, data. The upstream server's own JSON-RPC error is passed
/// on as it was; anything else is an internal error naming what happened.
pub struct Refusal(pub i64, pub String, pub Option<Value>);

impl Refusal {
    pub fn params(message: impl Into<String>) -> Self {
        Self(INVALID_PARAMS, message.into(), None)
    }

    pub fn from_error(failure: &Error) -> Self {
        match failure {
            Error::Server {
                code,
                message,
                data,
            } => Self(*code, message.clone(), data.clone()),
            other => Self(INTERNAL_ERROR, other.to_string(), None),
        }
    }

    pub fn with_id(self, id: &Value) -> Value {
        let mut object = json!({"code": self.0, "message": self.1});
        if let Some(data) = self.2 {
            object["data"] = data;
        }
        json!({"jsonrpc": "2.0", "id": id, "error": object})
    }
}

impl From<ServersError> for Refusal {
    fn from(failure: ServersError) -> Self {
        match failure.client_error() {
            Some(error) => Self::from_error(error),
            None => Self(INTERNAL_ERROR, failure.to_string(), None),
        }
    }
}
