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
//!   carrying the session id starts a new session (below), or ends the connection
//!   ([`CloseReason::SessionExpired`]) with [`HttpTransport::no_session_renewal`].
//! - **Renewing an expired session** (the default; 2025-11-25 only, `renew.rs`): the frames of `initialize` and `notifications/initialized` are
//!   kept, byte for byte, as they pass through `send` (recognized by the method each frame
//!   carries, never by reading the JSON). At the first 404 of a session, the request answered 404
//!   (never processed: the server refused it) waits to go again, once, first on the new session
//!   (reported [`TransportEvent::RequestHeldForSession`]: a cancel takes it back, its timeout
//!   runs on); every other request still at that session (its POST or its resumption running)
//!   fails with [`Error::SessionLost`] and is **never** sent again; every later message waits at the gate, and each request waiting there
//!   is reported [`TransportEvent::RequestHeld`] (nothing of it is at the server: a cancel
//!   drops it where it waits and writes nothing). The transport then POSTs the kept
//!   `initialize` without `Mcp-Session-Id`, takes the new session id from the answer and
//!   swallows the answer itself (the connection had its `initialize` result long ago; the id is
//!   old), POSTs the kept `notifications/initialized` with the new id, re-opens the GET stream if
//!   one was open, and lets the waiting messages go, in order, on the new session. Other 404s of
//!   the old session meanwhile are part of the same expiry: their requests are lost, no second
//!   renewal starts. If the renewal fails (an error status, a 404, no session id, a network
//!   error, or no end within 30 s), or a renewed session expires before any of its POSTs was
//!   answered, the connection ends with [`CloseReason::SessionExpired`] as without renewal,
//!   and every waiting request fails with it. At most one renewal runs per expiry; a 404 on the
//!   renewal is final.
//! - 2026-07-28: no session; `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers from what each
//!   frame carries ([`Frame`](crate::transport::Frame)); a cancel aborts the request's POST.
//! - After the handshake a GET stream takes what the server sends on its own (405: none).
//! - Closing first sends the cancels still owed (within a few seconds), then aborts every POST
//!   and sends `DELETE` with the session id.
//!
//! The request states (each POST's phase, the gate, the cancel lane, the session and its
//! renewal, closing) are one plain state machine, `states.rs`; `driver.rs` owns it, and the
//! tasks only do I/O and report events.
//!
//! Failures of one POST fail that request only ([`TransportEvent::RequestFailed`]): an HTTP error
//! status without a JSON-RPC error becomes [`Error::Http`], a network error
//! [`Error::Transport`], a `202` or an event stream ending without the answer (and without an
//! event id to resume from) [`Error::Protocol`].

mod clients;
mod driver;
pub(crate) mod post;
mod renew;
mod session;
pub(crate) mod sse;
mod states;
#[cfg(test)]
mod states_model;

use std::{future::Future, pin::Pin, rc::Rc, time::Duration};

use bytes::Bytes;
use reqwest::{
    header::{HeaderMap, HeaderName, HeaderValue},
    Method,
};

use self::{
    driver::{now, Shared},
    states::{Caps, HttpRequests, Outgoing, CLOSE_LIMIT},
};
use super::{
    CancelStyle, EventSender, Outbound, ResumePoint, Sent, Transport, TransportEvent, TransportIo,
    DEFAULT_MAX_FRAME_BYTES,
};
use crate::{
    error::{CloseReason, Error},
    protocol::jsonrpc::RequestId,
};

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
    /// Reached over this Unix socket, not TCP.
    #[cfg(unix)]
    unix_socket: Option<std::path::PathBuf>,
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
            #[cfg(unix)]
            unix_socket: None,
            event_stream: true,
            max_frame: DEFAULT_MAX_FRAME_BYTES,
            http2_prior_knowledge: false,
            renew_sessions: true,
            #[cfg(feature = "auth")]
            auth: None,
        }
    }

    /// End the connection when the session expires, instead of starting a new one (the default,
    /// as the 2025-11-25 spec requires: "the client MUST start a new session").
    ///
    /// With this, a `404` to a request carrying `Mcp-Session-Id` ends the connection with
    /// [`CloseReason::SessionExpired`]. Without it (2025-11-25 era only; the 2026-07-28 era has
    /// no sessions):
    ///
    /// - a request answered `404` was never processed: it goes again, once, on the new session
    ///   (its cancellation and timeout unchanged);
    /// - the other requests that were at the expired session (their answer not yet read) fail
    ///   with [`Error::SessionLost`]: they are **never** sent again, since the server may have
    ///   acted on them. Sending one again is the caller's decision;
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
    pub fn no_session_renewal(mut self) -> Self {
        self.renew_sessions = false;
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

    /// Reach the server over the Unix socket at `path` instead of TCP (HTTP over a local socket,
    /// as the transports working group recommends for local servers: no port to find or to
    /// guard). The URL still names the endpoint (`http://localhost/mcp`: its host is sent as
    /// `Host`, its path is the endpoint's). Sessions, both eras and cancellation are as over
    /// TCP. Ignored when a [`client`](Self::client) of your own is given.
    #[cfg(unix)]
    pub fn unix_socket(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.unix_socket = Some(path.into());
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

    /// The largest JSON body or event accepted from the server (default 32 MiB,
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
    fn peer(&self) -> super::Peer {
        match reqwest::Url::parse(&self.url) {
            Ok(url) => super::Peer::http(
                url.host_str().unwrap_or_default(),
                url.port_or_known_default(),
            ),
            Err(_) => super::Peer::default(),
        }
    }

    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error> {
        let url = reqwest::Url::parse(&self.url)
            .map_err(|e| invalid_input(format!("URL {:?}: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid_input(format!("URL {url}: not http or https")));
        }
        let headers = self.header_map()?;
        let client = match self.client {
            Some(client) => client,
            #[cfg(unix)]
            None if self.unix_socket.is_some() => {
                let path = self
                    .unix_socket
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""));
                clients::over_unix_socket(path, self.http2_prior_knowledge)?
            }
            None => clients::shared(self.http2_prior_knowledge)?,
        };
        let requests = HttpRequests::new(self.event_stream, self.renew_sessions, Caps::default());
        let shared = Shared::new(
            client,
            url,
            headers,
            events,
            self.max_frame,
            requests,
            #[cfg(feature = "auth")]
            self.auth,
        );
        Ok(Box::new(HttpIo {
            shared,
            closing: false,
        }))
    }
}

/// The open transport, owned by the connection actor.
struct HttpIo {
    shared: Rc<Shared>,
    /// `close` was called: its future ends every task once closing is done.
    closing: bool,
}

impl TransportIo for HttpIo {
    fn send(&mut self, batch: Outbound) -> Sent {
        let modern = self.shared.session(|session| session.modern);
        let now = now();
        for frame in batch.frames() {
            let bytes = frame.bytes.strip_suffix(b"\n").unwrap_or(frame.bytes);
            let bytes = Bytes::copy_from_slice(bytes);
            let routing = if modern {
                session::routing_headers(frame.method, frame.routing)
            } else {
                Vec::new()
            };
            let outgoing = Outgoing::new(bytes, frame.kind, routing);
            let handshake = frame.handshake;
            self.shared
                .event(|requests| requests.send(outgoing, handshake, now));
        }
        Sent::Taken(batch)
    }

    /// The cancels still owed go out first (within a few seconds); then every POST is aborted
    /// and `DELETE` ends the session.
    fn close(&mut self) -> Pin<Box<dyn Future<Output = ()>>> {
        self.closing = true;
        let ended = self.shared.close();
        let shared = self.shared.clone();
        Box::pin(async move {
            // However this future ends (dropped too), every task ends with it.
            let _shutdown = shared.shutdown.clone().drop_guard();
            // The machine ends closing within CLOSE_LIMIT; the bound here only guards that.
            let session = match tokio::time::timeout(2 * CLOSE_LIMIT, ended).await {
                Ok(Ok(session)) => session,
                _ => shared.session(|session| session.header_id().cloned()),
            };
            shared.shutdown.cancel();
            if let Some(id) = session {
                // Through the one authorized path: the token, a DPoP proof and the version too.
                let version = shared.session(|session| session.protocol_version.clone());
                let delete = shared
                    .request(Method::DELETE, Some(&id), version.as_ref())
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
        if self.shared.session(|session| session.modern) {
            CancelStyle::Abort
        } else {
            CancelStyle::Notification
        }
    }

    /// The version header on every later POST. 2026-07-28: no session, routing headers, and a
    /// cancel is the abort of the request's POST. An older version keeps the 2025-11-25 shape.
    fn use_protocol_version(&mut self, version: Option<&str>, stateless: bool) {
        let modern = stateless;
        let version = version.and_then(|v| HeaderValue::from_str(v).ok());
        self.shared
            .event(|requests| requests.use_protocol_version(version, modern));
    }

    fn resume(&mut self, request: RequestId, at: ResumePoint) {
        self.shared.resume(request, at);
    }

    fn abort(&mut self, request: RequestId) {
        self.shared.event(|requests| requests.abort(request));
    }

    /// At the gate: taken out, never POSTed. Refused and waiting for authorization: its task
    /// ends. Let go since (POSTed again, or the gate opened): left alone; the connection cancels
    /// it after its write (a notification, or in the 2026-07-28 era the abort of its POST), or,
    /// withdrawn without a cancel, lets its answer come.
    fn withdraw(&mut self, request: RequestId) -> bool {
        self.shared.event(|requests| requests.withdraw(request))
    }
}

impl Drop for HttpIo {
    fn drop(&mut self) {
        if !self.closing {
            self.shared.shutdown.cancel();
        }
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
