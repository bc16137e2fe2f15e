//! Downstream Streamable HTTP at `/mcp`. The 2026-07-28 era: `server/discover`, each request on
//! its own POST without a session, the POST aborted its cancel. The 2025-11-25 era: `initialize` opens a session
//! (`Mcp-Session-Id`); each POST of a request carries back its progress and its answer, as an
//! event stream when the client takes one, else the answer as JSON; a notification or an answer
//! gets `202`; `DELETE` ends the session, cancelling upstream what it left in flight;
//! `GET` opens the session's stream of what belongs to no request (an upstream `list_changed`).
//! Every session shares the one upstream connection of each server. `GET /healthz` says where
//! each upstream server is.
//!
//! One actix-web worker per core. The 2025-11-25 sessions are in one table shared by every
//! worker (`table.rs`, a plain type): each session is its owner's only, idle ones expire, and
//! there are at most so many. A session lives on the worker that opened it; the others reach it
//! through its handle (`session.rs`). What waits for a client is bounded (`outbox.rs`), and so
//! is what a POST may send and how long it may take (`body.rs`).

use std::{
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use actix_web::{web, App, HttpMessage as _, HttpRequest, HttpResponse, HttpServer};
use serde_json::Value;
use tokio::sync::broadcast;

mod body;
mod envelope;

mod parking;
mod peer;
mod relay;
mod replicated;
mod session;
mod shutdown;
mod sign_in;
mod table;

use crate::outbox::Inbox;
use crate::{
    authorization::Authorization,
    changes::Event,
    message::{Incoming, Request},
    method::{Method, Routed, Task},
    owner::{Caller, Owner},
    replies::{error, INVALID_PARAMS},
    upstream::Upstream,
};
use parking::{Parked, Parking};
use session::{AbortIsCancel, HttpSession, SessionHandle, Setup, Target};
pub use {body::BodyLimits, table::Limits};

/// The header naming a session.
const SESSION: &str = "mcp-session-id";

/// JSON-RPC (implementation-defined server error): the gateway holds as many sessions as it
/// takes.
const TOO_MANY_SESSIONS: i64 = -32000;

/// What every worker shares.
struct Gateway {
    upstream: Upstream,
    /// It listens on a loopback address (see `origin.rs`).
    loopback: bool,
    /// Tokens required, of this issuer.
    authorization: Option<Arc<Authorization>>,
    /// The proxies whose `X-Forwarded-For` is believed (for the client address in logs).
    trusted_proxies: Vec<IpAddr>,
    changes: broadcast::Sender<Event>,
    sessions: Arc<Mutex<table::Table<SessionHandle>>>,
    /// 2026-07-28 calls answered `input_required`, waiting for their retry.
    parking: Parking,
    body: BodyLimits,
    stream_buffer: usize,
    /// With `--replicas`: sessions shared with the other replicas (`replicated.rs`).
    replicas: Option<Arc<crate::replicas::Replicas>>,
    /// Requests relayed to or from other replicas (`relay.rs`).
    relays: Arc<relay::Relays>,
}

impl Gateway {
    fn table(&self) -> std::sync::MutexGuard<'_, table::Table<SessionHandle>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn setup(&self, caller: Arc<Caller>) -> Setup {
        Setup {
            upstream: self.upstream.clone(),
            caller,
            stream_buffer: self.stream_buffer,
        }
    }
}

/// An exchange with a 2025-11-25 session under way (a request until its POST ends): the
/// session is not idle meanwhile.
struct Exchange {
    sessions: Arc<Mutex<table::Table<SessionHandle>>>,
    id: String,
    handle: SessionHandle,
}

impl Exchange {
    /// `owner`'s exchange with session `id`, if it is there and theirs.
    fn begin(gateway: &Gateway, id: &str, owner: &Owner) -> Option<Self> {
        let handle = gateway.table().begin(id, owner, Instant::now())?;
        Some(Self {
            sessions: gateway.sessions.clone(),
            id: id.to_owned(),
            handle,
        })
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let mut table = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        table.finish(&self.id, Instant::now());
    }
}

/// Who the request is from: the token's caller (`require_token`), else the anonymous one.
fn caller_of(request: &HttpRequest) -> Arc<Caller> {
    let extensions = request.extensions();
    let caller = extensions.get::<Arc<Caller>>().cloned();
    caller.unwrap_or_else(Caller::anonymous)
}

/// An access rule grants what was asked only with `scope`: MCP's scope challenge (`403`,
/// `insufficient_scope`), the JSON-RPC refusal as its body. `None` without authorization.
fn scope_challenge(
    request: &HttpRequest,
    scope: &str,
    body: &bytes::Bytes,
) -> Option<HttpResponse> {
    let gateway = request.app_data::<web::Data<Gateway>>()?;
    let authorization = gateway.authorization.as_ref()?;
    let refused = crate::authorization::Refused::InsufficientScope(scope.to_owned());
    let challenge = authorization.challenge(&refused);
    Some(
        HttpResponse::Forbidden()
            .insert_header(("www-authenticate", challenge))
            .content_type("application/json")
            .body(body.clone()),
    )
}

/// What a request's POST answers: an event stream of its messages when the client takes one,
/// else the answer as JSON (`202` if it was cancelled meanwhile). With `abort`, the POST's end
/// before its answer cancels the request.
async fn reply(
    request: &HttpRequest,
    messages: Option<Inbox>,
    mut abort: Option<AbortIsCancel>,
    streams: bool,
    exchange: Option<Exchange>,
) -> HttpResponse {
    let Some(mut messages) = messages else {
        return HttpResponse::Accepted().finish();
    };
    let accepts = request
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    // A stateless request answers as JSON unless it asked for progress: while the handler
    // waits, the client going away drops it, which is the request's cancel.
    if accepts && (abort.is_none() || streams) {
        return event_stream(request, messages, abort, exchange);
    }
    while let Some(message) = messages.recv().await {
        // The answer (a request asked of the client has a method too).
        if !message.answer {
            continue;
        }
        if let Some(scope) = &message.scope_needed {
            if let Some(refused) = scope_challenge(request, scope, &message.json) {
                return refused;
            }
        }
        if let Some(abort) = abort.as_mut() {
            abort.answered = true;
            // 2026-07-28: a missing client capability is a bad request.
            if message.missing_capability {
                return HttpResponse::BadRequest()
                    .content_type("application/json")
                    .body(message.json);
            }
        }
        return HttpResponse::Ok()
            .content_type("application/json")
            .body(message.json);
    }
    HttpResponse::Accepted().finish()
}

fn json(answer: &Value) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.to_string())
}

fn not_found() -> HttpResponse {
    HttpResponse::NotFound().body("no such session")
}

async fn post(
    request: HttpRequest,
    payload: web::Payload,
    gateway: web::Data<Gateway>,
) -> HttpResponse {
    let message = match body::read(&request, payload, gateway.body).await {
        Ok(message) => message,
        Err(refused) => return refused,
    };
    let caller = caller_of(&request);
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let repeated = envelope::Headers {
        protocol_version: header("mcp-protocol-version"),
        method: header("mcp-method"),
        name: header("mcp-name"),
    };
    // A 2026-07-28 `initialize` is a method that era removed (refused below), not a session.
    let message = match message {
        Incoming::Request(asked)
            if asked.method == Method::Initialize && !envelope::is_modern(&repeated, &asked) =>
        {
            return open_session(&request, asked, caller, &gateway).await;
        }
        other => other,
    };
    let Some(named) = header(SESSION) else {
        // Without a session, a notification or an answer belongs to nothing.
        let Incoming::Request(asked) = message else {
            return HttpResponse::Accepted().finish();
        };
        if let Err(refused) = envelope::check(&repeated, &asked) {
            let status = actix_web::http::StatusCode::from_u16(refused.status)
                .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
            return HttpResponse::build(status)
                .content_type("application/json")
                .body(refused.answer.to_string());
        }
        return stateless(&request, asked, caller, &gateway).await;
    };
    let exchange = match begin(&gateway, named, &caller).await {
        Ok(exchange) => exchange,
        Err(refused) => return refused,
    };
    if let Some(replicas) = &gateway.replicas {
        replicated::tell_others(replicas, named, &message);
        if let Some((to, relay)) = replicated::served_elsewhere(replicas, named, &message) {
            let id = message.request().map(|r| r.id.clone()).unwrap_or_default();
            return relayed(&request, &gateway, replicas, to, relay, false, true, id).await;
        }
    }
    // With replicas, a `tasks/list` gathers every replica's part of the session's tasks.
    let lists_tasks = match (&gateway.replicas, &message) {
        (Some(replicas), Incoming::Request(asked))
            if asked.method == Method::Routed(Routed::Task(Task::List)) =>
        {
            Some((replicas.clone(), asked.clone()))
        }
        _ => None,
    };
    // On the session's own worker, directly; from another, through its handle.
    let messages = match session::here(named) {
        Some(session) => Ok(session.exchange(message, caller)),
        None => exchange.handle.exchange(message, caller),
    };
    let messages = match (messages, lists_tasks) {
        (Ok(Some(here)), Some((replicas, asked))) => Ok(Some(
            relay::list_tasks(&gateway, &replicas, named, here, &asked).await,
        )),
        (messages, _) => messages,
    };
    match messages {
        Ok(messages) => reply(&request, messages, None, true, Some(exchange)).await,
        Err(session::Gone) => not_found(),
    }
}

/// `caller`'s exchange with session `id`, if it is theirs; with replicas, made from its shared
/// record if this replica has no copy yet.
async fn begin(
    gateway: &Gateway,
    id: &str,
    caller: &Arc<Caller>,
) -> Result<Exchange, HttpResponse> {
    match &gateway.replicas {
        None => Exchange::begin(gateway, id, &caller.owner).ok_or_else(not_found),
        Some(replicas) => replicated::exchange(gateway, replicas, id, caller).await,
    }
}

/// `initialize`: a new session of `owner`, if the table takes one more.
async fn open_session(
    request: &HttpRequest,
    initialize: Request,
    caller: Arc<Caller>,
    gateway: &Gateway,
) -> HttpResponse {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let owner = caller.owner.clone();
    let setup = gateway.setup(caller.clone());
    let session = HttpSession::new(setup, Some(&gateway.changes), None);
    let handle = session.handle();
    let opened = gateway
        .table()
        .open(id.clone(), owner.clone(), handle, Instant::now());
    if let Err(full) = opened {
        // Its only handle went with the refusal: its driver ends it.
        return too_many(&initialize.id, &full);
    }
    if let Some(replicas) = &gateway.replicas {
        // Recorded before it is answered: its next request may reach another replica.
        let per_owner = gateway.table().limits().per_owner;
        let opened = replicated::opened(replicas, &id, &caller, &initialize, per_owner);
        if let Err(refused) = opened.await {
            gateway.table().close(&id, &owner);
            return refused;
        }
    }
    tracing::debug!(%owner, "a downstream session opened");
    session.live_here_as(&id);
    session.session.known_as(&id);
    let exchange = Exchange::begin(gateway, &id, &owner);
    let messages = session.exchange(Incoming::Request(initialize), caller);
    let mut response = reply(request, messages, None, true, exchange).await;
    if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&id) {
        response.headers_mut().insert(
            actix_web::http::header::HeaderName::from_static(SESSION),
            value,
        );
    }
    response
}

/// The refusal of a session the table has no room for: `503` (the gateway's limit) or `429`
/// (the user's), with a JSON-RPC error that names the limit.
fn too_many(id: &Value, full: &table::Full) -> HttpResponse {
    let (mut response, why) = match full {
        table::Full::Table(n) => (
            HttpResponse::ServiceUnavailable(),
            format!("the gateway holds its limit of {n} sessions (--max-sessions)"),
        ),
        table::Full::Owner(n) => (
            HttpResponse::TooManyRequests(),
            format!("this user holds its limit of {n} sessions (--max-sessions-per-user)"),
        ),
        table::Full::Stopping => (
            HttpResponse::ServiceUnavailable(),
            "the gateway is stopping".to_owned(),
        ),
    };
    response
        .insert_header(("retry-after", "60"))
        .content_type("application/json")
        .body(error(id, TOO_MANY_SESSIONS, why).to_string())
}

/// 2026-07-28: no session; each request on its own, its POST's abort its cancel. A retry
/// after `input_required` (its `requestState`) takes over the call that waits for it.
async fn stateless(
    request: &HttpRequest,
    asked: Request,
    caller: Arc<Caller>,
    gateway: &Gateway,
) -> HttpResponse {
    // What streams before its answer: progress or logs asked for, or a listen (no answer at
    // all).
    let meta = asked.meta();
    let listens = asked.method == Method::Listen;
    let progress = !meta["progressToken"].is_null()
        || !meta[actix_mcp::protocol::discover::META_LOG_LEVEL].is_null()
        || listens;
    if let Some(state) = asked.params["requestState"].as_str().map(str::to_owned) {
        return retry(request, asked, &state, &caller.owner, gateway, progress).await;
    }
    let parking = Some(gateway.parking.clone());
    let changes = listens.then_some(&gateway.changes);
    let session = HttpSession::new(gateway.setup(caller.clone()), changes, parking);
    let capabilities = &meta["io.modelcontextprotocol/clientCapabilities"];
    session.session.stateless(capabilities.clone());
    let abort = AbortIsCancel {
        target: Target::Here(session.clone()),
        id: asked.id.clone(),
        answered: false,
    };
    let messages = session.exchange(Incoming::Request(asked), caller);
    reply(request, messages, Some(abort), progress, None).await
}

/// A retry after `input_required`: the call it names takes its input, if it still waits and is
/// `owner`'s.
async fn retry(
    request: &HttpRequest,
    asked: Request,
    state: &str,
    owner: &Owner,
    gateway: &Gateway,
    progress: bool,
) -> HttpResponse {
    let retry_id = asked.id.clone();
    let Some(Parked { session, id }) = gateway.parking.take(state, owner) else {
        // Parked at another replica: served there.
        let replicas = gateway.replicas.as_ref();
        let elsewhere = replicas.and_then(|r| Some((r, crate::replicas::elsewhere(r, state)?)));
        if let Some((replicas, to)) = elsewhere {
            let relay = crate::replicas::Relay::Retry {
                state: state.to_owned(),
                owner: owner.into(),
                body: relay::body_of(&asked),
            };
            let to = to.to_owned();
            let id = retry_id.clone();
            return relayed(request, gateway, replicas, to, relay, true, progress, id).await;
        }
        let why = "the requestState names no call waiting for input (answered or expired)";
        return json(&error(&retry_id, INVALID_PARAMS, why));
    };
    let abort = AbortIsCancel {
        target: Target::Handle(session.clone()),
        id: id.clone(),
        answered: false,
    };
    match session.resume(id, asked).await {
        Ok(messages) => reply(request, Some(messages), Some(abort), progress, None).await,
        Err(session::Gone) => {
            let why = "the call waiting for input ended";
            json(&error(&retry_id, INVALID_PARAMS, why))
        }
    }
}

/// A request served at replica `to`: its messages on this POST, as they come back. With
/// `cancels` (a 2026-07-28 call), the POST's end before its answer cancels it there.
#[allow(
    clippy::too_many_arguments,
    reason = "each says what the relayed request is"
)]
async fn relayed(
    request: &HttpRequest,
    gateway: &Gateway,
    replicas: &Arc<crate::replicas::Replicas>,
    to: String,
    relay: crate::replicas::Relay,
    cancels: bool,
    streams: bool,
    answer_id: Value,
) -> HttpResponse {
    match relay::ask(gateway, replicas, &to, relay, cancels, answer_id).await {
        Ok((messages, post)) => {
            let abort = AbortIsCancel {
                target: Target::Relayed(post),
                id: Value::Null,
                answered: false,
            };
            reply(request, Some(messages), Some(abort), streams, None).await
        }
        Err(refused) => refused,
    }
}

async fn delete(request: HttpRequest, gateway: web::Data<Gateway>) -> HttpResponse {
    let caller = caller_of(&request);
    let named = request.headers().get(SESSION).and_then(|v| v.to_str().ok());
    let handle = named.and_then(|id| gateway.table().close(id, &caller.owner));
    let mut closed = handle.is_some();
    if let Some(handle) = handle {
        handle.end("the downstream session was closed").await;
    }
    if let (Some(replicas), Some(id)) = (&gateway.replicas, named) {
        match replicated::close(&gateway, replicas, id, &caller).await {
            Ok(theirs) => closed |= theirs,
            Err(refused) => return refused,
        }
    }
    match closed {
        true => HttpResponse::Ok().finish(),
        false => HttpResponse::NotFound().finish(),
    }
}

/// `GET /mcp`: the session's stream of what belongs to no request (a new one replaces the
/// last). An open stream does not keep a session from expiring: requests do.
async fn get(request: HttpRequest, gateway: web::Data<Gateway>) -> HttpResponse {
    let caller = caller_of(&request);
    let named = request.headers().get(SESSION).and_then(|v| v.to_str().ok());
    let Some(named) = named else {
        return HttpResponse::BadRequest().body("no Mcp-Session-Id");
    };
    let exchange = match begin(&gateway, named, &caller).await {
        Ok(exchange) => exchange,
        Err(refused) => return refused,
    };
    let stream = match session::here(named) {
        Some(session) => Ok(session.open_stream()),
        None => exchange.handle.open_stream().await,
    };
    match stream {
        Ok(messages) => event_stream(&request, messages, None, None),
        Err(session::Gone) => not_found(),
    }
}

/// An event stream of `messages`, one event each, ending with them, or when the client goes
/// away. With `abort`, the answer marks the request answered: the stream dropped before it
/// cancels it. `exchange` is held for as long as the stream lasts.
fn event_stream(
    request: &HttpRequest,
    messages: Inbox,
    abort: Option<AbortIsCancel>,
    exchange: Option<Exchange>,
) -> HttpResponse {
    let gone = actix_mcp::web::disconnected(request).map(|gone| Box::pin(gone) as Gone);
    let state = Streaming {
        messages,
        abort,
        _exchange: exchange,
        gone,
    };
    let events = futures::stream::unfold(state, |mut state| async move {
        let message = match state.gone.as_mut() {
            Some(gone) => tokio::select! {
                message = state.messages.recv() => message?,
                () = gone => return None,
            },
            None => state.messages.recv().await?,
        };
        if let (Some(abort), true) = (state.abort.as_mut(), message.answer) {
            abort.answered = true;
        }
        let mut event = web::BytesMut::with_capacity(message.json.len() + 24);
        event.extend_from_slice(b"event: message\ndata: ");
        event.extend_from_slice(&message.json);
        event.extend_from_slice(b"\n\n");
        Some((Ok::<_, std::convert::Infallible>(event.freeze()), state))
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .streaming(events)
}

type Gone = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// What an event stream holds while it lasts.
struct Streaming {
    messages: Inbox,
    abort: Option<AbortIsCancel>,
    _exchange: Option<Exchange>,
    gone: Option<Gone>,
}

/// Refuses (`403`) what DNS rebinding would bring: see `origin.rs`.
async fn refuse_foreign(
    request: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (host, origin) = (
        header(actix_web::http::header::HOST),
        header(actix_web::http::header::ORIGIN),
    );
    let loopback = request
        .app_data::<web::Data<Gateway>>()
        .is_some_and(|gateway| gateway.loopback);
    if crate::origin::is_foreign(host.as_deref(), origin.as_deref(), loopback) {
        let refused = HttpResponse::Forbidden().body("this Host or Origin is not served here");
        return Ok(request.into_response(refused));
    }
    Ok(next.call(request).await?.map_into_boxed_body())
}

/// `/healthz`: the gateway answers, and says where each upstream server is.
async fn healthz(gateway: web::Data<Gateway>) -> HttpResponse {
    let servers: Vec<Value> = gateway
        .upstream
        .servers
        .status()
        .iter()
        .map(|s| serde_json::json!({"name": s.name, "status": s.status.name()}))
        .collect();
    json(&serde_json::json!({ "servers": servers }))
}

/// How the gateway serves, beyond where.
pub struct Options {
    /// The inspector at `/inspector/`.
    pub inspector: bool,
    /// Require tokens of this issuer (`authorization.rs`).
    pub authorization_server: Option<String>,
    /// The audience they must name; default the URL listened on.
    pub resource: Option<String>,
    /// The scopes they must grant.
    pub scopes: Vec<String>,
    /// How far a token's times may be off the gateway's clock.
    pub clock_leeway: Duration,
    /// The proxies whose forwarded headers are believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// How long a 2026-07-28 call answered `input_required` waits for its retry.
    pub input_wait: Duration,
    /// The session table's limits.
    pub sessions: Limits,
    /// What a POST may carry, and how long it may take.
    pub body: BodyLimits,
    /// The bound of what waits unread for one stream, in bytes.
    pub stream_buffer: usize,
    /// Connections at once, in all (default: what the file limit allows).
    pub max_connections: Option<usize>,
    /// actix-web workers (default: one per core).
    pub workers: Option<usize>,
    /// The bounds of the per-user upstream connections.
    pub user_connections: UserLimits,
}

/// How many per-user upstream connections, and how long one stays unused.
pub struct UserLimits {
    pub max: usize,
    pub idle: Duration,
}

/// Every 10 s, the per-user upstream connections unused past their idle limit are closed.
async fn sweep_user_connections(users: Arc<crate::users::Users>) {
    let mut every = tokio::time::interval(Duration::from_secs(10));
    loop {
        every.tick().await;
        users.sweep(Instant::now()).await;
    }
}

/// `scheme://authority` of `url`.
fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(url) => url.origin().ascii_serialization(),
        Err(_) => url.trim_end_matches('/').to_owned(),
    }
}

/// Serves `/mcp` on `listen` (with the inspector at `/inspector/` if asked for) until the
/// process is interrupted (SIGINT, SIGTERM): then every session ends (what it left in flight is
/// cancelled upstream), every call waiting for its input too, and the server stops at once,
/// which drops (and so cancels) the stateless calls still running.
pub async fn serve(
    upstream: Upstream,
    listen: SocketAddr,
    options: Options,
    changes: broadcast::Sender<Event>,
) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind(listen)?;
    let address = listener.local_addr()?;
    let authorization = match &options.authorization_server {
        None => None,
        Some(issuer) => {
            let resource = options
                .resource
                .clone()
                .unwrap_or_else(|| format!("http://{address}/mcp"));
            let (scopes, leeway) = (options.scopes.clone(), options.clock_leeway);
            // Users sign in upstream through the gateway's own URL.
            upstream.users.serve(crate::users::Serving {
                origin: origin_of(&resource),
                resource: resource.clone(),
                max_connections: options.user_connections.max,
                idle: options.user_connections.idle,
            });
            let found = Authorization::discover(issuer, resource, scopes, leeway).await;
            Some(Arc::new(found.map_err(std::io::Error::other)?))
        }
    };
    let gateway = web::Data::new(Gateway {
        upstream: upstream.clone(),
        loopback: listen.ip().is_loopback(),
        authorization,
        trusted_proxies: options.trusted_proxies.clone(),
        changes,
        sessions: Arc::new(Mutex::new(table::Table::new(options.sessions))),
        parking: Parking::new(options.input_wait),
        body: options.body,
        stream_buffer: options.stream_buffer,
        replicas: upstream.replicas.clone(),
        relays: Arc::default(),
    });
    replicated::run(&gateway);
    let workers = options.workers.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let connections = options
        .max_connections
        .unwrap_or_else(shutdown::connections_allowed);
    let inspector = options.inspector;
    let server = HttpServer::new({
        let (upstream, gateway) = (upstream.clone(), gateway.clone());
        move || {
            App::new()
                .app_data(gateway.clone())
                // A POST whose client goes away has its handler dropped (2026-07-28: a cancel).
                .wrap(actix_web::middleware::from_fn(
                    actix_mcp::web::cancel_on_disconnect,
                ))
                .wrap(actix_web::middleware::from_fn(require_token))
                .wrap(actix_web::middleware::from_fn(refuse_foreign))
                .route("/mcp", web::post().to(post))
                .route("/mcp", web::delete().to(delete))
                .route("/mcp", web::get().to(get))
                .route("/healthz", web::get().to(healthz))
                .route("/oauth/start/{ticket}", web::get().to(sign_in::start))
                .route("/oauth/callback", web::get().to(sign_in::callback))
                .route(
                    "/.well-known/oauth-protected-resource/mcp",
                    web::get().to(resource_metadata),
                )
                .route(
                    "/.well-known/oauth-protected-resource",
                    web::get().to(resource_metadata),
                )
                .configure(|config| {
                    if inspector {
                        let servers = upstream.servers.clone();
                        config.service(actix_mcp::inspector::scope("/inspector", servers));
                    }
                })
        }
    })
    .on_connect(on_connect)
    .workers(workers)
    .max_connections(connections.div_ceil(workers).max(1))
    .disable_signals()
    .shutdown_timeout(1)
    .listen(listener)?
    .run();
    eprintln!("actix-mcp-gateway: listening on http://{address}/mcp");
    let sessions = gateway.sessions.clone();
    actix_rt::spawn(shutdown::sweep(sessions.clone()));
    actix_rt::spawn(sweep_user_connections(upstream.users.clone()));
    let stop = shutdown::on_signal(server.handle(), sessions, gateway.parking.clone());
    actix_rt::spawn(stop);
    server.await
}

/// With `--authorization-server`, `/mcp` (and the inspector) only with a valid token: `401`
/// and the challenge otherwise (`403` and MCP's scope challenge for a missing scope), both
/// from `authorization.rs`. The token's owner goes with the request.
async fn require_token(
    request: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let gateway = request.app_data::<web::Data<Gateway>>();
    // The sign-in pages are a browser's, which has no token: the sign-in says who it is.
    let path = request.path();
    let open =
        path == "/healthz" || path.starts_with("/.well-known/") || path.starts_with("/oauth/");
    let authorization = gateway.and_then(|g| g.authorization.clone().filter(|_| !open));
    let Some(authorization) = authorization else {
        return Ok(next.call(request).await?.map_into_boxed_body());
    };
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (authorization_header, dpop) = (header("authorization"), header("dpop"));
    let method = request.method().as_str().to_owned();
    let presented = crate::authorization::Presented {
        authorization: authorization_header.as_deref(),
        dpop: dpop.as_deref(),
        method: &method,
        path: request.path(),
    };
    match authorization.check(presented).await {
        Ok(caller) => {
            request.extensions_mut().insert(Arc::new(caller));
            Ok(next.call(request).await?.map_into_boxed_body())
        }
        Err(refused) => {
            let forwarded = header("x-forwarded-for");
            let peer = request.peer_addr().map(|a| a.ip());
            let gateway = request.app_data::<web::Data<Gateway>>();
            let trusted = gateway.map_or(&[][..], |g| g.trusted_proxies.as_slice());
            let client = peer::client_address(peer, forwarded.as_deref(), trusted);
            tracing::info!(?refused, ?client, "a token was refused");
            let status = actix_web::http::StatusCode::from_u16(refused.status())
                .unwrap_or(actix_web::http::StatusCode::UNAUTHORIZED);
            let refusal = HttpResponse::build(status)
                .insert_header(("www-authenticate", authorization.challenge(&refused)))
                .finish();
            Ok(request.into_response(refusal))
        }
    }
}

/// The protected resource metadata (RFC 9728), when the gateway requires tokens.
async fn resource_metadata(gateway: web::Data<Gateway>) -> HttpResponse {
    match &gateway.authorization {
        Some(authorization) => json(&authorization.metadata()),
        None => HttpResponse::NotFound().finish(),
    }
}

/// Every answer is small and written in pieces (an SSE event, then the stream's end): without
/// `TCP_NODELAY` each waited out the client's delayed ACK (~40 ms a call).
fn on_connect(connection: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        let _ = tcp.set_nodelay(true);
    }
    actix_mcp::web::watch_connection(connection, data);
}
