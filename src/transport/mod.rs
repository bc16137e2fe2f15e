//! Transports: how frames reach the server and come back. A transport moves bytes and frames; it
//! knows neither the connection actor nor what the frames mean (what it needs to know about an
//! outgoing frame comes with it, see [`Frame`]).
//!
//! A transport is opened by the connection on the connection's own thread. The connection hands
//! it batches of frames with [`TransportIo::send`]; the transport reports back through an
//! [`EventSender`]:
//!
//! - the **write-complete event** the cancellation rules hang on: a `notifications/cancelled` for
//!   a request is only queued after its request was reported written. Never report it from a
//!   timer or before the write finished. Two kinds of transport report it two ways:
//!   - a **stream** transport (stdio, the in-memory pair) keeps each batch ([`Sent::Writing`])
//!     and reports [`TransportEvent::Written`] once every byte of it was handed to the wire, in
//!     order. It takes one batch at a time, which is also what coalesces many queued frames into
//!     one write;
//!   - a **message** transport (Streamable HTTP) takes the frames out at once and gives the batch
//!     back ([`Sent::Taken`]); each request then reports its own
//!     [`TransportEvent::RequestWritten`] when its message went out;
//! - [`TransportEvent::Received`] for each complete incoming frame, in wire order; a message
//!   transport reports the body answering one request as [`TransportEvent::Reply`] (or
//!   [`TransportEvent::Refused`] with an error status), so the connection can fail that request
//!   if the body is not an answer;
//! - [`TransportEvent::Closed`] exactly once, when the transport can carry nothing more.

mod batch;
#[cfg(feature = "http")]
pub mod http;
#[cfg(any(test, feature = "test-util"))]
pub mod memory;
pub mod stdio;

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use bytes::Bytes;

pub use crate::protocol::routing::Routing;
pub use batch::{Frame, FrameKind, Outbound};
#[cfg(feature = "http")]
pub use http::HttpTransport;
#[cfg(any(test, feature = "test-util"))]
pub use memory::{MemoryPeer, MemoryTransport};
pub use stdio::StdioTransport;

use crate::{
    error::{CloseReason, Error},
    protocol::jsonrpc::RequestId,
};

/// The largest incoming frame accepted by default (a line on stdio; a JSON body or one event over
/// HTTP).
/// 32 MiB: an MCP App's page is a resource of megabytes (the official PDF server's viewer is
/// 4.3 MB), and a cap holds memory to one frame of it, not the sum of the frames.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 32 * 1024 * 1024;

/// A transport before it is opened: a description of how to reach the server.
pub trait Transport: Send + 'static {
    /// Opens the transport on the connection's thread.
    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error>;

    /// What telemetry says of the peer this transport reaches (read once, before `open`).
    fn peer(&self) -> Peer {
        Peer::default()
    }
}

/// The peer a transport reaches, as the OpenTelemetry conventions name it on the spans and
/// metrics of its calls (`network.transport`, `network.protocol.name`, `server.address`,
/// `server.port`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peer {
    /// `pipe` (stdio) or `tcp` (HTTP); `None` when unknown.
    pub network_transport: Option<&'static str>,
    /// `http` over HTTP.
    pub network_protocol: Option<&'static str>,
    /// The server's host.
    pub server_address: Option<String>,
    /// The server's port.
    pub server_port: Option<u16>,
}

impl Peer {
    /// A server reached over a pipe (stdio).
    pub fn pipe() -> Self {
        Self {
            network_transport: Some("pipe"),
            ..Self::default()
        }
    }

    /// A server at `address:port`, over HTTP on TCP.
    pub fn http(address: impl Into<String>, port: Option<u16>) -> Self {
        Self {
            network_transport: Some("tcp"),
            network_protocol: Some("http"),
            server_address: Some(address.into()),
            server_port: port,
        }
    }
}

/// A transport chosen at run time (e.g. from a command line).
impl Transport for Box<dyn Transport> {
    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error> {
        (*self).open(events)
    }

    fn peer(&self) -> Peer {
        (**self).peer()
    }
}

/// An open transport, owned by the connection.
pub trait TransportIo {
    /// Hands a batch of frames to the transport. Must not block.
    fn send(&mut self, batch: Outbound) -> Sent;

    /// Starts closing. The transport must still report [`TransportEvent::Closed`] (if anyone is
    /// listening); the returned future resolves when every resource (e.g. the child process) is
    /// released.
    fn close(&mut self) -> Pin<Box<dyn Future<Output = ()>>>;

    /// How a written request is cancelled on this transport.
    fn cancel_style(&self) -> CancelStyle {
        CancelStyle::Notification
    }

    /// For [`CancelStyle::Abort`] transports: abandon this written request (e.g. abort its POST).
    fn abort(&mut self, _request: RequestId) {}

    /// Take back a request reported [`TransportEvent::RequestHeld`], whose caller gave it up.
    /// `true`: taken back, nothing of it reaches the server. `false`: it was let go before this
    /// call (its `RequestWritten` is on its way) and is left alone: the connection cancels it on
    /// the wire after its write (or, withdrawn without a cancel, lets its answer come).
    fn withdraw(&mut self, _request: RequestId) -> bool {
        true
    }

    /// The protocol version the connection settled on (`None`: not settled, e.g. going back to
    /// the handshake after a failed 2026-07-28 probe), and whether it is a stateless one (the
    /// 2026-07-28 era: no session, cancels by abort). Called before the first frame of that
    /// version is sent: HTTP changes its headers and its cancel style with it.
    fn use_protocol_version(&mut self, _version: Option<&str>, _stateless: bool) {}

    /// A request whose answer stream ended early is still unanswered: pick it up from `at`
    /// (see [`TransportEvent::StreamEnded`]).
    fn resume(&mut self, _request: RequestId, _at: ResumePoint) {}
}

/// What the transport did with a batch.
#[derive(Debug)]
#[non_exhaustive]
pub enum Sent {
    /// A stream transport keeps the batch until [`TransportEvent::Written`]; send nothing more
    /// until then.
    Writing,
    /// A message transport took the frames out; here are the buffers back. Each request reports
    /// its own [`TransportEvent::RequestWritten`]; the next batch may come at once.
    Taken(Outbound),
}

/// How a request that reached the wire is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelStyle {
    /// Write `notifications/cancelled {requestId, reason?}` (stdio; legacy HTTP).
    Notification,
    /// Call [`TransportIo::abort`] (2026-07-28 Streamable HTTP: abort that POST).
    Abort,
}

/// Where a message transport can pick up a request's answer stream that ended before the answer
/// (HTTP: the last event id). Opaque outside the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePoint {
    pub(crate) last_event_id: String,
    pub(crate) retry: Option<Duration>,
    /// How many times this request's stream was resumed already.
    pub(crate) attempts: u32,
}

/// What a transport reports to its connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum TransportEvent {
    /// Stream transports: every frame of this batch was handed to the wire. The batch comes back
    /// so its buffers can be reused.
    Written(Outbound),
    /// Message transports: this request's message went out.
    RequestWritten(RequestId),
    /// Message transports: this request was refused before the server read it (HTTP `401`) and
    /// waits (for authorization) to be sent again. Until its next `RequestWritten`, nothing of
    /// it is at the server: a cancel then takes it back ([`TransportIo::withdraw`]) and writes
    /// nothing, unless it was let go meanwhile.
    RequestHeld(RequestId),
    /// Message transports: this request was answered as sent on a session that has ended (HTTP
    /// `404`), so the server never processed it; it waits for the renewed session and goes
    /// again, once, with its next `RequestWritten`. Until then nothing of it is at the server:
    /// a cancel takes it back as for [`RequestHeld`](Self::RequestHeld), but its timeout keeps
    /// running.
    RequestHeldForSession(RequestId),
    /// Complete incoming frames (one JSON text each, without the newline), in wire order.
    Received(Vec<Bytes>),
    /// Message transports: the body that answers `request` (JSON, an object or an array). If it
    /// is not JSON, the request fails.
    Reply {
        /// The request answered.
        request: RequestId,
        /// The response body, as received.
        body: Bytes,
    },
    /// Message transports: `request` was refused with an HTTP error status. If the body is the
    /// request's JSON-RPC error, that is its answer; otherwise the request fails with
    /// [`Error::Http`].
    Refused {
        /// The request refused.
        request: RequestId,
        /// The HTTP status code.
        status: u16,
        /// The response body, as received.
        body: Bytes,
        /// The server's `Retry-After`, if it gave one in seconds.
        retry_after: Option<std::time::Duration>,
    },
    /// Message transports: the stream that should have carried `request`'s answer ended early
    /// (it broke, or it can be resumed; a clean end that cannot be resumed is not reported). If
    /// the request is still waiting, the connection asks the transport to [`resume`] it from
    /// `resume`, or (no resume point) fails it with `error`.
    ///
    /// [`resume`]: TransportIo::resume
    StreamEnded {
        /// The request whose answer the stream should have carried.
        request: RequestId,
        /// Where to resume the stream; `None` if it cannot be resumed.
        resume: Option<ResumePoint>,
        /// Why the stream broke; `None` if it ended cleanly.
        error: Option<Error>,
    },
    /// A message transport could not deliver this request, or its answer: its caller gets
    /// `error`. The connection stays open for the other requests.
    RequestFailed(RequestId, Error),
    /// Message transports: the server gave the session this id (2025-11-25 HTTP,
    /// `Mcp-Session-Id`; again for each renewed session). Telemetry names it.
    SessionStarted(String),
    /// The transport ended; nothing more will be written or read.
    Closed(CloseReason),
}

/// Where a transport's events go (the connection implements it).
pub trait EventSink: Send + Sync + 'static {
    /// Delivers an event. Returns `false` when nobody listens any more (stop working then).
    fn deliver(&self, event: TransportEvent) -> bool;

    /// Whether anybody still listens.
    fn is_listening(&self) -> bool;
}

/// The transport's way back to its connection. The connection's sink holds no strong reference
/// to it, so a transport never keeps its connection alive.
#[derive(Clone)]
pub struct EventSender {
    sink: Arc<dyn EventSink>,
}

impl EventSender {
    /// A sender that delivers to `sink`.
    pub fn new(sink: impl EventSink) -> Self {
        Self {
            sink: Arc::new(sink),
        }
    }

    /// Delivers an event. Returns `false` when the connection is gone (stop working then).
    pub fn send(&self, event: TransportEvent) -> bool {
        self.sink.deliver(event)
    }

    /// Whether the connection still exists.
    pub fn is_connected(&self) -> bool {
        self.sink.is_listening()
    }
}
