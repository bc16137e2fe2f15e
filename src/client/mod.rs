//! [`Client`]: the everyday handle over a connection's address.

mod call;
mod connect;
mod interned;
mod lifecycle;
#[cfg(feature = "otel")]
mod metrics;
mod session_facts;
#[cfg(feature = "otel")]
pub(crate) use metrics::Metrics;
mod list_cache;
mod mrtr;
mod notifications;
mod output_schemas;
mod pages;
mod progress;
mod shared;
#[cfg(feature = "skills")]
pub mod skills;
mod tasks;
mod tool_facts;
mod tool_headers;

use std::{sync::Arc, time::Duration};

use actix::{Addr, Recipient};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

pub use crate::connection::{apply_elicitation_defaults, HandlerError};
pub use call::{Call, CallFuture};
pub use connect::{ConnectOptions, Placement, DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT};
pub use lifecycle::{ProtocolEra, DISCOVER_PROBE_TIMEOUT};
pub use notifications::{NotificationStream, NOTIFICATION_BUFFER};
pub use pages::{AllPages, Page, DEFAULT_MAX_PAGES};
pub use progress::{ProgressCallback, ProgressStream, PROGRESS_BUFFER};
pub use tasks::{TaskHandle, TaskStatusCallback, TaskStatusStream, TaskWait};

use self::shared::Shared;
use crate::connection::Publisher;
use crate::{
    connection::{
        Close, Connection, ConnectionStats, GetStats, Notify, Request, Subscribe, WaitReleased,
    },
    error::{CloseReason, Error},
    protocol::{
        completion::{CompleteResult, CompletionReference},
        lifecycle::{Implementation, InitializeResult},
        logging::LoggingLevel,
        notifications::{ListenFilter, ServerNotification},
        prompts::{GetPromptResult, ListPromptsResult},
        resources::{ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult},
        tools::{CallToolResult, EmptyResult, ListToolsResult},
    },
};

/// Settings every call of a client shares.
pub(crate) struct Settings {
    pub default_timeout: Option<Duration>,
    /// Check structured tool results against their tool's `outputSchema`.
    pub validate_output: bool,
    pub max_pages: usize,
    pub notifications: Publisher,
    /// 2026-07-28: the log level every request asks for (none by default).
    pub log_level: LevelCell,
}

/// An optional [`LoggingLevel`], shared and changed without a lock.
#[derive(Default)]
pub(crate) struct LevelCell(std::sync::atomic::AtomicU8);

impl LevelCell {
    const LEVELS: [LoggingLevel; 8] = [
        LoggingLevel::Debug,
        LoggingLevel::Info,
        LoggingLevel::Notice,
        LoggingLevel::Warning,
        LoggingLevel::Error,
        LoggingLevel::Critical,
        LoggingLevel::Alert,
        LoggingLevel::Emergency,
    ];

    pub fn get(&self) -> Option<LoggingLevel> {
        let index = self.0.load(std::sync::atomic::Ordering::Relaxed);
        Self::LEVELS
            .get(usize::from(index).checked_sub(1)?)
            .copied()
    }

    pub fn set(&self, level: Option<LoggingLevel>) {
        let index = level.map_or(0, |level| {
            Self::LEVELS
                .iter()
                .position(|l| *l == level)
                .map_or(0, |i| i + 1)
        });
        // At most 8: fits.
        self.0.store(
            u8::try_from(index).unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// A cheap-to-clone handle to one server connection.
///
/// Every clone shares the same connection actor. The connection closes when the last handle
/// (client, `Addr`, or pending request) is dropped, or on [`Client::close`].
#[derive(Clone)]
pub struct Client {
    /// The actor's address and its inbox; every call future holds this `Arc`.
    shared: Arc<Shared>,
    server: Arc<InitializeResult>,
    settings: Arc<Settings>,
}

impl Client {
    /// Starts a connection actor over `transport` and runs the handshake.
    ///
    /// Inside an actix System (`#[actix::main]`, `#[actix_web::main]`, `#[actix::test]`) the actor
    /// runs on the current arbiter; anywhere else (e.g. `#[tokio::main]`) on a thread of its own.
    pub async fn connect(transport: impl crate::transport::Transport) -> Result<Client, Error> {
        ConnectOptions::default().connect(transport).await
    }

    /// Options for [`connect`](Self::connect): client info, handlers for server requests,
    /// timeouts, where the actor runs.
    pub fn builder() -> ConnectOptions {
        ConnectOptions::default()
    }

    /// The connection actor's address, to share or to send [`Request`]/[`Cancel`](crate::Cancel)
    /// messages directly.
    pub fn addr(&self) -> &Addr<Connection> {
        self.shared.addr()
    }

    /// The server's answer to `initialize`.
    pub fn initialize_result(&self) -> &InitializeResult {
        &self.server
    }

    /// The server's name and version (`serverInfo`). In the 2026-07-28 era it comes from
    /// `server/discover`'s `_meta`; named `unknown` if the server sent none.
    pub fn server_info(&self) -> &Implementation {
        &self.server.server_info
    }

    /// Whether the connection has ended (the server exited, its stream or session closed, or
    /// [`close`](Self::close) was called): every call would fail with [`Error::Closed`]. A
    /// closed client never reopens; connect again (the [`Servers`](crate::Servers) manager does
    /// this for you).
    pub fn is_closed(&self) -> bool {
        self.shared.has_ended()
    }

    /// Why the connection ended ([`Error::Closed`] with its [`CloseReason`] for an end the
    /// connection saw), or `None` while it is open.
    pub fn close_reason(&self) -> Option<Error> {
        if !self.is_closed() {
            return None;
        }
        Some(self.shared.end_reason().unwrap_or(Error::Closed {
            reason: CloseReason::ActorStopped,
        }))
    }

    /// Resolves, with why, once the connection has ended and its transport has let everything
    /// go (the server process is reaped). The future does not keep the connection open: it
    /// resolves when the last handle is dropped too.
    pub fn closed(&self) -> impl std::future::Future<Output = Error> + Send + 'static {
        let released = self.shared.addr().send(WaitReleased);
        let shared = Arc::downgrade(&self.shared);
        let inbox = self.shared.inbox();
        async move {
            if let Ok(mut released) = released.await {
                let _ = released.wait_for(|done| *done).await;
            }
            drop(shared);
            inbox.end_reason().cloned().unwrap_or(Error::Closed {
                reason: CloseReason::ActorStopped,
            })
        }
    }

    /// Whether the connection speaks the 2026-07-28 era.
    pub(crate) fn is_modern(&self) -> bool {
        self.shared.is_modern()
    }

    /// The protocol version the server chose.
    pub fn protocol_version(&self) -> &str {
        &self.server.protocol_version
    }

    /// The id of the session the server gave (2025-11-25 Streamable HTTP, `Mcp-Session-Id`),
    /// the current one after a renewal; `None` over stdio, in the 2026-07-28 era, or from a
    /// server that keeps no sessions.
    pub fn session_id(&self) -> Option<std::sync::Arc<str>> {
        self.shared.facts.known().session_id
    }

    /// What the server offers, read once at the handshake (fields this crate does not know
    /// are in `extra`).
    pub fn capabilities(&self) -> &crate::protocol::lifecycle::ServerCapabilities {
        &self.server.capabilities
    }

    /// The extensions the server declared (`capabilities.extensions`), by identifier, with
    /// their settings; empty when it declared none.
    pub fn server_extensions(&self) -> &serde_json::Map<String, Value> {
        static NONE: std::sync::LazyLock<serde_json::Map<String, Value>> =
            std::sync::LazyLock::new(serde_json::Map::new);
        self.server
            .capabilities
            .extensions
            .as_ref()
            .unwrap_or(&NONE)
    }

    /// Whether the server declared extension `name`.
    pub fn server_extension(&self, name: &str) -> Option<&Value> {
        self.server_extensions().get(name)
    }

    /// How to use the server, e.g. in a model's system prompt; `None` if it gave none.
    pub fn instructions(&self) -> Option<&str> {
        self.server.instructions.as_deref()
    }

    /// A call with the connection's default timeout.
    pub(crate) fn call<T>(&self, request: Request) -> Call<T> {
        let call =
            Call::new(self.shared.clone(), request).timeout_opt(self.settings.default_timeout);
        match self.settings.log_level.get() {
            Some(level) if self.shared.is_modern() => call.log_level(level),
            _ => call,
        }
    }

    /// One page of a list method. In the 2026-07-28 era a page the server marked cacheable
    /// (`ttlMs`) is answered from the cache until it expires or its `list_changed` comes.
    pub(crate) fn list_page<P: Page>(&self, cursor: Option<&str>) -> Call<P> {
        self.call(Request::new(P::METHOD, cursor_params(cursor)))
            .cached(P::METHOD, cursor)
    }

    fn call_with<T, P: Serialize>(&self, method: &'static str, params: &P) -> Call<T> {
        self.call(Request::with_params(method, Some(params)))
    }

    /// Any request, for methods this crate has no method of its own for: `params` is any
    /// `Serialize` that serializes to a JSON object (`()` or `None` for none), the result any
    /// `Deserialize` (`serde_json::Value` for the raw JSON). Params of another shape fail the
    /// call with [`Error::Misuse`] before anything is sent. A `tools/call` sent this way is
    /// routed like [`call_tool`](Self::call_tool)'s.
    pub fn request<R>(
        &self,
        method: impl Into<std::borrow::Cow<'static, str>>,
        params: impl Serialize,
    ) -> Call<R> {
        let method = method.into();
        let params = match params_object(&params) {
            Ok(params) => params,
            Err(why) => return self.call(Request::refused(method, why)),
        };
        let routing = self.shared.raw_tool_call_routing(&method, params.as_ref());
        self.call(Request::new(method, params).with_routing(routing))
    }

    /// `ping`: the server answers at once with an empty result. Legacy era only: 2026-07-28 removed
    /// `ping`, so a server of that era may reject it.
    pub fn ping(&self) -> Call<EmptyResult> {
        self.call(Request::new("ping", None))
    }

    /// `tools/list`, one page (`cursor` from the previous page's `next_cursor`).
    pub fn list_tools(&self, cursor: Option<&str>) -> Call<ListToolsResult> {
        self.list_page(cursor)
    }

    /// Every tool, following cursors.
    pub fn tools(&self) -> AllPages<ListToolsResult> {
        AllPages::new(self.clone())
    }

    /// `tools/call`. A tool's own failure is a successful call with `isError: true` (`CallToolResult::failed`).
    pub fn call_tool(&self, name: &str, arguments: Value) -> Call<CallToolResult> {
        #[derive(Serialize)]
        struct Params<'a> {
            name: &'a str,
            arguments: &'a Value,
        }
        let routing = self.shared.tool_call_routing(name, &arguments);
        let params = Params {
            name,
            arguments: &arguments,
        };
        let request = Request::with_params("tools/call", Some(&params)).with_routing(routing);
        self.tool_call(name, request)
    }

    /// `tools/call` with arguments from any serializable value, which must serialize to a JSON
    /// object: anything else fails the call before anything is sent. Read a structured result as
    /// your own type with [`CallToolResult::structured`].
    pub fn call_tool_with<A: Serialize + ?Sized>(
        &self,
        name: &str,
        arguments: &A,
    ) -> Call<CallToolResult> {
        match serde_json::to_value(arguments) {
            Ok(Value::Object(arguments)) => self.call_tool(name, Value::Object(arguments)),
            Ok(other) => self.call(Request::refused(
                "tools/call",
                format!(
                    "tool arguments must be a JSON object, not {}",
                    json_kind(&other)
                ),
            )),
            Err(e) => self.call(Request::refused(
                "tools/call",
                format!("tool arguments do not serialize: {e}"),
            )),
        }
    }

    fn tool_call(&self, name: &str, request: Request) -> Call<CallToolResult> {
        let schema = if self.settings.validate_output {
            self.shared.output_schema(name)
        } else {
            None
        };
        let call = self.call(request).check_output(name, schema);
        // A tool that says it must run as a task is run as one (2025-11-25 `taskSupport`),
        // when the server says it runs tool calls as tasks (2026-07-28: the server decides).
        // The tool is asked first: for every other tool that is one set lookup, no JSON.
        if self.shared.task_required(name) && self.server_runs_tool_tasks() {
            return call.as_task();
        }
        call
    }

    /// Whether the server runs tool calls as tasks (2025-11-25 capability
    /// `tasks.requests.tools.call`; 2026-07-28: the server decides per call).
    fn server_runs_tool_tasks(&self) -> bool {
        self.shared.is_modern()
            || self
                .server
                .capabilities
                .tasks
                .as_ref()
                .and_then(|tasks| tasks.pointer("/requests/tools/call"))
                .is_some()
    }

    /// A task on the server, by its id (from [`Call::start_task`], perhaps in another
    /// process): read it, wait for it, cancel it.
    pub fn task(&self, task_id: impl Into<String>) -> TaskHandle {
        TaskHandle::new(self.shared.clone(), task_id.into())
    }

    /// `tasks/list` (2025-11-25): the server's tasks, one page.
    pub fn list_tasks(
        &self,
        cursor: Option<&str>,
    ) -> Call<crate::protocol::tasks::ListTasksResult> {
        self.call(Request::new("tasks/list", cursor_params(cursor)))
    }

    /// `resources/list`, one page (`cursor` from the previous page's `next_cursor`).
    pub fn list_resources(&self, cursor: Option<&str>) -> Call<ListResourcesResult> {
        self.list_page(cursor)
    }

    /// Every resource, following cursors.
    pub fn resources(&self) -> AllPages<ListResourcesResult> {
        AllPages::new(self.clone())
    }

    /// `resources/templates/list`, one page (`cursor` from the previous page's `next_cursor`).
    pub fn list_resource_templates(
        &self,
        cursor: Option<&str>,
    ) -> Call<ListResourceTemplatesResult> {
        self.list_page(cursor)
    }

    /// Every resource template, following cursors.
    pub fn resource_templates(&self) -> AllPages<ListResourceTemplatesResult> {
        AllPages::new(self.clone())
    }

    /// `resources/read`: text contents, or base64 blobs ([`ResourceContents::bytes`](crate::ResourceContents::bytes) decodes).
    pub fn read_resource(&self, uri: &str) -> Call<ReadResourceResult> {
        let request = Request::with_params("resources/read", Some(&json!({ "uri": uri })));
        self.call(request.with_routing(self.shared.named_routing(uri)))
    }

    /// `resources/subscribe`: asks for `notifications/resources/updated` when `uri` changes. Legacy
    /// era only: 2026-07-28 replaced it with [`listen`](Self::listen).
    pub fn subscribe_resource(&self, uri: &str) -> Call<EmptyResult> {
        self.call_with("resources/subscribe", &json!({ "uri": uri }))
    }

    /// `resources/unsubscribe`: undoes [`subscribe_resource`](Self::subscribe_resource).
    /// Legacy era only.
    pub fn unsubscribe_resource(&self, uri: &str) -> Call<EmptyResult> {
        self.call_with("resources/unsubscribe", &json!({ "uri": uri }))
    }

    /// `prompts/list`, one page (`cursor` from the previous page's `next_cursor`).
    pub fn list_prompts(&self, cursor: Option<&str>) -> Call<ListPromptsResult> {
        self.list_page(cursor)
    }

    /// Every prompt, following cursors.
    pub fn prompts(&self) -> AllPages<ListPromptsResult> {
        AllPages::new(self.clone())
    }

    /// `prompts/get` with its arguments (string values).
    pub fn get_prompt(&self, name: &str, arguments: Map<String, Value>) -> Call<GetPromptResult> {
        let params = json!({ "name": name, "arguments": arguments });
        let request = Request::with_params("prompts/get", Some(&params));
        self.call(request.with_routing(self.shared.named_routing(name)))
    }

    /// `completion/complete` for one argument of a prompt or resource template; `context` holds
    /// the values of arguments already chosen.
    pub fn complete(
        &self,
        reference: CompletionReference,
        argument: &str,
        value: &str,
        context: Option<Map<String, Value>>,
    ) -> Call<CompleteResult> {
        let mut params = json!({
            "ref": reference,
            "argument": { "name": argument, "value": value },
        });
        if let Some(context) = context {
            params["context"] = json!({ "arguments": context });
        }
        self.call_with("completion/complete", &params)
    }

    /// Asks the server for log messages (`notifications/message`) at `level` and above.
    ///
    /// Legacy era: sends `logging/setLevel` for the session. 2026-07-28 era, which removed that
    /// method: every later request of this client carries the level in its `_meta`
    /// (`io.modelcontextprotocol/logLevel`), which is how that revision asks for logs; nothing
    /// is sent now. [`Call::log_level`] sets it for one request.
    pub async fn set_logging_level(&self, level: LoggingLevel) -> Result<(), Error> {
        if self.shared.is_modern() {
            self.settings.log_level.set(Some(level));
            return Ok(());
        }
        let _: EmptyResult = self
            .call_with("logging/setLevel", &json!({ "level": level }))
            .await?;
        Ok(())
    }

    /// Stops asking for log messages on later requests (2026-07-28 era; see
    /// [`set_logging_level`](Self::set_logging_level)). A legacy session has no "off": set a
    /// high level there instead.
    pub fn clear_logging_level(&self) {
        self.settings.log_level.set(None);
    }

    /// `subscriptions/listen` (2026-07-28): asks the server for the notifications `filter` names.
    /// The request stays open, without a timeout, for as long as the subscription lives; what it
    /// brings arrives on [`notifications`](Self::notifications) and to subscribed actors.
    /// Cancelling or dropping the call ends the subscription (over HTTP: its POST is aborted).
    /// It resolves when the server ends the subscription gracefully.
    pub fn listen(&self, filter: &ListenFilter) -> Call<Value> {
        self.call_with("subscriptions/listen", &json!({ "notifications": filter }))
            .no_timeout()
    }

    /// The server's notifications (list changes, resource updates, log messages) as a bounded
    /// stream; see [`NotificationStream`] for what happens when it is not read.
    pub fn notifications(&self) -> NotificationStream {
        let sender = self
            .settings
            .notifications
            .get_or_init(|| broadcast::channel(NOTIFICATION_BUFFER).0);
        NotificationStream::new(sender.subscribe())
    }

    /// Delivers the server's notifications to an actor (dropped and counted while its mailbox is
    /// full).
    pub async fn subscribe(&self, recipient: Recipient<ServerNotification>) -> Result<(), Error> {
        self.shared
            .addr()
            .send(Subscribe(recipient))
            .await
            .map_err(|_| actor_stopped())
    }

    /// Sends any notification (queued in order with requests; resolves once queued):
    /// `params` as for [`request`](Self::request).
    pub async fn notify(
        &self,
        method: impl Into<String>,
        params: impl Serialize,
    ) -> Result<(), Error> {
        let notify = Notify {
            method: method.into(),
            params: params_object(&params).map_err(Error::Misuse)?,
        };
        self.shared
            .addr()
            .send(notify)
            .await
            .map_err(|_| actor_stopped())?
    }

    /// The connection's counters.
    pub async fn stats(&self) -> Result<ConnectionStats, Error> {
        self.shared
            .addr()
            .send(GetStats)
            .await
            .map_err(|_| actor_stopped())
    }

    /// Closes the connection for every handle: pending requests fail with
    /// [`CloseReason::ClosedByClient`]; the server gets EOF, then SIGTERM and SIGKILL if it lingers.
    pub async fn close(&self) {
        let _ = self.shared.addr().send(Close).await;
    }

    /// [`close`](Self::close), then waits until the transport released everything: frames queued
    /// before (a cancel, say) were written and the server process was reaped. Call it before a
    /// program exits.
    pub async fn shutdown(&self) {
        self.close().await;
        if let Ok(mut released) = self.shared.addr().send(WaitReleased).await {
            let _ = released.wait_for(|done| *done).await;
        }
    }
}

/// Params as JSON-RPC takes them from us: an object, or none (`null`: `()`, `None`).
fn params_object(params: &impl Serialize) -> Result<Option<Value>, String> {
    match serde_json::to_value(params) {
        Ok(Value::Null) => Ok(None),
        Ok(object @ Value::Object(_)) => Ok(Some(object)),
        Ok(other) => Err(format!(
            "params must be a JSON object, not {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("params do not serialize: {e}")),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn cursor_params(cursor: Option<&str>) -> Option<Value> {
    cursor.map(|c| json!({ "cursor": c }))
}

fn actor_stopped() -> Error {
    Error::Closed {
        reason: CloseReason::ActorStopped,
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server.server_info.name)
            .field("protocol_version", &self.server.protocol_version)
            .finish()
    }
}
