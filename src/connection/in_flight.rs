//! The table of our requests that have not been answered, keyed by internal id.

use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

use futures::channel::oneshot;

use crate::{error::Error, protocol::RawResult, RequestId};

/// What a caller receives. The error is boxed to keep the channel, one per request, small.
pub(crate) type Outcome = Result<RawResult, Box<Error>>;

/// Where the caller's answer goes. A `futures` oneshot, not tokio's: tokio's receiver takes part
/// in the runtime's cooperative budget, and with 100,000 calls polled from one task an exhausted
/// budget made every pending call wake itself again and again (throughput fell to a quarter).
pub(crate) type Reply = oneshot::Sender<Outcome>;

/// How far a request got towards the wire. The distinction decides what a cancel does:
/// a `Queued` request is simply never written, a `Writing` one is cancelled once its
/// write-complete event arrives, a `Written` one is cancelled at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// In the outbox; not yet handed to the transport.
    Queued,
    /// Handed to the transport; its write-complete event has not arrived.
    Writing,
    /// The transport reported its frame written.
    Written,
    /// Cancelled while `Writing`: the caller was answered; the cancel goes on the wire when the
    /// write-complete event arrives (its reason waits in the connection's `deferred_cancels`).
    CancelAfterWrite,
}

/// Kept small (24 bytes): one of these lives per request in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    /// `None` once the caller was answered early (cancelled while `Writing`).
    pub reply: Option<Reply>,
    /// The tick its timeout expires at (see `deadlines.rs`); 0: no timeout.
    pub expires: u32,
    /// Its timeout, for the error the caller gets.
    pub timeout_ms: u32,
    pub phase: Phase,
    /// `false` for `initialize`, which must never be cancelled on the wire.
    pub wire_cancellable: bool,
}

impl InFlight {
    pub fn queued(reply: Reply, wire_cancellable: bool) -> Self {
        Self {
            reply: Some(reply),
            expires: 0,
            timeout_ms: 0,
            phase: Phase::Queued,
            wire_cancellable,
        }
    }

    /// Answers the caller, if it is still waiting.
    pub fn answer(&mut self, outcome: Result<RawResult, Error>) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(outcome.map_err(Box::new));
        }
    }
}

/// Ids are sequential integers: a multiplicative hash spreads them without SipHash's cost.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(crate) type InFlightTable = HashMap<RequestId, InFlight, BuildHasherDefault<IdHasher>>;
