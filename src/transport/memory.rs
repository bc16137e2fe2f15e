//! An in-memory transport pair: the client side is a [`MemoryTransport`], the other end a
//! [`MemoryPeer`] that a test drives like a scripted server.
//!
//! The peer sees every frame the moment the transport is handed its batch, and decides when the
//! batch counts as written: by default at once, or, after [`MemoryPeer::hold_writes`], only when
//! the test calls [`MemoryPeer::release_writes`]. That makes "a write in progress" a state a test
//! can hold on to and observe.

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{EventSender, Outbound, Sent, Transport, TransportEvent, TransportIo};
use crate::error::{CloseReason, Error};

/// Creates a connected transport and peer.
pub fn pair() -> (MemoryTransport, MemoryPeer) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let (to_peer, from_client) = mpsc::unbounded_channel();
    (
        MemoryTransport {
            shared: shared.clone(),
            to_peer,
        },
        MemoryPeer {
            shared,
            from_client,
        },
    )
}

#[derive(Default)]
struct Shared {
    events: Option<EventSender>,
    /// Frames the peer sent before the connection opened.
    early: Vec<Bytes>,
    hold_writes: bool,
    held: VecDeque<Outbound>,
    closed: bool,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic while holding this lock can only come from a failing test; keep going.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The client side of an in-memory pair.
pub struct MemoryTransport {
    shared: Arc<Mutex<Shared>>,
    to_peer: mpsc::UnboundedSender<Bytes>,
}

impl Transport for MemoryTransport {
    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error> {
        let mut shared = lock(&self.shared);
        let early = std::mem::take(&mut shared.early);
        if !early.is_empty() {
            events.send(TransportEvent::Received(early));
        }
        shared.events = Some(events);
        drop(shared);
        Ok(Box::new(MemoryIo {
            shared: self.shared,
            to_peer: Some(self.to_peer),
        }))
    }
}

struct MemoryIo {
    shared: Arc<Mutex<Shared>>,
    to_peer: Option<mpsc::UnboundedSender<Bytes>>,
}

impl TransportIo for MemoryIo {
    fn send(&mut self, batch: Outbound) -> Sent {
        if let Some(to_peer) = &self.to_peer {
            for frame in batch.frames() {
                let line = &frame.bytes[..frame.bytes.len().saturating_sub(1)];
                let _ = to_peer.send(Bytes::copy_from_slice(line));
            }
        }
        let mut shared = lock(&self.shared);
        if shared.hold_writes {
            shared.held.push_back(batch);
        } else if let Some(events) = &shared.events {
            events.send(TransportEvent::Written(batch));
        }
        Sent::Writing
    }

    fn close(&mut self) -> Pin<Box<dyn Future<Output = ()>>> {
        self.to_peer = None;
        let mut shared = lock(&self.shared);
        if !shared.closed {
            shared.closed = true;
            if let Some(events) = &shared.events {
                events.send(TransportEvent::Closed(CloseReason::ClosedByClient));
            }
        }
        Box::pin(async {})
    }
}

/// The far end of an in-memory pair, driven by a test.
pub struct MemoryPeer {
    shared: Arc<Mutex<Shared>>,
    from_client: mpsc::UnboundedReceiver<Bytes>,
}

impl MemoryPeer {
    /// The next frame the client wrote, as JSON (`Value::Null` if it is not JSON).
    /// `None` once the client closed the transport.
    pub async fn recv(&mut self) -> Option<Value> {
        let frame = self.from_client.recv().await?;
        Some(serde_json::from_slice(&frame).unwrap_or(Value::Null))
    }

    /// The next frame if one is already there.
    pub fn try_recv(&mut self) -> Option<Value> {
        let frame = self.from_client.try_recv().ok()?;
        Some(serde_json::from_slice(&frame).unwrap_or(Value::Null))
    }

    /// Sends a JSON message to the client.
    pub fn send(&self, message: &Value) {
        self.send_raw(message.to_string().into_bytes());
    }

    /// Sends raw bytes as one frame (they need not be valid JSON).
    pub fn send_raw(&self, frame: impl Into<Bytes>) {
        let mut shared = lock(&self.shared);
        match &shared.events {
            Some(events) => {
                events.send(TransportEvent::Received(vec![frame.into()]));
            }
            None => shared.early.push(frame.into()),
        }
    }

    /// From now on, batches stay "being written" until [`release_writes`](Self::release_writes).
    pub fn hold_writes(&self) {
        lock(&self.shared).hold_writes = true;
    }

    /// Reports every held batch written, and stops holding.
    pub fn release_writes(&self) {
        let mut shared = lock(&self.shared);
        shared.hold_writes = false;
        let held = std::mem::take(&mut shared.held);
        if let Some(events) = &shared.events {
            for batch in held {
                events.send(TransportEvent::Written(batch));
            }
        }
    }

    /// How many batches are held as "being written".
    pub fn held_batches(&self) -> usize {
        lock(&self.shared).held.len()
    }

    /// Ends the connection from the server side.
    pub fn close(&self, reason: CloseReason) {
        let mut shared = lock(&self.shared);
        if !shared.closed {
            shared.closed = true;
            if let Some(events) = &shared.events {
                events.send(TransportEvent::Closed(reason));
            }
        }
    }

    /// Plays the server's part of the 2025-11-25 handshake, answering with `version`.
    /// Returns the client's `initialize` params.
    pub async fn accept_handshake(&mut self, version: &str) -> Option<Value> {
        let init = self.recv().await?;
        self.send(&serde_json::json!({
            "jsonrpc": "2.0",
            "id": init["id"],
            "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "memory-peer", "version": "0"},
            }
        }));
        let initialized = self.recv().await?;
        (initialized["method"] == "notifications/initialized").then(|| init["params"].clone())
    }
}
