//! Handlers for the server's requests (2025-11-25 era): `roots/list`, `sampling/createMessage`,
//! `elicitation/create`.
//!
//! Handlers run off the actor, each in a task of its own, so a slow handler never delays the
//! routing of responses. When the server cancels its request, the handler's [`Cancellation`] is
//! cancelled and whatever it returns is not sent.

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc};

use serde_json::{json, Map, Value};

use crate::cancellation::Cancellation;

/// An error a handler answers with. The default code is -32603 (internal error).
#[derive(Debug, Clone)]
pub struct HandlerError {
    /// The JSON-RPC error code sent to the server.
    pub code: i64,
    /// The error message sent to the server.
    pub message: String,
    /// The error's `data` member; `None` omits it.
    pub data: Option<Value>,
}

impl From<HandlerError> for crate::protocol::jsonrpc::ErrorObject {
    /// The JSON-RPC error sent to the server for a handler's error.
    fn from(e: HandlerError) -> Self {
        Self {
            code: e.code,
            message: e.message,
            data: e.data,
        }
    }
}

impl HandlerError {
    /// An error with this code and message, without `data`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// An internal error (-32603) with this message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, message)
    }
}

impl<E: std::fmt::Display> From<E> for HandlerError {
    fn from(e: E) -> Self {
        Self::internal(e.to_string())
    }
}

pub(crate) type BoxedHandler = Arc<
    dyn Fn(Value, Cancellation) -> Pin<Box<dyn Future<Output = Result<Value, HandlerError>> + Send>>
        + Send
        + Sync,
>;

/// The registered handlers, by method.
///
/// At most 1024 of the server's requests are held at once (handlers running, or a `tasks/result`
/// waiting), and at most 1024 of the tasks it asks of us still running: past either, its request
/// is answered with an internal error (-32603), and counted in
/// [`ConnectionStats::server_requests_refused`](crate::ConnectionStats).
#[derive(Clone, Default)]
pub struct Handlers {
    by_method: HashMap<&'static str, BoxedHandler>,
}

pub(crate) const ROOTS_LIST: &str = "roots/list";
pub(crate) const SAMPLING: &str = "sampling/createMessage";
pub(crate) const ELICITATION: &str = "elicitation/create";
/// The key of the URL-mode elicitation handler (same method, another mode).
pub(crate) const ELICITATION_URL: &str = "elicitation/create#url";

impl Handlers {
    pub(crate) fn insert<F, Fut>(&mut self, method: &'static str, handler: F)
    where
        F: Fn(Value, Cancellation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, HandlerError>> + Send + 'static,
    {
        let boxed: BoxedHandler = Arc::new(move |params, token| Box::pin(handler(params, token)));
        self.by_method.insert(method, boxed);
    }

    /// The handler of a request: by method, and for `elicitation/create` by mode (a URL-mode
    /// elicitation goes to the URL handler).
    pub(crate) fn get(&self, method: &str, params: Option<&Value>) -> Option<&BoxedHandler> {
        let url_mode = method == ELICITATION
            && params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url");
        if url_mode {
            return self.by_method.get(ELICITATION_URL);
        }
        self.by_method.get(method)
    }

    /// Exactly the client capabilities that have handlers.
    pub(crate) fn capabilities(&self) -> Value {
        let mut caps = Map::new();
        if self.by_method.contains_key(ROOTS_LIST) {
            caps.insert("roots".into(), json!({}));
        }
        if self.by_method.contains_key(SAMPLING) {
            caps.insert("sampling".into(), json!({}));
        }
        let mut elicitation = Map::new();
        if self.by_method.contains_key(ELICITATION) {
            elicitation.insert("form".into(), json!({}));
        }
        if self.by_method.contains_key(ELICITATION_URL) {
            // Declared only when a URL handler exists.
            elicitation.insert("url".into(), json!({}));
        }
        if !elicitation.is_empty() {
            caps.insert("elicitation".into(), Value::Object(elicitation));
        }
        Value::Object(caps)
    }
}

/// Fills what an accepted form-mode elicitation left out with the defaults of the requested
/// schema (SEP-1034).
pub fn apply_elicitation_defaults(params: &Value, mut result: Value) -> Value {
    if result.get("action").and_then(Value::as_str) != Some("accept") {
        return result;
    }
    let Some(properties) = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
    else {
        return result;
    };
    let Some(obj) = result.as_object_mut() else {
        return result;
    };
    let content = obj
        .entry("content")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(content) = content.as_object_mut() {
        for (name, schema) in properties {
            if let Some(default) = schema.get("default") {
                content
                    .entry(name.clone())
                    .or_insert_with(|| default.clone());
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_missing_fields_of_an_accepted_form() {
        let params = json!({"requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "anon"},
            "age": {"type": "integer", "default": 30},
            "email": {"type": "string"}}}});
        let filled = apply_elicitation_defaults(
            &params,
            json!({"action": "accept", "content": {"name": "Ann"}}),
        );
        assert_eq!(filled["content"], json!({"name": "Ann", "age": 30}));
        let declined = apply_elicitation_defaults(&params, json!({"action": "decline"}));
        assert_eq!(declined, json!({"action": "decline"}));
    }
}
