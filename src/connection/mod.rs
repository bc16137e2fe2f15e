//! The [`Connection`] actor: it owns the transport, the in-flight table and the outbox.
//!
//! Data path: a caller's [`Request`] lands in the mailbox; the handler records it as `Queued` in
//! the in-flight table, queues it in the outbox and replies at once with a [`PendingReply`] (a
//! oneshot receiver; no task or future per request lives in the actor). When the transport is
//! idle, the outbox is drained into one batch (skipping requests cancelled meanwhile), the batch
//! goes to the transport and its requests become `Writing`. The transport's `Written` event makes
//! them `Written`, queues any cancel that waited for it, and lets the next batch go. Incoming
//! frames are routed by id in `inbound.rs`.

mod deadlines;
mod in_flight;
mod inbound;
mod messages;
mod outbox;
mod submissions;

use std::collections::HashMap;

use actix::{
    Actor, ActorContext, AsyncContext, Context, Handler, MessageResult, Recipient, WeakAddr,
};

use tokio::sync::{broadcast, watch};

pub(crate) use in_flight::Outcome;
pub use messages::{
    Cancel, Close, ConnectionStats, GetStats, Notify, PendingReply, Request, RequestOptions,
    Subscribe, WaitReleased,
};
pub(crate) use messages::{ServerRequestDone, Submit, UseProtocol};
pub(crate) use submissions::{Link, Submissions};

use self::{
    deadlines::Deadlines,
    in_flight::{InFlight, InFlightTable, Phase, Reply},
    inbound::ServerRequests,
    outbox::{Outbox, Outgoing},
    submissions::Drain,
};
use crate::{
    error::Error,
    protocol::jsonrpc::{notification_frame, write_cancelled, write_request},
    transport::{CancelStyle, EventSender, Flow, Transport, TransportEvent, TransportIo},
    CloseReason, RequestId,
};

/// Default mailbox bound: `Addr::send` of a [`Request`] waits when this many messages are queued.
/// (actix's default of 16 would throttle a multiplexed connection.)
pub const DEFAULT_MAILBOX_CAPACITY: usize = 4096;

/// How long a requested close waits for queued frames to be written.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The connection actor. One per server.
pub struct Connection {
    /// The transport until `started` opens it.
    transport: Option<Box<dyn Transport>>,
    io: Option<Box<dyn TransportIo>>,
    /// Whether the transport can take a batch now.
    writer_ready: bool,
    in_flight: InFlightTable,
    /// Reasons of cancels waiting for their request's write-complete event (rare, so kept out
    /// of the in-flight records).
    deferred_cancels: HashMap<RequestId, Option<String>>,
    /// Timeouts of requests in flight.
    deadlines: Deadlines,
    /// Progress listeners of requests in flight, by id (= progress token).
    progress: HashMap<RequestId, crate::client::ProgressCallback>,
    outbox: Outbox,
    /// The 2026-07-28 era's `_meta` entries, spliced into every request's params.
    request_meta: Option<Box<str>>,
    /// Calls from `Client`s wait here until the actor drains them (see `submissions.rs`).
    submissions: std::sync::Arc<Submissions>,
    /// The drained queue's buffer, swapped back in on the next drain.
    drained: Vec<Submit>,
    server_requests: ServerRequests,
    handlers: crate::client::Handlers,
    notifications: Option<broadcast::Sender<crate::ServerNotification>>,
    subscribers: Vec<Recipient<crate::ServerNotification>>,
    /// For handler tasks to report back without keeping the connection alive.
    myself: Option<WeakAddr<Connection>>,
    /// Set once the connection can carry nothing more: every request then fails with it.
    closed: Option<Error>,
    /// Closing by request: frames queued before the close (cancels, notifications) are still
    /// written, then the transport is closed.
    draining: bool,
    /// Becomes `true` once the transport has released everything (the child process is reaped).
    released: watch::Sender<bool>,
    stats: ConnectionStats,
    mailbox_capacity: usize,
    /// When this connection runs on a System of its own, stop it once the transport is shut down.
    owns_system: bool,
}

impl Connection {
    pub fn new(transport: impl Transport) -> Self {
        Self::from_boxed(Box::new(transport))
    }

    pub(crate) fn from_boxed(transport: Box<dyn Transport>) -> Self {
        Self {
            transport: Some(transport),
            io: None,
            writer_ready: false,
            in_flight: InFlightTable::default(),
            deferred_cancels: HashMap::new(),
            progress: HashMap::new(),
            deadlines: Deadlines::default(),
            outbox: Outbox::default(),
            request_meta: None,
            submissions: Default::default(),
            drained: Vec::new(),
            server_requests: ServerRequests::default(),
            handlers: crate::client::Handlers::default(),
            notifications: None,
            subscribers: Vec::new(),
            myself: None,
            closed: None,
            draining: false,
            released: watch::Sender::new(false),
            stats: ConnectionStats::default(),
            mailbox_capacity: DEFAULT_MAILBOX_CAPACITY,
            owns_system: false,
        }
    }

    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity.max(1);
        self
    }

    /// Handlers for the server's requests (see [`ConnectOptions`](crate::ConnectOptions)).
    pub fn handlers(mut self, handlers: crate::client::Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    pub(crate) fn notifications(
        mut self,
        sender: broadcast::Sender<crate::ServerNotification>,
    ) -> Self {
        self.notifications = Some(sender);
        self
    }

    /// The queue a `Client` pushes its calls on (shared with the actor once started).
    pub(crate) fn submissions(mut self, submissions: std::sync::Arc<Submissions>) -> Self {
        self.submissions = submissions;
        self
    }

    /// Accepts the calls waiting in the submission queue, in order. Done before handling any
    /// message whose meaning depends on earlier calls (a `Cancel` names one of them).
    fn drain_submissions(&mut self) {
        let mut drained = std::mem::take(&mut self.drained);
        self.submissions.take(&mut drained);
        for submit in drained.drain(..) {
            self.accept(submit.request, submit.reply);
        }
        // After a burst, give the buffer back rather than hand it to the queue again.
        if drained.capacity() <= submissions::KEEP_CAPACITY {
            self.drained = drained;
        }
    }

    pub(crate) fn owning_system(mut self) -> Self {
        self.owns_system = true;
        self
    }

    /// Hands queued frames to the transport if it is ready for them.
    fn flush(&mut self) {
        if !self.writer_ready || self.outbox.is_empty() {
            return;
        }
        if self.io.is_none() {
            return;
        }
        let in_flight = &mut self.in_flight;
        let stats = &mut self.stats;
        let request_meta = self.request_meta.as_deref();
        let mut dropped = Vec::new();
        let batch = self.outbox.fill(|item, batch| match item {
            Outgoing::Frame(frame) => batch.push(&frame),
            Outgoing::Cancelled(id) => batch.push_cancel(id, |buf| write_cancelled(buf, id, None)),
            Outgoing::CancelledWithReason(cancel) => {
                let (id, reason) = *cancel;
                batch.push_cancel(id, |buf| write_cancelled(buf, id, Some(&reason)));
            }
            Outgoing::Request(request) => {
                let id = request.id;
                // Checked at dequeue (hyper's rule): a request cancelled while queued is gone from
                // the table and is never written, so it never needs a cancel on the wire.
                let Some(entry) = in_flight.get_mut(&id) else {
                    return;
                };
                if entry.reply.as_ref().is_none_or(|r| r.is_closed()) {
                    // The caller went away without a Cancel reaching us yet; same outcome.
                    dropped.push((id, None));
                    stats.cancelled_before_write += 1;
                    return;
                }
                // `accept` answered requests whose params failed to serialize: these are `Ok`.
                let params = request.params.as_ref().ok().and_then(Option::as_deref);
                match batch.push_with(Some(id), |buf| {
                    write_request(buf, id, &request.method, params, request_meta)
                }) {
                    Ok(()) => {
                        entry.set_phase(Phase::Writing);
                        stats.requests_written += 1;
                    }
                    Err(e) => {
                        let error = Error::Protocol(format!(
                            "cannot serialize {} request: {e}",
                            request.method
                        ));
                        dropped.push((id, Some(error)));
                    }
                }
            }
        });
        for (id, error) in dropped {
            if let (Some(mut entry), Some(error)) = (self.forget(id), error) {
                entry.answer(Err(error));
            }
        }
        if batch.is_empty() {
            self.outbox.recycle(batch);
            return;
        }
        if let Some(io) = self.io.as_mut() {
            self.writer_ready = io.send(batch) == Flow::Ready;
        }
    }

    /// The transport finished writing a batch.
    fn on_written(&mut self, batch: crate::transport::Outbound) {
        for id in batch.requests() {
            let Some(entry) = self.in_flight.get_mut(&id) else {
                continue; // answered while being written
            };
            match entry.phase() {
                Phase::Writing => entry.set_phase(Phase::Written),
                Phase::CancelAfterWrite => {
                    // The cancel waited for this event: now it follows the request on the wire.
                    let wire = entry.wire_cancellable();
                    let reason = self.deferred_cancels.remove(&id).flatten();
                    self.forget(id);
                    self.cancel_on_wire(id, reason, wire);
                }
                Phase::Queued | Phase::Written => {}
            }
        }
        self.outbox.recycle(batch);
        self.writer_ready = true;
    }

    fn cancel_on_wire(&mut self, id: RequestId, reason: Option<String>, wire_cancellable: bool) {
        if !wire_cancellable {
            return;
        }
        let Some(io) = self.io.as_mut() else {
            return;
        };
        match io.cancel_style() {
            CancelStyle::Notification => {
                self.outbox.push(Outgoing::cancelled(id, reason));
                self.stats.cancels_sent += 1;
            }
            CancelStyle::Abort => io.abort(id),
        }
    }

    /// Cancels a request: its caller gets `error` at once; the wire gets what its phase calls for.
    fn cancel(&mut self, id: RequestId, reason: Option<String>, error: Error) {
        let Some(entry) = self.in_flight.get_mut(&id) else {
            return; // answered, cancelled before, or not ours
        };
        match entry.phase() {
            Phase::Queued => {
                // Never written: drop it; the outbox skips it. Nothing goes on the wire.
                if let Some(mut entry) = self.forget(id) {
                    entry.answer(Err(error));
                }
                self.stats.cancelled_before_write += 1;
            }
            Phase::Writing => {
                // Wake the caller now; the notification waits for the write-complete event.
                entry.answer(Err(error));
                entry.set_phase(Phase::CancelAfterWrite);
                let expires = std::mem::take(&mut entry.expires);
                if expires != 0 {
                    self.deadlines.remove(expires);
                }
                self.progress.remove(&id);
                self.deferred_cancels.insert(id, reason);
            }
            Phase::CancelAfterWrite => {} // a second cancel: the first one is already waiting
            Phase::Written => {
                let Some(mut entry) = self.forget(id) else {
                    return;
                };
                entry.answer(Err(error));
                self.cancel_on_wire(id, reason, entry.wire_cancellable());
            }
        }
    }

    /// Removes a request from the table with everything kept for it.
    fn forget(&mut self, id: RequestId) -> Option<InFlight> {
        // Both side tables are usually empty: skip hashing then (this runs per response).
        if !self.progress.is_empty() {
            self.progress.remove(&id);
        }
        if !self.deferred_cancels.is_empty() {
            self.deferred_cancels.remove(&id);
        }
        let entry = self.in_flight.remove(&id)?;
        if entry.expires != 0 {
            self.deadlines.remove(entry.expires);
        }
        Some(entry)
    }

    /// Times out every request whose deadline passed, then schedules the next wake-up.
    fn expire(&mut self) {
        let now = self.deadlines.now();
        if self.deadlines.take_due(now) {
            // Rare (a timeout happened): only then is the table looked through.
            let expired: Vec<(RequestId, u32)> = self
                .in_flight
                .iter_mut()
                .filter(|(_, e)| e.expires != 0 && e.expires <= now)
                .map(|(id, e)| {
                    e.expires = 0; // its count was taken with the tick
                    (*id, e.timeout_ms())
                })
                .collect();
            for (id, ms) in expired {
                let after = std::time::Duration::from_millis(u64::from(ms));
                let reason = format!("timed out after {ms} ms");
                self.cancel(id, Some(reason), Error::Timeout { after });
            }
            self.flush();
        }
        self.schedule_expiry();
    }

    /// Makes sure the actor wakes up for the earliest deadline.
    fn schedule_expiry(&mut self) {
        let Some((tick, wait)) = self.deadlines.next() else {
            return;
        };
        match &self.deadlines.wake {
            Some((scheduled, _)) if *scheduled <= tick => return,
            Some((_, task)) => task.abort(),
            None => {}
        }
        let connection = self.myself.clone();
        let task = actix_rt::spawn(async move {
            tokio::time::sleep(wait).await;
            if let Some(addr) = connection.and_then(|c| c.upgrade()) {
                addr.do_send(Expire);
            }
        });
        self.deadlines.wake = Some((tick, task));
    }

    /// Records a request and queues it. Returns `false` if it was answered at once (closed
    /// connection, unserializable params).
    fn accept(&mut self, mut request: Box<Request>, reply: Reply) -> bool {
        if let Some(error) = &self.closed {
            let _ = reply.send(Err(Box::new(error.clone())));
            return false;
        }
        if let Err(e) = &request.params {
            let _ = reply.send(Err(Box::new(Error::Protocol(format!(
                "cannot serialize {} params: {e}",
                request.method
            )))));
            return false;
        }
        let id = request.id;
        let mut entry = InFlight::queued(reply, request.options.cancel_on_wire);
        if let Some(timeout) = request.options.timeout() {
            entry.expires = self.deadlines.add(timeout);
            entry.set_timeout_ms(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX));
        }
        let timed = entry.expires != 0;
        self.in_flight.insert(id, entry);
        if let Some(progress) = request.options.progress.take() {
            self.progress.insert(id, *progress);
        }
        self.outbox.push(Outgoing::Request(request));
        if timed {
            self.schedule_expiry();
        }
        true
    }

    /// The connection can carry nothing more: fail everyone, now and later. With `drain`, what
    /// is already queued for the wire (cancels, notifications, cancels waiting for their
    /// request's write) is still written before the transport closes.
    fn close_with(&mut self, error: Error, drain: bool) {
        if self.closed.is_some() {
            return;
        }
        // Calls already submitted are answered with the same error as those in the table.
        self.drain_submissions();
        self.submissions.mark_ended();
        for entry in self.in_flight.values_mut() {
            entry.answer(Err(error.clone()));
        }
        self.deadlines.clear();
        if drain && self.io.is_some() {
            self.in_flight
                .retain(|_, entry| entry.phase() == Phase::CancelAfterWrite);
            for entry in self.in_flight.values_mut() {
                entry.expires = 0;
            }
        } else {
            self.in_flight.clear();
            self.deferred_cancels.clear();
            self.outbox.clear();
        }
        self.progress.clear();
        self.server_requests.cancel_all();
        self.closed = Some(error);
        if drain && self.io.is_some() {
            self.draining = true;
            self.flush();
            self.finish_draining();
        } else {
            self.release_transport();
        }
    }

    /// Closes the transport once a drain has nothing left to write.
    fn finish_draining(&mut self) {
        let idle = self.writer_ready && self.outbox.is_empty() && self.in_flight.is_empty();
        if self.draining && idle {
            self.draining = false;
            self.release_transport();
        }
    }

    fn release_transport(&mut self) {
        self.draining = false;
        self.writer_ready = false;
        self.outbox.clear();
        match self.io.take() {
            Some(mut io) => {
                let done = io.close();
                let released = self.released.clone();
                actix_rt::spawn(async move {
                    done.await;
                    released.send_replace(true);
                });
            }
            None => {
                self.released.send_replace(true);
            }
        }
    }
}

impl Drop for Connection {
    /// An actor dropped without `stopped` (its System torn down) still refuses further calls;
    /// the callers waiting in the queue see their reply channel closed.
    fn drop(&mut self) {
        drop(self.submissions.close());
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        self.myself = Some(ctx.address().downgrade());
        let Some(transport) = self.transport.take() else {
            return;
        };
        let events = EventSender::new(ctx.address().downgrade());
        match transport.open(events) {
            Ok(io) => {
                self.io = Some(io);
                self.writer_ready = true;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot open MCP transport");
                self.submissions.mark_ended();
                self.closed = Some(e);
                self.released.send_replace(true);
            }
        }
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let error = Error::Closed {
            reason: CloseReason::ActorStopped,
        };
        self.close_with(error.clone(), false);
        // From now on a call is refused at the queue; what raced in is answered here.
        for submit in self.submissions.close() {
            let _ = submit.reply.send(Err(Box::new(error.clone())));
        }
        if self.draining {
            self.release_transport();
        }
        if self.owns_system {
            // The transport's own tasks finish the shutdown; the System we own ends after them.
            let mut released = self.released.subscribe();
            actix_rt::spawn(async move {
                let _ = released.wait_for(|done| *done).await;
                actix_rt::System::current().stop();
            });
        }
    }
}

impl Handler<Request> for Connection {
    type Result = MessageResult<Request>;

    fn handle(&mut self, request: Request, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        let id = request.id;
        let accepted = self.accept(Box::new(request), tx);
        self.flush();
        let guard = accepted.then(|| ctx.address());
        MessageResult(PendingReply::new(id, rx, guard))
    }
}

impl Handler<Drain> for Connection {
    type Result = ();

    fn handle(&mut self, _: Drain, _ctx: &mut Self::Context) {
        self.drain_submissions();
        self.flush();
    }
}

/// The wake-up for request deadlines.
struct Expire;

impl actix::Message for Expire {
    type Result = ();
}

impl Handler<Expire> for Connection {
    type Result = ();

    fn handle(&mut self, _: Expire, _ctx: &mut Self::Context) {
        self.deadlines.wake = None;
        self.expire();
    }
}

impl Handler<Cancel> for Connection {
    type Result = ();

    fn handle(&mut self, cancel: Cancel, _ctx: &mut Self::Context) {
        self.drain_submissions();
        let error = Error::cancelled(cancel.reason.clone());
        self.cancel(cancel.id, cancel.reason, error);
        self.flush();
    }
}

impl Handler<Notify> for Connection {
    type Result = Result<(), Error>;

    fn handle(&mut self, notify: Notify, _ctx: &mut Self::Context) -> Self::Result {
        self.drain_submissions();
        if let Some(error) = &self.closed {
            return Err(error.clone());
        }
        let frame = notification_frame(&notify.method, notify.params.as_ref())
            .map_err(|e| Error::Protocol(format!("cannot serialize {}: {e}", notify.method)))?;
        self.outbox.push(Outgoing::frame(frame));
        self.flush();
        Ok(())
    }
}

impl Handler<Close> for Connection {
    type Result = ();

    fn handle(&mut self, _: Close, ctx: &mut Self::Context) {
        let error = Error::Closed {
            reason: CloseReason::ClosedByClient,
        };
        self.close_with(error, true);
        // A server that stopped reading must not hold the close up for ever.
        ctx.run_later(DRAIN_LIMIT, |connection, _| {
            if connection.draining {
                connection.release_transport();
            }
        });
    }
}

impl Handler<WaitReleased> for Connection {
    type Result = MessageResult<WaitReleased>;

    fn handle(&mut self, _: WaitReleased, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.released.subscribe())
    }
}

impl Handler<Subscribe> for Connection {
    type Result = ();

    fn handle(&mut self, Subscribe(recipient): Subscribe, _ctx: &mut Self::Context) {
        self.subscribers.push(recipient);
    }
}

impl Handler<ServerRequestDone> for Connection {
    type Result = ();

    fn handle(&mut self, done: ServerRequestDone, _ctx: &mut Self::Context) {
        let outcome = done
            .outcome
            .map_err(|e| crate::protocol::jsonrpc::ErrorObject {
                code: e.code,
                message: e.message,
                data: e.data,
            });
        self.answer_server_request(done.id, outcome);
        self.flush();
    }
}

impl Handler<UseProtocol> for Connection {
    type Result = ();

    fn handle(&mut self, protocol: UseProtocol, _ctx: &mut Self::Context) {
        self.drain_submissions();
        self.request_meta = protocol.request_meta;
        if let Some(io) = self.io.as_mut() {
            io.protocol_chosen(&protocol.version);
        }
    }
}

impl Handler<GetStats> for Connection {
    type Result = MessageResult<GetStats>;

    fn handle(&mut self, _: GetStats, _ctx: &mut Self::Context) -> Self::Result {
        self.drain_submissions();
        MessageResult(ConnectionStats {
            in_flight: self.in_flight.len(),
            ..self.stats
        })
    }
}

impl Handler<TransportEvent> for Connection {
    type Result = ();

    fn handle(&mut self, event: TransportEvent, ctx: &mut Self::Context) {
        match event {
            TransportEvent::Written(batch) => self.on_written(batch),
            TransportEvent::Received(frames) => {
                for frame in &frames {
                    self.on_frame(frame);
                }
            }
            TransportEvent::RequestFailed(id, error) => {
                if let Some(mut entry) = self.forget(id) {
                    entry.answer(Err(error));
                }
            }
            TransportEvent::Closed(reason) => {
                if self.draining {
                    // The transport ended while we drained: nothing more can be written.
                    self.release_transport();
                }
                self.close_with(Error::Closed { reason }, false);
                // Nobody holds an address any more: nothing else will happen here.
                if !ctx.connected() {
                    ctx.stop();
                }
            }
        }
        self.flush();
        self.finish_draining();
    }
}
