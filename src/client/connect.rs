//! Starting a connection: options, where the actor runs (the handshake is in `lifecycle.rs`).

use std::{
    future::Future,
    sync::{Arc, OnceLock, Weak},
    time::Duration,
};

use actix::{Actor, Addr};
use serde_json::Value;

use super::{
    lifecycle::ProtocolEra,
    list_cache::{Family, ListCache},
    pages::DEFAULT_MAX_PAGES,
    session_facts::SessionFacts,
    shared::Shared,
    Client, LevelCell, Settings,
};
use crate::connection::Publisher;
use crate::{
    cancellation::Cancellation,
    connection::{
        apply_elicitation_defaults, boxed_handler, Close, Connection, CountersObserver,
        HandlerError, Handlers, Inbox, Link, NotificationObserver, ProgressObserver,
        SessionObserver, DEFAULT_MAILBOX_CAPACITY,
    },
    error::Error,
    pool::Pool,
    protocol::{
        elicitation::{ElicitResult, FormElicitation, UrlElicitation},
        lifecycle::Implementation,
        logging::LoggingLevel,
        notifications::ServerNotification,
        roots::{ListRootsResult, Root},
        sampling::{CreateMessageRequest, CreateMessageResult},
    },
    transport::Transport,
};

/// A typed handler behind the `Value` form: params read as `P` (else -32602), the result
/// written as JSON.
async fn typed<P, R, F, Fut>(
    handler: Arc<F>,
    params: Value,
    token: Cancellation,
) -> Result<Value, HandlerError>
where
    P: serde::de::DeserializeOwned,
    R: serde::Serialize,
    F: Fn(P, Cancellation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, HandlerError>> + Send + 'static,
{
    let params: P = serde_json::from_value(params)
        .map_err(|e| HandlerError::new(-32602, format!("invalid params: {e}")))?;
    let result = handler(params, token).await?;
    serde_json::to_value(result).map_err(HandlerError::from)
}

/// Where the connection actor (and its transport's tasks) runs. No placement makes a thread per
/// connection.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Placement {
    /// The current arbiter inside an actix System; the [pool](Placement::Pool) anywhere else
    /// (plain tokio, a plain thread).
    #[default]
    Auto,
    /// The current arbiter; connecting fails outside an actix System.
    Current,
    /// The process's pool of arbiters (one per core by default, see
    /// [`set_pool_size`](crate::set_pool_size)): the one running the fewest connections. Spreads
    /// many connections over every core; what a manager of many servers uses by default. Its
    /// logs go to the global `tracing` subscriber: one set with `set_default` covers only the
    /// thread that set it.
    Pool,
    /// This arbiter (e.g. one made for MCP connections in an actix-web service).
    Arbiter(actix_rt::ArbiterHandle),
}

/// How to connect. Built by [`Client::builder`].
#[derive(Clone)]
pub struct ConnectOptions {
    pub(super) client_info: Implementation,
    pub(super) handlers: Handlers,
    pub(super) cancellation: Option<Cancellation>,
    pub(super) connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    max_pages: usize,
    placement: Placement,
    mailbox_capacity: usize,
    /// The server's name in logs (the connection's span).
    name: Option<String>,
    pub(super) era: ProtocolEra,
    validate_output: bool,
    log_level: Option<LoggingLevel>,
    trace_context: bool,
    #[cfg(feature = "otel")]
    meter: Option<opentelemetry::metrics::Meter>,
    #[cfg(feature = "otel")]
    tracer: Option<Arc<opentelemetry::global::BoxedTracer>>,
}

/// What the actor tells the client, on the actor's thread.
struct Observers {
    notifications: NotificationObserver,
    progress: ProgressObserver,
    sessions: SessionObserver,
    counters: Option<CountersObserver>,
}

/// Told of each notification on the connection's thread, before it is published: the cached
/// lists it makes stale, the tasks it reports. It reaches the client's state through a weak
/// reference, set once the client exists.
fn notification_observer(
    list_cache: &Arc<ListCache>,
    client_state: &Arc<OnceLock<Weak<Shared>>>,
) -> NotificationObserver {
    let list_cache = list_cache.clone();
    let client_state = client_state.clone();
    Box::new(move |notification: &ServerNotification| {
        if let ServerNotification::Other { method, params } = notification {
            if matches!(
                method.as_str(),
                "notifications/tasks/status" | "notifications/tasks"
            ) {
                if let Some(shared) = client_state.get().and_then(Weak::upgrade) {
                    shared.task_status(params.as_ref());
                }
            }
            return;
        }
        let Some(family) = Family::changed_by(notification) else {
            return;
        };
        list_cache.invalidate(family);
        if family == Family::Tools {
            if let Some(shared) = client_state.get().and_then(Weak::upgrade) {
                shared.refetch_tools();
            }
        }
    })
}

/// Offered the progress no request listens to: a task's, under its creating call's token.
fn progress_observer(client_state: &Arc<OnceLock<Weak<Shared>>>) -> ProgressObserver {
    let client_state = client_state.clone();
    Box::new(move |token, progress| {
        client_state
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|shared| shared.task_progress(token, progress))
    })
}

/// Default bound on the handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default timeout of every request (as in the TypeScript SDK). A request that times out is
/// cancelled on the wire and fails with [`Error::Timeout`]. Change it with
/// [`ConnectOptions::request_timeout`], or per call with `.timeout(..)` / `.no_timeout()`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            client_info: Implementation::new("actix-mcp", env!("CARGO_PKG_VERSION")),
            handlers: Handlers::default(),
            cancellation: None,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            max_pages: DEFAULT_MAX_PAGES,
            placement: Placement::Auto,
            mailbox_capacity: DEFAULT_MAILBOX_CAPACITY,
            name: None,
            era: ProtocolEra::Auto,
            validate_output: true,
            log_level: None,
            trace_context: true,
            #[cfg(feature = "otel")]
            meter: None,
            #[cfg(feature = "otel")]
            tracer: None,
        }
    }
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("client_info", &self.client_info)
            .field("capabilities", &self.handlers.capabilities())
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("placement", &self.placement)
            .field("era", &self.era)
            .finish()
    }
}

impl ConnectOptions {
    /// Who this client says it is (`clientInfo` in `initialize`, or in every request's `_meta` in
    /// the 2026-07-28 era). Default: `actix-mcp` and this crate's version.
    pub fn client_info(mut self, info: Implementation) -> Self {
        self.client_info = info;
        self
    }

    /// Cancelling this token during the handshake fails `connect` with
    /// [`Error::Cancelled`] and closes the connection (`initialize` itself is never cancelled on
    /// the wire).
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    /// Bound on the handshake (`initialize`, or `server/discover` in the 2026-07-28 era;
    /// [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Connecting waits as long as it takes.
    pub fn no_connect_timeout(mut self) -> Self {
        self.connect_timeout = None;
        self
    }

    /// The default timeout of every request ([`DEFAULT_REQUEST_TIMEOUT`]); a call's own
    /// `.timeout(..)` / `.no_timeout()` overrides it.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// No default request timeout: a request waits until answered, cancelled, or given a
    /// timeout of its own.
    pub fn no_request_timeout(mut self) -> Self {
        self.request_timeout = None;
        self
    }

    /// The page cap of all-pages requests ([`DEFAULT_MAX_PAGES`]): a server that keeps handing
    /// out new cursors fails the walk with [`Error::TooManyPages`]. A walk holds at most this
    /// many pages, each at most the transport's `max_frame_bytes`.
    pub fn max_pages(mut self, max: usize) -> Self {
        self.max_pages = max.max(1);
        self
    }

    /// Whether structured tool results are checked against their tool's `outputSchema` (on by
    /// default; the spec says clients should). A result that breaks it fails the call with
    /// [`Error::InvalidOutput`]. The schemas come from the tool list, so tools listed before the
    /// call are checked. Per call: [`Call::validate_output`](super::Call::validate_output).
    /// Only with the `output-schema` feature (on by default); without it nothing is checked.
    pub fn validate_output(mut self, validate: bool) -> Self {
        self.validate_output = validate;
        self
    }

    /// Whether each request carries the caller's W3C trace context (`traceparent`, and
    /// `tracestate` if any) in `params._meta`, as SEP-414 and the OpenTelemetry conventions for
    /// MCP have it, so that the server's span joins the caller's trace (on by default; only
    /// with the `otel` feature, and only while a span is active: the call's own span through
    /// `tracing-opentelemetry`, else the current OpenTelemetry context).
    pub fn trace_context(mut self, carry: bool) -> Self {
        self.trace_context = carry;
        self
    }

    /// Records the client's metrics with `meter` (feature `otel`; e.g.
    /// `opentelemetry::global::meter("actix-mcp")`): `mcp.client.operation.duration` by
    /// method, tool, `error.type` and server, `mcp.client.session.duration`, the requests in
    /// flight, the requests given up by way (token, timeout, drop, close), and, for the
    /// manager's servers, restarts and state changes. Without it nothing is recorded.
    #[cfg(feature = "otel")]
    pub fn metrics(mut self, meter: opentelemetry::metrics::Meter) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Makes each call's CLIENT span with `tracer`, straight through the OpenTelemetry API
    /// (feature `otel`; e.g. `opentelemetry::global::tracer("actix-mcp")`): the same span, name
    /// and attributes the `tracing` span `mcp.client` has, for services that do not export
    /// `tracing` through `tracing-opentelemetry`. Its parent is the current OpenTelemetry
    /// context (or the current `tracing` span's, through that layer); the trace context the
    /// request carries names it. A service that exports both would see each call twice: give
    /// the tracer only without the layer.
    #[cfg(feature = "otel")]
    pub fn tracer(mut self, tracer: opentelemetry::global::BoxedTracer) -> Self {
        self.tracer = Some(Arc::new(tracer));
        self
    }

    /// The meter given to [`metrics`](Self::metrics).
    #[cfg(feature = "otel")]
    pub(crate) fn meter(&self) -> Option<&opentelemetry::metrics::Meter> {
        self.meter.as_ref()
    }

    /// The server's name in logs: the connection and its transport log inside a
    /// `mcp.connection` span with `server = name` (each call inside its `mcp.client` span, by
    /// the OpenTelemetry conventions for MCP, target `actix_mcp::call` at info level), so the
    /// log of many servers can be read.
    /// [`Servers`](crate::Servers) names each connection after its server.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Asks for the server's log messages at `level` and above from the start (see
    /// [`Client::set_logging_level`]): a legacy server that declares `logging` gets
    /// `logging/setLevel` right after the handshake; in the 2026-07-28 era every request
    /// carries the level. None by default.
    pub fn log_level(mut self, level: LoggingLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// Answers the server's `sampling/createMessage`; declares the `sampling` capability.
    /// Params that do not read as a [`CreateMessageRequest`] are answered -32602 without calling
    /// the handler.
    pub fn on_sampling<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(CreateMessageRequest, Cancellation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CreateMessageResult, HandlerError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.handlers.sampling = Some(boxed_handler(move |params, token| {
            typed(handler.clone(), params, token)
        }));
        self
    }

    /// Answers form-mode `elicitation/create` (an accepted form is completed with the
    /// requested schema's defaults); declares `elicitation.form`.
    pub fn on_form_elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(FormElicitation, Cancellation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, HandlerError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.handlers.form_elicitation = Some(boxed_handler(move |params: Value, token| {
            let handler = handler.clone();
            async move {
                let request = params.clone();
                let result = typed(handler, params, token).await?;
                Ok(apply_elicitation_defaults(&request, result))
            }
        }));
        self
    }

    /// Answers URL-mode `elicitation/create` (send the user to the URL; the answer is whether
    /// they agreed to go); declares `elicitation.url`, which is declared only when this handler
    /// exists.
    pub fn on_url_elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(UrlElicitation, Cancellation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, HandlerError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.handlers.url_elicitation = Some(boxed_handler(move |params, token| {
            typed(handler.clone(), params, token)
        }));
        self
    }

    /// Answers the server's `roots/list` with the roots `handler` gives; declares `roots`.
    pub fn on_roots<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Cancellation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Root>, HandlerError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.handlers.roots = Some(boxed_handler(move |_, token| {
            let handler = handler.clone();
            async move {
                let roots = handler(token).await?;
                let result = ListRootsResult {
                    roots,
                    ..ListRootsResult::default()
                };
                serde_json::to_value(result).map_err(HandlerError::from)
            }
        }));
        self
    }

    /// Answers the server's requests of `method` with `handler`, params and result as JSON
    /// (absent params read as `{}`): for a method the typed handlers do not cover, or instead of
    /// one of them. For `sampling/createMessage`, `elicitation/create` (both modes) and
    /// `roots/list` it declares the capability as the typed handler does. `ping` and `tasks/*`
    /// are always answered by the connection itself.
    pub fn on_request_raw<F, Fut>(mut self, method: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Value, Cancellation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, HandlerError>> + Send + 'static,
    {
        self.handlers
            .insert_raw(method.into(), boxed_handler(handler));
        self
    }

    /// Declares the client extension `name` with its `settings` in `capabilities.extensions`
    /// (both eras), e.g. MCP Apps: `extension("io.modelcontextprotocol/ui",
    /// json!({"mimeTypes": ["text/html;profile=mcp-app"]}))`. Declaring one again replaces it.
    /// The server's are [`Client::server_extensions`](crate::Client::server_extensions).
    pub fn extension(mut self, name: impl Into<String>, settings: Value) -> Self {
        self.handlers.extensions.insert(name.into(), settings);
        self
    }

    /// Which protocol era to speak ([`ProtocolEra::Auto`] by default).
    pub fn era(mut self, era: ProtocolEra) -> Self {
        self.era = era;
        self
    }

    /// Where the connection actor runs ([`Placement::Auto`] by default).
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// [`Placement::Pool`] unless a placement was chosen: many servers spread over every core.
    pub(crate) fn pooled_by_default(mut self) -> Self {
        if matches!(self.placement, Placement::Auto) {
            self.placement = Placement::Pool;
        }
        self
    }

    /// The actor's mailbox bound (default [`DEFAULT_MAILBOX_CAPACITY`]).
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity;
        self
    }

    /// Starts the actor and runs the handshake. On any failure the connection is closed.
    pub async fn connect(self, transport: impl Transport) -> Result<Client, Error> {
        let span = self.session_span();
        let facts = Arc::new(SessionFacts::new(transport.peer(), span.clone()));
        let notifications = Publisher::default();
        let inbox = Arc::new(Inbox::default());
        let list_cache = Arc::new(ListCache::default());
        let client_state: Arc<OnceLock<Weak<Shared>>> = Arc::default();
        let observer = notification_observer(&list_cache, &client_state);
        let progress_observer = progress_observer(&client_state);
        #[cfg(feature = "otel")]
        let metrics = self
            .meter
            .as_ref()
            .map(|meter| Arc::new(super::metrics::Metrics::new(meter, self.name.as_deref())));
        let observers = Observers {
            notifications: observer,
            progress: progress_observer,
            sessions: {
                let facts = facts.clone();
                Box::new(move |id| facts.set_session_id(id))
            },
            #[cfg(feature = "otel")]
            counters: metrics.as_ref().map(|m| m.wire_counter()),
            #[cfg(not(feature = "otel"))]
            counters: None,
        };
        let addr = self
            .start(
                Box::new(transport),
                notifications.clone(),
                observers,
                inbox.clone(),
                span,
            )
            .await?;
        #[allow(unused_mut, reason = "mutated with some features only")]
        let mut shared = Shared::new(
            Link { addr, inbox },
            self.handlers.clone(),
            list_cache,
            self.trace_context,
            facts,
        );
        #[cfg(feature = "otel")]
        {
            shared.metrics = metrics;
            shared.tracer = self.tracer.clone();
        }
        let shared = Arc::new(shared);
        let _ = client_state.set(Arc::downgrade(&shared));
        match self.negotiate(&shared).await {
            Ok(result) => {
                let client = Client {
                    shared,
                    server: super::interned::shared(result),
                    settings: Arc::new(Settings {
                        default_timeout: self.request_timeout,
                        validate_output: self.validate_output,
                        max_pages: self.max_pages,
                        notifications,
                        log_level: LevelCell::default(),
                    }),
                };
                let declares_logging = client.capabilities().logging.is_some();
                match self.log_level {
                    Some(level) if client.shared.is_modern() || declares_logging => {
                        client.set_logging_level(level).await?;
                    }
                    _ => {}
                }
                Ok(client)
            }
            Err(e) => {
                shared.addr().do_send(Close);
                Err(e)
            }
        }
    }

    /// The session's span, `mcp.connection`: the actor runs in it, so whatever the connection
    /// and its transport log names the server. A root of its own, linked from the current span:
    /// a connection outlives the request that opened it.
    fn session_span(&self) -> tracing::Span {
        let span = tracing::info_span!(
            parent: None,
            "mcp.connection",
            server = tracing::field::Empty,
            "mcp.session.id" = tracing::field::Empty,
            "mcp.protocol.version" = tracing::field::Empty,
            "network.transport" = tracing::field::Empty,
            "network.protocol.name" = tracing::field::Empty,
            "server.address" = tracing::field::Empty,
            "server.port" = tracing::field::Empty,
        );
        if let Some(name) = &self.name {
            span.record("server", tracing::field::display(name));
        }
        span.follows_from(tracing::Span::current());
        span
    }

    async fn start(
        &self,
        transport: Box<dyn Transport>,
        notifications: Publisher,
        observers: Observers,
        inbox: Arc<Inbox>,
        span: tracing::Span,
    ) -> Result<Addr<Connection>, Error> {
        let capacity = self.mailbox_capacity;
        let handlers = self.handlers.clone();
        let connection = move || {
            let connection = Connection::from_boxed(transport)
                .span(span)
                .mailbox_capacity(capacity)
                .handlers(handlers)
                .notifications(notifications)
                .observe_notifications(observers.notifications)
                .observe_late_progress(observers.progress)
                .observe_sessions(observers.sessions)
                .inbox(inbox);
            match observers.counters {
                Some(counters) => connection.observe_counters(counters),
                None => connection,
            }
        };
        let here = actix_rt::Arbiter::try_current().is_some();
        match &self.placement {
            Placement::Auto | Placement::Current if here => Ok(connection().start()),
            Placement::Current => Err(Error::Misuse(
                "Placement::Current: not inside an actix System".into(),
            )),
            Placement::Arbiter(arbiter) => {
                Ok(Connection::start_in_arbiter(arbiter, move |_| connection()))
            }
            Placement::Auto | Placement::Pool => {
                let (arbiter, lease) = Pool::get()?.place();
                Ok(Connection::start_in_arbiter(&arbiter, move |_| {
                    connection().lease(lease)
                }))
            }
        }
    }
}
