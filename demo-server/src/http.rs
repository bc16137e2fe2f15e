//! The demo server over Streamable HTTP (`--http ADDR`): the same server, one POST per message,
//! for the HTTP tests and benchmark scenarios.
//!
//! A request's answer, and the progress for its token, go back on its own POST as an event
//! stream that ends with the answer. A POST whose client goes away before the answer cancels the
//! request (the 2026-07-28 rule); a `notifications/cancelled` POST cancels it too (2025-11-25).
//! No sessions by default: GET and DELETE get 405. With `--sessions`, `initialize` is answered
//! with a new `Mcp-Session-Id`, every other POST must carry a known one (missing: 400, unknown:
//! 404), GET opens the session's event stream (it starts with `retry: 100`, then carries the
//! notifications that belong to no request, such as `list_changed`, to every open session), and
//! DELETE ends the session. HTTP/1.1, and HTTP/2 without TLS (h2c) for clients that start with
//! its preface. The bound port is printed to stderr as `LISTENING <port>`.
//!
//! With `--sessions`, a request's id and progress token are its session's own (two clients may
//! both send request 11): on the way in they are made the session's (`SESSION|<id as JSON>`,
//! and a cancel's `requestId` too), on the way out given back as the client sent them. The
//! journal keeps what the client sent.

use std::{
    cell::RefCell,
    collections::HashMap,
    convert::Infallible,
    pin::Pin,
    process::ExitCode,
    rc::{Rc, Weak},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::{
    body::{Frame, Incoming},
    service::service_fn,
    Method, Request, Response, StatusCode,
};
use hyper_util::{rt::TokioIo, server::conn::auto};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::{net::TcpListener, sync::mpsc, task::spawn_local};

use crate::{server::Server, SERVER_NAME};

/// Not `Send`: the stream's guard holds the server (`Rc`), and everything runs on one thread.
type Body = Pin<Box<dyn hyper::body::Body<Data = Bytes, Error = Infallible>>>;

/// Where the messages for each open request POST go.
#[derive(Default)]
pub(super) struct Routes {
    /// By request id (as JSON text): the POST's event stream, and the request's progress token.
    by_id: HashMap<String, (mpsc::UnboundedSender<Bytes>, Option<String>)>,
    /// Progress token (as JSON text) → request id.
    by_token: HashMap<String, String>,
    /// `--sessions`: each live session's id, and its GET stream while one is open.
    sessions: HashMap<String, Option<mpsc::UnboundedSender<Bytes>>>,
    /// The number of sessions handed out (the next id's suffix).
    sessions_created: u64,
}

#[derive(Deserialize)]
struct Probe {
    id: Option<Value>,
    method: Option<String>,
    params: Option<ProbeParams>,
}

#[derive(Deserialize)]
struct ProbeParams {
    #[serde(rename = "progressToken")]
    progress_token: Option<Value>,
    #[serde(rename = "_meta")]
    meta: Option<ProbeMeta>,
}

#[derive(Deserialize)]
struct ProbeMeta {
    #[serde(rename = "progressToken")]
    progress_token: Option<Value>,
}

impl Routes {
    /// Sends outgoing lines on the stream of the open POST of request `key` (id as JSON text)
    /// without ending it (server requests belonging to that request); dropped if it is closed.
    pub(super) fn route_to(&mut self, key: &str, lines: &[u8]) {
        let Some((stream, _)) = self.by_id.get(key) else {
            return;
        };
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let _ = stream.send(event(line));
        }
    }

    /// Sends outgoing lines to the POSTs they belong to; a response ends its POST's stream.
    pub(super) fn route(&mut self, lines: &[u8]) {
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(probe) = serde_json::from_slice::<Probe>(line) else {
                continue;
            };
            match (probe.method.as_deref(), probe.id) {
                (None, Some(id)) => {
                    if let Some((stream, token)) = self.by_id.remove(&id.to_string()) {
                        let _ = stream.send(event(&scoped::outward(line)));
                        if let Some(token) = token {
                            self.by_token.remove(&token);
                        }
                    }
                }
                (Some("notifications/progress"), None) => {
                    let token = probe.params.and_then(|p| p.progress_token);
                    let route = token
                        .and_then(|t| self.by_token.get(&t.to_string()))
                        .and_then(|id| self.by_id.get(id));
                    if let Some((stream, _)) = route {
                        let _ = stream.send(event(&scoped::outward(line)));
                    }
                }
                // A notification of no request: every session's GET stream (none without
                // sessions).
                (Some(_), None) => {
                    let event = event(line);
                    for stream in self.sessions.values().flatten() {
                        let _ = stream.send(event.clone());
                    }
                }
                // Server requests outside any request have no stream to go on.
                _ => {}
            }
        }
    }
}

/// One message as an SSE event.
fn event(line: &[u8]) -> Bytes {
    Bytes::from(format!(
        "event: message\ndata: {}\n\n",
        String::from_utf8_lossy(line)
    ))
}

/// Serves `addr` until the process ends: a TCP address, or `unix:PATH`, a Unix socket.
pub(super) async fn serve(server: Rc<Server>, addr: &str) -> ExitCode {
    if let Some(path) = addr.strip_prefix("unix:") {
        return serve_unix(server, path).await;
    }
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("{SERVER_NAME}: cannot listen on {addr}: {err}");
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(bound) => eprintln!("LISTENING {}", bound.port()),
        Err(err) => eprintln!("{SERVER_NAME}: no local address: {err}"),
    }
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                eprintln!("{SERVER_NAME}: accept failed: {err}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        connection(Rc::clone(&server), stream);
    }
}

/// [`serve`] on the Unix socket at `path` (made anew: a stale one is removed first).
async fn serve_unix(server: Rc<Server>, path: &str) -> ExitCode {
    let _ = std::fs::remove_file(path);
    let listener = match tokio::net::UnixListener::bind(path) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("{SERVER_NAME}: cannot listen on {path}: {err}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("LISTENING unix:{path}");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => connection(Rc::clone(&server), stream),
            Err(err) => eprintln!("{SERVER_NAME}: accept failed: {err}"),
        }
    }
}

/// Serves one connection, counted, as a task of its own.
fn connection<S>(server: Rc<Server>, stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    {
        let counters = &mut server.state.borrow_mut().counters;
        counters.connections += 1;
        counters.connections_open += 1;
        counters.connections_peak = counters.connections_peak.max(counters.connections_open);
    }
    spawn_local(async move {
        let counted = Rc::clone(&server);
        let service = service_fn(move |request| answer(Rc::clone(&server), request));
        // HTTP/1.1, or HTTP/2 when the client starts with its preface (h2c).
        let mut builder = auto::Builder::new(LocalExec);
        // Every request in flight is a stream: allow as many as the benchmark's storms.
        // A client that cancels by resetting streams (the 2026-07-28 way, or closing a
        // cancelled request's stream) resets many at once in a storm; hyper's default
        // (20 streams reset before the server took them) would end its whole connection.
        builder
            .http2()
            .max_concurrent_streams(MAX_STREAMS)
            .max_pending_accept_reset_streams(MAX_STREAMS as usize);
        let _ = builder
            .serve_connection(TokioIo::new(stream), service)
            .await;
        counted.state.borrow_mut().counters.connections_open -= 1;
    });
}

/// Concurrent HTTP/2 streams per connection (hyper's default is 200).
const MAX_STREAMS: u32 = 100_000;

/// HTTP/2 runs each stream as a task; the server is single-threaded (`Rc`), so they are local.
#[derive(Clone, Copy)]
struct LocalExec;

impl<F: std::future::Future + 'static> hyper::rt::Executor<F> for LocalExec {
    fn execute(&self, future: F) {
        spawn_local(future);
    }
}

fn empty(status: StatusCode) -> Response<Body> {
    let body: Body = Box::pin(Empty::new());
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

async fn answer(
    server: Rc<Server>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let sessions = server.cli.sessions;
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if sessions && request.method() == Method::GET {
        return Ok(event_stream(&server, session.as_deref()));
    }
    if sessions && request.method() == Method::DELETE && !server.cli.refuse_delete {
        return Ok(end_session(&server, session.as_deref()));
    }
    if request.method() != Method::POST {
        return Ok(empty(StatusCode::METHOD_NOT_ALLOWED));
    }
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return Ok(empty(StatusCode::BAD_REQUEST)),
    };
    // Journal first, as on stdio.
    server.journal.record(&body);
    let body = match session.as_deref().filter(|_| sessions) {
        Some(session) => Bytes::from(scoped::inward(&body, session)),
        None => body,
    };
    let probe = serde_json::from_slice::<Probe>(&body).ok();
    let request_id = probe
        .as_ref()
        .filter(|p| p.method.is_some())
        .and_then(|p| p.id.clone());
    let initialize = request_id.is_some()
        && probe.as_ref().and_then(|p| p.method.as_deref()) == Some("initialize");
    if sessions && !initialize {
        if let Err(status) = known_session(&server, session.as_deref()) {
            return Ok(empty(status));
        }
    }
    let Some(id) = request_id else {
        // A notification (or a response): handled, nothing to send back.
        let _ = server.handle_line(&body);
        return Ok(empty(StatusCode::ACCEPTED));
    };
    let key = id.to_string();
    let token = probe
        .and_then(|p| p.params)
        .and_then(|p| p.meta)
        .and_then(|m| m.progress_token)
        .map(|t| t.to_string());
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let Some(routes) = server.http.as_ref() else {
            return Ok(empty(StatusCode::INTERNAL_SERVER_ERROR));
        };
        let mut routes = routes.borrow_mut();
        if let Some(token) = &token {
            routes.by_token.insert(token.clone(), key.clone());
        }
        routes.by_id.insert(key.clone(), (tx, token));
    }
    let _ = server.handle_line(&body);
    let guard = Disconnect {
        server: Rc::downgrade(&server),
        id,
        key,
    };
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let event = rx.recv().await?;
        Some((Ok(Frame::data(event)), (rx, guard)))
    });
    let body: Body = Box::pin(StreamBody::new(stream));
    let mut response = Response::new(body);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    if sessions && initialize {
        if let Some(value) = new_session(&server) {
            response.headers_mut().insert("mcp-session-id", value);
        }
    }
    Ok(response)
}

/// A new session (`--sessions`), as the header value that names it.
fn new_session(server: &Server) -> Option<hyper::header::HeaderValue> {
    let mut routes = server.http.as_ref()?.borrow_mut();
    routes.sessions_created += 1;
    let id = format!("demo-session-{}", routes.sessions_created);
    let value = hyper::header::HeaderValue::from_str(&id).ok()?;
    routes.sessions.insert(id, None);
    Some(value)
}

/// Whether `session` names a live session: 400 without one, 404 for one that is unknown or ended.
fn known_session(server: &Server, session: Option<&str>) -> Result<(), StatusCode> {
    let session = session.ok_or(StatusCode::BAD_REQUEST)?;
    let routes = server
        .http
        .as_ref()
        .ok_or(StatusCode::INTERNAL_SERVER_ERROR)?;
    if routes.borrow().sessions.contains_key(session) {
        Ok(())
    } else {
        Err(StatusCode::NOT_FOUND)
    }
}

/// DELETE (`--sessions`): the session ends; its GET stream with it.
fn end_session(server: &Server, session: Option<&str>) -> Response<Body> {
    if let Err(status) = known_session(server, session) {
        return empty(status);
    }
    if let (Some(routes), Some(session)) = (server.http.as_ref(), session) {
        routes.borrow_mut().sessions.remove(session);
    }
    empty(StatusCode::OK)
}

/// GET (`--sessions`): the session's event stream, for the notifications of no request. A new
/// GET of the session replaces (ends) the one before. It opens with `retry: 100`, so a client
/// that loses it comes back soon.
fn event_stream(server: &Rc<Server>, session: Option<&str>) -> Response<Body> {
    if let Err(status) = known_session(server, session) {
        return empty(status);
    }
    let (Some(routes), Some(session)) = (server.http.as_ref(), session) else {
        return empty(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let (tx, rx) = mpsc::unbounded_channel();
    routes
        .borrow_mut()
        .sessions
        .insert(session.to_owned(), Some(tx.clone()));
    let guard = EventStreamGone {
        server: Rc::downgrade(server),
        session: session.to_owned(),
        stream: tx,
    };
    let prime = Bytes::from_static(b"retry: 100\ndata:\n\n");
    let first = futures::stream::once(async move { Ok(Frame::data(prime)) });
    let rest = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let event = rx.recv().await?;
        Some((Ok(Frame::data(event)), (rx, guard)))
    });
    let body: Body = Box::pin(StreamBody::new(futures::StreamExt::chain(first, rest)));
    let mut response = Response::new(body);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// Dropped with a GET stream: the session has none open any more (unless a newer GET replaced
/// it).
struct EventStreamGone {
    server: Weak<Server>,
    session: String,
    stream: mpsc::UnboundedSender<Bytes>,
}

impl Drop for EventStreamGone {
    fn drop(&mut self) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        let Some(routes) = server.http.as_ref() else {
            return;
        };
        let mut routes = routes.borrow_mut();
        if let Some(open) = routes.sessions.get_mut(&self.session) {
            if open.as_ref().is_some_and(|s| s.same_channel(&self.stream)) {
                *open = None;
            }
        }
    }
}

/// Dropped with its POST's stream: if the request is still routed (no answer went out), its
/// client went away, which cancels it.
struct Disconnect {
    server: Weak<Server>,
    id: Value,
    key: String,
}

impl Drop for Disconnect {
    fn drop(&mut self) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        let still_open = server.http.as_ref().and_then(|routes| {
            let mut routes = routes.borrow_mut();
            let (_, token) = routes.by_id.remove(&self.key)?;
            if let Some(token) = token {
                routes.by_token.remove(&token);
            }
            Some(())
        });
        if still_open.is_some() {
            server.cancel(Some(
                &json!({"requestId": self.id, "reason": "connection closed"}),
            ));
        }
    }
}

/// The routes of an HTTP-mode server (none on stdio).
pub(super) fn routes() -> Option<RefCell<Routes>> {
    Some(RefCell::new(Routes::default()))
}

/// `--sessions`: request ids and progress tokens made the session's on the way in, given back
/// on the way out.
mod scoped {
    use serde_json::Value;

    /// What every scoped value starts with (the session ids' own prefix).
    const SCOPED: &str = "demo-session-";

    fn scope(value: &mut Value, session: &str) {
        if !value.is_null() {
            *value = Value::String(format!("{session}|{value}"));
        }
    }

    /// `body` of `session`, its request id, progress token and cancelled id made the session's.
    pub(super) fn inward(body: &[u8], session: &str) -> Vec<u8> {
        let Ok(mut message) = serde_json::from_slice::<Value>(body) else {
            return body.to_vec();
        };
        let Some(method) = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return body.to_vec();
        };
        if let Some(id) = message.get_mut("id") {
            scope(id, session);
        }
        let params = message.get_mut("params").and_then(Value::as_object_mut);
        if let Some(params) = params {
            if method == "notifications/cancelled" {
                if let Some(id) = params.get_mut("requestId") {
                    scope(id, session);
                }
            }
            let meta = params.get_mut("_meta").and_then(Value::as_object_mut);
            if let Some(token) = meta.and_then(|meta| meta.get_mut("progressToken")) {
                scope(token, session);
            }
        }
        serde_json::to_vec(&message).unwrap_or_else(|_| body.to_vec())
    }

    fn unscope(value: &mut Value) {
        let Some(text) = value.as_str().filter(|t| t.starts_with(SCOPED)) else {
            return;
        };
        let given = text.split_once('|').map(|(_, given)| given);
        if let Some(given) = given.and_then(|g| serde_json::from_str(g).ok()) {
            *value = given;
        }
    }

    /// `line` as its client knows it: an answer's id and a progress token given back.
    pub(super) fn outward(line: &[u8]) -> Vec<u8> {
        if !line.windows(SCOPED.len()).any(|w| w == SCOPED.as_bytes()) {
            return line.to_vec();
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
            return line.to_vec();
        };
        if let Some(id) = message.get_mut("id") {
            unscope(id);
        }
        let params = message.get_mut("params").and_then(Value::as_object_mut);
        if let Some(token) = params.and_then(|params| params.get_mut("progressToken")) {
            unscope(token);
        }
        serde_json::to_vec(&message).unwrap_or_else(|_| line.to_vec())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn two_sessions_ids_stay_apart_and_come_back_as_sent() {
            let call = br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"_meta":{"progressToken":11}}}"#;
            let one = inward(call, "demo-session-1");
            let three = inward(call, "demo-session-3");
            assert_ne!(one, three);
            let one: Value = serde_json::from_slice(&one).unwrap();
            assert_eq!(one["id"], "demo-session-1|11");
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": one["id"], "result": {}});
            let back: Value =
                serde_json::from_slice(&outward(answer.to_string().as_bytes())).unwrap();
            assert_eq!(back["id"], 11);
            let progress = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "demo-session-1|\"t\"", "progress": 1}});
            let back: Value =
                serde_json::from_slice(&outward(progress.to_string().as_bytes())).unwrap();
            assert_eq!(back["params"]["progressToken"], "t");
            let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}"#;
            let cancel: Value = serde_json::from_slice(&inward(cancel, "demo-session-3")).unwrap();
            assert_eq!(cancel["params"]["requestId"], "demo-session-3|11");
        }
    }
}
