//! One POST per message, and the optional GET stream for what the server sends on its own.
//!
//! A POST reports its request's write-complete event (`RequestWritten`) once the request body was
//! handed to the HTTP connection: the body is a one-chunk stream that notices when it is asked for
//! more after its only chunk. (A response that comes first counts too.) Only then may the
//! connection queue a cancel for that request, so a `notifications/cancelled` can never be sent
//! for a request whose POST has not gone out.
//!
//! Nothing here reads the JSON: a JSON body answering a request goes to the connection as its
//! `Reply`, an error status as `Refused`, events as `Received`, and the end of a request's event
//! stream as `StreamEnded` (the connection, which has routed every frame before it, decides
//! whether the request still needs resuming).

use std::{cell::Cell, future::Future, io, pin::pin, rc::Rc, task::Poll, time::Duration};

use backon::BackoffBuilder;
use bytes::Bytes;
use futures::channel::oneshot;
use reqwest::{
    header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE},
    Method, Response, StatusCode,
};

use super::{
    driver::Shared,
    sse::{read_events, StreamEnd},
    states::Outgoing,
};
use crate::{
    error::{CloseReason, Error},
    protocol::jsonrpc::RequestId,
    transport::{FrameKind, ResumePoint, TransportEvent},
};

/// How many times one request may wait for an authorization flow and be sent again.
#[cfg(feature = "auth")]
const MAX_AUTH_ROUNDS: u32 = 3;
/// How many times a request's event stream is resumed (GET + `Last-Event-ID`) before giving up.
const MAX_RESUMES: usize = 5;
/// How many same-origin redirects one request may follow.
pub(super) const MAX_REDIRECTS: usize = 5;
/// The wait before resuming when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// What a POST was sent with.
#[derive(Clone, Copy)]
pub(super) struct SentOn {
    /// It carried `Mcp-Session-Id` (2025-11-25).
    pub had_session: bool,
    /// The session's generation then.
    pub generation: u64,
}

impl Shared {
    /// A request with the user's headers, the authorization, and the session's id and version
    /// as they are now.
    pub(super) fn request_in_session(&self, method: Method) -> reqwest::RequestBuilder {
        self.session(|session| {
            self.request(
                method,
                session.header_id(),
                session.protocol_version.as_ref(),
            )
        })
    }

    /// A request with the user's headers and the authorization; with `session` and `version`,
    /// also those (without: as the first `initialize` went out).
    pub(super) fn request(
        &self,
        method: Method,
        session: Option<&HeaderValue>,
        version: Option<&HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let url = self.endpoint.borrow().clone();
        // The DPoP proof names the URL too: a second copy only when there is authorization.
        #[cfg(feature = "auth")]
        let proof_url = self.auth.as_ref().map(|_| url.clone());
        let mut builder = self.client.request(method.clone(), url);
        if !self.headers.is_empty() {
            builder = builder.headers(self.headers.clone());
        }
        if let Some(id) = session {
            builder = builder.header("mcp-session-id", id.clone());
        }
        if let Some(version) = version {
            builder = builder.header("mcp-protocol-version", version.clone());
        }
        #[cfg(feature = "auth")]
        if let (Some(auth), Some(url)) = (&self.auth, &proof_url) {
            builder = authorize(builder, auth, &method, url);
        }
        builder
    }

    /// Follows a same-origin 307/308 to a POST (Starlette's `/mcp` → `/mcp/`): the endpoint
    /// moves there for every later request too, and `true` says to send the frame again (its
    /// body is a stream that reqwest cannot replay itself). Any other redirect is not followed.
    fn moved(&self, response: &Response, redirects: &mut usize) -> bool {
        if !matches!(response.status().as_u16(), 307 | 308) || *redirects >= MAX_REDIRECTS {
            return false;
        }
        let location = response.headers().get(reqwest::header::LOCATION);
        let current = self.endpoint.borrow().clone();
        let target = location
            .and_then(|location| location.to_str().ok())
            .and_then(|location| current.join(location).ok());
        match target.filter(|target| same_origin(target, &current)) {
            Some(target) => {
                *redirects += 1;
                *self.endpoint.borrow_mut() = target;
                true
            }
            None => false,
        }
    }

    fn written(&self, request: RequestId) {
        self.events.send(TransportEvent::RequestWritten(request));
    }

    pub(super) fn fail(&self, request: Option<RequestId>, error: Error) {
        match request {
            Some(id) => {
                self.events.send(TransportEvent::RequestFailed(id, error));
            }
            None => tracing::warn!(%error, "MCP HTTP message not delivered"),
        }
    }

    fn deliver(&self, frame: Bytes) {
        self.events.send(TransportEvent::Received(vec![frame]));
    }

    /// The stream that should carry `request`'s answer ended: the connection decides whether
    /// to resume it (`resume`) from where it ended.
    fn stream_ended(&self, request: RequestId, end: StreamEnd, attempts: u32) {
        let resume = end.last_event_id.map(|last_event_id| ResumePoint {
            last_event_id,
            retry: end.retry,
            attempts,
        });
        let error = end.error.map(|error| {
            Error::transport("the request's event stream broke", io::Error::other(error))
        });
        // Ended cleanly and cannot be resumed: no answer can come any more (a server may end
        // a request's stream early only after an event with an id, to be resumed). The
        // connection, which routed every frame of the stream before this, fails the request
        // if it still waits.
        let error = match (&resume, error) {
            (None, None) => Some(Error::Protocol(
                "the request's event stream ended without its answer".into(),
            )),
            (_, error) => error,
        };
        self.events.send(TransportEvent::StreamEnded {
            request,
            resume,
            error,
        });
    }

    fn transport_error(&self, what: &str, error: reqwest::Error) -> Error {
        Error::transport(
            format!("{what} {}", self.url),
            io::Error::other(WithCauses(error)),
        )
    }
}

/// A reqwest error shown with its causes ("error sending request: connection refused"):
/// reqwest's own message leaves out what went wrong underneath.
#[derive(Debug)]
struct WithCauses(reqwest::Error);

impl std::fmt::Display for WithCauses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = std::error::Error::source(&self.0);
        while let Some(error) = cause {
            write!(f, ": {error}")?;
            cause = error.source();
        }
        Ok(())
    }
}

impl std::error::Error for WithCauses {}

/// The access token (and a DPoP proof) on one request.
#[cfg(feature = "auth")]
fn authorize(
    mut builder: reqwest::RequestBuilder,
    auth: &crate::auth::OAuth,
    method: &Method,
    url: &reqwest::Url,
) -> reqwest::RequestBuilder {
    if let Some(proof) = auth.resource_proof(method.as_str(), url) {
        builder = builder.header("dpop", proof);
    }
    if let Some(header) = auth.authorization().0 {
        match HeaderValue::from_str(&header) {
            Ok(mut value) => {
                value.set_sensitive(true);
                builder = builder.header(reqwest::header::AUTHORIZATION, value);
            }
            Err(_) => tracing::warn!("the access token is not a valid header value"),
        }
    }
    builder
}

/// POSTs one message (with the era's routing headers) and delivers whatever comes back.
/// `sent_again`: a request answered `404` once already.
pub(super) async fn post(
    shared: &Rc<Shared>,
    frame: Bytes,
    request: Option<RequestId>,
    routing: &[(HeaderName, HeaderValue)],
    sent_again: bool,
) {
    let sent = send_authorized(shared, &frame, request, routing).await;
    if let Some((response, sent_on)) = sent {
        if response.status() == StatusCode::NOT_FOUND && sent_on.had_session {
            // The session is gone: it is renewed (the default), or the connection ends. A
            // request answered so was never processed: it goes again on the new session.
            let again = request.map(|id| Outgoing {
                sent_again,
                ..Outgoing::new(frame, FrameKind::Request(id), routing.to_vec())
            });
            return shared.event(|requests| requests.session_expired(again, sent_on.generation));
        }
        answer(shared, response, request, sent_on).await;
    }
}

/// Sends `frame` until it is not refused for authorization. With authorization, a `401` (or
/// `403 insufficient_scope`) holds the request until the one authorization flow of the
/// connection ends, then sends it again. `None`: it failed (the request was failed).
#[cfg(feature = "auth")]
async fn send_authorized(
    shared: &Rc<Shared>,
    frame: &Bytes,
    request: Option<RequestId>,
    routing: &[(HeaderName, HeaderValue)],
) -> Option<(Response, SentOn)> {
    let (mut rounds, mut redirects) = (0, 0);
    loop {
        let seen = match &shared.auth {
            Some(auth) => {
                if rounds == 0 && redirects == 0 {
                    // The token a store kept for this server goes on the first request.
                    let endpoint = shared.endpoint.borrow().to_string();
                    Box::pin(auth.prime_once(&endpoint)).await;
                }
                let (_, seen) = auth.authorization();
                // Boxed: the flows are rare and large, and every POST task would otherwise
                // carry their state inline (several KiB per request in flight).
                Box::pin(auth.refresh_if_expiring(seen)).await;
                Some((auth, auth.authorization().1))
            }
            None => None,
        };
        let (response, sent_on) = send_once(shared, frame.clone(), request, routing).await?;
        if shared.moved(&response, &mut redirects) {
            continue;
        }
        if let Some((auth, seen)) = seen.filter(|_| rounds < MAX_AUTH_ROUNDS) {
            let status = response.status().as_u16();
            if let Some(refusal) = crate::auth::Refusal::from_response(status, response.headers()) {
                rounds += 1;
                match reauthorize(shared, auth, refusal, request, seen).await {
                    Ok(()) => continue,
                    Err(e) => {
                        shared.fail(request, e);
                        return None;
                    }
                }
            }
        }
        heard(shared, request);
        return Some((response, sent_on));
    }
}

/// Sends `frame` once (no authorization in this build). `None`: it failed.
#[cfg(not(feature = "auth"))]
async fn send_authorized(
    shared: &Rc<Shared>,
    frame: &Bytes,
    request: Option<RequestId>,
    routing: &[(HeaderName, HeaderValue)],
) -> Option<(Response, SentOn)> {
    let mut redirects = 0;
    loop {
        let (response, sent_on) = send_once(shared, frame.clone(), request, routing).await?;
        if shared.moved(&response, &mut redirects) {
            continue;
        }
        heard(shared, request);
        return Some((response, sent_on));
    }
}

/// Whether two URLs have one origin (scheme, host, port).
pub(super) fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    let origin = |url: &reqwest::Url| {
        let host = url.host_str().map(str::to_ascii_lowercase);
        (url.scheme().to_owned(), host, url.port_or_known_default())
    };
    origin(a) == origin(b)
}

/// The server has read the request (its answer's headers came): a cancel waiting for that may
/// go.
fn heard(shared: &Rc<Shared>, request: Option<RequestId>) {
    if let Some(id) = request {
        shared.event(|requests| requests.heard(id));
    }
}

/// Runs (or waits for) the connection's authorization flow for a refused request. Refused
/// before the server read it, nothing of it reached the server: it is held meanwhile.
#[cfg(feature = "auth")]
async fn reauthorize(
    shared: &Rc<Shared>,
    auth: &crate::auth::OAuth,
    refusal: crate::auth::Refusal,
    request: Option<RequestId>,
    seen: crate::auth::Seen,
) -> Result<(), Error> {
    if let Some(id) = request {
        shared.event(|requests| requests.refused(id));
    }
    let recovered = Box::pin(auth.recover(&shared.url, refusal, seen)).await;
    if let Some(id) = request {
        // Let go: from here a cancel must follow it on the wire.
        shared.event(|requests| requests.let_go(id));
    }
    recovered
}

/// What the answer to a POST means: the session expired (`404`), an error status, or the
/// request's answer (JSON or an event stream).
async fn answer(
    shared: &Rc<Shared>,
    response: Response,
    request: Option<RequestId>,
    sent_on: SentOn,
) {
    let status = response.status();
    let given = shared.event(|requests| {
        requests.answered(sent_on.generation);
        if status.is_success() && requests.session().id.is_none() {
            if let Some(id) = response.headers().get("mcp-session-id") {
                requests.session_given(id);
                return requests.session().id.is_some().then(|| id.clone());
            }
        }
        None
    });
    if let Some(id) = given.as_ref().and_then(|id| id.to_str().ok()) {
        shared
            .events
            .send(TransportEvent::SessionStarted(id.to_owned()));
    }
    if !status.is_success() {
        return refused(shared, response, request).await;
    }
    match content_type(&response).as_str() {
        "text/event-stream" => {
            let end = read_events(response, shared.max_frame, |frame| shared.deliver(frame)).await;
            if let Some(id) = request {
                shared.stream_ended(id, end, 0);
            }
        }
        "application/json" => match (read_capped(response, shared.max_frame).await, request) {
            (Ok(body), Some(request)) => {
                shared.events.send(TransportEvent::Reply { request, body });
            }
            (Ok(body), None) => shared.deliver(body),
            (Err(e), _) => shared.fail(request, e),
        },
        // 202 Accepted (a notification or a response of ours), or an empty answer: a request
        // must be answered with JSON or an event stream.
        _ if status == StatusCode::ACCEPTED || response.content_length() == Some(0) => {
            if request.is_some() {
                let error = "the server accepted the request without answering it";
                shared.fail(request, Error::Protocol(error.into()));
            }
        }
        other => shared.fail(
            request,
            Error::Protocol(format!("unexpected HTTP content type {other:?}")),
        ),
    }
}

/// One POST of `frame`: reports the request written once its body went out (or the answer came
/// first). `None` when it failed before any answer (the request was failed).
async fn send_once(
    shared: &Shared,
    frame: Bytes,
    request: Option<RequestId>,
    routing: &[(HeaderName, HeaderValue)],
) -> Option<(Response, SentOn)> {
    let (sent_tx, sent_rx) = oneshot::channel::<()>();
    let length = frame.len();
    // The session as the headers carry it, read before anything is awaited.
    let (builder, sent_on) = shared.session(|session| {
        let id = session.header_id();
        let sent_on = SentOn {
            had_session: id.is_some(),
            generation: session.generation,
        };
        let builder = shared.request(Method::POST, id, session.protocol_version.as_ref());
        (builder, sent_on)
    });
    let mut builder = builder
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_LENGTH, length);
    for (name, value) in routing {
        builder = builder.header(name.clone(), value.clone());
    }
    let send = builder
        .body(reqwest::Body::wrap_stream(one_chunk(frame, sent_tx)))
        .send();

    let reported = Cell::new(false);
    let report_written = || {
        if let Some(id) = request {
            if !reported.replace(true) {
                shared.written(id);
            }
        }
    };
    let mut watch_sent = pin!(async {
        if sent_rx.await.is_ok() {
            report_written();
        }
        std::future::pending::<()>().await
    });
    let mut send = pin!(send);
    let response = std::future::poll_fn(|cx| {
        let _ = watch_sent.as_mut().poll(cx);
        send.as_mut().poll(cx)
    })
    .await;
    match response {
        Ok(response) => {
            report_written();
            Some((response, sent_on))
        }
        Err(e) => {
            shared.fail(request, shared.transport_error("POST", e));
            None
        }
    }
}

/// A request body of one chunk that tells `sent` when the chunk has been handed to the
/// connection: when it is asked for more (HTTP/2), or when it is dropped after its chunk was
/// taken (HTTP/1.1 stops at `Content-Length` and drops the body without asking again; without
/// this, a request whose answer has no headers yet was never reported written, and its cancel
/// never sent).
fn one_chunk(
    frame: Bytes,
    sent: oneshot::Sender<()>,
) -> impl futures::Stream<Item = Result<Bytes, io::Error>> + Send + 'static {
    OneChunk {
        frame: Some(frame),
        sent: Some(sent),
    }
}

struct OneChunk {
    frame: Option<Bytes>,
    sent: Option<oneshot::Sender<()>>,
}

impl OneChunk {
    fn report_if_taken(&mut self) {
        if self.frame.is_none() {
            if let Some(sent) = self.sent.take() {
                let _ = sent.send(());
            }
        }
    }
}

impl futures::Stream for OneChunk {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        if let Some(chunk) = self.frame.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        self.report_if_taken();
        Poll::Ready(None)
    }
}

impl Drop for OneChunk {
    fn drop(&mut self) {
        self.report_if_taken();
    }
}

pub(super) fn content_type(response: &Response) -> String {
    media_type(response.headers())
}

/// The media type of `Content-Type`, lower-cased, without parameters (empty if absent).
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// An error status: the connection tells a JSON-RPC error in the body (the request's answer)
/// from anything else ([`Error::Http`]).
async fn refused(shared: &Shared, response: Response, request: Option<RequestId>) {
    let status = response.status().as_u16();
    let retry_after = retry_after_seconds(response.headers());
    let location = response.headers().get(reqwest::header::LOCATION).cloned();
    let body = match location.filter(|_| response.status().is_redirection()) {
        Some(location) => Bytes::from(format!(
            "redirected to {}; not followed (only 307 and 308 to the same origin are)",
            String::from_utf8_lossy(location.as_bytes())
        )),
        None => read_capped(response, shared.max_frame)
            .await
            .unwrap_or_default(),
    };
    match request {
        Some(request) => {
            shared.events.send(TransportEvent::Refused {
                request,
                status,
                body,
                retry_after,
            });
        }
        None => tracing::warn!(status, "MCP HTTP message refused"),
    }
}

pub(super) async fn read_capped(mut response: Response, limit: usize) -> Result<Bytes, Error> {
    // Sized once when the server says the length (within the cap): no doubling past the body.
    let declared = response
        .content_length()
        .and_then(|n| usize::try_from(n).ok());
    let mut body = Vec::with_capacity(declared.filter(|n| *n <= limit).unwrap_or(0));
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(Error::Closed {
                        reason: CloseReason::FrameTooLarge { limit },
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.into()),
            Err(e) => {
                return Err(Error::transport(
                    "reading an MCP HTTP response",
                    io::Error::other(e),
                ))
            }
        }
    }
}

/// Waits between reconnects: from [`DEFAULT_RETRY`] doubling to 30 s, `times` at most.
fn backoff(times: Option<usize>) -> backon::ExponentialBackoff {
    let builder = backon::ExponentialBuilder::default()
        .with_min_delay(DEFAULT_RETRY)
        .with_max_delay(Duration::from_secs(30));
    match times {
        Some(times) => builder.with_max_times(times),
        None => builder.without_max_times(),
    }
    .build()
}

/// Resumes a request's event stream that ended before its answer (2025-11-25): after the
/// server's `retry` or a growing back-off, GET with `Last-Event-ID`, deliver what comes, and
/// report the end again. At most [`MAX_RESUMES`] times.
pub(super) async fn resume(shared: &Shared, id: RequestId, at: ResumePoint) {
    let attempts = at.attempts + 1;
    let delay = usize::try_from(at.attempts)
        .ok()
        .and_then(|n| backoff(Some(MAX_RESUMES)).nth(n));
    let Some(delay) = delay else {
        return shared.fail(
            Some(id),
            Error::Protocol(format!(
                "the server's event stream broke {MAX_RESUMES} times before the answer"
            )),
        );
    };
    tokio::time::sleep(at.retry.unwrap_or(delay)).await;
    let response = shared
        .request_in_session(Method::GET)
        .header(ACCEPT, "text/event-stream")
        .header("last-event-id", at.last_event_id.clone())
        .send()
        .await;
    let response = match response {
        Ok(r) if r.status().is_success() && content_type(&r) == "text/event-stream" => r,
        Ok(r) => {
            return shared.fail(
                Some(id),
                Error::Http {
                    status: r.status().as_u16(),
                    body: "resuming the event stream failed".into(),
                    retry_after: retry_after_seconds(r.headers()),
                },
            )
        }
        Err(e) => return shared.fail(Some(id), shared.transport_error("GET", e)),
    };
    let next = read_events(response, shared.max_frame, |frame| shared.deliver(frame)).await;
    let end = StreamEnd {
        last_event_id: next.last_event_id.or(Some(at.last_event_id)),
        retry: next.retry.or(at.retry),
        error: next.error,
    };
    shared.stream_ended(id, end, attempts);
}

/// The GET stream for messages the server sends outside any request (2025-11-25), opened once the
/// handshake is done. A server without one answers 405 and is left alone (as after any other
/// 4xx but 429); a broken stream is resumed after the server's `retry` or a growing back-off, a
/// refused one (429, 5xx) after its `Retry-After` if it has one.
pub(super) async fn event_stream(shared: &Shared, answered: impl Fn()) {
    let mut last_event_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut backoff = backoff(None);
    loop {
        let mut request = shared
            .request_in_session(Method::GET)
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = &last_event_id {
            request = request.header("last-event-id", id.clone());
        }
        let response = request.send().await;
        answered();
        // A refusal's `Retry-After` says when to come back, before the stream's `retry`.
        let mut retry_after = None;
        match response {
            Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
            Ok(r) if r.status().is_success() && content_type(&r) == "text/event-stream" => {
                let end = read_events(r, shared.max_frame, |frame| shared.deliver(frame)).await;
                last_event_id = end.last_event_id.or(last_event_id);
                retry = end.retry.or(retry);
                backoff = self::backoff(None); // it worked: start over
            }
            Ok(r) => {
                tracing::debug!(status = %r.status(), "MCP HTTP event stream refused");
                // 429 means "later", not "never".
                if r.status().is_client_error() && r.status() != StatusCode::TOO_MANY_REQUESTS {
                    return;
                }
                retry_after = retry_after_seconds(r.headers());
            }
            Err(e) => tracing::debug!(error = %e, "MCP HTTP event stream failed"),
        }
        let delay = retry_after
            .or(retry)
            .or_else(|| backoff.next())
            .unwrap_or(DEFAULT_RETRY);
        tokio::time::sleep(delay).await;
    }
}

/// `Retry-After` in seconds (at most 10 minutes); the HTTP-date form is not read.
fn retry_after_seconds(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(seconds.min(600)))
}
