//! The request state machine: everything about our requests in flight, as a plain struct.
//!
//! It owns the in-flight table (a 16-byte record per request), the cancel reasons waiting for a
//! write-complete event, the progress listeners, the deadlines and the outbox, and has one method
//! per event: [`accept`](Requests::accept), [`cancel`](Requests::cancel),
//! [`next_batch`](Requests::next_batch), [`written`](Requests::written),
//! [`answered`](Requests::answered), [`expire`](Requests::expire), [`close`](Requests::close).
//! No actix, no I/O, no clock: time is passed in. The connection actor is the glue between this
//! and the transport.
//!
//! ```text
//!            accept                next_batch               written
//!  (caller) ───────► Queued ───────────────────► Writing ───────────────► Written
//!                      │ cancel: answered,          │ cancel: answered,      │ cancel: answered,
//!                      │ never written              ▼                        │ cancel on the wire now
//!                      ▼                     CancelAfterWrite ──written──►  (gone)
//!                    (gone)                  (cancel on the wire then)
//! ```
//! An answer, a transport failure, or a close ends a request in any state; a timeout is a
//! cancel with a reason.

use std::{
    borrow::Cow,
    collections::HashMap,
    time::{Duration, Instant},
};

use super::{
    deadlines::Deadlines,
    in_flight::{InFlight, InFlightTable, Phase, Reply},
    outbox::{Outbox, Outgoing},
    Request,
};
use crate::{
    error::Error,
    protocol::{
        jsonrpc::{write_cancelled, write_request, RawResult, RequestId},
        notifications::{Progress, ProgressCallback},
        routing::{target_in, Routing},
    },
    timeout::Timeout,
    transport::{CancelStyle, FrameKind, Outbound},
};

/// What the request states have counted. Counters only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestCounters {
    pub requests_written: u64,
    pub responses_delivered: u64,
    pub cancelled_before_write: u64,
    /// Of `requests_written`, those cancelled while the transport held them (see
    /// [`crate::ConnectionStats::cancelled_while_held`]).
    pub cancelled_while_held: u64,
    pub cancels_sent: u64,
    /// Written requests cancelled by abandoning them on the transport ([`CancelStyle::Abort`]).
    pub requests_aborted: u64,
    pub late_responses: u64,
    pub progress_dropped: u64,
}

/// Why a message transport holds a request, which decides its timeout meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Refused for authorization (`401`): a sign-in has a bound of its own, and a person in a
    /// browser may take minutes, so the timeout pauses and starts again in full once written.
    ForAuthorization,
    /// Answered `404` by an ended session, waiting for the renewed one: the wait is the
    /// transport's and short, so the timeout runs on.
    ForSession,
}

/// A cancelled request the transport held when the cancel came (see [`Requests::withdrawn`]).
#[derive(Debug)]
pub(crate) struct Withdrawal {
    pub id: RequestId,
    reason: Option<String>,
    wire_cancellable: bool,
    /// A withdrawal without a cancel ([`Requests::withdraw`]): the request is still in the
    /// table, answered with this if taken back; let go, its answer comes as usual.
    answer_with: Option<Error>,
}

pub(crate) struct Requests {
    table: InFlightTable,
    /// Reasons of cancels waiting for their request's write-complete event (rare, so kept out of
    /// the records).
    deferred_cancels: HashMap<RequestId, Option<String>>,
    /// Progress listeners of requests in flight, by id (= progress token).
    progress: HashMap<RequestId, ProgressCallback>,
    deadlines: Deadlines,
    outbox: Outbox,
    cancel_style: CancelStyle,
    /// Written requests to abandon ([`CancelStyle::Abort`]): the actor hands them to the transport.
    aborts: Vec<RequestId>,
    /// Held requests cancelled: the actor asks the transport to take them back.
    withdrawals: Vec<Withdrawal>,
    /// Held requests the transport let go before their withdrawal reached it: cancelled on the
    /// wire at their write-complete event (reasons, as in `deferred_cancels`).
    cancel_when_written: HashMap<RequestId, Option<String>>,
    /// The 2026-07-28 era's `_meta` entries, spliced into every request's params.
    request_meta: Option<Box<str>>,
    /// Set once the connection can carry nothing more: every request then fails with it.
    ended: Option<Error>,
    counters: RequestCounters,
}

impl Requests {
    /// `epoch`: where deadline ticks count from (any instant not after the first `accept`).
    pub fn new(epoch: Instant) -> Self {
        Self {
            table: InFlightTable::default(),
            deferred_cancels: HashMap::new(),
            progress: HashMap::new(),
            deadlines: Deadlines::new(epoch),
            outbox: Outbox::default(),
            cancel_style: CancelStyle::Notification,
            aborts: Vec::new(),
            withdrawals: Vec::new(),
            cancel_when_written: HashMap::new(),
            request_meta: None,
            ended: None,
            counters: RequestCounters::default(),
        }
    }

    pub fn set_cancel_style(&mut self, style: CancelStyle) {
        self.cancel_style = style;
    }

    pub fn set_request_meta(&mut self, meta: Option<Box<str>>) {
        self.request_meta = meta;
    }

    /// Requests in the table (including cancels waiting for a write-complete event).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn counters(&self) -> RequestCounters {
        self.counters
    }

    /// Whether nothing is queued or waiting for a write-complete event.
    pub fn is_idle(&self) -> bool {
        self.outbox.is_empty() && self.table.is_empty() && self.cancel_when_written.is_empty()
    }

    /// Answers to the server's requests queued and not yet handed to the transport.
    pub fn queued_answers(&self) -> usize {
        self.outbox.answers()
    }

    /// Whether `id`'s caller still waits for its answer.
    pub fn is_waiting(&self, id: RequestId) -> bool {
        self.table.get(&id).is_some_and(|e| e.reply.is_some())
    }

    /// Event: a caller submitted a request. It is recorded as `Queued` and queued for the wire,
    /// or answered at once (the connection ended, its params failed to serialize).
    pub fn accept(&mut self, mut request: Box<Request>, reply: Reply, now: Instant) {
        if let Some(error) = &self.ended {
            let _ = reply.send(Err(Box::new(error.clone())));
            return;
        }
        if let Err(e) = &request.params {
            let error = Error::Misuse(format!("{} not sent: {e}", request.method));
            let _ = reply.send(Err(Box::new(error)));
            return;
        }
        let id = request.id;
        let mut entry = InFlight::queued(reply, request.options.cancel_on_wire);
        if let Some(timeout) = request.options.timeout {
            entry.expires = self.deadlines.add(timeout.duration(), now);
            entry.set_timeout(Some(timeout));
        }
        self.table.insert(id, entry);
        if let Some(progress) = request.options.take_progress() {
            self.progress.insert(id, progress);
        }
        self.outbox.push(Outgoing::Request(request));
    }

    /// Event: a caller cancelled (or its timeout fired). Its caller gets `error` at once; the
    /// wire gets what the request's phase calls for.
    pub fn cancel(&mut self, id: RequestId, reason: Option<String>, error: Error) {
        let Some(entry) = self.table.get_mut(&id) else {
            return; // answered, cancelled before, or never ours
        };
        match entry.phase() {
            Phase::Queued => {
                // Never written: drop it; the outbox skips it. Nothing goes on the wire.
                if let Some(mut entry) = self.forget(id) {
                    entry.answer(Err(error));
                }
                self.counters.cancelled_before_write += 1;
            }
            Phase::Writing => {
                // Wake the caller now; the cancel waits for the write-complete event.
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
            Phase::Held => {
                // Nothing of it is at the server: it is taken back where it waits, and no cancel
                // is written, unless the transport let it go meanwhile (`withdrawn`).
                if let Some(mut entry) = self.forget(id) {
                    entry.answer(Err(error));
                    let withdrawal = Withdrawal {
                        id,
                        reason,
                        wire_cancellable: entry.wire_cancellable(),
                        answer_with: None,
                    };
                    // Already being withdrawn (`withdraw`): now cancelled as well.
                    match self.withdrawals.iter_mut().find(|w| w.id == id) {
                        Some(pending) => *pending = withdrawal,
                        None => self.withdrawals.push(withdrawal),
                    }
                }
            }
            Phase::Written => {
                if let Some(mut entry) = self.forget(id) {
                    entry.answer(Err(error));
                    self.cancel_on_wire(id, reason, entry.wire_cancellable());
                }
            }
        }
    }

    /// Withdraws request `id` if nothing of it reached the server (queued, or held for a
    /// retry): answered with `error`, nothing on the wire. A request being written or written
    /// is left as it is: its answer comes as usual.
    pub fn withdraw(&mut self, id: RequestId, error: Error) {
        let Some(entry) = self.table.get(&id) else {
            return;
        };
        match entry.phase() {
            Phase::Queued => self.cancel(id, None, error),
            // Kept until the transport says whether it took it back: if it had let it go, the
            // answer must still reach the caller (a task it creates is the caller's to cancel).
            Phase::Held => {
                if !self.withdrawals.iter().any(|w| w.id == id) {
                    self.withdrawals.push(Withdrawal {
                        id,
                        reason: None,
                        wire_cancellable: false,
                        answer_with: Some(error),
                    });
                }
            }
            Phase::Writing | Phase::CancelAfterWrite | Phase::Written => {}
        }
    }

    fn cancel_on_wire(&mut self, id: RequestId, reason: Option<String>, wire_cancellable: bool) {
        if !wire_cancellable {
            return;
        }
        match self.cancel_style {
            CancelStyle::Notification => self.outbox.push(Outgoing::cancelled(id, reason)),
            CancelStyle::Abort => {
                self.aborts.push(id);
                self.counters.requests_aborted += 1;
            }
        }
    }

    /// Event: a notification or a response to the server to send, in order with the requests.
    pub fn send_frame(
        &mut self,
        kind: FrameKind,
        method: Option<Cow<'static, str>>,
        frame: Vec<u8>,
    ) -> Result<(), Error> {
        if let Some(error) = &self.ended {
            return Err(error.clone());
        }
        self.outbox.push(Outgoing::frame(kind, method, frame));
        Ok(())
    }

    /// Event: the transport can take a batch. Moves what is queued into one batch; a request
    /// cancelled while queued, or whose caller is gone, is skipped here (checked at dequeue,
    /// hyper's rule) and never written. Taken requests become `Writing`.
    pub fn next_batch(&mut self) -> Option<Outbound> {
        if self.outbox.is_empty() {
            return None;
        }
        let table = &mut self.table;
        let counters = &mut self.counters;
        let request_meta = self.request_meta.as_deref();
        let mut dropped = Vec::new();
        let batch = self.outbox.fill(|item, batch| match item {
            Outgoing::Frame(frame) => {
                let frame = *frame;
                batch.push(frame.kind, frame.method, &frame.bytes);
            }
            // Counted here, when the frame goes out: a cancel dropped while queued was never sent.
            Outgoing::Cancelled(id) => {
                batch.push_cancel(id, |buf| write_cancelled(buf, id, None));
                counters.cancels_sent += 1;
            }
            Outgoing::CancelledWithReason(cancel) => {
                let (id, reason) = *cancel;
                batch.push_cancel(id, |buf| write_cancelled(buf, id, Some(&reason)));
                counters.cancels_sent += 1;
            }
            Outgoing::Request(request) => {
                let Request {
                    id,
                    method,
                    params,
                    mut options,
                } = *request;
                let mut routing = options.take_routing();
                if request_meta.is_some() && routing.as_ref().is_none_or(|r| r.name.is_none()) {
                    // 2026-07-28, a raw request: what it names is read from its params, once.
                    let name = params.as_ref().ok().and_then(Option::as_deref);
                    if let Some(name) = name.and_then(|p| target_in(&method, p)) {
                        routing.get_or_insert_with(Routing::default).name = Some(name);
                    }
                }
                let routing = routing.map(Box::new);
                let Some(entry) = table.get_mut(&id) else {
                    return; // cancelled while queued
                };
                if entry.reply.as_ref().is_none_or(|r| r.is_closed()) {
                    // The caller went away without a cancel reaching us yet; same outcome.
                    dropped.push((id, None));
                    counters.cancelled_before_write += 1;
                    return;
                }
                // `accept` answered requests whose params failed to serialize: these are `Ok`.
                let params = params.as_ref().ok().and_then(Option::as_deref);
                let written = batch.push_request(id, method, routing, |buf, method| {
                    write_request(buf, id, method, params, request_meta)
                        .map_err(|e| format!("cannot serialize {method} request: {e}"))
                });
                match written {
                    Ok(()) => {
                        entry.set_phase(Phase::Writing);
                        counters.requests_written += 1;
                    }
                    Err(why) => dropped.push((id, Some(Error::Misuse(why)))),
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
            return None;
        }
        Some(batch)
    }

    /// Takes back a batch the transport is done with, so its buffers serve the next one.
    pub fn recycle(&mut self, batch: Outbound) {
        self.outbox.recycle(batch);
    }

    /// Event: a stream transport wrote every frame of `batch`.
    pub fn batch_written(&mut self, batch: Outbound) {
        for id in batch.requests() {
            // A stream transport never holds a request: no timeout restarts, no clock read.
            self.on_written(id, Instant::now);
        }
        self.recycle(batch);
    }

    /// Event: the request's frame is on the wire (at `now`). A cancel that waited for this goes
    /// out now, after the request. A request that was held (waiting for sign-in) is sent again:
    /// its timeout, paused while it was held, starts again in full.
    pub fn written(&mut self, id: RequestId, now: Instant) {
        self.on_written(id, || now);
    }

    fn on_written(&mut self, id: RequestId, now: impl FnOnce() -> Instant) {
        let Some(entry) = self.table.get_mut(&id) else {
            // Answered while being written; or cancelled while held, and let go before the
            // transport could take it back: its cancel goes now.
            if !self.cancel_when_written.is_empty() {
                if let Some(reason) = self.cancel_when_written.remove(&id) {
                    self.cancel_on_wire(id, reason, true);
                }
            }
            return;
        };
        match entry.phase() {
            Phase::Writing => entry.set_phase(Phase::Written),
            Phase::Held => {
                entry.set_phase(Phase::Written);
                // A paused timeout starts again in full; one that kept running runs on.
                if let Some(timeout) = entry.timeout().filter(|_| entry.expires == 0) {
                    entry.expires = self.deadlines.add(timeout.duration(), now());
                }
            }
            Phase::CancelAfterWrite => {
                let wire = entry.wire_cancellable();
                let reason = self.deferred_cancels.remove(&id).flatten();
                self.forget(id);
                self.cancel_on_wire(id, reason, wire);
            }
            Phase::Queued | Phase::Written => {}
        }
    }

    /// Event: a message transport took the request back before the server read it (HTTP `401`,
    /// waiting for authorization); it will be written again. A cancel waiting for its write is
    /// done now: the request is abandoned where it waits, and nothing is written. Its timeout
    /// pauses or runs on as the [`Hold`] says.
    pub fn held(&mut self, id: RequestId, why: Hold) {
        let Some(entry) = self.table.get_mut(&id) else {
            // Cancelled once written, then refused: it must not be sent again, and a cancel not
            // yet written is for a request the server never read (it goes again if the
            // transport lets the request go before taking it back). Or let go once already.
            let pending = self.outbox.remove_cancel(id);
            let again = self.cancel_when_written.remove(&id);
            self.withdrawals.push(Withdrawal {
                id,
                wire_cancellable: pending.is_some() || again.is_some(),
                reason: pending.or(again).flatten(),
                answer_with: None,
            });
            return;
        };
        match entry.phase() {
            Phase::Writing | Phase::Written => {
                entry.set_phase(Phase::Held);
                if why == Hold::ForAuthorization {
                    let expires = std::mem::take(&mut entry.expires);
                    if expires != 0 {
                        self.deadlines.remove(expires);
                    }
                }
            }
            Phase::CancelAfterWrite => {
                // Cancelled while being written, and the transport held it: taken back there.
                let wire_cancellable = entry.wire_cancellable();
                let reason = self.deferred_cancels.remove(&id).flatten();
                self.forget(id);
                self.withdrawals.push(Withdrawal {
                    id,
                    reason,
                    wire_cancellable,
                    answer_with: None,
                });
            }
            Phase::Queued | Phase::Held => {}
        }
    }

    /// Event: an answer arrived for `id` (`None`: an id that cannot be ours). Returns whether a
    /// caller got it; an answer nobody waits for is dropped and counted.
    pub fn answered(&mut self, id: Option<RequestId>, outcome: Result<RawResult, Error>) -> bool {
        // A request cancelled while being written and answered before the write completed:
        // `forget` drops its waiting cancel too, which the answer made moot.
        match id.and_then(|id| self.forget(id)) {
            Some(mut entry) if entry.reply.is_some() => {
                self.counters.responses_delivered += 1;
                entry.answer(outcome);
                true
            }
            _ => {
                self.counters.late_responses += 1;
                false
            }
        }
    }

    /// Event: the transport could not deliver the request or its answer.
    pub fn failed(&mut self, id: RequestId, error: Error) {
        if let Some(mut entry) = self.forget(id) {
            entry.answer(Err(error));
        }
    }

    /// Event: progress for the request whose id is the token. Dropped (and counted) unless that
    /// request is in flight with a listener.
    /// Whether request `id` has a progress listener.
    pub fn listens_to_progress(&self, id: RequestId) -> bool {
        self.progress.contains_key(&id)
    }

    pub fn progress(&mut self, token: Option<RequestId>, progress: Progress) {
        match token.and_then(|id| self.progress.get_mut(&id)) {
            Some(listener) => listener(progress),
            None => self.counters.progress_dropped += 1,
        }
    }

    /// When [`expire`](Self::expire) has something to do next.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.next()
    }

    /// Event: the time is `now`. Every request whose timeout passed fails with
    /// [`Error::Timeout`] and is cancelled like an explicit cancel.
    pub fn expire(&mut self, now: Instant) {
        let tick = self.deadlines.tick(now);
        if !self.deadlines.take_due(tick) {
            return;
        }
        // Rare (a timeout happened): only then is the table looked through.
        let expired: Vec<(RequestId, Timeout)> = self
            .table
            .iter_mut()
            .filter(|(_, e)| e.expires != 0 && e.expires <= tick)
            .map(|(id, e)| {
                e.expires = 0; // its count was taken with the tick
                let timeout = e.timeout().unwrap_or_else(|| Timeout::new(Duration::ZERO));
                (*id, timeout)
            })
            .collect();
        for (id, timeout) in expired {
            self.cancel(id, Some(timeout.reason()), timeout.error());
        }
    }

    /// Event: the connection can carry nothing more. Every waiting caller gets `error`, now and
    /// later. With `drain`, what is already queued for the wire (cancels, notifications, cancels
    /// waiting for their request's write-complete event) is kept to be written; without, it is
    /// dropped.
    pub fn close(&mut self, error: Error, drain: bool) {
        if self.ended.is_some() {
            if !drain {
                self.discard_wire();
            }
            return;
        }
        for entry in self.table.values_mut() {
            entry.answer(Err(error.clone()));
        }
        self.deadlines.clear();
        self.progress.clear();
        self.ended = Some(error);
        if drain {
            self.table
                .retain(|_, entry| entry.phase() == Phase::CancelAfterWrite);
            for entry in self.table.values_mut() {
                entry.expires = 0;
            }
        } else {
            self.discard_wire();
        }
    }

    /// Event: the transport is gone: nothing more will be written.
    pub fn discard_wire(&mut self) {
        self.table.clear();
        self.deferred_cancels.clear();
        self.outbox.clear();
        self.aborts.clear();
        self.withdrawals.clear();
        self.cancel_when_written.clear();
    }

    /// Written requests to abandon on a [`CancelStyle::Abort`] transport, oldest first.
    pub fn take_aborts(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.aborts)
    }

    /// Cancelled held requests to take back from the transport, oldest first; each comes back
    /// with [`Requests::withdrawn`].
    pub fn take_withdrawals(&mut self) -> Vec<Withdrawal> {
        std::mem::take(&mut self.withdrawals)
    }

    /// What the transport did with a withdrawal: took the request back (nothing of it reached
    /// the server), or had let it go already; then its cancel goes on the wire after its
    /// write-complete event, as for any request cancelled while being written.
    pub fn withdrawn(&mut self, withdrawal: Withdrawal, taken_back: bool) {
        let id = withdrawal.id;
        if let Some(error) = withdrawal.answer_with {
            match (taken_back, self.table.get_mut(&id)) {
                (true, Some(_)) => {
                    if let Some(mut entry) = self.forget(id) {
                        entry.answer(Err(error));
                    }
                    self.counters.cancelled_before_write += 1;
                    self.counters.cancelled_while_held += 1;
                }
                // On its way again: its write-complete event and its answer come as usual. It
                // stays held until that event, which restarts its paused timeout in full.
                (false, Some(_)) => {}
                (_, None) => {}
            }
        } else if taken_back {
            self.counters.cancelled_before_write += 1;
            self.counters.cancelled_while_held += 1;
        } else if withdrawal.wire_cancellable {
            self.cancel_when_written.insert(id, withdrawal.reason);
        }
    }

    /// Removes a request with everything kept for it.
    fn forget(&mut self, id: RequestId) -> Option<InFlight> {
        // Both side tables are usually empty: skip hashing then (this runs per response).
        if !self.progress.is_empty() {
            self.progress.remove(&id);
        }
        if !self.deferred_cancels.is_empty() {
            self.deferred_cancels.remove(&id);
        }
        if !self.cancel_when_written.is_empty() {
            self.cancel_when_written.remove(&id);
        }
        let entry = self.table.remove(&id)?;
        if entry.expires != 0 {
            self.deadlines.remove(entry.expires);
        }
        Some(entry)
    }

    /// Whether every table is empty (for tests: nothing is left behind).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
            && self.deferred_cancels.is_empty()
            && self.progress.is_empty()
            && self.deadlines.is_empty()
            && self.outbox.is_empty()
            && self.aborts.is_empty()
            && self.withdrawals.is_empty()
            && self.cancel_when_written.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::RequestOptions;

    fn submit(
        requests: &mut Requests,
        timeout: Option<Duration>,
        now: Instant,
    ) -> (RequestId, oneshot::Receiver<super::super::Outcome>) {
        let request = Request::new("ping", None).with_options(RequestOptions {
            timeout,
            ..RequestOptions::default()
        });
        let id = request.id();
        let (reply, rx) = oneshot::channel();
        requests.accept(Box::new(request), reply, now);
        (id, rx)
    }

    /// A request taken by a message transport, then reported held (HTTP `401`).
    fn submit_held(
        requests: &mut Requests,
        now: Instant,
    ) -> (RequestId, oneshot::Receiver<super::super::Outcome>) {
        let (id, rx) = submit(requests, None, now);
        let batch = requests.next_batch().unwrap();
        requests.recycle(batch);
        requests.held(id, Hold::ForAuthorization);
        (id, rx)
    }

    fn kinds(batch: &Outbound) -> Vec<FrameKind> {
        batch.frames().map(|f| f.kind).collect()
    }

    fn result() -> RawResult {
        serde_json::value::to_raw_value(&serde_json::json!({})).unwrap()
    }

    #[test]
    fn a_request_goes_queued_writing_written_answered() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, rx) = submit(&mut requests, None, now);
        let batch = requests.next_batch().unwrap();
        assert_eq!(kinds(&batch), [FrameKind::Request(id)]);
        requests.batch_written(batch);
        assert!(requests.is_waiting(id));
        assert!(requests.answered(Some(id), Ok(result())));
        assert!(rx.try_recv().unwrap().is_ok());
        assert!(requests.is_empty());
        assert_eq!(requests.counters().responses_delivered, 1);
    }

    #[test]
    fn cancelled_while_queued_it_is_never_written() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, rx) = submit(&mut requests, None, now);
        requests.cancel(id, None, Error::cancelled(None));
        assert!(matches!(
            *rx.try_recv().unwrap().unwrap_err(),
            Error::Cancelled { .. }
        ));
        assert!(requests.next_batch().is_none(), "nothing goes on the wire");
        assert!(requests.is_empty());
    }

    #[test]
    fn withdrawn_while_queued_it_is_never_written_once_written_it_is_answered_as_usual() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (queued, queued_rx) = submit(&mut requests, None, now);
        requests.withdraw(queued, Error::cancelled(None));
        assert!(queued_rx.try_recv().unwrap().is_err());
        assert!(requests.next_batch().is_none(), "nothing goes on the wire");

        let (id, rx) = submit(&mut requests, None, now);
        let batch = requests.next_batch().unwrap();
        requests.withdraw(id, Error::cancelled(None)); // being written: left be
        requests.batch_written(batch);
        requests.withdraw(id, Error::cancelled(None)); // written: left be
        assert!(requests.next_batch().is_none(), "no cancel on the wire");
        assert!(requests.answered(Some(id), Ok(result())));
        assert!(rx.try_recv().unwrap().is_ok(), "its answer still comes");
        assert!(requests.is_empty());
    }

    /// Regression (issue 13): a request held by the transport (HTTP `401`, waiting for
    /// authorization) and cancelled just after the transport sent it again was taken for one
    /// the server never read: its POST was aborted and no cancel was written, so a server that
    /// ignores closed POSTs ran it to its end.
    #[test]
    fn a_held_request_let_go_before_its_withdrawal_is_cancelled_after_its_write() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, rx) = submit_held(&mut requests, now);
        requests.cancel(id, None, Error::cancelled(None));
        assert!(rx.try_recv().unwrap().is_err(), "answered at once");
        let withdrawals = requests.take_withdrawals();
        assert_eq!(withdrawals.len(), 1);
        // The transport had let it go: it is being written.
        for withdrawal in withdrawals {
            requests.withdrawn(withdrawal, false);
        }
        assert!(
            requests.next_batch().is_none(),
            "no cancel before its write"
        );
        requests.written(id, now);
        let cancel = requests.next_batch().unwrap();
        assert_eq!(kinds(&cancel), [FrameKind::Cancel(id)]);
        assert_eq!(requests.counters().cancelled_while_held, 0);
        requests.recycle(cancel);
        assert!(requests.is_empty());

        // Taken back: nothing is written, and it is counted as never at the server.
        let (id, _rx) = submit_held(&mut requests, now);
        requests.cancel(id, None, Error::cancelled(None));
        for withdrawal in requests.take_withdrawals() {
            requests.withdrawn(withdrawal, true);
        }
        requests.written(id, now); // a stray event changes nothing
        assert!(requests.next_batch().is_none());
        assert_eq!(requests.counters().cancelled_while_held, 1);
        assert!(requests.is_empty());
    }

    /// Regression (issue 13): a task-creating call is withdrawn when given up (never cancelled
    /// on the wire; its task, if any, is cancelled with `tasks/cancel` once its answer names
    /// it). Withdrawn while held but already let go by the transport, it was answered with an
    /// error at once: the answer naming the task the server created was then dropped, and the
    /// task left running.
    #[test]
    fn a_withdrawn_held_request_let_go_still_gets_its_answer() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, rx) = submit_held(&mut requests, now);
        requests.withdraw(id, Error::cancelled(None));
        assert!(
            rx.try_recv().is_err(),
            "not answered before the transport's verdict"
        );
        for withdrawal in requests.take_withdrawals() {
            requests.withdrawn(withdrawal, false);
        }
        requests.written(id, now);
        assert!(requests.next_batch().is_none(), "nothing on the wire");
        assert!(requests.answered(Some(id), Ok(result())));
        assert!(
            rx.try_recv().unwrap().is_ok(),
            "the answer reached the caller"
        );
        assert!(requests.is_empty());

        // Taken back: answered with the error, nothing written.
        let (id, rx) = submit_held(&mut requests, now);
        requests.withdraw(id, Error::cancelled(None));
        for withdrawal in requests.take_withdrawals() {
            requests.withdrawn(withdrawal, true);
        }
        assert!(rx.try_recv().unwrap().is_err());
        assert!(requests.next_batch().is_none());
        assert!(requests.is_empty());
    }

    #[test]
    fn cancelled_while_writing_the_cancel_waits_for_the_write() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, rx) = submit(&mut requests, None, now);
        let batch = requests.next_batch().unwrap();
        requests.cancel(
            id,
            Some("stop".into()),
            Error::cancelled(Some("stop".into())),
        );
        assert!(
            rx.try_recv().unwrap().is_err(),
            "the caller is answered at once"
        );
        assert!(
            requests.next_batch().is_none(),
            "no cancel before the write-complete event"
        );
        requests.batch_written(batch);
        let cancel = requests.next_batch().unwrap();
        assert_eq!(kinds(&cancel), [FrameKind::Cancel(id)]);
        assert!(String::from_utf8_lossy(cancel.bytes()).contains(r#""reason":"stop""#));
        requests.batch_written(cancel);
        assert!(
            !requests.answered(Some(id), Ok(result())),
            "a late answer is dropped"
        );
        assert!(requests.is_empty());
    }

    #[test]
    fn an_answer_before_the_write_completes_drops_the_waiting_cancel() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, _rx) = submit(&mut requests, None, now);
        let batch = requests.next_batch().unwrap();
        requests.cancel(id, None, Error::cancelled(None));
        assert!(!requests.answered(Some(id), Ok(result())));
        requests.batch_written(batch);
        assert!(
            requests.next_batch().is_none(),
            "the answer made the cancel moot"
        );
        assert!(requests.is_empty());
    }

    #[test]
    fn cancelled_once_written_the_abort_style_aborts_instead_of_notifying() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        requests.set_cancel_style(CancelStyle::Abort);
        let (id, _rx) = submit(&mut requests, None, now);
        let batch = requests.next_batch().unwrap();
        requests.recycle(batch);
        requests.written(id, now);
        requests.cancel(id, None, Error::cancelled(None));
        assert_eq!(requests.take_aborts(), [id]);
        assert!(
            requests.next_batch().is_none(),
            "no notification in this style"
        );
        let counters = requests.counters();
        assert_eq!((counters.requests_aborted, counters.cancels_sent), (1, 0));
    }

    #[test]
    fn a_timeout_cancels_with_its_reason_when_its_time_comes() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (id, rx) = submit(&mut requests, Some(Duration::from_millis(300)), now);
        let batch = requests.next_batch().unwrap();
        requests.batch_written(batch);
        let due = requests.next_deadline().unwrap();
        assert!(due >= now + Duration::from_millis(300));
        requests.expire(now + Duration::from_millis(299));
        assert!(rx.try_recv().is_err(), "not before its time");
        requests.expire(due);
        match *rx.try_recv().unwrap().unwrap_err() {
            Error::Timeout { after } => assert_eq!(after, Duration::from_millis(300)),
            other => panic!("{other:?}"),
        }
        let cancel = requests.next_batch().unwrap();
        assert_eq!(kinds(&cancel), [FrameKind::Cancel(id)]);
        assert!(String::from_utf8_lossy(cancel.bytes()).contains("timed out after 300 ms"));
    }

    /// A request held for a renewed session (answered `404`) keeps its timeout running, and
    /// the timeout takes it back where it waits: nothing goes on the wire. Sent again, its
    /// deadline is the first one, not a new one.
    #[test]
    fn a_request_held_for_a_new_session_keeps_its_timeout() {
        let now = Instant::now();
        let timeout = Some(Duration::from_millis(300));
        let mut requests = Requests::new(now);
        let (id, rx) = submit(&mut requests, timeout, now);
        let batch = requests.next_batch().unwrap();
        requests.recycle(batch);
        requests.held(id, Hold::ForSession);
        let due = requests.next_deadline().expect("still running");
        requests.expire(due);
        assert!(matches!(
            *rx.try_recv().unwrap().unwrap_err(),
            Error::Timeout { .. }
        ));
        let withdrawals = requests.take_withdrawals();
        assert_eq!(withdrawals.iter().map(|w| w.id).collect::<Vec<_>>(), [id]);
        assert!(requests.next_batch().is_none(), "no cancel on the wire");

        let (id, rx) = submit(&mut requests, timeout, now);
        let batch = requests.next_batch().unwrap();
        requests.recycle(batch);
        requests.held(id, Hold::ForSession);
        requests.written(id, now + Duration::from_millis(200));
        assert_eq!(requests.next_deadline(), Some(due), "the first deadline");
        requests.expire(due);
        assert!(
            rx.try_recv().unwrap().is_err(),
            "timed out on its first deadline"
        );
    }

    #[test]
    fn a_drained_close_still_writes_the_cancels_waiting_for_their_write() {
        let now = Instant::now();
        let mut requests = Requests::new(now);
        let (a, _ra) = submit(&mut requests, None, now);
        let batch = requests.next_batch().unwrap();
        requests.cancel(a, None, Error::cancelled(None));
        let (_b, rb) = submit(&mut requests, None, now);
        let closed = Error::Closed {
            reason: crate::error::CloseReason::ClosedByClient,
        };
        requests.close(closed, true);
        assert!(matches!(
            *rb.try_recv().unwrap().unwrap_err(),
            Error::Closed { .. }
        ));
        requests.batch_written(batch);
        let cancel = requests.next_batch().unwrap();
        assert_eq!(kinds(&cancel), [FrameKind::Cancel(a)], "b is never written");
        requests.batch_written(cancel);
        assert!(requests.is_idle());
        let (_c, rc) = submit(&mut requests, None, now);
        assert!(
            rc.try_recv().unwrap().is_err(),
            "a call after close fails at once"
        );
    }
}
