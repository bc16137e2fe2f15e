//! Frames waiting for the transport, and how they are coalesced into batches.

use std::{borrow::Cow, collections::VecDeque};

use super::Request;

use crate::{
    protocol::jsonrpc::RequestId,
    transport::{FrameKind, Outbound},
};

/// Stop adding frames to a batch past this size, so a cancel queued behind a huge backlog
/// does not wait for all of it. A pipe holds 64 KiB: a bigger write cannot finish sooner, and a
/// smaller cap keeps the batch buffer (held for reuse) small.
const MAX_BATCH_BYTES: usize = 64 * 1024;

/// Queue capacity kept after a burst.
const SHRINK_ABOVE: usize = 4096;

pub(crate) enum Outgoing {
    /// Serialized only when taken into a batch, so a request cancelled while queued costs nothing.
    /// The caller's own box, kept from the call to the write: no copy and no second allocation.
    Request(Box<Request>),
    /// `notifications/cancelled` for one of our requests, written straight into the batch.
    Cancelled(RequestId),
    /// The same, with a reason (boxed: every variant stays one word).
    CancelledWithReason(Box<(RequestId, String)>),
    /// Another notification or a response to the server, already serialized. Boxed so that every
    /// variant is one word: these are rare, queued requests are many.
    Frame(Box<QueuedFrame>),
}

pub(crate) struct QueuedFrame {
    pub kind: FrameKind,
    pub method: Option<Cow<'static, str>>,
    pub bytes: Vec<u8>,
}

impl Outgoing {
    pub fn cancelled(id: RequestId, reason: Option<String>) -> Self {
        match reason {
            None => Self::Cancelled(id),
            Some(reason) => Self::CancelledWithReason(Box::new((id, reason))),
        }
    }

    fn is_answer(&self) -> bool {
        matches!(self, Self::Frame(frame) if frame.kind == FrameKind::Response)
    }

    pub fn frame(kind: FrameKind, method: Option<Cow<'static, str>>, bytes: Vec<u8>) -> Self {
        Self::Frame(Box::new(QueuedFrame {
            kind,
            method,
            bytes,
        }))
    }
}

// Every queued request costs one of these while the transport is busy.
const _: () = assert!(std::mem::size_of::<Outgoing>() == 16);

#[derive(Default)]
pub(crate) struct Outbox {
    queue: VecDeque<Outgoing>,
    /// How many of the queued items are answers to the server's requests (the inbound router
    /// stops answering a server that lets them pile up, see `MAX_SERVER_REQUESTS`).
    answers: usize,
    /// A returned batch whose buffers are reused for the next one.
    spare: Option<Outbound>,
}

impl Outbox {
    pub fn push(&mut self, item: Outgoing) {
        self.answers += usize::from(item.is_answer());
        self.queue.push_back(item);
    }

    /// Answers to the server's requests queued and not yet taken into a batch.
    pub fn answers(&self) -> usize {
        self.answers
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn clear(&mut self) {
        self.queue.clear();
        self.answers = 0;
    }

    /// Drops a queued cancel of `id` (rare: its request turned out never to reach the server).
    /// Takes a queued cancel of `id` out, with its reason: `None` if there was none.
    pub fn remove_cancel(&mut self, id: RequestId) -> Option<Option<String>> {
        let at = self.queue.iter().position(|item| match item {
            Outgoing::Cancelled(cancelled) => *cancelled == id,
            Outgoing::CancelledWithReason(cancel) => cancel.0 == id,
            _ => false,
        })?;
        match self.queue.remove(at)? {
            Outgoing::CancelledWithReason(cancel) => {
                let (_, reason) = *cancel;
                Some(Some(reason))
            }
            _ => Some(None),
        }
    }

    /// Moves queued items into a batch until it is full. `admit` decides, per item, whether it
    /// goes on the wire and writes it into the batch.
    pub fn fill(&mut self, mut admit: impl FnMut(Outgoing, &mut Outbound)) -> Outbound {
        let mut batch = self.spare.take().unwrap_or_default();
        while let Some(item) = self.queue.pop_front() {
            self.answers = self.answers.saturating_sub(usize::from(item.is_answer()));
            admit(item, &mut batch);
            if batch.bytes().len() >= MAX_BATCH_BYTES {
                break;
            }
        }
        // After a burst, give the queue's memory back rather than hold it for the next one.
        if self.queue.is_empty() && self.queue.capacity() > SHRINK_ABOVE {
            self.queue.shrink_to(SHRINK_ABOVE / 4);
        }
        batch
    }

    /// Takes back a written batch so its allocations serve the next one.
    pub fn recycle(&mut self, mut batch: Outbound) {
        batch.clear();
        self.spare = Some(batch);
    }
}
