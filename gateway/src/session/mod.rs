//! One downstream session: what each of its messages asks of the upstream servers. `initialize`
//! and `ping` are answered here; `tools/list` is the catalogue of every ready server under the
//! gateway's names (`names.rs`); `tools/call` is routed to its server's one shared connection,
//! with a token that a downstream `notifications/cancelled` (or the session's end) fires.
//! Answers go to `out` (`Answers`), in the order they are ready: stdio writes each as a line,
//! HTTP hands each to the POST that carried its request.

mod access;
mod asked;
mod audit;
mod events;
mod input;
mod listen;
mod logs;
mod per_user;
mod subscriptions;
mod tasks;

use std::{cell::RefCell, collections::HashMap, rc::Rc, sync::Arc};

use crate::{
    in_flight::InFlight,
    message::{Incoming, Request},
    method::{List, Method, Routed},
    outbound::{Answer, Outbound},
    replies::{error, result, uncacheable, Refusal, INVALID_PARAMS, METHOD_NOT_FOUND},
    routes::Routes,
    server_requests::SessionKey,
    upstream::Upstream,
};

use serde_json::{json, Value};

/// Where a session's messages go: answers, and the notifications of a request in flight
/// (its progress), with that request's downstream id.
pub type Answers = Rc<dyn Fn(Outbound, Option<&Value>)>;

/// The protocol versions a downstream client may ask for (the first is offered otherwise).
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless era, served over HTTP without a session.
const MODERN_VERSION: &str = "2026-07-28";

/// What the gateway offers, in both eras (in 2026-07-28 list changes and resource updates are
/// told on `subscriptions/listen` streams).
static CAPABILITIES: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({
        "tools": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "prompts": {"listChanged": true},
        "completions": {},
    })
});

/// What a 2025-11-25 session is offered besides: tool calls as tasks, passed through.
static SESSION_CAPABILITIES: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    let mut capabilities = CAPABILITIES.clone();
    capabilities["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    capabilities["logging"] = json!({});
    capabilities
});

fn server_info() -> Value {
    json!({"name": "actix-mcp-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// What a session's shared record says of its logs and subscriptions (`--replicas`).
pub struct Followed {
    pub log_level: Option<actix_mcp::LoggingLevel>,
    pub subscriptions: std::collections::BTreeSet<String>,
}

pub struct Session {
    upstream: Upstream,
    /// The client speaks 2026-07-28 (`server/discover`, or a request without a session).
    modern: std::cell::Cell<bool>,
    /// This session in the registry of who can be asked what upstream servers ask.
    key: SessionKey,
    /// Whose session it is: with users, an upstream log message reaches only the call it is of.
    owner: crate::owner::Owner,
    /// Who sent its latest request, with what their token grants (`access.rs`).
    caller: RefCell<Arc<crate::owner::Caller>>,
    /// Its `Mcp-Session-Id`, for the audit trail (a 2025-11-25 session over HTTP).
    known_as: RefCell<Option<Arc<str>>>,
    out: Answers,
    state: Rc<RefCell<State>>,
    /// Dropped with the session: its task that follows the upstream events ends at once.
    _alive: tokio::sync::oneshot::Sender<()>,
}

#[derive(Default)]
struct State {
    in_flight: InFlight,
    /// The routes of the last lists (made on first use if no list was asked yet).
    routes: Option<Arc<Routes>>,
    /// The routed calls' tasks, to wait for at the end.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The upstream tasks this session's calls made, by the ids it knows them by.
    upstream_tasks: crate::tasks::Tasks,
    /// Upstream servers' requests asked of the downstream client, by the id they were given.
    asked: HashMap<String, asked::Asked>,
    /// 2026-07-28: the calls whose upstream requests are being gathered (`input.rs`).
    gathering: Vec<Value>,
    /// The resources it is subscribed to, by URI, with their server.
    subscribed: HashMap<String, String>,
    /// 2026-07-28: its `subscriptions/listen`, once acknowledged.
    listen: Option<listen::Listen>,
    /// The level the client asked for logs at (`logging/setLevel`); none: no logs.
    log_level: Option<actix_mcp::LoggingLevel>,
}

impl Session {
    /// A session whose messages go to `out`: told of every upstream list change (when it
    /// follows the `changes`: a 2026-07-28 request only if it listens), and asked what upstream
    /// servers ask of it.
    pub fn start(
        upstream: Upstream,
        out: Answers,
        changes: Option<&tokio::sync::broadcast::Sender<crate::changes::Event>>,
        caller: Arc<crate::owner::Caller>,
    ) -> Rc<Self> {
        let (key, carried) = upstream.downstream.join();
        let (alive, dropped) = tokio::sync::oneshot::channel();
        let session = Rc::new(Self {
            upstream,
            modern: std::cell::Cell::new(false),
            key,
            owner: caller.owner.clone(),
            caller: RefCell::new(caller),
            known_as: RefCell::default(),
            out,
            state: Rc::default(),
            _alive: alive,
        });
        if let Some(changes) = changes {
            session.follow(changes.subscribe(), dropped);
        }
        session.carry(carried);
        session
    }

    /// The session is one 2026-07-28 request, whose client declared `capabilities` (in its
    /// `_meta`): upstream servers' requests reach it as `input_required` answers.
    pub fn stateless(&self, capabilities: Value) {
        self.modern.set(true);
        self.upstream.downstream.stateless(self.key, capabilities);
    }

    /// A session opened at another replica, served here too (`--replicas`): what its client
    /// declared at `initialize`, then what its record says of its logs and subscriptions.
    pub fn restore(self: &Rc<Self>, capabilities: Value, record: Followed) {
        self.modern.set(false);
        self.upstream.downstream.initialized(self.key, capabilities);
        self.follow_record(record);
    }

    /// What the session's record says now (`--replicas`: asked at another replica): logs at
    /// its level, and subscribed to its resources here too, so that the replica holding the
    /// client's stream tells it of their updates.
    pub fn follow_record(self: &Rc<Self>, record: Followed) {
        let level = record.log_level;
        let level = level.filter(|level| self.state.borrow().log_level != Some(*level));
        if let Some(level) = level {
            self.state.borrow_mut().log_level = Some(level);
            let session = self.clone();
            self.spawn(async move { session.ask_upstreams_for_logs(level).await });
        }
        let here: Vec<String> = self.state.borrow().subscribed.keys().cloned().collect();
        let left = here
            .into_iter()
            .filter(|uri| !record.subscriptions.contains(uri));
        let left: Vec<String> = left.collect();
        let joined: Vec<String> = (record.subscriptions.into_iter())
            .filter(|uri| !self.state.borrow().subscribed.contains_key(uri))
            .collect();
        if left.is_empty() && joined.is_empty() {
            return;
        }
        let session = self.clone();
        self.spawn(async move {
            for uri in left {
                session.unsubscribe(&uri).await;
            }
            for uri in joined {
                if let Err(refusal) = session.subscribe(&uri).await {
                    tracing::debug!(%uri, why = %refusal.1, "a subscription of another replica was not followed");
                }
            }
        });
    }

    /// Known to its client as session `id` (for the audit trail).
    pub fn known_as(&self, id: &str) {
        *self.known_as.borrow_mut() = Some(id.into());
    }

    fn send(&self, message: impl Into<Outbound>) {
        (self.out)(message.into(), None);
    }

    /// One message from the downstream client, taken in the order they come: a call is in
    /// flight (and a cancel that follows finds it) before anything is awaited; the work that
    /// waits (a list, an upstream call) runs as a task of its own.
    pub fn message(self: &Rc<Self>, message: Incoming) {
        match message {
            Incoming::Request(request) => self.request(request),
            Incoming::Notification { method, params } if method == "notifications/cancelled" => {
                let reason = params["reason"].as_str();
                let reason = reason.map_or_else(
                    || "cancelled by the downstream client".to_owned(),
                    |r| format!("cancelled by the downstream client: {r}"),
                );
                let cancelled = self
                    .state
                    .borrow_mut()
                    .in_flight
                    .cancel(&params["requestId"], Some(&reason));
                tracing::debug!(cancelled, "downstream cancel");
            }
            // The answer to an upstream server's request asked of the client.
            Incoming::Answer { id, message } => self.answered(&id, &message),
            // Other notifications (initialized, roots): nothing to do.
            Incoming::Notification { .. } => {}
        }
    }

    fn request(self: &Rc<Self>, request: Request) {
        let Request {
            id,
            method,
            name,
            params,
        } = request;
        let params = &params;
        if !method.served(self.modern.get()) {
            let why = format!("the gateway does not serve {name}");
            return self.send(error(&id, METHOD_NOT_FOUND, why));
        }
        let answer = match method {
            Method::Initialize => self.initialize(&id, params),
            Method::Discover => self.discover(&id),
            Method::Ping => result(&id, json!({}), self.modern.get()),
            Method::SetLogLevel => return self.set_log_level(id, params),
            Method::List(list) => return self.list(id, list),
            Method::Routed(routed) => return self.call(id, routed, &name, params),
            Method::Listen => return self.listen(id, params),
            Method::Subscribe => return self.subscription(id, params, true),
            Method::Unsubscribe => return self.subscription(id, params, false),
            Method::Other => return,
        };
        self.send(answer);
    }

    fn initialize(&self, id: &Value, params: &Value) -> Value {
        self.modern.set(false);
        let capabilities = params["capabilities"].clone();
        self.upstream.downstream.initialized(self.key, capabilities);
        let asked = params["protocolVersion"].as_str().unwrap_or_default();
        let version = VERSIONS
            .iter()
            .find(|v| **v == asked)
            .unwrap_or(&VERSIONS[0]);
        let answer = json!({
            "protocolVersion": version,
            "capabilities": SESSION_CAPABILITIES.clone(),
            "serverInfo": server_info(),
        });
        result(id, answer, false)
    }

    /// 2026-07-28: what `initialize` says, without a session.
    fn discover(&self, id: &Value) -> Value {
        self.modern.set(true);
        let mut versions = vec![MODERN_VERSION];
        versions.extend(VERSIONS);
        // Its era requires the cache hints of every discover result: a client that checks them
        // (fastmcp) takes the answer as 2025-11-25 without them.
        let answer = uncacheable(json!({
            "supportedVersions": versions,
            "capabilities": CAPABILITIES.clone(),
            "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
        }));
        result(id, answer, true)
    }

    /// A list of the catalogue, under the gateway's names.
    fn list(self: &Rc<Self>, id: Value, list: List) {
        let session = self.clone();
        self.spawn(async move {
            let routes = session.catalogue().await;
            let items = session.visible(list, &routes);
            let modern = session.modern.get();
            let mut answer = json!({ list.field(): items });
            if modern {
                answer = uncacheable(answer);
            }
            session.send(result(&id, answer, modern));
        });
    }

    fn spawn(&self, work: impl std::future::Future<Output = ()> + 'static) {
        let task = actix_rt::spawn(work);
        let tasks = &mut self.state.borrow_mut().tasks;
        tasks.retain(|task| !task.is_finished());
        tasks.push(task);
    }

    /// Every ready server's lists under the gateway's names, kept for routing (made once per
    /// catalogue change for every session, `Upstream::routes`).
    async fn catalogue(&self) -> Arc<Routes> {
        let routes = self.upstream.routes().await;
        self.state.borrow_mut().routes = Some(routes.clone());
        routes
    }

    /// Routes a `tools/call`, `prompts/get` or `resources/read` to its server: in flight at
    /// once, answered when the upstream request ends, unless the downstream client cancelled it
    /// meanwhile.
    fn call(self: &Rc<Self>, id: Value, routed: Routed, method: &str, params: &Value) {
        let Some(token) = self.state.borrow_mut().in_flight.begin(&id) else {
            return self.send(error(
                &id,
                INVALID_PARAMS,
                "a request with this id is in flight",
            ));
        };
        use tracing::Instrument as _;
        let span = server_span(&id, method, params);
        let (session, params) = (self.clone(), params.clone());
        // What the audit trail needs, only when it is kept.
        let audited =
            (self.upstream.audit.is_on()).then(|| (method.to_owned(), std::time::Instant::now()));
        self.spawn(
            async move {
                let outcome = session.routed(&id, routed, &params, &token).await;
                // A request cancelled downstream is owed no answer.
                let owed = session.state.borrow_mut().in_flight.end(&id);
                if let Some((method, started)) = &audited {
                    let cancelled = (!owed).then(|| cancelled_by(&token));
                    let took = started.elapsed();
                    session.audit(routed, method, &params, &outcome, cancelled, took);
                }
                if owed {
                    session.send(match outcome {
                        Ok(answer) => answer.to(&id, session.modern.get()),
                        Err(refusal) => refusal.with_id(&id).into(),
                    });
                }
            }
            .instrument(span),
        );
    }

    /// The upstream request of a routed downstream one, with the downstream's token.
    async fn routed(
        self: &Rc<Self>,
        id: &Value,
        routed: Routed,
        params: &Value,
        token: &actix_mcp::Cancellation,
    ) -> Result<Answer, Refusal> {
        let routes = self.routes().await;
        self.guard(routed, params, &routes)?;
        let made = match routed {
            Routed::Task(asked) => self.task(asked, params, token).await,
            Routed::CallTool if params["task"].is_object() => {
                self.start_task(id, params, &routes, token).await
            }
            Routed::Complete => self.complete(id, params, &routes, token).await,
            Routed::CallTool => return self.route_tool_call(id, params, &routes, token).await,
            // Boxed, as the per-user path of a tool call is: each would size every call's future
            // (moved when the call is spawned) to its own.
            Routed::GetPrompt => {
                return Box::pin(self.route_prompt(id, params, &routes, token)).await
            }
            Routed::ReadResource => {
                return Box::pin(self.route_read(id, params, &routes, token)).await
            }
        };
        made.map(Answer::Made)
    }

    /// How a request to `server` that failed with `error` is answered (a per-user server
    /// without the user's grant: the `-32042` of a sign-in).
    fn failed(&self, server: &str, error: &actix_mcp::Error) -> Refusal {
        self.upstream.users.refusal(&self.owner, server, error)
    }

    /// The connection to upstream `server` (started if need be).
    async fn upstream_client(&self, server: &str) -> Result<actix_mcp::Client, Refusal> {
        if self.upstream.users.per_user(&self.owner, server) {
            let caller = self.caller.borrow().clone();
            let token = caller.token.as_ref();
            return self.upstream.users.client(&self.owner, server, token).await;
        }
        self.upstream
            .servers
            .client(server)
            .await
            .map_err(Refusal::from)
    }

    /// `tools/call`, routed by the tool's gateway name.
    async fn route_tool_call(
        self: &Rc<Self>,
        id: &Value,
        params: &Value,
        routes: &Routes,
        token: &actix_mcp::Cancellation,
    ) -> Result<Answer, Refusal> {
        let (server, tool) = routed_tool(routes, params)?;
        let _in_flight = self.upstream.downstream.call_begins(self.key, server, id);
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let progress_token = params["_meta"].get("progressToken").cloned();
        let (meta, logs) = self.call_meta(id, params).await?;
        if self.upstream.users.per_user(&self.owner, server) {
            // On the user's own connection, with their own grant (signed in first if need be).
            let parts = (arguments, meta, progress_token);
            let attempt = |(arguments, meta, progress)| {
                self.user_tool_call(id, server, tool, arguments, meta, progress, token)
            };
            // Boxed: the common path's future stays small (it is moved when the call is spawned).
            let answer = Box::pin(self.with_sign_in(id, token, parts, attempt));
            let answer = Box::pin(self.with_logs(id, server, logs, answer));
            return Ok(Answer::Passed(answer.await?));
        }
        // A routed call, so the inspector sees it.
        let call = self.upstream.servers.call_tool(server, tool, arguments);
        let call = call.raw().meta(meta).cancellation(token);
        // With replicas, recorded before it is written, for a survivor to cancel.
        let (call, _owed) = crate::replicas::owing(self.upstream.replicas.as_ref(), server, call);
        let answer = async {
            match progress_token {
                None => call.await.map_err(Refusal::from),
                Some(progress_token) => {
                    let (call, progress) = call.progress_stream();
                    let call = std::future::IntoFuture::into_future(call);
                    let passed = self.with_progress(id, progress_token, call, progress);
                    passed.await.map_err(Refusal::from)
                }
            }
        };
        Ok(Answer::Passed(
            self.with_logs(id, server, logs, answer).await?,
        ))
    }

    /// `prompts/get`, routed by the prompt's gateway name.
    async fn route_prompt(
        self: &Rc<Self>,
        id: &Value,
        params: &Value,
        routes: &Routes,
        token: &actix_mcp::Cancellation,
    ) -> Result<Answer, Refusal> {
        let name = params["name"].as_str();
        let name = name.ok_or_else(|| Refusal::params("prompts/get needs a name"))?;
        let (server, prompt) = routes
            .prompts
            .route(name)
            .ok_or_else(|| Refusal::params(format!("no prompt named {name:?}")))?;
        let _in_flight = self.upstream.downstream.call_begins(self.key, server, id);
        let arguments = params["arguments"].as_object().cloned().unwrap_or_default();
        let (meta, logs) = self.call_meta(id, params).await?;
        let attempt = |(arguments, meta)| async move {
            let client = self.upstream_client(server).await?;
            let call = client.get_prompt(prompt, arguments).raw();
            let call = call.cancellation(token).meta(meta);
            let answer = std::future::IntoFuture::into_future(call).await;
            answer.map_err(|e| self.failed(server, &e))
        };
        let parts = (arguments, meta);
        let answer = self.signed_in_if_need_be(id, server, token, parts, attempt);
        Ok(Answer::Passed(
            self.with_logs(id, server, logs, answer).await?,
        ))
    }

    /// `resources/read`, routed by the URI.
    async fn route_read(
        self: &Rc<Self>,
        id: &Value,
        params: &Value,
        routes: &Routes,
        token: &actix_mcp::Cancellation,
    ) -> Result<Answer, Refusal> {
        let uri = params["uri"].as_str();
        let uri = uri.ok_or_else(|| Refusal::params("resources/read needs a uri"))?;
        let server = routes
            .resource_server(uri)
            .ok_or_else(|| Refusal::params(format!("no resource {uri:?}")))?;
        let _in_flight = self.upstream.downstream.call_begins(self.key, server, id);
        let (meta, logs) = self.call_meta(id, params).await?;
        let attempt = |meta| async move {
            let client = self.upstream_client(server).await?;
            let call = client
                .read_resource(uri)
                .raw()
                .cancellation(token)
                .meta(meta);
            let answer = std::future::IntoFuture::into_future(call).await;
            answer.map_err(|e| self.failed(server, &e))
        };
        let answer = self.signed_in_if_need_be(id, server, token, meta, attempt);
        let answer = Answer::Passed(self.with_logs(id, server, logs, answer).await?);
        Ok(match self.modern.get() {
            true => answer.uncacheable(),
            false => answer,
        })
    }

    /// Runs `call`, passing its upstream progress downstream under the downstream's token.
    async fn with_progress<E>(
        &self,
        id: &Value,
        progress_token: Value,
        call: impl std::future::Future<Output = Result<actix_mcp::protocol::RawResult, E>>,
        mut progress: actix_mcp::client::ProgressStream,
    ) -> Result<actix_mcp::protocol::RawResult, E> {
        use futures::{FutureExt as _, StreamExt as _};
        let mut call = std::pin::pin!(call);
        let pass_on = |update: actix_mcp::Progress| {
            let mut params = serde_json::to_value(&update).unwrap_or_default();
            params["progressToken"] = progress_token.clone();
            let notification = json!({
                "jsonrpc": "2.0", "method": "notifications/progress", "params": params
            });
            (self.out)(notification.into(), Some(id));
        };
        let answer = loop {
            tokio::select! {
                biased;
                Some(update) = progress.next() => pass_on(update),
                answer = &mut call => break answer,
            }
        };
        // The progress that came before the answer is in the stream already: it goes first.
        while let Some(Some(update)) = progress.next().now_or_never() {
            pass_on(update);
        }
        answer
    }

    /// The routes of the last lists, made now if none was asked for yet.
    async fn routes(&self) -> Arc<Routes> {
        if let Some(routes) = self.state.borrow().routes.clone() {
            return routes;
        }
        self.catalogue().await
    }

    /// The downstream client gave up `id` another way than a notification (2026-07-28: it
    /// aborted the request's POST): its upstream call is cancelled.
    pub fn abandoned(&self, id: &Value, reason: &str) {
        self.state.borrow_mut().in_flight.cancel(id, Some(reason));
    }

    /// The downstream client went away: every call it left in flight is cancelled upstream,
    /// what upstream servers asked of it is answered with an error, and its tasks have ended
    /// (each cancel handed to its connection) when this returns.
    ///
    /// The cancels go first: a server whose request is refused may end the call by itself, and
    /// its answer would make the cancel owed no more. Yielding once lets the calls just
    /// cancelled run (they were woken before this task) and hand their cancels over before the
    /// refusals; waiting for every task instead could wait on a server that answers nothing
    /// until its own request is answered.
    pub async fn end(&self, reason: &str) {
        self.upstream.downstream.leave(self.key);
        self.leave_subscriptions();
        let cancelled = self.state.borrow_mut().in_flight.cancel_all(reason);
        tracing::debug!(cancelled, "downstream session ended");
        if cancelled > 0 {
            tokio::task::yield_now().await;
        }
        self.state.borrow_mut().asked.clear();
        let tasks = std::mem::take(&mut self.state.borrow_mut().tasks);
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// What cancelled a call downstream, as its token says.
fn cancelled_by(token: &actix_mcp::Cancellation) -> String {
    let reason = token
        .reason()
        .unwrap_or("cancelled by the downstream client");
    reason.to_owned()
}

/// The server and its own name of the tool a `tools/call` names by its gateway name.
fn routed_tool<'r>(routes: &'r Routes, params: &Value) -> Result<(&'r str, &'r str), Refusal> {
    let name = params["name"].as_str();
    let name = name.ok_or_else(|| Refusal::params("tools/call needs a name"))?;
    let routed = routes.tools.route(name);
    routed.ok_or_else(|| Refusal::params(format!("no tool named {name:?}")))
}

/// The gateway's SERVER span for a routed request (the OpenTelemetry conventions for MCP:
/// `{method} {target}`), a child of the downstream client's span when its `_meta` names one; the
/// upstream call's CLIENT span is made inside it. Disabled unless spans are exported.
fn server_span(id: &Value, method: &str, params: &Value) -> tracing::Span {
    let target = params["name"].as_str().or(params["uri"].as_str());
    // The fields are made only when the span is enabled: nothing is formatted otherwise.
    let span = tracing::info_span!(
        target: "actix_mcp_gateway",
        "mcp.server",
        "otel.name" = match target {
            Some(target) => format!("{method} {target}"),
            None => method.to_owned(),
        },
        "otel.kind" = "server",
        "mcp.method.name" = method,
        "gen_ai.tool.name" = (method == "tools/call").then_some(target).flatten(),
        "jsonrpc.request.id" = %id,
    );
    let parent = params["_meta"]["traceparent"].as_str();
    if let Some(parent) = parent.filter(|_| !span.is_disabled()) {
        let state = params["_meta"]["tracestate"].as_str();
        actix_mcp_programs::telemetry::join_remote(&span, parent, state);
    }
    span
}

/// What of a downstream request's `_meta` its upstream request carries: the W3C trace context
/// (SEP-414), so the upstream server's span joins the downstream client's trace. The rest
/// (progress token, the 2026-07-28 era's per-request protocol fields) is the gateway's to answer.
pub(super) fn trace_context(params: &Value) -> serde_json::Map<String, Value> {
    let meta = params["_meta"].as_object();
    ["traceparent", "tracestate", "baggage"]
        .into_iter()
        .filter_map(|key| Some((key.to_owned(), meta?.get(key)?.clone())))
        .filter(|(_, value)| value.is_string())
        .collect()
}

impl Drop for Session {
    fn drop(&mut self) {
        self.upstream.downstream.leave(self.key);
        self.leave_subscriptions();
    }
}
