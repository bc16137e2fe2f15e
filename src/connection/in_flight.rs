//! The table of our requests that have not been answered, keyed by internal id.

use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

use crate::{
    error::Error,
    protocol::jsonrpc::{RawResult, RequestId},
    timeout::Timeout,
};

/// What a caller receives. The error is boxed to keep the channel, one per request, small.
pub(crate) type Outcome = Result<RawResult, Box<Error>>;

/// Where the caller's answer goes. The `oneshot` crate's channel: one 48-byte allocation with no
/// reference counts (`futures`' is 112 bytes). Not tokio's: tokio's receiver takes part in the
/// runtime's cooperative budget, and with 100,000 calls polled from one task an exhausted budget
/// made every pending call wake itself again and again (throughput fell to a quarter).
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
    /// write-complete event arrives (its reason waits in `Requests::deferred_cancels`).
    CancelAfterWrite,
    /// A message transport took it back before the server read it (HTTP `401`: waiting for
    /// authorization); it will be written again. A cancel now writes nothing.
    Held,
}

/// Kept small (16 bytes): one of these lives per request in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    /// `None` once the caller was answered early (cancelled while `Writing`).
    pub reply: Option<Reply>,
    /// The tick its timeout expires at (see `deadlines.rs`); 0: no timeout.
    pub expires: u32,
    /// Bits 0–2: the phase; bit 3: cancellable on the wire; bits 4–31: the timeout in ms.
    packed: u32,
}

const PHASE_BITS: u32 = 0b111;
const WIRE_CANCELLABLE: u32 = 0b1000;
const TIMEOUT_SHIFT: u32 = 4;
/// The largest timeout the record can report (about 74 hours). A longer timeout still expires
/// on time (its tick is exact); only the figure in its error is capped.
const MAX_TIMEOUT_MS: u32 = u32::MAX >> TIMEOUT_SHIFT;

impl InFlight {
    pub fn queued(reply: Reply, wire_cancellable: bool) -> Self {
        let mut entry = Self {
            reply: Some(reply),
            expires: 0,
            packed: 0,
        };
        if wire_cancellable {
            entry.packed |= WIRE_CANCELLABLE;
        }
        entry.set_phase(Phase::Queued);
        entry
    }

    pub fn phase(&self) -> Phase {
        match self.packed & PHASE_BITS {
            0 => Phase::Queued,
            1 => Phase::Writing,
            2 => Phase::Written,
            3 => Phase::CancelAfterWrite,
            _ => Phase::Held,
        }
    }

    pub fn set_phase(&mut self, phase: Phase) {
        let bits = match phase {
            Phase::Queued => 0,
            Phase::Writing => 1,
            Phase::Written => 2,
            Phase::CancelAfterWrite => 3,
            Phase::Held => 4,
        };
        self.packed = (self.packed & !PHASE_BITS) | bits;
    }

    /// `false` for `initialize`, which must never be cancelled on the wire.
    pub fn wire_cancellable(&self) -> bool {
        self.packed & WIRE_CANCELLABLE != 0
    }

    /// Its timeout, for the error the caller gets (capped at [`MAX_TIMEOUT_MS`]).
    pub fn timeout(&self) -> Option<Timeout> {
        Timeout::from_ms(self.packed >> TIMEOUT_SHIFT)
    }

    pub fn set_timeout(&mut self, timeout: Option<Timeout>) {
        let ms = timeout.map_or(0, |t| t.ms().min(MAX_TIMEOUT_MS));
        self.packed = (self.packed & ((1 << TIMEOUT_SHIFT) - 1)) | (ms << TIMEOUT_SHIFT);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_keeps_phase_cancellability_and_timeout_apart() {
        let (reply, _rx) = oneshot::channel();
        let mut entry = InFlight::queued(reply, true);
        let minute = Timeout::from_ms(60_000);
        entry.set_timeout(minute);
        for phase in [
            Phase::Writing,
            Phase::Written,
            Phase::CancelAfterWrite,
            Phase::Held,
            Phase::Queued,
        ] {
            entry.set_phase(phase);
            assert_eq!(entry.phase(), phase);
            assert!(entry.wire_cancellable());
            assert_eq!(entry.timeout(), minute);
        }
        let (reply, _rx) = oneshot::channel();
        let mut initialize = InFlight::queued(reply, false);
        initialize.set_timeout(Timeout::from_ms(u32::MAX));
        assert!(!initialize.wire_cancellable());
        assert_eq!(initialize.phase(), Phase::Queued);
        assert_eq!(initialize.timeout(), Timeout::from_ms(MAX_TIMEOUT_MS));
        assert_eq!(std::mem::size_of::<InFlight>(), 16);
    }
}
