//! Streamable HTTP, the 2025-03-26 … 2025-11-25 shape: every message is its own POST.
//!
//! - A request's POST is answered with JSON or with an event stream carrying the request's
//!   progress, the server's own requests and finally the response; everything is handed to the
//!   actor as `Received`, and routed by id there (a response may come on any stream).
//! - A message transport: each request reports its own write-complete event (`RequestWritten`)
//!   when its body went out (`post.rs`); batches are taken apart at once ([`Sent::Taken`]).
//! - Cancelling is a separate POST of `notifications/cancelled` (this era's rule: closing a stream
//!   is not a cancel), queued by the actor only after the request's `Written`.
//! - The session id from the `initialize` answer and the protocol version the connection settled
//!   on ([`TransportIo::use_protocol_version`]) go on every later request; a 404 to a request
//!   carrying the session id ends the connection ([`CloseReason::SessionExpired`]), unless the
//!   transport renews expired sessions (below).
//! - **Renewing an expired session** (opt-in, [`HttpTransport::renew_expired_sessions`];
//!   2025-11-25 only, `renew.rs`): the frames of `initialize` and `notifications/initialized` are
//!   kept, byte for byte, as they pass through `send` (recognized by the method each frame
//!   carries, never by reading the JSON). At the first 404 of a session, every request still at
//!   that session (its POST or its resumption running) fails with [`Error::SessionLost`] and is
//!   **never** sent again; every later message waits at the gate, and each request waiting there
//!   is reported [`TransportEvent::RequestHeld`] (nothing of it is at the server: a cancel
//!   drops it where it waits and writes nothing). The transport then POSTs the kept
//!   `initialize` without `Mcp-Session-Id`, takes the new session id from the answer and
//!   swallows the answer itself (the connection had its `initialize` result long ago; the id is
//!   old), POSTs the kept `notifications/initialized` with the new id, re-opens the GET stream if
//!   one was open, and lets the waiting messages go, in order, on the new session. Other 404s of
//!   the old session meanwhile are part of the same expiry: their requests are lost, no second
//!   renewal starts. If the renewal fails (an error status, a 404, no session id, a network
//!   error, or no end within 30 s), or a renewed session expires before any of its POSTs was
//!   answered, the connection ends with [`CloseReason::SessionExpired`] as without the opt-in,
//!   and every waiting request fails with it. At most one renewal runs per expiry; a 404 on the
//!   renewal is final.
//! - 2026-07-28: no session; `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers from what each
//!   frame carries ([`Frame`](crate::transport::Frame)); a cancel aborts the request's POST.
//! - After the handshake a GET stream takes what the server sends on its own (405: none).
//! - Closing aborts every POST and sends `DELETE` with the session id.
//!
//! Failures of one POST fail that request only ([`TransportEvent::RequestFailed`]): an HTTP error
//! status without a JSON-RPC error becomes [`Error::Http`], a network error
//! [`Error::Transport`].

pub(crate) mod post;
mod renew;
mod session;
pub(crate) mod sse;

use std::{
    cell::RefCell,
    collections::{HashMap, VecDeque},
    future::Future,
    pin::Pin,
    rc::Rc,
    time::Duration,
};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use self::{
    post::Shared,
    renew::{Renewal, State},
    session::Session,
};
use super::{
    CancelStyle, EventSender, Outbound, ResumePoint, Sent, Transport, TransportEvent, TransportIo,
    DEFAULT_MAX_FRAME_BYTES,
};
use crate::{
    error::{CloseReason, Error},
    protocol::{discover::MODERN_PROTOCOL_VERSIONS, jsonrpc::RequestId},
};

/// The longest later requests wait for the GET stream to open after the handshake.
const GATE_LIMIT: Duration = Duration::from_secs(5);

/// How long closing waits for the server to acknowledge `DELETE`.
const DELETE_LIMIT: Duration = Duration::from_secs(2);

/// A Streamable HTTP MCP endpoint, such as `http://127.0.0.1:3001/mcp`.
///
/// ```no_run
/// # async fn run() -> Result<(), actix_mcp::Error> {
/// use actix_mcp::{Client, HttpTransport};
///
/// let transport = HttpTransport::new("http://127.0.0.1:3001/mcp")
///     .header("authorization", "Bearer my-token");
/// let client = Client::connect(transport).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HttpTransport {
    url: String,
    headers: Vec<(String, String)>,
    client: Option<reqwest::Client>,
    event_stream: bool,
    max_frame: usize,
    http2_prior_knowledge: bool,
    renew_sessions: bool,
    #[cfg(feature = "auth")]
    auth: Option<crate::auth::OAuth>,
}

impl HttpTransport {
    /// The endpoint at `url`; an unparsable or non-`http(s)` URL makes `connect` fail.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            client: None,
            event_stream: true,
            max_frame: DEFAULT_MAX_FRAME_BYTES,
            http2_prior_knowledge: false,
            renew_sessions: false,
            #[cfg(feature = "auth")]
            auth: None,
        }
    }

    /// Renew an expired session in place instead of ending the connection (2025-11-25 era only;
    /// the 2026-07-28 era has no sessions).
    ///
    /// Without it, a `404` to a request carrying `Mcp-Session-Id` ends the connection with
    /// [`CloseReason::SessionExpired`]. With it:
    ///
    /// - the requests that were at the expired session (their answer not yet read) fail with
    ///   [`Error::SessionLost`]: they are **never** sent again, since the server may have acted
    ///   on them. Sending one again is the caller's decision;
    /// - the transport runs the handshake again by itself on a new session: the very
    ///   `initialize` frame the connection sent first (its answer is not delivered), then
    ///   `notifications/initialized` with the new session id, then the GET stream if one was
    ///   open;
    /// - requests made meanwhile wait and go out on the new session (a cancel meanwhile drops
    ///   them, nothing is written); later requests simply use it;
    /// - if the renewal fails (error status, `404`, no session id, or no end within 30 s), or the
    ///   new session expires before any of its requests was answered, the connection ends with
    ///   [`CloseReason::SessionExpired`] as without this option, and every waiting request fails
    ///   with [`Error::Closed`]. There is at most one renewal per expiry.
    ///
    /// The server sees a new session: state it kept for the old one (subscriptions, log level,
    /// anything the tools remember) is gone.
    pub fn renew_expired_sessions(mut self) -> Self {
        self.renew_sessions = true;
        self
    }

    /// Authorize with OAuth when the server answers `401` (feature `auth`): every request,
    /// the GET stream and `DELETE` carry the token; see [`crate::auth`].
    #[cfg(feature = "auth")]
    pub fn auth(mut self, auth: crate::auth::OAuth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// A header sent with every request (e.g. `authorization`). Invalid names or values make
    /// `connect` fail.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Use this HTTP client (proxies, TLS roots, timeouts of your own).
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Speak HTTP/2 over plain `http://` without negotiating (h2c, "prior knowledge"): every
    /// request of the connection is a stream of one TCP connection, and a cancel that aborts a
    /// POST resets just its stream. Over `https://`, HTTP/2 is negotiated by itself when the
    /// server offers it.
    pub fn http2_prior_knowledge(mut self) -> Self {
        self.http2_prior_knowledge = true;
        self
    }

    /// Do not open the GET stream for messages the server sends outside any request.
    pub fn without_event_stream(mut self) -> Self {
        self.event_stream = false;
        self
    }

    /// The largest JSON body or event accepted from the server (default 4 MiB,
    /// [`DEFAULT_MAX_FRAME_BYTES`]). A larger JSON body fails its request with
    /// [`CloseReason::FrameTooLarge`] (the connection stays); an event growing past it ends its
    /// stream with an error (resumed if the server numbered its events, else the request fails).
    /// It also bounds each entry of every other buffer a server can fill (see ARCHITECTURE.md,
    /// "Caps on what a server can make us hold").
    pub fn max_frame_bytes(mut self, limit: usize) -> Self {
        self.max_frame = limit;
        self
    }

    pub(crate) fn header_map(&self) -> Result<HeaderMap, Error> {
        let mut map = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| invalid_input(format!("header name {name:?}: {e}")))?;
            // CR, LF and other bytes a header cannot hold are refused here, before anything
            // is sent (and the value is not echoed: it may be a secret).
            let mut value = HeaderValue::from_str(value)
                .map_err(|e| invalid_input(format!("header {name} value: {e}")))?;
            // Secrets are kept out of the HTTP stack's logs and `Debug` output.
            if is_secret_header(name.as_str()) {
                value.set_sensitive(true);
            }
            map.append(name, value);
        }
        Ok(map)
    }
}

/// Whether a header (its lowercase name) usually carries a secret: credentials, cookies, keys,
/// tokens.
fn is_secret_header(name: &str) -> bool {
    matches!(
        name,
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) || ["key", "token", "secret", "password", "auth"]
        .iter()
        .any(|word| name.contains(word))
}

fn invalid_input(message: String) -> Error {
    Error::transport(
        "MCP HTTP transport",
        std::io::Error::new(std::io::ErrorKind::InvalidInput, message),
    )
}

impl Transport for HttpTransport {
    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error> {
        let url = reqwest::Url::parse(&self.url)
            .map_err(|e| invalid_input(format!("URL {:?}: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid_input(format!("URL {url}: not http or https")));
        }
        let headers = self.header_map()?;
        let client = match self.client {
            Some(client) => client,
            None => {
                let builder = reqwest::Client::builder();
                let builder = if self.http2_prior_knowledge {
                    builder.http2_prior_knowledge()
                } else {
                    builder
                };
                builder
                    .build()
                    .map_err(|e| invalid_input(format!("HTTP client: {e}")))?
            }
        };
        let shared = Rc::new(Shared {
            client,
            url,
            headers,
            events,
            session: RefCell::new(Session::default()),
            shutdown: CancellationToken::new(),
            max_frame: self.max_frame,
            posts: RefCell::new(HashMap::new()),
            cancel_lane: RefCell::new(CancelLane::default()),
            heard: RefCell::new(std::collections::HashSet::new()),
            refused: RefCell::new(std::collections::HashSet::new()),
            headers_arrived: tokio::sync::Notify::new(),
            gate: RefCell::new(None),
            event_task: RefCell::new(None),
            renewal: RefCell::new(Renewal::new(self.renew_sessions)),
            #[cfg(feature = "auth")]
            auth: self.auth,
        });
        Ok(Box::new(HttpIo {
            shared,
            event_stream: self.event_stream,
        }))
    }
}

/// The open transport, owned by the connection actor.
struct HttpIo {
    shared: Rc<Shared>,
    event_stream: bool,
}

/// One message waiting to be POSTed.
pub(super) struct Outgoing {
    frame: Bytes,
    request: Option<RequestId>,
    routing: Vec<(HeaderName, HeaderValue)>,
    /// `notifications/initialized`: once it is accepted, the GET stream opens.
    opens_event_stream: bool,
    /// A `notifications/cancelled` (2025-11-25): the cancelled request's own POST is closed as
    /// the cancel goes out. The spec allows it, and a server that never ends that stream would
    /// otherwise keep it, and its task, for ever.
    cancels: Option<RequestId>,
    /// A cancel that already waited for the server to have its request (see [`spawn_post`]).
    cancel_ready: bool,
}

/// Starts the POST of one message, unless the gate is closed (the GET stream is opening, or an
/// expired session is being renewed): then it waits there, in order.
fn post_or_hold(shared: &Rc<Shared>, outgoing: Outgoing) {
    let state = shared.renewal.borrow().state;
    match state {
        // The connection is ending with the expired session: the request fails with it.
        State::Failed => return,
        State::Running => {
            if let Some(id) = outgoing.request {
                // Nothing of it is at the server until the new session exists.
                shared.events.send(TransportEvent::RequestHeld(id));
            }
        }
        State::Idle => {}
    }
    if let Some(held) = shared.gate.borrow_mut().as_mut() {
        held.push(outgoing);
        return;
    }
    if outgoing.request.is_some() && outgoing.cancels.is_none() {
        let mut lane = shared.cancel_lane.borrow_mut();
        if lane.backlog() >= CANCEL_BACKLOG || !lane.behind_cancels.is_empty() {
            // Not reported held: the lane may let it go before the connection could take it
            // back, and a cancel must then follow it. Cancelled while it waits here, it is
            // cancelled once it is written, as any request being written.
            lane.behind_cancels.push_back(outgoing);
            return;
        }
    }
    spawn_post(shared, outgoing);
}

fn spawn_post(shared: &Rc<Shared>, mut outgoing: Outgoing) {
    if let Some(id) = outgoing.cancels {
        if shared.renewal.borrow().lost.contains(&id) {
            return; // its request was lost with an expired session: the new one never saw it
        }
        if !outgoing.cancel_ready && !server_has(shared, id) {
            // The request's body went out, but on its own connection (or stream): the cancel,
            // on another, could reach the server first and be ignored, leaving the request to
            // run. It waits until the answer's headers show the server read the request (or its
            // POST ended), at most CANCEL_WAIT: a response the network holds back must not
            // keep the cancel from a request the server does run.
            outgoing.cancel_ready = true;
            shared.cancel_lane.borrow_mut().until_heard += 1;
            let shared = shared.clone();
            actix_rt::spawn(async move {
                let shutdown = shared.shutdown.clone();
                let heard = async {
                    while !server_has(&shared, id) {
                        shared.headers_arrived.notified().await;
                    }
                };
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::timeout(CANCEL_WAIT, heard) => {
                        shared.cancel_lane.borrow_mut().until_heard -= 1;
                        spawn_post(&shared, outgoing);
                    }
                }
            });
            return;
        }
        // The request's own POST goes first: its connection (HTTP/1.1) is freed before the
        // cancel needs one, so a storm of cancels does not hold two connections per request.
        if let Some(post) = shared.posts.borrow_mut().remove(&id) {
            post.abort();
        }
        let mut lane = shared.cancel_lane.borrow_mut();
        if lane.running >= CANCEL_LANE_WIDTH {
            lane.waiting.push_back(outgoing);
            return;
        }
        lane.running += 1;
    }
    let Outgoing {
        frame,
        request,
        routing,
        opens_event_stream,
        cancels,
        cancel_ready: _,
    } = outgoing;
    let generation = shared.session.borrow().generation;
    let task_shared = shared.clone();
    let handle = actix_rt::spawn(async move {
        let shared = task_shared;
        // However the task ends (aborted too), the request is no longer "heard".
        let _heard = request.map(|id| ForgetHeard {
            shared: shared.clone(),
            id,
        });
        let shutdown = shared.shutdown.clone();
        // A cancel gives up its place in the lane after CANCEL_LIMIT: a server that never
        // answers one must not hold back every later cancel.
        // Likewise our answers and notifications: a server that never answers their POSTs
        // must not hold a task (and an HTTP/1.1 connection) for each for ever.
        // A request's own POST has no limit (the caller's timeout cancels it), and so no timer.
        let limit = match (cancels, request) {
            (Some(_), _) => Some(CANCEL_LIMIT),
            (None, None) => Some(MESSAGE_LIMIT),
            (None, Some(_)) => None,
        };
        let post = post::post(shared.clone(), frame, request, routing);
        let posted = async {
            match limit {
                Some(limit) => {
                    let _ = tokio::time::timeout(limit, post).await;
                }
                None => post.await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = posted => {
                // Not if the session expired meanwhile: the renewal opens the GET stream then.
                if opens_event_stream && renew::is_current(&shared, generation) {
                    spawn_event_stream(shared.clone());
                }
                if cancels.is_some() {
                    cancel_lane_done(&shared);
                }
            }
        }
        if let Some(id) = request {
            shared.posts.borrow_mut().remove(&id);
        }
    });
    if let Some(id) = request {
        shared.posts.borrow_mut().insert(id, handle);
    }
}

/// At most this many `notifications/cancelled` POSTs at once; the rest wait in order. Each is a
/// small POST answered at once, and over HTTP/1.1 each needs a connection of its own: ten
/// thousand cancels at once would otherwise open ten thousand connections together.
const CANCEL_LANE_WIDTH: usize = 16;

/// The longest a `notifications/cancelled` POST may take before it is abandoned.
const CANCEL_LIMIT: Duration = Duration::from_secs(3);

/// The longest the POST of one of our answers or notifications may take before it is
/// abandoned (the server answers them `202 Accepted` at once).
const MESSAGE_LIMIT: Duration = Duration::from_secs(30);

/// The longest a cancel waits for the server to show it read the request (its answer's
/// headers) before it is sent anyway.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// Drops a request from [`Shared::heard`] when its POST task ends, however it ends, and wakes
/// the cancels waiting for it.
struct ForgetHeard {
    shared: Rc<Shared>,
    id: RequestId,
}

impl Drop for ForgetHeard {
    fn drop(&mut self) {
        self.shared.heard.borrow_mut().remove(&self.id);
        // Empty unless authorization is recovering: skip hashing then (every POST ends here).
        let mut refused = self.shared.refused.borrow_mut();
        if !refused.is_empty() {
            refused.remove(&self.id);
        }
        drop(refused);
        self.shared.headers_arrived.notify_waiters();
    }
}

/// Whether the server has read `id` (its answer's headers came) or its POST is over.
fn server_has(shared: &Shared, id: RequestId) -> bool {
    shared.heard.borrow().contains(&id) || !shared.posts.borrow().contains_key(&id)
}

/// The cancels being POSTed, and those waiting for a place (2025-11-25).
#[derive(Default)]
pub(super) struct CancelLane {
    running: usize,
    waiting: VecDeque<Outgoing>,
    /// Cancels waiting for the server to show it read their request, before the lane.
    until_heard: usize,
    /// New requests held while [`CANCEL_BACKLOG`] cancels wait (see there).
    behind_cancels: VecDeque<Outgoing>,
}

impl CancelLane {
    /// Cancels not yet on their way.
    fn backlog(&self) -> usize {
        self.waiting.len() + self.until_heard
    }
}

/// Cancels waiting for a place in the lane beyond which new requests wait too, until half of
/// them went out. A cancelled caller is free at once and sends its next request; each request
/// gets its share of a busy server, and the lane's sixteen only theirs: the soak over HTTP/1.1
/// (256 in flight, 30 % cancelled) had queued cancels by the ten thousand (12 MB, and seconds
/// of delay for each cancel). Cancels first keeps the queue, and the delay, bounded.
const CANCEL_BACKLOG: usize = 256;

/// A cancel's POST ended: the next waiting one goes, and the requests held behind the cancels
/// once few enough wait.
fn cancel_lane_done(shared: &Rc<Shared>) {
    let (next, released) = {
        let mut lane = shared.cancel_lane.borrow_mut();
        lane.running = lane.running.saturating_sub(1);
        let next = lane.waiting.pop_front();
        let released = if lane.backlog() <= CANCEL_BACKLOG / 2 {
            std::mem::take(&mut lane.behind_cancels)
        } else {
            VecDeque::new()
        };
        (next, released)
    };
    if let Some(next) = next {
        spawn_post(shared, next);
    }
    for request in released {
        post_or_hold(shared, request);
    }
}

/// The GET stream for what the server sends on its own. Until the server has answered the GET
/// (or [`GATE_LIMIT`] passed), later POSTs wait at the gate: a server that sends a request on
/// that stream while handling one of ours (e.g. an elicitation) would otherwise send it before
/// the stream exists, and it would be lost.
fn spawn_event_stream(shared: Rc<Shared>) {
    let generation = shared.session.borrow().generation;
    // Weak: the timer must not keep the transport (and its pooled connections) alive for
    // GATE_LIMIT after the client closed.
    let gate_shared = Rc::downgrade(&shared);
    actix_rt::spawn(async move {
        tokio::time::sleep(GATE_LIMIT).await;
        if let Some(shared) = gate_shared.upgrade() {
            open_gate(&shared, generation);
        }
    });
    let task_shared = shared.clone();
    let task = actix_rt::spawn(async move {
        let shared = task_shared;
        let shutdown = shared.shutdown.clone();
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = post::event_stream(shared.clone(), || open_gate(&shared, generation)) => {}
        }
    });
    if let Some(previous) = shared.event_task.borrow_mut().replace(task) {
        previous.abort();
    }
}

/// Lets what waits at the gate go, unless the gate was closed for another session than
/// `generation` (a renewal holds it now).
fn open_gate(shared: &Rc<Shared>, generation: u64) {
    if !renew::is_current(shared, generation) {
        return;
    }
    let held = shared.gate.borrow_mut().take();
    for outgoing in held.into_iter().flatten() {
        spawn_post(shared, outgoing);
    }
}

impl TransportIo for HttpIo {
    fn send(&mut self, batch: Outbound) -> Sent {
        for frame in batch.frames() {
            let bytes = frame.bytes.strip_suffix(b"\n").unwrap_or(frame.bytes);
            let bytes = Bytes::copy_from_slice(bytes);
            let (routing, opens_event_stream) = {
                let mut session = self.shared.session.borrow_mut();
                if session.modern {
                    (session::routing_headers(frame.method, frame.routing), false)
                } else {
                    // Kept for a renewal (opt-in): the handshake's frames, as they were sent.
                    self.shared.renewal.borrow_mut().remember(&frame, &bytes);
                    // The handshake is done once `notifications/initialized` goes out.
                    let opens = self.event_stream
                        && !session.event_stream_opened
                        && frame.method == Some("notifications/initialized");
                    session.event_stream_opened |= opens;
                    (Vec::new(), opens)
                }
            };
            post_or_hold(
                &self.shared,
                Outgoing {
                    frame: bytes,
                    request: frame.request(),
                    routing,
                    opens_event_stream,
                    cancels: frame.cancels(),
                    cancel_ready: false,
                },
            );
            if opens_event_stream {
                // What follows the handshake waits until the GET stream is open.
                self.shared.gate.borrow_mut().get_or_insert_with(Vec::new);
            }
        }
        Sent::Taken(batch)
    }

    fn close(&mut self) -> Pin<Box<dyn Future<Output = ()>>> {
        self.shared.shutdown.cancel();
        self.shared.gate.borrow_mut().take();
        {
            let mut lane = self.shared.cancel_lane.borrow_mut();
            lane.waiting.clear();
            lane.behind_cancels.clear();
        }
        for (_, post) in self.shared.posts.borrow_mut().drain() {
            post.abort();
        }
        if let Some(task) = self.shared.event_task.borrow_mut().take() {
            task.abort();
        }
        let shared = self.shared.clone();
        Box::pin(async move {
            let session = shared.session.borrow().id.clone();
            if let Some(id) = session {
                let delete = shared
                    .client
                    .delete(shared.url.clone())
                    .headers(shared.headers.clone())
                    .header("mcp-session-id", id)
                    .send();
                // The server may answer 405 (it does not end sessions on request): that is fine.
                let _ = tokio::time::timeout(DELETE_LIMIT, delete).await;
            }
            shared
                .events
                .send(TransportEvent::Closed(CloseReason::ClosedByClient));
        })
    }

    fn cancel_style(&self) -> CancelStyle {
        if self.shared.session.borrow().modern {
            CancelStyle::Abort
        } else {
            CancelStyle::Notification
        }
    }

    /// The version header on every later POST. 2026-07-28: no session, routing headers, and a
    /// cancel is the abort of the request's POST. An older version keeps the 2025-11-25 shape.
    fn use_protocol_version(&mut self, version: Option<&str>) {
        let mut session = self.shared.session.borrow_mut();
        session.modern = version.is_some_and(|v| MODERN_PROTOCOL_VERSIONS.contains(&v));
        session.protocol_version = version.and_then(|v| HeaderValue::from_str(v).ok());
        if session.modern {
            session.id = None;
        }
    }

    fn resume(&mut self, request: RequestId, at: ResumePoint) {
        let shared = self.shared.clone();
        let handle = actix_rt::spawn(async move {
            let shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = post::resume(shared.clone(), request, at) => {}
            }
            shared.posts.borrow_mut().remove(&request);
        });
        // Aborted with the request, like its POST.
        if let Some(previous) = self.shared.posts.borrow_mut().insert(request, handle) {
            previous.abort();
        }
    }

    fn abort(&mut self, request: RequestId) {
        if let Some(post) = self.shared.posts.borrow_mut().remove(&request) {
            post.abort();
        }
    }

    /// At the gate: taken out, never POSTed. Refused and waiting for authorization: its task
    /// ends. Let go since (POSTed again, or the gate opened): left alone; the connection cancels
    /// it after its write (a notification, or in the 2026-07-28 era the abort of its POST), or,
    /// withdrawn without a cancel, lets its answer come.
    fn withdraw(&mut self, request: RequestId) -> bool {
        let at_gate = self.shared.gate.borrow_mut().as_mut().and_then(|held| {
            let at = held.iter().position(|o| o.request == Some(request))?;
            Some(held.remove(at))
        });
        if at_gate.is_some() {
            return true;
        }
        if self.shared.refused.borrow_mut().remove(&request) {
            self.abort(request);
            return true;
        }
        false
    }
}

impl Drop for HttpIo {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_headers_are_sensitive_and_a_header_with_a_line_break_is_refused() {
        let transport = HttpTransport::new("http://127.0.0.1:1/mcp")
            .header("Authorization", "Bearer s3cret")
            .header("X-Api-Key", "k")
            .header("X-Trace", "visible");
        let map = transport.header_map().unwrap();
        assert!(map["authorization"].is_sensitive());
        assert!(map["x-api-key"].is_sensitive());
        assert!(!map["x-trace"].is_sensitive());
        assert!(!format!("{map:?}").contains("s3cret"), "redacted in Debug");

        let injected =
            HttpTransport::new("http://127.0.0.1:1/mcp").header("X-Test", "a\r\nX-Injected: 1");
        let error = injected.header_map().unwrap_err().to_string();
        assert!(error.contains("x-test"), "{error}");
        assert!(
            !error.contains("X-Injected"),
            "the value is not echoed: {error}"
        );
    }
}
