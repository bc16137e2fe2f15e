//! A fault-injecting HTTP proxy between the client's Streamable HTTP transport and a backend
//! server (the demo server's HTTP mode), for tests that break the wire on purpose.
//!
//! Towards the client it speaks HTTP/1.1 and HTTP/2 without TLS (h2c, prior knowledge), on
//! 127.0.0.1 and a free port; towards the backend HTTP/1.1. It runs on a runtime (and thread) of
//! its own, so a client that hangs cannot stop it, and it ends when dropped.
//!
//! Each request is read whole, counted ([`ProxyStats`]) and matched against the [`Rule`]s in
//! order (HTTP method, JSON-RPC method, tool name, the nth match, how many times): the first that
//! fires injects its [`Fault`]; without one the request is forwarded as it is and the answer
//! streamed back. [`FaultProxy::drop_event_streams`] breaks the GET streams open now, and
//! [`FaultProxy::set_backend`] points the proxy at another server (a restart).
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::{
    body::{Body, Frame, Incoming},
    header::{self, HeaderMap, HeaderName, HeaderValue},
    http::request::Parts,
    service::service_fn,
    Method, Request, Response, StatusCode, Uri, Version,
};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client as Upstream},
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a cut waits after the last bytes it lets through, so they reach the client before
/// the connection or stream breaks (a reset discards what is still unsent).
const FLUSH_PAUSE: Duration = Duration::from_millis(50);

/// What a rule does to the request it matches.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Reset the client's TCP connection (RST) without answering; with `forward`, only once
    /// the backend answered the request (it has it), whose answer is then dropped.
    ResetBeforeHeaders { forward: bool },
    /// Forward, send the backend's response headers, then reset the client's TCP connection.
    ResetAfterHeaders,
    /// Never answer; with `forward`, the backend has the request (and its answer is held).
    /// Ends only when the client goes away.
    Stall { forward: bool },
    /// Forward and pass on the first `keep` bytes of the response body, then break it: over
    /// HTTP/1.1 the connection closes, over HTTP/2 the stream is reset.
    Truncate { keep: usize },
    /// As [`Fault::Truncate`], after turning the backend's event-stream answer into a JSON body
    /// (`application/json`, its full `Content-Length`): a JSON answer cut short.
    TruncateJson { keep: usize },
    /// Forward, and hold the response headers this long.
    DelayHeaders(Duration),
    /// Answer this status, not forwarding, with `Retry-After` if given.
    Status {
        status: u16,
        retry_after: Option<&'static str>,
    },
}

/// When a fault is injected: every condition set must hold.
#[derive(Clone, Debug)]
pub struct Rule {
    fault: Fault,
    http_method: Option<Method>,
    rpc_method: Option<String>,
    tool: Option<String>,
    nth: Option<usize>,
    times: Option<usize>,
    matched: usize,
    fired: usize,
}

impl Rule {
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            http_method: None,
            rpc_method: None,
            tool: None,
            nth: None,
            times: None,
            matched: 0,
            fired: 0,
        }
    }

    /// Only requests of this HTTP method (`GET` for the event streams).
    pub fn http(mut self, method: Method) -> Self {
        self.http_method = Some(method);
        self
    }

    /// Only bodies of this JSON-RPC method.
    pub fn rpc(mut self, method: &str) -> Self {
        self.rpc_method = Some(method.to_owned());
        self
    }

    /// Only `tools/call` of this tool.
    pub fn tool(mut self, name: &str) -> Self {
        self.rpc_method = Some("tools/call".to_owned());
        self.tool = Some(name.to_owned());
        self
    }

    /// Only the nth request (from 1) that meets the other conditions.
    pub fn nth(mut self, n: usize) -> Self {
        self.nth = Some(n);
        self
    }

    /// At most this many times.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    fn fires(&mut self, http: &Method, rpc: Option<&str>, tool: Option<&str>) -> bool {
        let meets = self.http_method.as_ref().is_none_or(|m| m == http)
            && self.rpc_method.as_deref().is_none_or(|m| Some(m) == rpc)
            && self.tool.as_deref().is_none_or(|t| Some(t) == tool);
        if !meets {
            return false;
        }
        self.matched += 1;
        let fires =
            self.nth.is_none_or(|n| n == self.matched) && self.times.is_none_or(|n| self.fired < n);
        self.fired += usize::from(fires);
        fires
    }
}

/// What the proxy saw.
#[derive(Clone, Debug, Default)]
pub struct ProxyStats {
    /// HTTP requests from the client.
    pub requests: usize,
    /// Of them over HTTP/2.
    pub http2_requests: usize,
    /// Requests sent on to the backend.
    pub forwarded: usize,
    /// Faults injected.
    pub faults: usize,
    /// Client connections open now (a shared client keeps idle ones for later requests).
    pub open_connections: usize,
    /// Client requests not over yet: their answer's body still open, or no answer yet.
    pub open_requests: usize,
    /// Client connections accepted so far.
    pub connections: usize,
    /// The HTTP method of every request, in order.
    pub http_methods: Vec<String>,
    /// The JSON-RPC method of every request body that has one, in order.
    pub rpc_methods: Vec<String>,
    /// The `notifications/cancelled` bodies, in order.
    pub cancels: Vec<Value>,
    /// Each `tools/call`: its `Authorization` header (empty without) and its arguments.
    pub tool_calls: Vec<(String, Value)>,
}

impl ProxyStats {
    /// How many requests of this HTTP method came.
    pub fn http_count(&self, method: &str) -> usize {
        self.http_methods.iter().filter(|m| *m == method).count()
    }

    /// How many bodies of this JSON-RPC method came.
    pub fn rpc_count(&self, method: &str) -> usize {
        self.rpc_methods.iter().filter(|m| *m == method).count()
    }
}

struct Shared {
    /// The backend's `host:port`.
    backend: Mutex<String>,
    rules: Mutex<Vec<Rule>>,
    stats: Mutex<ProxyStats>,
    upstream: Upstream<HttpConnector, Full<Bytes>>,
    /// Each client connection's kill switch.
    connections: Mutex<Vec<CancellationToken>>,
    /// Cancelled (and replaced) to break the GET streams open now.
    event_streams: Mutex<CancellationToken>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The proxy; ends (with every connection) when dropped.
pub struct FaultProxy {
    shared: Arc<Shared>,
    /// The MCP endpoint through the proxy.
    pub url: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FaultProxy {
    /// A proxy in front of `backend` (an MCP endpoint URL such as `http://127.0.0.1:1234/mcp`).
    pub fn start(backend: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("bound").port();
        let uri: Uri = backend.parse().expect("a backend URL");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let shared = Arc::new(Shared {
            backend: Mutex::new(authority(backend)),
            rules: Mutex::new(Vec::new()),
            stats: Mutex::new(ProxyStats::default()),
            upstream: Upstream::builder(TokioExecutor::new()).build_http(),
            connections: Mutex::new(Vec::new()),
            event_streams: Mutex::new(CancellationToken::new()),
        });
        runtime.spawn(accept_loop(shared.clone(), listener));
        Self {
            shared,
            url: format!("http://127.0.0.1:{port}{}", uri.path()),
            runtime: Some(runtime),
        }
    }

    /// Adds a rule (after the ones before: the first that fires wins).
    pub fn rule(&self, rule: Rule) -> &Self {
        lock(&self.shared.rules).push(rule);
        self
    }

    pub fn clear_rules(&self) {
        lock(&self.shared.rules).clear();
    }

    pub fn stats(&self) -> ProxyStats {
        lock(&self.shared.stats).clone()
    }

    /// Sends what comes next to another backend (the old one's streams break with it).
    pub fn set_backend(&self, backend: &str) {
        *lock(&self.shared.backend) = authority(backend);
    }

    /// Breaks every GET event stream open now (later ones are left alone).
    pub fn drop_event_streams(&self) {
        let old = std::mem::take(&mut *lock(&self.shared.event_streams));
        old.cancel();
    }

    /// Resets every client connection open now.
    pub fn reset_connections(&self) {
        for kill in lock(&self.shared.connections).drain(..) {
            kill.cancel();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn authority(url: &str) -> String {
    let uri: Uri = url.parse().expect("a backend URL");
    uri.authority()
        .expect("a backend host and port")
        .to_string()
}

/// Counts a client request open until dropped (with its handler, or with its answer's body).
struct Exchange(Arc<Shared>);

impl Exchange {
    fn new(shared: &Arc<Shared>) -> Self {
        lock(&shared.stats).open_requests += 1;
        Self(shared.clone())
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        lock(&self.0.stats).open_requests -= 1;
    }
}

/// Counts a client connection open until dropped.
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        lock(&self.0.stats).open_connections -= 1;
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: std::net::TcpListener) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("the proxy's listener");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Closing is abortive (RST): a reset fault is a reset, not a polite FIN.
        let _ = stream.set_zero_linger();
        let kill = CancellationToken::new();
        {
            let mut stats = lock(&shared.stats);
            stats.open_connections += 1;
            stats.connections += 1;
        }
        lock(&shared.connections).push(kill.clone());
        let open = Open(shared.clone());
        let shared = shared.clone();
        tokio::spawn(async move {
            let _open = open;
            let service = {
                let kill = kill.clone();
                service_fn(move |request| handle(shared.clone(), kill.clone(), request))
            };
            // HTTP/1.1, or HTTP/2 when the client starts with its preface (h2c).
            // As many streams as the demo server takes (hyper's default is 200), and a storm of
            // closed streams does not end the connection.
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http2()
                .max_concurrent_streams(100_000)
                .max_pending_accept_reset_streams(100_000);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = kill.cancelled() => {}
            }
        });
    }
}

type Answer = Response<Tap>;

async fn handle(
    shared: Arc<Shared>,
    kill: CancellationToken,
    request: Request<Incoming>,
) -> Result<Answer, BoxError> {
    let exchange = Exchange::new(&shared);
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let json: Option<Value> = serde_json::from_slice(&body).ok();
    let rpc = json
        .as_ref()
        .and_then(|j| j.get("method"))
        .and_then(Value::as_str);
    let tool = json
        .as_ref()
        .filter(|_| rpc == Some("tools/call"))
        .and_then(|j| j.pointer("/params/name"))
        .and_then(Value::as_str);
    let fault = {
        let mut stats = lock(&shared.stats);
        stats.requests += 1;
        stats.http2_requests += usize::from(parts.version == Version::HTTP_2);
        stats.http_methods.push(parts.method.to_string());
        if let Some(rpc) = rpc {
            stats.rpc_methods.push(rpc.to_owned());
        }
        if rpc == Some("notifications/cancelled") {
            stats.cancels.extend(json.clone());
        }
        if let Some(arguments) = json.as_ref().filter(|_| rpc == Some("tools/call")) {
            let authorization = parts
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let arguments = arguments.pointer("/params/arguments").cloned();
            stats
                .tool_calls
                .push((authorization.to_owned(), arguments.unwrap_or_default()));
        }
        let fault = lock(&shared.rules).iter_mut().find_map(|rule| {
            rule.fires(&parts.method, rpc, tool)
                .then(|| rule.fault.clone())
        });
        stats.faults += usize::from(fault.is_some());
        fault
    };
    let event_stream = parts.method == Method::GET;
    let answer = match fault {
        None => relay(
            forward(&shared, &parts, body).await,
            Cut::None,
            &shared,
            event_stream,
        ),
        Some(Fault::ResetBeforeHeaders { forward: first }) => {
            let _held = if first {
                Some(forward(&shared, &parts, body).await)
            } else {
                None
            };
            kill.cancel();
            std::future::pending().await
        }
        Some(Fault::ResetAfterHeaders) => {
            let cut = Cut::After {
                keep: 0,
                kill: Some(kill),
            };
            relay(forward(&shared, &parts, body).await, cut, &shared, false)
        }
        Some(Fault::Stall { forward: first }) => {
            let _held = if first {
                Some(forward(&shared, &parts, body).await)
            } else {
                None
            };
            std::future::pending().await
        }
        Some(Fault::Truncate { keep }) => {
            let cut = Cut::After { keep, kill: None };
            relay(forward(&shared, &parts, body).await, cut, &shared, false)
        }
        Some(Fault::TruncateJson { keep }) => match forward(&shared, &parts, body).await {
            Ok(response) => {
                let events = response.into_body().collect().await?.to_bytes();
                let json = last_event_data(&events);
                let length = json.len();
                let body = Full::new(json)
                    .map_err(|never| match never {})
                    .boxed_unsync();
                let mut answer = Response::new(Tap::new(body, Cut::After { keep, kill: None }));
                let headers = answer.headers_mut();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
                answer
            }
            Err(e) => bad_gateway(&e),
        },
        Some(Fault::DelayHeaders(delay)) => {
            let response = forward(&shared, &parts, body).await;
            tokio::time::sleep(delay).await;
            relay(response, Cut::None, &shared, event_stream)
        }
        Some(Fault::Status {
            status,
            retry_after,
        }) => {
            let body = Full::new(Bytes::from_static(b"injected by the fault proxy"))
                .map_err(|never| match never {})
                .boxed_unsync();
            let mut answer = Response::new(Tap::new(body, Cut::None));
            *answer.status_mut() = StatusCode::from_u16(status)?;
            let headers = answer.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            if let Some(after) = retry_after {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static(after));
            }
            answer
        }
    };
    Ok(answer.map(|mut tap| {
        tap.exchange = Some(exchange);
        tap
    }))
}

/// The data of the last event of an event stream (the demo server ends a POST's stream with
/// the answer).
fn last_event_data(events: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(events);
    let data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|data| !data.is_empty())
        .unwrap_or_default();
    Bytes::from(data.to_owned())
}

const HOP_BY_HOP: [HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

fn end_to_end(headers: &HeaderMap) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
    headers
        .iter()
        .filter(|(name, _)| !HOP_BY_HOP.contains(name) && *name != header::HOST)
}

async fn forward(
    shared: &Shared,
    parts: &Parts,
    body: Bytes,
) -> Result<Response<Incoming>, BoxError> {
    let backend = lock(&shared.backend).clone();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = Request::builder()
        .method(parts.method.clone())
        .uri(format!("http://{backend}{path}"))
        .version(Version::HTTP_11);
    for (name, value) in end_to_end(&parts.headers) {
        request = request.header(name, value);
    }
    let request = request.body(Full::new(body))?;
    lock(&shared.stats).forwarded += 1;
    Ok(shared.upstream.request(request).await?)
}

fn bad_gateway(error: &BoxError) -> Answer {
    let body = Full::new(Bytes::from(format!("the backend failed: {error}")))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut answer = Response::new(Tap::new(body, Cut::None));
    *answer.status_mut() = StatusCode::BAD_GATEWAY;
    answer
}

/// The backend's answer, streamed back (an unreachable backend: 502).
fn relay(
    response: Result<Response<Incoming>, BoxError>,
    cut: Cut,
    shared: &Shared,
    event_stream: bool,
) -> Answer {
    let response = match response {
        Ok(response) => response,
        Err(e) => return bad_gateway(&e),
    };
    let (parts, body) = response.into_parts();
    let body = body.map_err(BoxError::from).boxed_unsync();
    let mut tap = Tap::new(body, cut);
    if event_stream && parts.status.is_success() {
        let token = lock(&shared.event_streams).clone();
        tap.dropped = Some(Box::pin(token.cancelled_owned()));
    }
    let mut answer = Response::new(tap);
    *answer.status_mut() = parts.status;
    let headers = answer.headers_mut();
    for (name, value) in end_to_end(&parts.headers) {
        headers.append(name.clone(), value.clone());
    }
    answer
}

enum Cut {
    None,
    /// After `keep` bytes of body: reset the connection (`kill`) or break the body.
    After {
        keep: usize,
        kill: Option<CancellationToken>,
    },
}

/// A response body on its way to the client, cut where a fault says.
pub struct Tap {
    inner: UnsyncBoxBody<Bytes, BoxError>,
    cut: Cut,
    sent: usize,
    /// The pause before the cut.
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    /// An event stream's: resolves when [`FaultProxy::drop_event_streams`] is called.
    dropped: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    /// The request this answers: over when the body is dropped.
    exchange: Option<Exchange>,
}

impl Tap {
    fn new(inner: UnsyncBoxBody<Bytes, BoxError>, cut: Cut) -> Self {
        Self {
            inner,
            cut,
            sent: 0,
            pause: None,
            dropped: None,
            exchange: None,
        }
    }
}

impl Body for Tap {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(dropped) = &mut this.dropped {
            if dropped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Some(Err("event stream dropped by the proxy".into())));
            }
        }
        let Cut::After { keep, kill } = &this.cut else {
            return Pin::new(&mut this.inner).poll_frame(cx);
        };
        if this.sent >= *keep {
            let pause = this
                .pause
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(FLUSH_PAUSE)));
            ready!(pause.as_mut().poll(cx));
            return match kill {
                Some(kill) => {
                    kill.cancel();
                    Poll::Pending
                }
                None => Poll::Ready(Some(Err("body cut by the proxy".into()))),
            };
        }
        let room = *keep - this.sent;
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                let frame = match frame.into_data() {
                    Ok(data) => {
                        let data = if data.len() > room {
                            data.slice(..room)
                        } else {
                            data
                        };
                        this.sent += data.len();
                        Frame::data(data)
                    }
                    Err(frame) => frame,
                };
                Poll::Ready(Some(Ok(frame)))
            }
            // The backend ended first: the cut comes at the end.
            None => {
                this.sent = *keep;
                Pin::new(this).poll_frame(cx)
            }
            other => Poll::Ready(other),
        }
    }
}
