//! Downstream Streamable HTTP at `/mcp`. The 2026-07-28 era: `server/discover`, each request on
//! its own POST without a session, the POST aborted its cancel. The 2025-11-25 era: `initialize` opens a session
//! (`Mcp-Session-Id`); each POST of a request carries back its progress and its answer, as an
//! event stream when the client takes one, else the answer as JSON; a notification or an answer
//! gets `202`; `DELETE` ends the session, cancelling upstream what it left in flight;
//! `GET` opens the session's stream of what belongs to no request (an upstream `list_changed`).
//! Every session shares the one upstream connection of each server. `GET /healthz` says where
//! each upstream server is.
//!
//! One actix-web worker: the sessions live on its thread (the upstream connections run on the
//! library's pool, spread over every core).

use std::{cell::RefCell, collections::HashMap, net::SocketAddr, rc::Rc, sync::Arc};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::Value;
use tokio::sync::broadcast;

mod envelope;
mod parking;
mod session;

use crate::{
    authorization::Authorization,
    changes::Event,
    replies::{error, INVALID_PARAMS},
    upstream::Upstream,
};
use parking::{Parked, Parking};
use session::{AbortIsCancel, HttpSession, Messages};

/// The header naming a session.
const SESSION: &str = "mcp-session-id";

/// What a request's POST answers: an event stream of its messages when the client takes one,
/// else the answer as JSON (`202` if it was cancelled meanwhile). With `abort`, the POST's end
/// before its answer cancels the request.
async fn reply(
    request: &HttpRequest,
    messages: Option<Messages>,
    mut abort: Option<AbortIsCancel>,
    streams: bool,
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
        return event_stream(messages, abort);
    }
    while let Some(message) = messages.recv().await {
        // The answer (a request asked of the client has a method too).
        if message.get("id").is_some() && message.get("method").is_none() {
            if let Some(abort) = abort.as_mut() {
                abort.answered = true;
                // 2026-07-28: a missing client capability is a bad request.
                if message["error"]["code"] == crate::replies::MISSING_CAPABILITY {
                    return HttpResponse::BadRequest()
                        .content_type("application/json")
                        .body(message.to_string());
                }
            }
            return json(&message);
        }
    }
    HttpResponse::Accepted().finish()
}

struct Gateway {
    upstream: Upstream,
    /// It listens on a loopback address (see `origin.rs`).
    loopback: bool,
    /// Tokens required, of this issuer.
    authorization: Option<Arc<Authorization>>,
    changes: broadcast::Sender<Event>,
    sessions: RefCell<HashMap<String, Rc<HttpSession>>>,
    /// 2026-07-28 calls answered `input_required`, waiting for their retry.
    parking: Rc<Parking>,
}

fn json(answer: &Value) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.to_string())
}

async fn post(
    request: HttpRequest,
    body: web::Bytes,
    gateway: web::Data<Rc<Gateway>>,
) -> HttpResponse {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return HttpResponse::BadRequest().body("the body is not a JSON-RPC message");
    };
    if !message.is_object() {
        return HttpResponse::BadRequest().body("one JSON-RPC message per POST");
    }
    let named = request
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let repeated = envelope::Headers {
        protocol_version: header("mcp-protocol-version"),
        method: header("mcp-method"),
        name: header("mcp-name"),
    };
    // A 2026-07-28 `initialize` is a method that era removed (refused below), not a session.
    if message["method"] == "initialize" && !envelope::is_modern(&repeated, &message) {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session = HttpSession::new(gateway.upstream.clone(), &gateway.changes, None);
        gateway
            .sessions
            .borrow_mut()
            .insert(id.clone(), session.clone());
        let mut response = reply(&request, session.exchange(message), None, true).await;
        if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&id) {
            response.headers_mut().insert(
                actix_web::http::header::HeaderName::from_static(SESSION),
                value,
            );
        }
        return response;
    }
    let Some(named) = named else {
        if let Err(refused) = envelope::check(&repeated, &message) {
            let status = actix_web::http::StatusCode::from_u16(refused.status)
                .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
            return HttpResponse::build(status)
                .content_type("application/json")
                .body(refused.answer.to_string());
        }
        return stateless(&request, message, &gateway).await;
    };
    let Some(session) = gateway.sessions.borrow().get(&named).cloned() else {
        return HttpResponse::NotFound().body("no such session");
    };
    reply(&request, session.exchange(message), None, true).await
}

/// 2026-07-28: no session; each request on its own, its POST's abort its cancel. A retry
/// after `input_required` (its `requestState`) takes over the call that waits for it.
async fn stateless(request: &HttpRequest, message: Value, gateway: &Gateway) -> HttpResponse {
    // What streams before its answer: progress or logs asked for, or a listen (no answer at
    // all).
    let meta = &message["params"]["_meta"];
    let progress = !meta["progressToken"].is_null()
        || !meta[actix_mcp::protocol::discover::META_LOG_LEVEL].is_null()
        || message["method"] == "subscriptions/listen";
    if let Some(state) = message["params"]["requestState"].as_str() {
        let Some(Parked { session, id }) = gateway.parking.take(state) else {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            let why = "the requestState names no call waiting for input (answered or expired)";
            return json(&error(&id, INVALID_PARAMS, why));
        };
        let abort = AbortIsCancel {
            session: session.clone(),
            id: id.clone(),
            answered: false,
        };
        let messages = session.resume(&id, &message);
        return reply(request, Some(messages), Some(abort), progress).await;
    }
    let session = HttpSession::new(
        gateway.upstream.clone(),
        &gateway.changes,
        Some(gateway.parking.clone()),
    );
    let capabilities = &message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    session.session.stateless(capabilities.clone());
    let abort = message.get("id").map(|id| AbortIsCancel {
        session: session.clone(),
        id: id.clone(),
        answered: false,
    });
    reply(request, session.exchange(message), abort, progress).await
}

async fn delete(request: HttpRequest, gateway: web::Data<Rc<Gateway>>) -> HttpResponse {
    let named = request.headers().get(SESSION).and_then(|v| v.to_str().ok());
    let session = named.and_then(|id| gateway.sessions.borrow_mut().remove(id));
    match session {
        Some(session) => {
            // Its POSTs still waiting end without an answer.
            session.forget_posts();
            session
                .session
                .end("the downstream session was closed")
                .await;
            HttpResponse::Ok().finish()
        }
        None => HttpResponse::NotFound().finish(),
    }
}

/// `GET /mcp`: the session's stream of what belongs to no request (a new one replaces the
/// last).
async fn get(request: HttpRequest, gateway: web::Data<Rc<Gateway>>) -> HttpResponse {
    let named = request.headers().get(SESSION).and_then(|v| v.to_str().ok());
    let Some(named) = named else {
        return HttpResponse::BadRequest().body("no Mcp-Session-Id");
    };
    let Some(session) = gateway.sessions.borrow().get(named).cloned() else {
        return HttpResponse::NotFound().body("no such session");
    };
    event_stream(session.open_stream(), None)
}

/// An event stream of `messages`, one event each, ending with them. With `abort`, the answer
/// (a message with an id) marks the request answered: the stream dropped before it cancels it.
fn event_stream(messages: Messages, abort: Option<AbortIsCancel>) -> HttpResponse {
    let events =
        futures::stream::unfold((messages, abort), |(mut messages, mut abort)| async move {
            let message = messages.recv().await?;
            let answer = message.get("id").is_some() && message.get("method").is_none();
            if let (Some(abort), true) = (abort.as_mut(), answer) {
                abort.answered = true;
            }
            let event = bytes::Bytes::from(format!("event: message\ndata: {message}\n\n"));
            Some((Ok::<_, std::convert::Infallible>(event), (messages, abort)))
        });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .streaming(events)
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
        .app_data::<web::Data<Rc<Gateway>>>()
        .is_some_and(|gateway| gateway.loopback);
    if crate::origin::is_foreign(host.as_deref(), origin.as_deref(), loopback) {
        let refused = HttpResponse::Forbidden().body("this Host or Origin is not served here");
        return Ok(request.into_response(refused));
    }
    Ok(next.call(request).await?.map_into_boxed_body())
}

/// `/healthz`: the gateway answers, and says where each upstream server is.
async fn healthz(gateway: web::Data<Rc<Gateway>>) -> HttpResponse {
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
    /// How long a 2026-07-28 call answered `input_required` waits for its retry.
    pub input_wait: std::time::Duration,
}

/// Serves `/mcp` on `listen` (with the inspector at `/inspector/` if asked for) until the
/// process is interrupted (SIGINT, SIGTERM). POSTs still waiting get 5 s; then the worker's
/// tasks end with it: each routed call still in flight is dropped, which cancels it upstream.
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
            let found = Authorization::discover(issuer, resource, options.scopes.clone()).await;
            Some(Arc::new(found.map_err(std::io::Error::other)?))
        }
    };
    let (inspector, input_wait) = (options.inspector, options.input_wait);
    let server = HttpServer::new({
        let upstream = upstream.clone();
        move || {
            let gateway = Rc::new(Gateway {
                upstream: upstream.clone(),
                loopback: listen.ip().is_loopback(),
                authorization: authorization.clone(),
                changes: changes.clone(),
                sessions: RefCell::default(),
                parking: Rc::new(Parking::new(input_wait)),
            });
            App::new()
                .app_data(web::Data::new(gateway))
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
    .workers(1)
    .shutdown_timeout(5)
    .listen(listener)?;
    eprintln!("actix-mcp-gateway: listening on http://{address}/mcp");
    server.run().await
}

/// With `--authorization-server`, `/mcp` (and the inspector) only with a valid token: `401`
/// and the challenge otherwise (`authorization.rs`).
async fn require_token(
    request: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let authorization = request
        .app_data::<web::Data<Rc<Gateway>>>()
        .and_then(|gateway| gateway.authorization.clone());
    let open = request.path() == "/healthz" || request.path().starts_with("/.well-known/");
    let Some(authorization) = authorization.filter(|_| !open) else {
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
    let info = request.connection_info().clone();
    let url = format!("{}://{}{}", info.scheme(), info.host(), request.path());
    let method = request.method().as_str().to_owned();
    let presented = crate::authorization::Presented {
        authorization: authorization_header.as_deref(),
        dpop: dpop.as_deref(),
        method: &method,
        url: &url,
    };
    if let Err(refused) = authorization.check(presented).await {
        if let Some(why) = &refused.0 {
            tracing::info!(%why, "a token was refused");
        }
        let refusal = HttpResponse::Unauthorized()
            .insert_header(("www-authenticate", authorization.challenge(&refused)))
            .finish();
        return Ok(request.into_response(refusal));
    }
    Ok(next.call(request).await?.map_into_boxed_body())
}

/// The protected resource metadata (RFC 9728), when the gateway requires tokens.
async fn resource_metadata(gateway: web::Data<Rc<Gateway>>) -> HttpResponse {
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
