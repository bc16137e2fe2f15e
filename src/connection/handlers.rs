//! Handlers for the server's requests (2025-11-25 era): `roots/list`, `sampling/createMessage`,
//! `elicitation/create`.
//!
//! Handlers run off the actor, each in a task of its own, so a slow handler never delays the
//! routing of responses. When the server cancels its request, the handler's [`Cancellation`] is
//! cancelled and whatever it returns is not sent.

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc};

use serde_json::{Map, Value};

use crate::{
    cancellation::Cancellation,
    protocol::{
        lifecycle::{
            ClientCapabilities, ClientTaskRequests, ClientTasksCapability, ElicitationCapability,
            ElicitationTaskRequests, ListChangedCapability, SamplingCapability,
            SamplingTaskRequests,
        },
        tasks::TASKS_EXTENSION,
    },
};

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

/// A handler as the connection runs it: JSON params in, a JSON result out.
pub(crate) fn boxed_handler<F, Fut>(handler: F) -> BoxedHandler
where
    F: Fn(Value, Cancellation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, HandlerError>> + Send + 'static,
{
    Arc::new(move |params, token| Box::pin(handler(params, token)))
}

/// The handlers of the server's requests: one for each request the protocol defines, plus raw
/// ones by method (which also take a defined request from its typed handler).
///
/// At most 1024 of the server's requests are held at once (handlers running, or a `tasks/result`
/// waiting), and at most 1024 of the tasks it asks of us still running: past either, its request
/// is answered with an internal error (-32603), and counted in
/// [`ConnectionStats::server_requests_refused`](crate::ConnectionStats).
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    /// `sampling/createMessage`.
    pub sampling: Option<BoxedHandler>,
    /// `elicitation/create` in form mode (`mode` absent or `"form"`).
    pub form_elicitation: Option<BoxedHandler>,
    /// `elicitation/create` in URL mode.
    pub url_elicitation: Option<BoxedHandler>,
    /// `roots/list`.
    pub roots: Option<BoxedHandler>,
    /// By method, before the typed ones.
    raw: HashMap<Box<str>, BoxedHandler>,
    /// The extensions the application declares (`capabilities.extensions`): what it supports
    /// beyond its handlers, e.g. MCP Apps.
    pub extensions: Map<String, Value>,
}

pub(crate) const ROOTS_LIST: &str = "roots/list";
pub(crate) const SAMPLING: &str = "sampling/createMessage";
pub(crate) const ELICITATION: &str = "elicitation/create";

impl Handlers {
    /// Answers `method` with `handler`, whatever typed handler it has.
    pub(crate) fn insert_raw(&mut self, method: impl Into<Box<str>>, handler: BoxedHandler) {
        self.raw.insert(method.into(), handler);
    }

    /// The handler of a request: a raw one for its method, else the typed one (for
    /// `elicitation/create`, by mode).
    pub(crate) fn get(&self, method: &str, params: Option<&Value>) -> Option<&BoxedHandler> {
        if let Some(raw) = self.raw.get(method) {
            return Some(raw);
        }
        match method {
            SAMPLING => self.sampling.as_ref(),
            ROOTS_LIST => self.roots.as_ref(),
            ELICITATION if is_url_mode(params) => self.url_elicitation.as_ref(),
            ELICITATION => self.form_elicitation.as_ref(),
            _ => None,
        }
    }

    fn answers(&self, typed: &Option<BoxedHandler>, method: &str) -> bool {
        typed.is_some() || self.raw.contains_key(method)
    }

    /// Exactly the client capabilities that have handlers (a raw `elicitation/create` handler
    /// sees both modes, so both are declared).
    pub(crate) fn capabilities(&self) -> ClientCapabilities {
        let form = self.answers(&self.form_elicitation, ELICITATION);
        // Declared only when a URL handler exists.
        let url = self.answers(&self.url_elicitation, ELICITATION);
        let elicitation = (form || url).then(|| ElicitationCapability {
            form: form.then(Map::new),
            url: url.then(Map::new),
            extra: Map::new(),
        });
        ClientCapabilities {
            roots: self
                .answers(&self.roots, ROOTS_LIST)
                .then(ListChangedCapability::default),
            sampling: self
                .answers(&self.sampling, SAMPLING)
                .then(SamplingCapability::default),
            elicitation,
            extensions: (!self.extensions.is_empty()).then(|| self.extensions.clone()),
            ..ClientCapabilities::default()
        }
    }

    /// The capabilities of a 2025-11-25 `initialize`: sampling and elicitation may be asked
    /// for as tasks, which the connection runs (`server_tasks.rs`).
    pub(crate) fn capabilities_for_initialize(&self) -> ClientCapabilities {
        let mut capabilities = self.capabilities();
        let requests = ClientTaskRequests {
            sampling: capabilities
                .sampling
                .is_some()
                .then(|| SamplingTaskRequests {
                    create_message: Some(Map::new()),
                    extra: Map::new(),
                }),
            elicitation: capabilities
                .elicitation
                .is_some()
                .then(|| ElicitationTaskRequests {
                    create: Some(Map::new()),
                    extra: Map::new(),
                }),
            extra: Map::new(),
        };
        if requests.sampling.is_some() || requests.elicitation.is_some() {
            capabilities.tasks = Some(ClientTasksCapability {
                list: Some(Map::new()),
                cancel: Some(Map::new()),
                requests: Some(requests),
                extra: Map::new(),
            });
        }
        capabilities
    }

    /// The capabilities of the 2026-07-28 era: server-to-client requests do not exist there,
    /// but the same handlers fulfil the `input_required` results of calls (`client/mrtr.rs`),
    /// so the same capabilities hold; calls the server makes tasks of are followed to their
    /// end (`client/tasks.rs`).
    pub(crate) fn capabilities_for_discover(&self) -> ClientCapabilities {
        let mut capabilities = self.capabilities();
        let extensions = capabilities.extensions.get_or_insert_with(Map::new);
        extensions
            .entry(TASKS_EXTENSION)
            .or_insert_with(|| Value::Object(Map::new()));
        capabilities
    }
}

fn is_url_mode(params: Option<&Value>) -> bool {
    params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url")
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
    use serde_json::json;

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

    fn answering() -> BoxedHandler {
        boxed_handler(|_, _| async { Ok(json!({})) })
    }

    fn declared(handlers: &Handlers) -> Value {
        serde_json::to_value(handlers.capabilities_for_initialize()).unwrap()
    }

    #[test]
    fn each_handler_declares_its_capability_in_the_specs_shape() {
        assert_eq!(declared(&Handlers::default()), json!({}));
        let tasks = |requests: Value| json!({"list": {}, "cancel": {}, "requests": requests});

        let mut handlers = Handlers {
            roots: Some(answering()),
            ..Handlers::default()
        };
        assert_eq!(
            declared(&handlers),
            json!({"roots": {}}),
            "roots never run as tasks"
        );

        handlers.sampling = Some(answering());
        assert_eq!(
            declared(&handlers),
            json!({"roots": {}, "sampling": {},
                "tasks": tasks(json!({"sampling": {"createMessage": {}}}))})
        );

        let form = Handlers {
            form_elicitation: Some(answering()),
            ..Handlers::default()
        };
        assert_eq!(
            declared(&form),
            json!({"elicitation": {"form": {}},
                "tasks": tasks(json!({"elicitation": {"create": {}}}))})
        );
        let url = Handlers {
            url_elicitation: Some(answering()),
            ..Handlers::default()
        };
        assert_eq!(
            declared(&url)["elicitation"],
            json!({"url": {}}),
            "URL mode without form mode"
        );
        let both = Handlers {
            url_elicitation: Some(answering()),
            ..form
        };
        assert_eq!(
            declared(&both)["elicitation"],
            json!({"form": {}, "url": {}})
        );
    }

    #[test]
    fn a_raw_handler_declares_the_capability_of_a_defined_request_only() {
        let mut handlers = Handlers::default();
        handlers.insert_raw("x/custom", answering());
        assert_eq!(handlers.capabilities(), ClientCapabilities::default());
        handlers.insert_raw(ELICITATION, answering());
        let elicitation = handlers.capabilities().elicitation.unwrap();
        assert!(
            elicitation.form.is_some() && elicitation.url.is_some(),
            "a raw elicitation handler sees both modes"
        );
        handlers.insert_raw(ROOTS_LIST, answering());
        handlers.insert_raw(SAMPLING, answering());
        let capabilities = handlers.capabilities();
        assert!(capabilities.roots.is_some() && capabilities.sampling.is_some());
    }

    #[test]
    fn the_modern_era_declares_the_tasks_extension_and_no_tasks_capability() {
        let handlers = Handlers {
            sampling: Some(answering()),
            ..Handlers::default()
        };
        assert_eq!(
            serde_json::to_value(handlers.capabilities_for_discover()).unwrap(),
            json!({"sampling": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
    }

    #[test]
    fn a_raw_handler_takes_its_method_from_the_typed_one_and_elicitation_goes_by_mode() {
        let typed = answering();
        let raw = answering();
        let mut handlers = Handlers {
            form_elicitation: Some(typed.clone()),
            url_elicitation: Some(typed.clone()),
            ..Handlers::default()
        };
        let url = json!({"mode": "url"});
        let chosen = |handlers: &Handlers, params: Option<&Value>| {
            handlers.get(ELICITATION, params).map(Arc::as_ptr)
        };
        assert_eq!(
            chosen(&handlers, None),
            handlers.form_elicitation.as_ref().map(Arc::as_ptr)
        );
        assert_eq!(
            chosen(&handlers, Some(&url)),
            handlers.url_elicitation.as_ref().map(Arc::as_ptr)
        );
        assert!(handlers.get(SAMPLING, None).is_none());
        handlers.insert_raw(ELICITATION, raw.clone());
        assert_eq!(chosen(&handlers, Some(&url)), Some(Arc::as_ptr(&raw)));
        assert_eq!(chosen(&handlers, None), Some(Arc::as_ptr(&raw)));
    }
}
