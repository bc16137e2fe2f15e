//! One POST per message, and the optional GET stream for what the server sends on its own.
//!
//! A POST reports its request's write-complete event (`Written`) once the request body was handed
//! to the HTTP connection: the body is a one-chunk stream that notices when it is asked for more
//! after its only chunk. (A response that comes first counts too.) Only then may the actor queue
//! a cancel for that request, so a `notifications/cancelled` can never be sent for a request whose
//! POST has not gone out.

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    future::Future,
    io,
    pin::pin,
    rc::Rc,
    task::Poll,
    time::Duration,
};

use backon::BackoffBuilder;
use bytes::Bytes;
use futures::channel::oneshot;
use reqwest::{
    header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE},
    Method, Response, StatusCode,
};
use tokio_util::sync::CancellationToken;

use super::{
    session::{answers, negotiated_version, Session},
    sse::{read_events, StreamEnd},
};
use crate::{
    error::Error,
    transport::{EventSender, Outbound, TransportEvent},
    CloseReason, RequestId,
};

/// How much of an error response's body is kept for [`Error::Http`].
const ERROR_BODY_LIMIT: usize = 1024;
/// How many times a request's event stream is resumed (GET + `Last-Event-ID`) before giving up.
const MAX_RESUMES: usize = 5;
/// The wait before resuming when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// What every POST task of one connection shares (all on the actor's thread).
pub(super) struct Shared {
    pub client: reqwest::Client,
    pub url: reqwest::Url,
    /// The user's own headers (e.g. `Authorization`).
    pub headers: HeaderMap,
    pub events: EventSender,
    pub session: RefCell<Session>,
    /// Cancelled when the transport closes: every task ends.
    pub shutdown: CancellationToken,
    /// The largest frame (JSON body or event) accepted.
    pub max_frame: usize,
    /// The POST of each request still running, to abort it.
    pub posts: RefCell<HashMap<RequestId, tokio::task::JoinHandle<()>>>,
    /// While the GET stream opens: the messages waiting to be POSTed, in order.
    pub gate: RefCell<Option<Vec<super::Outgoing>>>,
    /// What the `tools/list` answers said about `x-mcp-header` arguments (2026-07-28).
    pub tool_headers: RefCell<super::params::ToolHeaders>,
}

impl Shared {
    fn request(&self, method: Method) -> reqwest::RequestBuilder {
        let mut builder = self
            .client
            .request(method, self.url.clone())
            .headers(self.headers.clone());
        let session = self.session.borrow();
        if let Some(id) = session.id.as_ref().filter(|_| !session.modern) {
            builder = builder.header("mcp-session-id", id.clone());
        }
        if let Some(version) = &session.protocol_version {
            builder = builder.header("mcp-protocol-version", version.clone());
        }
        builder
    }

    fn written(&self, request: RequestId) {
        let mut marker = Outbound::default();
        let _ = marker.push_with(Some(request), |_| Ok::<(), ()>(()));
        self.events.send(TransportEvent::Written(marker));
    }

    fn fail(&self, request: Option<RequestId>, error: Error) {
        match request {
            Some(id) => {
                self.events.send(TransportEvent::RequestFailed(id, error));
            }
            None => tracing::warn!(%error, "MCP HTTP message not delivered"),
        }
    }

    /// Hands an incoming frame to the actor. A `tools/list` answer of the 2026-07-28 era is
    /// screened for `x-mcp-header` annotations first.
    fn deliver_answer(&self, frame: Bytes, lists_tools: bool) {
        if lists_tools && self.session.borrow().modern {
            let screened =
                super::params::screen_tools_list(&frame, &mut self.tool_headers.borrow_mut());
            if let Some(screened) = screened {
                return self.deliver(Bytes::from(screened));
            }
        }
        self.deliver(frame);
    }

    /// Hands an incoming frame to the actor, learning the protocol version from the answer to
    /// `initialize` on the way.
    fn deliver(&self, frame: Bytes) {
        let initialize = self.session.borrow().initialize;
        if let Some(id) = initialize {
            if answers(&frame, id) {
                let mut session = self.session.borrow_mut();
                session.protocol_version = negotiated_version(&frame);
                session.initialize = None;
            }
        }
        self.events.send(TransportEvent::Received(vec![frame]));
    }

    fn transport_error(&self, what: &str, error: reqwest::Error) -> Error {
        Error::transport(format!("{what} {}", self.url), io::Error::other(error))
    }
}

/// POSTs one message (with the era's routing headers) and delivers whatever comes back.
pub(super) async fn post(
    shared: Rc<Shared>,
    frame: Bytes,
    request: Option<RequestId>,
    routing: Vec<(HeaderName, HeaderValue)>,
    lists_tools: bool,
) {
    let had_session = {
        let session = shared.session.borrow();
        session.id.is_some() && !session.modern
    };
    let (sent_tx, sent_rx) = oneshot::channel::<()>();
    let length = frame.len();
    let mut builder = shared
        .request(Method::POST)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_LENGTH, length);
    for (name, value) in routing {
        builder = builder.header(name, value);
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
    let response = match response {
        Ok(response) => {
            report_written();
            response
        }
        Err(e) => return shared.fail(request, shared.transport_error("POST", e)),
    };

    let status = response.status();
    if status == StatusCode::NOT_FOUND && had_session {
        // The session is gone: every request of this connection is.
        shared.fail(
            request,
            Error::Closed {
                reason: CloseReason::SessionExpired,
            },
        );
        shared
            .events
            .send(TransportEvent::Closed(CloseReason::SessionExpired));
        return;
    }
    if status.is_success() && shared.session.borrow().id.is_none() {
        if let Some(id) = response.headers().get("mcp-session-id") {
            shared.session.borrow_mut().id = Some(id.clone());
        }
    }
    if !status.is_success() {
        return answer_error_status(&shared, response, request).await;
    }
    let answered = Cell::new(false);
    match content_type(&response).as_str() {
        "text/event-stream" => {
            let end = read_events(response, shared.max_frame, |frame| {
                if request.is_some_and(|id| answers(&frame, id)) {
                    answered.set(true);
                    return shared.deliver_answer(frame, lists_tools);
                }
                shared.deliver(frame);
            })
            .await;
            if let Some(id) = request.filter(|_| !answered.get()) {
                resume(&shared, id, end, &answered).await;
            }
        }
        "application/json" => match read_capped(response, shared.max_frame).await {
            Ok(body) => deliver_json(&shared, body, request, lists_tools),
            Err(e) => shared.fail(request, e),
        },
        // 202 Accepted (a notification or a response of ours), or an empty answer.
        _ if status == StatusCode::ACCEPTED || response.content_length() == Some(0) => {}
        other => shared.fail(
            request,
            Error::Protocol(format!("unexpected HTTP content type {other:?}")),
        ),
    }
}

/// A request body of one chunk that tells `sent` when it is asked for more: the chunk has been
/// handed to the connection.
fn one_chunk(
    frame: Bytes,
    sent: oneshot::Sender<()>,
) -> impl futures::Stream<Item = Result<Bytes, io::Error>> + Send + 'static {
    let mut frame = Some(frame);
    let mut sent = Some(sent);
    futures::stream::poll_fn(move |_| {
        if let Some(chunk) = frame.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        if let Some(sent) = sent.take() {
            let _ = sent.send(());
        }
        Poll::Ready(None)
    })
}

fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// An error status: a JSON-RPC error in the body goes to the caller as the server's answer;
/// anything else becomes [`Error::Http`].
async fn answer_error_status(shared: &Shared, response: Response, request: Option<RequestId>) {
    let status = response.status().as_u16();
    let body = read_capped(response, shared.max_frame)
        .await
        .unwrap_or_default();
    if let Some(id) = request {
        if answers(&body, id) {
            return shared.deliver(body);
        }
    }
    let end = body.len().min(ERROR_BODY_LIMIT);
    let text = String::from_utf8_lossy(&body[..end]).into_owned();
    shared.fail(request, Error::Http { status, body: text });
}

/// A JSON body: one message, or (2025-03-26 servers) an array of them. A body that is not JSON
/// fails the request it answers.
fn deliver_json(shared: &Shared, body: Bytes, request: Option<RequestId>, lists_tools: bool) {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_none() {
        return;
    }
    let items = if first == Some(&b'[') {
        serde_json::from_slice::<Vec<Box<serde_json::value::RawValue>>>(&body).map(|items| {
            items
                .into_iter()
                .map(|i| Bytes::copy_from_slice(i.get().as_bytes()))
                .collect()
        })
    } else {
        serde_json::from_slice::<&serde_json::value::RawValue>(&body).map(|_| vec![body.clone()])
    };
    match items {
        Ok(items) => items
            .into_iter()
            .for_each(|item| shared.deliver_answer(item, lists_tools)),
        Err(e) => shared.fail(
            request,
            Error::Protocol(format!("the server's JSON answer does not parse: {e}")),
        ),
    }
}

async fn read_capped(mut response: Response, limit: usize) -> Result<Bytes, Error> {
    let mut body = Vec::new();
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

/// The request's event stream ended before its answer. If the server numbered its events, wait
/// as it advised and resume with GET + `Last-Event-ID` (2025-11-25). Otherwise the answer may
/// still come on the GET stream; the request's timeout bounds the wait.
async fn resume(shared: &Shared, id: RequestId, mut end: StreamEnd, answered: &Cell<bool>) {
    let mut backoff = backoff(Some(MAX_RESUMES));
    while !answered.get() {
        let Some(last_event_id) = end.last_event_id.clone() else {
            // Not resumable. A stream that broke fails the request now; one that ended cleanly
            // may still see its answer on the GET stream, within the request's timeout.
            if let Some(error) = end.error {
                shared.fail(
                    Some(id),
                    Error::transport("the request's event stream broke", io::Error::other(error)),
                );
            }
            return;
        };
        let Some(backoff_delay) = backoff.next() else {
            return shared.fail(
                Some(id),
                Error::Protocol(format!(
                    "the server's event stream broke {MAX_RESUMES} times before the answer"
                )),
            );
        };
        tokio::time::sleep(end.retry.unwrap_or(backoff_delay)).await;
        let response = shared
            .request(Method::GET)
            .header(ACCEPT, "text/event-stream")
            .header("last-event-id", last_event_id)
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
                    },
                )
            }
            Err(e) => return shared.fail(Some(id), shared.transport_error("GET", e)),
        };
        let next = read_events(response, shared.max_frame, |frame| {
            if answers(&frame, id) {
                answered.set(true);
            }
            shared.deliver(frame);
        })
        .await;
        end = StreamEnd {
            last_event_id: next.last_event_id.or(end.last_event_id),
            retry: next.retry.or(end.retry),
            error: next.error,
        };
    }
}

/// The GET stream for messages the server sends outside any request (2025-11-25), opened once the
/// handshake is done. A server without one answers 405 and is left alone; a broken stream is
/// resumed after the server's `retry` or a growing back-off.
pub(super) async fn event_stream(shared: Rc<Shared>, answered: impl Fn()) {
    let mut last_event_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut backoff = backoff(None);
    loop {
        let mut request = shared
            .request(Method::GET)
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = &last_event_id {
            request = request.header("last-event-id", id.clone());
        }
        let response = request.send().await;
        answered();
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
                if r.status().is_client_error() {
                    return;
                }
            }
            Err(e) => tracing::debug!(error = %e, "MCP HTTP event stream failed"),
        }
        let delay = retry.or_else(|| backoff.next()).unwrap_or(DEFAULT_RETRY);
        tokio::time::sleep(delay).await;
    }
}
