//! The [`Connection`] actor: the glue between callers, the request states and the transport.
//!
//! - Calls and cancels come in through one inbox (`inbox.rs`; from a `Client`, a
//!   [`PendingReply`], or [`Request`]/[`Cancel`] messages); the actor reaches the request states
//!   only through it, so a cancel always meets the request it names.
//! - The request states (`requests.rs`) are a plain struct with one method per event; the actor
//!   feeds it the transport's events and the time, and hands its batches to the transport.
//! - Incoming frames are routed by id in `inbound.rs`; the server's own requests run the
//!   handlers registered on [`ConnectOptions`](crate::ConnectOptions).
//! - The connection's own life is one enum (`Lifecycle`, in `lifecycle.rs`).

mod deadlines;
mod handler_span;
mod handlers;
mod in_flight;
mod inbound;
mod inbox;
mod lifecycle;
mod messages;
mod outbox;
mod requests;
#[cfg(test)]
mod requests_model;
mod server_tasks;

use std::{sync::Arc, time::Instant};

use actix::{
    Actor, ActorContext, AsyncContext, Context, Handler, MessageResult, Recipient, WeakAddr,
};
use tokio::sync::{broadcast, watch};

pub use handlers::{apply_elicitation_defaults, HandlerError};
pub(crate) use handlers::{boxed_handler, Handlers};
pub(crate) use in_flight::Outcome;
pub(crate) use inbox::{Entry, Inbox, Link};
pub use messages::{
    Cancel, Close, ConnectionStats, GetStats, Notify, PendingReply, Request, RequestOptions,
    Subscribe, WaitReleased,
};
pub(crate) use messages::{ServerRequestDone, ServerTaskDone, UseProtocol};
use requests::Hold;
#[cfg_attr(
    not(feature = "otel"),
    allow(unused_imports, reason = "used with otel only")
)]
pub(crate) use requests::RequestCounters;

use self::{
    inbound::{InboundCounters, ServerRequests},
    inbox::{Drain, Ordered},
    lifecycle::{Lifecycle, Wire},
    requests::Requests,
};
use crate::{
    error::{CloseReason, Error},
    pool::Lease,
    protocol::{
        discover::MODERN_PROTOCOL_VERSIONS, jsonrpc::notification_frame,
        notifications::ServerNotification,
    },
    transport::{EventSender, EventSink, FrameKind, Sent, Transport, TransportEvent},
};

/// Where the server's notifications are published: the channel is made by the first
/// subscriber (its ring of slots is most of an idle connection's memory otherwise), and until
/// then nothing is published: nobody would see it.
pub(crate) type Publisher = Arc<std::sync::OnceLock<broadcast::Sender<ServerNotification>>>;

/// Default mailbox bound: `Addr::send` of a [`Request`] waits when this many messages are queued.
/// (actix's default of 16 would throttle a multiplexed connection.)
pub const DEFAULT_MAILBOX_CAPACITY: usize = 4096;

/// How long a requested close waits for queued frames to be written.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Told of each server notification before it is published (see `observe_notifications`).
pub(crate) type NotificationObserver = Box<dyn Fn(&ServerNotification) + Send>;

/// Offered the progress for a request without a listener (answered already); `true` if taken.
pub(crate) type ProgressObserver = Box<
    dyn Fn(crate::protocol::RequestId, &crate::protocol::notifications::Progress) -> bool + Send,
>;

/// Told the session id each time a server gives one (telemetry's `mcp.session.id`).
pub(crate) type SessionObserver = Box<dyn Fn(&str) + Send>;

/// Told the request counters after each event (the client's metrics count the wire from them).
pub(crate) type CountersObserver = Box<dyn FnMut(&requests::RequestCounters) + Send>;

/// The connection actor. One per server.
pub struct Connection {
    lifecycle: Lifecycle,
    /// The request states, reachable only through the inbox (see `inbox.rs`).
    requests: Ordered,
    server_requests: ServerRequests,
    /// The tasks the server asked of us (2025-11-25 task-augmented server requests).
    server_tasks: server_tasks::ServerTasks,
    handlers: Handlers,
    notifications: Option<Publisher>,
    /// Told of each notification before anyone else, on the connection's thread.
    observer: Option<NotificationObserver>,
    /// Offered progress that no request listens to any more.
    progress_observer: Option<ProgressObserver>,
    session_observer: Option<SessionObserver>,
    counters_observer: Option<CountersObserver>,
    subscribers: Vec<Recipient<ServerNotification>>,
    counters: InboundCounters,
    /// The wake-up for the earliest request deadline, and when it is due.
    wake: Option<(Instant, tokio::task::JoinHandle<()>)>,
    /// For handler tasks to report back without keeping the connection alive.
    myself: Option<WeakAddr<Connection>>,
    /// Becomes `true` once the transport has released everything (the child process is reaped).
    released: watch::Sender<bool>,
    mailbox_capacity: usize,
    /// Its place on an arbiter of the pool, given back when the actor is dropped.
    _lease: Option<Lease>,
    /// `mcp.connection{server}`: every handler runs in it, so whatever the connection and its
    /// transport log names the server.
    span: tracing::Span,
}

impl Connection {
    /// A connection over `transport`, opened when the actor starts.
    pub fn new(transport: impl Transport) -> Self {
        Self::from_boxed(Box::new(transport))
    }

    pub(crate) fn from_boxed(transport: Box<dyn Transport>) -> Self {
        Self {
            lifecycle: Lifecycle::Opening(transport),
            requests: Ordered::new(Arc::default(), Requests::new(Instant::now())),
            server_requests: ServerRequests::default(),
            server_tasks: server_tasks::ServerTasks::default(),
            handlers: Handlers::default(),
            notifications: None,
            observer: None,
            progress_observer: None,
            session_observer: None,
            counters_observer: None,
            subscribers: Vec::new(),
            counters: InboundCounters::default(),
            wake: None,
            myself: None,
            released: watch::Sender::new(false),
            mailbox_capacity: DEFAULT_MAILBOX_CAPACITY,
            _lease: None,
            span: tracing::Span::none(),
        }
    }

    /// Runs the connection in `span` (see `ConnectOptions::name`).
    pub(crate) fn span(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }

    /// The actor's mailbox bound (default [`DEFAULT_MAILBOX_CAPACITY`]; at least 1).
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity.max(1);
        self
    }

    /// Handlers for the server's requests (see [`ConnectOptions`](crate::ConnectOptions)).
    pub(crate) fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    pub(crate) fn notifications(mut self, publisher: Publisher) -> Self {
        self.notifications = Some(publisher);
        self
    }

    /// Calls `observer` with each notification before it is published, so what the client
    /// keeps about the server (cached lists) is stale for nobody who saw the notification.
    pub(crate) fn observe_notifications(mut self, observer: NotificationObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Offers `observer` the progress of requests that were answered already (a task's creating
    /// call: the task it made reports progress under its token).
    pub(crate) fn observe_late_progress(mut self, observer: ProgressObserver) -> Self {
        self.progress_observer = Some(observer);
        self
    }

    /// Tells `observer` each session id the server gives.
    pub(crate) fn observe_sessions(mut self, observer: SessionObserver) -> Self {
        self.session_observer = Some(observer);
        self
    }

    /// Tells `observer` the request counters after each event.
    pub(crate) fn observe_counters(mut self, observer: CountersObserver) -> Self {
        self.counters_observer = Some(observer);
        self
    }

    /// The inbox a `Client` pushes its calls and cancels on (shared with the actor once started).
    pub(crate) fn inbox(mut self, inbox: Arc<Inbox>) -> Self {
        let requests = Requests::new(Instant::now());
        self.requests = Ordered::new(inbox, requests);
        self
    }

    /// Counted on a pool arbiter for as long as the actor lives.
    pub(crate) fn lease(mut self, lease: Lease) -> Self {
        self._lease = Some(lease);
        self
    }

    fn link(&self, ctx: &Context<Self>) -> Link {
        Link {
            addr: ctx.address(),
            inbox: self.requests.inbox().clone(),
        }
    }

    /// After every event: hand the transport what is queued, close a drained connection, and
    /// make sure the actor wakes up for the earliest deadline. The inbox is taken in once, by
    /// `flush`; the rest only reads.
    fn settle(&mut self, ctx: &mut Context<Self>) {
        self.flush();
        self.finish_draining();
        self.schedule_expiry(ctx);
        self.report_counters();
    }

    fn report_counters(&mut self) {
        if let Some(observe) = &mut self.counters_observer {
            observe(&self.requests.peek().counters());
        }
    }

    /// Takes in the inbox, then hands queued frames to the transport while it takes them, and
    /// the aborts it must do.
    fn flush(&mut self) {
        // Taken in even without a transport: a call after the close is answered at once.
        let requests = self.requests.get();
        let Some(wire) = self.lifecycle.wire() else {
            return;
        };
        for id in requests.take_aborts() {
            wire.io.abort(id);
        }
        for withdrawal in requests.take_withdrawals() {
            let taken_back = wire.io.withdraw(withdrawal.id);
            requests.withdrawn(withdrawal, taken_back);
        }
        while wire.ready {
            let Some(batch) = requests.next_batch() else {
                break;
            };
            match wire.io.send(batch) {
                Sent::Writing => wire.ready = false,
                Sent::Taken(batch) => requests.recycle(batch),
            }
        }
    }

    /// Makes sure the actor wakes up for the earliest deadline: one task that holds only a weak
    /// address (a timer in the actor's context would keep it alive with no handle left).
    fn schedule_expiry(&mut self, ctx: &mut Context<Self>) {
        let Some(at) = self.requests.peek().next_deadline() else {
            return;
        };
        match &self.wake {
            Some((scheduled, _)) if *scheduled <= at => return,
            Some((_, task)) => task.abort(),
            None => {}
        }
        let connection = ctx.address().downgrade();
        let task = actix_rt::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            if let Some(addr) = connection.upgrade() {
                addr.do_send(Expire);
            }
        });
        self.wake = Some((at, task));
    }

    /// The connection can carry nothing more: fail everyone, now and later. With `drain`, what
    /// is already queued for the wire (cancels, notifications, cancels waiting for their
    /// request's write) is still written before the transport closes.
    fn close_with(&mut self, error: Error, drain: bool) {
        let drain = drain && self.lifecycle.is_open();
        self.requests.inbox().mark_ended_with(&error);
        self.requests.get().close(error, drain);
        self.server_requests.cancel_all();
        self.server_tasks.cancel_all();
        if drain {
            self.lifecycle.start_draining();
            self.flush();
            self.finish_draining();
        } else {
            self.release_transport();
        }
    }

    /// Closes the transport once a drain has nothing left to write.
    fn finish_draining(&mut self) {
        let idle = self.requests.peek().is_idle();
        if self.lifecycle.drained(idle) {
            self.release_transport();
        }
    }

    fn release_transport(&mut self) {
        let Some(mut io) = self.lifecycle.close() else {
            return; // released already, or never opened
        };
        self.requests.get().discard_wire();
        let done = io.close();
        let released = self.released.clone();
        actix_rt::spawn(async move {
            done.await;
            released.send_replace(true);
        });
    }
}

impl Drop for Connection {
    /// An actor dropped without `stopped` (its System torn down) still refuses further calls;
    /// the callers waiting in the inbox see their reply channel closed.
    fn drop(&mut self) {
        drop(self.requests.inbox().close());
    }
}

/// The transport's events, delivered to the actor's mailbox through a weak address: a transport
/// never keeps its connection alive.
struct Mailbox(WeakAddr<Connection>);

impl EventSink for Mailbox {
    fn deliver(&self, event: TransportEvent) -> bool {
        match self.0.upgrade() {
            Some(addr) => {
                addr.do_send(Event(event));
                true
            }
            None => false,
        }
    }

    fn is_listening(&self) -> bool {
        self.0.upgrade().is_some_and(|a| a.connected())
    }
}

/// A transport event, as a mailbox message.
struct Event(TransportEvent);

impl actix::Message for Event {
    type Result = ();
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        self.myself = Some(ctx.address().downgrade());
        let Some(transport) = self.lifecycle.take_transport() else {
            return;
        };
        let events = EventSender::new(Mailbox(ctx.address().downgrade()));
        match transport.open(events) {
            Ok(io) => {
                self.requests.get().set_cancel_style(io.cancel_style());
                self.lifecycle = Lifecycle::Open(Wire { io, ready: true });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot open MCP transport");
                self.close_with(e, false);
                self.released.send_replace(true);
            }
        }
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let error = Error::Closed {
            reason: CloseReason::ActorStopped,
        };
        if self.lifecycle.is_draining() {
            self.release_transport();
        }
        self.close_with(error.clone(), false);
        self.report_counters();
        // From now on a call is refused at the inbox; what raced in is answered here.
        for entry in self.requests.inbox().close() {
            if let Entry::Call(_, reply) = entry {
                let _ = reply.send(Err(Box::new(error.clone())));
            }
        }
    }
}

impl Handler<Request> for Connection {
    type Result = MessageResult<Request>;

    fn handle(&mut self, request: Request, ctx: &mut Self::Context) -> Self::Result {
        let span = self.span.clone();
        let _in = span.enter();
        let (reply, rx) = oneshot::channel();
        let id = request.id;
        self.requests.call_here(Box::new(request), reply);
        self.settle(ctx);
        MessageResult(PendingReply::new(id, rx, self.link(ctx)))
    }
}

impl Handler<Cancel> for Connection {
    type Result = ();

    fn handle(&mut self, cancel: Cancel, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        self.requests.cancel_here(cancel.id, cancel.reason);
        self.settle(ctx);
    }
}

/// The wake-up for request deadlines.
struct Expire;

impl actix::Message for Expire {
    type Result = ();
}

impl Handler<Expire> for Connection {
    type Result = ();

    fn handle(&mut self, _: Expire, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        self.wake = None;
        self.requests.get().expire(Instant::now());
        self.settle(ctx);
    }
}

impl Handler<Drain> for Connection {
    type Result = ();

    fn handle(&mut self, _: Drain, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        self.settle(ctx);
    }
}

impl Handler<Notify> for Connection {
    type Result = Result<(), Error>;

    fn handle(&mut self, notify: Notify, ctx: &mut Self::Context) -> Self::Result {
        let span = self.span.clone();
        let _in = span.enter();
        let frame = notification_frame(&notify.method, notify.params.as_ref())
            .map_err(|e| Error::Misuse(format!("cannot serialize {}: {e}", notify.method)))?;
        let queued = self.requests.get().send_frame(
            FrameKind::Notification,
            Some(notify.method.into()),
            frame,
        );
        self.settle(ctx);
        queued
    }
}

impl Handler<Close> for Connection {
    type Result = ();

    fn handle(&mut self, _: Close, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        let error = Error::Closed {
            reason: CloseReason::ClosedByClient,
        };
        self.close_with(error, true);
        // A server that stopped reading must not hold the close up for ever.
        ctx.run_later(DRAIN_LIMIT, |connection, _| {
            if connection.lifecycle.is_draining() {
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

    fn handle(&mut self, done: ServerRequestDone, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        let outcome = done.outcome.map_err(Into::into);
        self.answer_server_request(done.id, outcome);
        self.settle(ctx);
    }
}

impl Handler<ServerTaskDone> for Connection {
    type Result = ();

    fn handle(&mut self, done: ServerTaskDone, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        let outcome = done.outcome.map_err(Into::into);
        let now = time::OffsetDateTime::now_utc();
        for (waiter, answer) in self.server_tasks.finished(&done.task_id, outcome, now) {
            self.answer_server_request(waiter, answer);
        }
        self.settle(ctx);
    }
}

impl Handler<UseProtocol> for Connection {
    type Result = ();

    fn handle(&mut self, protocol: UseProtocol, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        let requests = self.requests.get();
        requests.set_request_meta(protocol.request_meta);
        if let Some(wire) = self.lifecycle.wire() {
            let version = protocol.version.as_deref();
            let stateless = version.is_some_and(|v| MODERN_PROTOCOL_VERSIONS.contains(&v));
            wire.io.use_protocol_version(version, stateless);
            requests.set_cancel_style(wire.io.cancel_style());
        }
        self.settle(ctx);
    }
}

impl Handler<GetStats> for Connection {
    type Result = MessageResult<GetStats>;

    fn handle(&mut self, _: GetStats, _ctx: &mut Self::Context) -> Self::Result {
        let requests = self.requests.get();
        let r = requests.counters();
        let i = self.counters;
        MessageResult(ConnectionStats {
            in_flight: requests.len(),
            requests_written: r.requests_written,
            responses_delivered: r.responses_delivered,
            cancelled_before_write: r.cancelled_before_write,
            cancelled_while_held: r.cancelled_while_held,
            cancels_sent: r.cancels_sent,
            requests_aborted: r.requests_aborted,
            late_responses: r.late_responses,
            progress_dropped: r.progress_dropped,
            invalid_frames: i.invalid_frames,
            server_requests: i.server_requests,
            notifications: i.notifications,
            notifications_dropped: i.notifications_dropped,
            server_requests_cancelled: i.server_requests_cancelled,
            server_requests_refused: i.server_requests_refused,
        })
    }
}

impl Handler<Event> for Connection {
    type Result = ();

    fn handle(&mut self, Event(event): Event, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _in = span.enter();
        match event {
            TransportEvent::Written(batch) => {
                self.requests.get().batch_written(batch);
                if let Some(wire) = self.lifecycle.wire() {
                    wire.ready = true;
                }
            }
            TransportEvent::RequestWritten(id) => {
                self.requests.get().written(id, Instant::now());
            }
            TransportEvent::RequestHeld(id) => self.requests.get().held(id, Hold::ForAuthorization),
            TransportEvent::RequestHeldForSession(id) => {
                self.requests.get().held(id, Hold::ForSession)
            }
            TransportEvent::Received(frames) => {
                for frame in &frames {
                    self.on_frame(frame);
                }
            }
            TransportEvent::Reply { request, body } => self.on_reply(request, &body),
            TransportEvent::Refused {
                request,
                status,
                body,
                retry_after,
            } => self.on_refused(request, status, &body, retry_after),
            TransportEvent::StreamEnded {
                request,
                resume,
                error,
            } => {
                // Every frame the stream carried was routed before this event: if the request
                // still waits, its answer did not come.
                let requests = self.requests.get();
                if requests.is_waiting(request) {
                    match (resume, error) {
                        (Some(at), _) => {
                            if let Some(wire) = self.lifecycle.wire() {
                                wire.io.resume(request, at);
                            }
                        }
                        (None, Some(error)) => requests.failed(request, error),
                        // Ended cleanly: the answer may still come on another stream, within
                        // the request's timeout.
                        (None, None) => {}
                    }
                }
            }
            TransportEvent::RequestFailed(id, error) => self.requests.get().failed(id, error),
            TransportEvent::SessionStarted(id) => {
                if let Some(observe) = &self.session_observer {
                    observe(&id);
                }
            }
            TransportEvent::Closed(reason) => {
                if self.lifecycle.is_draining() {
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
        self.settle(ctx);
    }
}
