//! The connection's own life, as one enum.
//!
//! ```text
//! Opening ──open──► Open ──Close──► Draining ──queued frames written (or 2 s)──► Closed
//!    │                 │                                                           ▲
//!    └─open failed─────┴──── the transport ended, or the actor stopped ────────────┘
//! ```

use crate::transport::{Transport, TransportIo};

pub(super) enum Lifecycle {
    /// Before the actor started: the transport waits to be opened on the actor's thread.
    Opening(Box<dyn Transport>),
    /// Carrying requests.
    Open(Wire),
    /// Closing by request: every caller was answered; frames queued before the close (cancels,
    /// notifications, cancels waiting for a write-complete event) are still written, then the
    /// transport closes.
    Draining(Wire),
    /// Nothing more is carried; the transport is closing or released.
    Closed,
}

/// The open transport and whether it can take a batch now.
pub(super) struct Wire {
    pub io: Box<dyn TransportIo>,
    pub ready: bool,
}

impl Lifecycle {
    /// The transport to open (once).
    pub fn take_transport(&mut self) -> Option<Box<dyn Transport>> {
        match std::mem::replace(self, Lifecycle::Closed) {
            Lifecycle::Opening(transport) => Some(transport),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The transport, while frames may still be written.
    pub fn wire(&mut self) -> Option<&mut Wire> {
        match self {
            Lifecycle::Open(wire) | Lifecycle::Draining(wire) => Some(wire),
            Lifecycle::Opening(_) | Lifecycle::Closed => None,
        }
    }

    pub fn is_open(&self) -> bool {
        matches!(self, Lifecycle::Open(_))
    }

    pub fn is_draining(&self) -> bool {
        matches!(self, Lifecycle::Draining(_))
    }

    pub fn start_draining(&mut self) {
        if let Lifecycle::Open(wire) = std::mem::replace(self, Lifecycle::Closed) {
            *self = Lifecycle::Draining(wire);
        }
    }

    /// Whether a drain is over: the transport is idle and nothing is left to write.
    pub fn drained(&self, nothing_left: bool) -> bool {
        matches!(self, Lifecycle::Draining(wire) if wire.ready && nothing_left)
    }

    /// Becomes `Closed`; returns the transport if it was open, to be closed.
    pub fn close(&mut self) -> Option<Box<dyn TransportIo>> {
        match std::mem::replace(self, Lifecycle::Closed) {
            Lifecycle::Open(wire) | Lifecycle::Draining(wire) => Some(wire.io),
            Lifecycle::Opening(_) | Lifecycle::Closed => None,
        }
    }
}
