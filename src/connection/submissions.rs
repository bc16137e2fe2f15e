//! The `Client`'s way in: calls push their request here and the actor drains the queue.
//!
//! Why not one mailbox message per call: actix boxes every message in an envelope and a queue
//! node (about 64 bytes, allocated by the caller and freed by the actor). A burst of 10,000 calls
//! left those 10,000 freed envelopes behind as heap the process kept. Here a call costs 16 bytes
//! in a vector the actor swaps out, and a burst costs one mailbox message: the first push into an
//! empty queue wakes the actor with [`Drain`].
//!
//! Ordering: a call's `Cancel` still goes through the mailbox, so the actor drains this queue
//! before it handles a `Cancel` (and any message whose meaning depends on earlier calls). A cancel
//! can therefore never be handled before the request it names.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use actix::{Addr, Message};

use super::{messages::Submit, Connection};

/// Above this many slots, the actor gives the queue's memory back after draining it.
pub(crate) const KEEP_CAPACITY: usize = 1024;

#[derive(Default)]
pub(crate) struct Submissions {
    queue: Mutex<Queue>,
    /// The connection can carry nothing more (its transport closed, or the actor is gone): every
    /// call would fail. Read by `Client::is_closed` without asking the actor.
    ended: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Queue {
    items: Vec<Submit>,
    /// A [`Drain`] is in the mailbox (or about to be) for the items queued so far.
    wake_sent: bool,
    /// The actor is gone: nothing pushed now would ever be answered.
    closed: bool,
}

impl Submissions {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `submit` and wakes the actor if the queue was idle. A closed connection drops it,
    /// and its caller then sees the reply channel closed.
    pub fn push(&self, submit: Submit, addr: &Addr<Connection>) {
        let wake = {
            let mut queue = self.lock();
            if queue.closed {
                return;
            }
            queue.items.push(submit);
            !std::mem::replace(&mut queue.wake_sent, true)
        };
        if wake {
            // do_send ignores the mailbox bound: a wake-up is never lost to a full mailbox.
            addr.do_send(Drain);
        }
    }

    /// Swaps the queued calls (in order) with `spare`, an empty vector whose buffer the queue
    /// reuses: a steady stream of calls allocates nothing here.
    pub fn take(&self, spare: &mut Vec<Submit>) {
        let mut queue = self.lock();
        queue.wake_sent = false;
        std::mem::swap(&mut queue.items, spare);
    }

    /// Records that the connection can carry nothing more.
    pub fn mark_ended(&self) {
        self.ended.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Refuses further pushes and returns what was queued.
    pub fn close(&self) -> Vec<Submit> {
        self.mark_ended();
        let mut queue = self.lock();
        queue.closed = true;
        std::mem::take(&mut queue.items)
    }
}

/// What a `Client` and each of its calls hold: the actor's address and its submission queue, in
/// one allocation (a call carries 8 bytes and bumps one reference count).
pub(crate) struct Link {
    pub addr: Addr<Connection>,
    pub submissions: Arc<Submissions>,
    /// The handlers of the server's requests; in the 2026-07-28 era they fulfil `input_required`
    /// results inside the call.
    pub handlers: crate::client::Handlers,
    /// Whether the connection speaks the 2026-07-28 era (set once, at connect).
    pub modern: std::sync::atomic::AtomicBool,
}

impl Link {
    pub fn is_modern(&self) -> bool {
        self.modern.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn submit(&self, submit: Submit) {
        self.submissions.push(submit, &self.addr);
    }
}

/// Wakes the actor to drain [`Submissions`].
pub(crate) struct Drain;

impl Message for Drain {
    type Result = ();
}
