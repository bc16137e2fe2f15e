//! The one road in: every call and every cancel, from a `Client`, a [`PendingReply`], or an
//! `Addr` user's [`Request`]/[`Cancel`] message, is pushed on the connection's [`Inbox`], and
//! the actor reaches the request states only through [`Ordered::get`], which takes in everything
//! pushed so far, in order, first. A cancel can therefore never be handled before the request it
//! names: not by a rule each handler must remember, but because there is no other way to the
//! states.
//!
//! Why not one mailbox message per call: actix boxes every message in an envelope and a queue
//! node (about 64 bytes, allocated by the caller and freed by the actor). A burst of 10,000 calls
//! left those 10,000 freed envelopes behind as heap the process kept. Here a call costs one slot
//! in a vector the actor swaps out, and a burst costs one mailbox message: the first push into an
//! idle inbox wakes the actor with [`Drain`].
//!
//! [`PendingReply`]: super::PendingReply
//! [`Request`]: super::Request
//! [`Cancel`]: super::Cancel

use std::{
    collections::HashMap,
    num::NonZeroU64,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
    time::Instant,
};

use actix::{Addr, Message};

use super::{in_flight::Reply, requests::Requests, Connection, Request};
use crate::{error::Error, protocol::jsonrpc::RequestId};

/// Above this many slots, the actor gives the inbox's memory back after draining it.
const KEEP_CAPACITY: usize = 1024;

/// What a caller puts in the inbox: 16 bytes (a burst of calls fills a vector of these).
pub(crate) enum Entry {
    /// A request and where its answer goes. Boxed from the call to the write: the outbox keeps
    /// this same box.
    Call(Box<Request>, Reply),
    /// Cancel a request. Its reason, if any, waits in the inbox's side table, so that this
    /// stays a word (ids are never 0).
    /// With [`WITHDRAW`] set: withdraw the request if nothing of it reached the server yet
    /// (queued or held), otherwise leave it be, its answer still coming to its reply channel.
    /// For task-creating calls, which must never be cancelled on the wire (2025-11-25) and whose
    /// answer names the task to cancel. (A flag, not a variant: the entry stays two words.)
    Cancel(NonZeroU64),
}

/// The bit of [`Entry::Cancel`] that makes it a withdrawal (no request id comes near it).
const WITHDRAW: u64 = 1 << 63;

const _: () = assert!(std::mem::size_of::<Entry>() == 16);

#[derive(Default)]
pub(crate) struct Inbox {
    queue: Mutex<Queue>,
    /// The connection can carry nothing more (its transport closed, or the actor is gone): every
    /// call would fail. Read by `Client::is_closed` without asking the actor.
    ended: AtomicBool,
    /// Why the connection ended, once it has (the first reason wins).
    end_reason: std::sync::OnceLock<Error>,
}

#[derive(Default)]
struct Queue {
    items: Vec<Entry>,
    /// The reasons of the cancels in `items` that have one.
    reasons: HashMap<RequestId, String>,
    /// A [`Drain`] is in the mailbox (or about to be) for the items queued so far.
    wake_sent: bool,
    /// The actor is gone: nothing pushed now would ever be answered.
    closed: bool,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `entry` (a cancel's reason beside it); returns whether the actor must be woken
    /// (the inbox was idle). A closed inbox drops the entry: a call's caller then sees its reply
    /// channel closed.
    fn push(&self, entry: Entry, reason: Option<(RequestId, String)>) -> bool {
        let mut queue = self.lock();
        if queue.closed {
            return false;
        }
        queue.items.push(entry);
        if let Some((id, reason)) = reason {
            queue.reasons.entry(id).or_insert(reason); // the first reason wins
        }
        !std::mem::replace(&mut queue.wake_sent, true)
    }

    /// Swaps the queued entries (in order) with `spare`, an empty vector whose buffer the queue
    /// reuses: a steady stream of calls allocates nothing here. The reasons come along.
    fn take(&self, spare: &mut Vec<Entry>, reasons: &mut HashMap<RequestId, String>) {
        let mut queue = self.lock();
        queue.wake_sent = false;
        std::mem::swap(&mut queue.items, spare);
        if !queue.reasons.is_empty() {
            reasons.extend(queue.reasons.drain());
        }
    }

    /// Records that the connection can carry nothing more.
    pub fn mark_ended(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Records that the connection can carry nothing more, and why.
    pub fn mark_ended_with(&self, reason: &Error) {
        let _ = self.end_reason.set(reason.clone());
        self.mark_ended();
    }

    /// Why the connection ended, if it has and said why.
    pub fn end_reason(&self) -> Option<&Error> {
        self.end_reason.get()
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Refuses further pushes and returns what was queued.
    pub fn close(&self) -> Vec<Entry> {
        self.mark_ended();
        let mut queue = self.lock();
        queue.closed = true;
        std::mem::take(&mut queue.items)
    }
}

/// A way into one connection: its address (a strong one: holding a link keeps the connection
/// alive) and its inbox.
#[derive(Clone)]
pub(crate) struct Link {
    pub addr: Addr<Connection>,
    pub inbox: Arc<Inbox>,
}

impl Link {
    pub fn submit(&self, request: Box<Request>, reply: Reply) {
        self.push(Entry::Call(request, reply), None);
    }

    /// Cancels a request submitted through this link: the one way every future cancels
    /// (explicitly, by token or timeout, or because it was dropped).
    pub fn cancel(&self, id: RequestId, reason: Option<String>) {
        if let Some(entry) = cancel_entry(id) {
            self.push(entry, reason.map(|r| (id, r)));
        }
    }

    /// Withdraws request `id` if it never reached the server; else it runs on (see
    /// [`Entry::Withdraw`]).
    pub fn withdraw(&self, id: RequestId) {
        if let Some(id) = NonZeroU64::new(id.as_u64() | WITHDRAW) {
            self.push(Entry::Cancel(id), None);
        }
    }

    fn push(&self, entry: Entry, reason: Option<(RequestId, String)>) {
        if self.inbox.push(entry, reason) {
            // do_send ignores the mailbox bound: a wake-up is never lost to a full mailbox.
            self.addr.do_send(Drain);
        }
    }
}

/// `None` only for id 0, which no request has.
fn cancel_entry(id: RequestId) -> Option<Entry> {
    NonZeroU64::new(id.as_u64()).map(Entry::Cancel)
}

/// Wakes the actor to drain its [`Inbox`].
pub(crate) struct Drain;

impl Message for Drain {
    type Result = ();
}

/// The request states behind the inbox: the actor holds this, never a bare [`Requests`].
pub(crate) struct Ordered {
    inbox: Arc<Inbox>,
    /// The drained queue's buffer, swapped back in on the next drain.
    spare: Vec<Entry>,
    /// The drained cancels' reasons.
    reasons: HashMap<RequestId, String>,
    requests: Requests,
}

impl Ordered {
    pub fn new(inbox: Arc<Inbox>, requests: Requests) -> Self {
        Self {
            inbox,
            spare: Vec::new(),
            reasons: HashMap::new(),
            requests,
        }
    }

    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// The request states, once everything pushed on the inbox so far was taken in, in order.
    pub fn get(&mut self) -> &mut Requests {
        let mut entries = std::mem::take(&mut self.spare);
        self.inbox.take(&mut entries, &mut self.reasons);
        if !entries.is_empty() {
            let now = Instant::now();
            for entry in entries.drain(..) {
                match entry {
                    Entry::Call(request, reply) => self.requests.accept(request, reply, now),
                    Entry::Cancel(id) if id.get() & WITHDRAW != 0 => {
                        let id = RequestId::from_u64(id.get() & !WITHDRAW);
                        self.requests.withdraw(id, Error::cancelled(None));
                    }
                    Entry::Cancel(id) => {
                        let id = RequestId::from_u64(id.get());
                        // Usually empty: skip hashing then.
                        let reason = if self.reasons.is_empty() {
                            None
                        } else {
                            self.reasons.remove(&id)
                        };
                        let error = Error::cancelled(reason.clone());
                        self.requests.cancel(id, reason, error);
                    }
                }
            }
        }
        // After a burst, give the buffer back rather than hand it to the queue again.
        if entries.capacity() <= KEEP_CAPACITY {
            self.spare = entries;
        }
        &mut self.requests
    }

    /// The request states as they stand, for a read only: entries pushed since the last
    /// [`get`](Self::get) are not seen (each push into an idle inbox has its `Drain` on the way,
    /// which takes them in and settles again).
    pub fn peek(&self) -> &Requests {
        &self.requests
    }

    /// A call from inside the actor (a `Request` message), behind whatever other threads
    /// pushed before; everything is taken in.
    pub fn call_here(&mut self, request: Box<Request>, reply: Reply) -> &mut Requests {
        // The actor drains right now: no wake-up needed (a pending one finds the inbox empty).
        let _ = self.inbox.push(Entry::Call(request, reply), None);
        self.get()
    }

    /// A cancel from inside the actor (a `Cancel` message), the same way.
    pub fn cancel_here(&mut self, id: RequestId, reason: Option<String>) -> &mut Requests {
        if let Some(entry) = cancel_entry(id) {
            let _ = self.inbox.push(entry, reason.map(|r| (id, r)));
        }
        self.get()
    }
}
