//! What waits for one downstream client's stream (a POST's event stream, a GET stream, stdout
//! over stdio), bounded
//! in bytes: a reader that falls behind has its stream ended, never grown. Each message is
//! serialized once, when it is queued. A message always goes into an empty queue whatever its
//! size (an answer of many megabytes still reaches a client that reads).

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::outbound::Outbound;

/// One message for the client, serialized.
#[derive(Debug)]
pub struct Outgoing {
    pub json: Bytes,
    /// The answer of a request (not a request asked of the client, not a notification).
    pub answer: bool,
    /// 2026-07-28: the answer refuses a request that lacked a client capability (`400`).
    pub missing_capability: bool,
    /// The answer refuses what an access rule grants only with this scope (`403` and the
    /// scope challenge, where the status is still open).
    pub scope_needed: Option<Box<str>>,
}

impl Outgoing {
    pub fn of(message: &Outbound) -> Self {
        let answer = message.is_answer();
        let code = message.error_code();
        Self {
            json: Bytes::from(message.to_json()),
            answer,
            missing_capability: answer && code == Some(crate::replies::MISSING_CAPABILITY),
            scope_needed: message.scope_needed().map(Box::from),
        }
    }
}

struct Shared {
    /// Bytes queued and not yet taken by the reader.
    queued: AtomicUsize,
    limit: usize,
    overflowed: AtomicBool,
}

/// The sending side: kept by the session.
pub struct Outbox {
    tx: mpsc::UnboundedSender<Outgoing>,
    shared: Arc<Shared>,
}

/// The reading side: the HTTP response's.
pub struct Inbox {
    rx: mpsc::UnboundedReceiver<Outgoing>,
    shared: Arc<Shared>,
}

/// The reader fell behind: the stream must end.
#[derive(Debug, PartialEq, Eq)]
pub struct Overflow;

/// A queue of at most `limit` bytes.
pub fn channel(limit: usize) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        queued: AtomicUsize::new(0),
        limit,
        overflowed: AtomicBool::new(false),
    });
    let inbox = Inbox {
        rx,
        shared: shared.clone(),
    };
    (Outbox { tx, shared }, inbox)
}

impl Outbox {
    /// Queues `message`, unless the reader already holds more than the limit unread: then the
    /// stream is marked overflowed and the sender should drop this outbox (which ends it).
    pub fn send(&self, message: &Outbound) -> Result<(), Overflow> {
        self.send_outgoing(Outgoing::of(message))
    }

    pub fn send_outgoing(&self, outgoing: Outgoing) -> Result<(), Overflow> {
        let size = outgoing.json.len();
        let queued = self.shared.queued.load(Ordering::Acquire);
        if queued > 0 && queued + size > self.shared.limit {
            self.shared.overflowed.store(true, Ordering::Release);
            return Err(Overflow);
        }
        self.shared.queued.fetch_add(size, Ordering::AcqRel);
        // A reader gone: nothing to bound.
        if self.tx.send(outgoing).is_err() {
            self.shared.queued.fetch_sub(size, Ordering::AcqRel);
        }
        Ok(())
    }
}

impl Inbox {
    pub async fn recv(&mut self) -> Option<Outgoing> {
        let outgoing = self.rx.recv().await?;
        let size = outgoing.json.len();
        self.shared.queued.fetch_sub(size, Ordering::AcqRel);
        Some(outgoing)
    }

    /// Whether the stream ended because its reader fell behind.
    #[cfg(test)]
    pub fn overflowed(&self) -> bool {
        self.shared.overflowed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log(size: usize) -> Outbound {
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x".repeat(size)}}).into()
    }

    #[tokio::test]
    async fn a_reader_that_falls_behind_is_cut_off_at_the_bound_and_one_that_reads_is_not() {
        let (outbox, mut inbox) = channel(10_000);
        let mut sent = 0;
        while outbox.send(&log(1_000)).is_ok() {
            sent += 1;
            assert!(sent < 100, "the queue grew past its bound");
        }
        assert!(sent >= 9, "{sent} messages fit");
        assert!(inbox.shared.queued.load(Ordering::Acquire) <= 10_000);
        // What was queued is still read, then the stream says why it ended.
        drop(outbox);
        let mut read = 0;
        while inbox.recv().await.is_some() {
            read += 1;
        }
        assert_eq!(read, sent);
        assert!(inbox.overflowed());

        // A reader that keeps up is never cut off, and one big message passes an empty queue.
        let (outbox, mut inbox) = channel(10_000);
        for _ in 0..1_000 {
            outbox.send(&log(1_000)).expect("read as it comes");
            inbox.recv().await.expect("queued");
        }
        outbox.send(&log(1_000_000)).expect("one big answer");
        assert!(!inbox.overflowed());
    }

    #[test]
    fn an_answer_is_told_from_a_request_and_a_notification() {
        let answer = Outgoing::of(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}).into());
        assert!(answer.answer && !answer.missing_capability);
        let asked =
            Outgoing::of(&json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}).into());
        assert!(!asked.answer);
        let refused = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "m"}});
        assert!(Outgoing::of(&refused.into()).missing_capability);
    }
}
