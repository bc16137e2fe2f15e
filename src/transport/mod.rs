//! Transports: how frames reach the server and come back.
//!
//! A transport is opened by the [`Connection`] actor on the actor's own thread.
//! The actor hands it batches of frames with [`TransportIo::send`]; the transport reports back
//! through an [`EventSender`]:
//!
//! - [`TransportEvent::Written`] once **every byte of a batch has been handed to the wire**, in the
//!   order the batches were sent. This is the write-complete event the cancellation rules hang on:
//!   a `notifications/cancelled` for a request is only queued after the batch that carried the
//!   request was reported written. Never report it from a timer or before the write finished.
//! - [`TransportEvent::Received`] for each complete incoming frame, in wire order.
//! - [`TransportEvent::Closed`] exactly once, when the transport can carry nothing more.
//!
//! Stream transports (stdio, the in-memory pair) take one batch at a time: `send` returns
//! [`Flow::Busy`] and the actor waits for `Written` before the next batch, which is also what
//! coalesces many queued frames into one write. A message-per-request transport (Streamable HTTP)
//! returns [`Flow::Ready`], runs each frame on its own, reports each frame's `Written` separately,
//! and cancels with [`CancelStyle::Abort`] instead of a notification.

mod batch;
#[cfg(feature = "http")]
pub mod http;
pub mod memory;
pub mod stdio;

use std::{future::Future, pin::Pin};

use actix::WeakAddr;
use bytes::Bytes;

pub use batch::{Frame, Outbound};
#[cfg(feature = "http")]
pub use http::HttpTransport;
pub use memory::{MemoryPeer, MemoryTransport};
pub use stdio::StdioTransport;

use crate::{connection::Connection, error::Error, CloseReason};

/// A transport before it is opened: a description of how to reach the server.
pub trait Transport: Send + 'static {
    /// Opens the transport on the connection actor's thread.
    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error>;
}

/// A transport chosen at run time (e.g. from a command line).
impl Transport for Box<dyn Transport> {
    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error> {
        (*self).open(events)
    }
}

/// An open transport, owned by the connection actor.
pub trait TransportIo {
    /// Hands a batch of frames to the transport. Must not block.
    fn send(&mut self, batch: Outbound) -> Flow;

    /// Starts closing. The transport must still report [`TransportEvent::Closed`] (if anyone is
    /// listening); the returned future resolves when every resource (e.g. the child process) is
    /// released.
    fn close(&mut self) -> Pin<Box<dyn Future<Output = ()>>>;

    /// How a written request is cancelled on this transport.
    fn cancel_style(&self) -> CancelStyle {
        CancelStyle::Notification
    }

    /// For [`CancelStyle::Abort`] transports: abandon this written request (e.g. abort its POST).
    fn abort(&mut self, _request: crate::RequestId) {}

    /// The connection settled on this protocol version; called before the first request of its
    /// era is sent (HTTP changes its headers and its cancel style for 2026-07-28).
    fn protocol_chosen(&mut self, _version: &str) {}
}

/// Whether the transport can take another batch before reporting the last one written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Wait for [`TransportEvent::Written`] before sending the next batch.
    Busy,
    /// Send the next batch whenever there is one.
    Ready,
}

/// How a request that reached the wire is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelStyle {
    /// Write `notifications/cancelled {requestId, reason?}` (stdio; legacy HTTP).
    Notification,
    /// Call [`TransportIo::abort`] (2026-07-28 Streamable HTTP: abort that POST).
    Abort,
}

/// What a transport reports to its connection.
#[derive(Debug)]
pub enum TransportEvent {
    /// Every frame of this batch was handed to the wire. The batch comes back so its buffers
    /// can be reused.
    Written(Outbound),
    /// Complete incoming frames (one JSON text each, without the newline), in wire order.
    Received(Vec<Bytes>),
    /// A message transport could not deliver this request, or its answer (e.g. its HTTP POST
    /// failed or came back with an error status): its caller gets `error`. The connection stays
    /// open for the other requests.
    RequestFailed(crate::RequestId, Error),
    /// The transport ended; nothing more will be written or read.
    Closed(CloseReason),
}

impl actix::Message for TransportEvent {
    type Result = ();
}

/// The transport's way back to its connection actor.
///
/// It holds only a weak address: a transport never keeps its connection alive, so when every
/// handle to the connection is dropped the actor stops and closes the transport.
#[derive(Clone)]
pub struct EventSender {
    connection: WeakAddr<Connection>,
}

impl EventSender {
    pub(crate) fn new(connection: WeakAddr<Connection>) -> Self {
        Self { connection }
    }

    /// Delivers an event. Returns `false` when the connection is gone (stop working then).
    pub fn send(&self, event: TransportEvent) -> bool {
        match self.connection.upgrade() {
            Some(addr) => {
                addr.do_send(event);
                true
            }
            None => false,
        }
    }

    /// Whether the connection still exists.
    pub fn is_connected(&self) -> bool {
        self.connection.upgrade().is_some_and(|a| a.connected())
    }
}
