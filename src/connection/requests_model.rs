//! Model-based property test of the request state machine: random interleavings of submit,
//! cancel, dropped callers, batches taken, write-complete events, responses (timely, late and
//! for unknown ids), progress, time passing and close, over both kinds of transport (a stream
//! that cancels with `notifications/cancelled`, a message transport that aborts). After every
//! step and at the end, the invariants the crate promises are checked against what went on the
//! "wire" (the batches the machine produced).

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use proptest::prelude::*;
use serde_json::json;

use super::{
    in_flight::Outcome,
    requests::{Hold, Requests},
    {Request, RequestOptions},
};
use crate::{
    error::Error,
    protocol::jsonrpc::RequestId,
    transport::{CancelStyle, FrameKind, Outbound},
};

#[derive(Debug, Clone)]
enum Op {
    Submit {
        timeout_ms: Option<u16>,
        wire_cancellable: bool,
        progress: bool,
    },
    Cancel {
        caller: usize,
        reason: bool,
    },
    DropCaller(usize),
    /// A task-creating call given up: withdrawn (nothing on the wire; if the server read it,
    /// its answer still comes to the caller).
    Withdraw(usize),
    TakeBatch,
    /// Stream: the oldest batch being written completes. Message: one request's POST went out.
    WriteComplete(usize),
    /// Message: one request taken or written is refused before the server read it (HTTP 401)
    /// and held, to be written again.
    Hold(usize),
    /// Message: the transport lets one held request go (sends it again); its write-complete
    /// event comes later, and a cancel may come first.
    Release(usize),
    Respond(usize),
    RespondUnknown,
    Progress(usize),
    Advance(u16),
    Close {
        drain: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::option::of(1u16..200), prop::bool::weighted(0.8), any::<bool>()).prop_map(
            |(timeout_ms, wire_cancellable, progress)| Op::Submit {
                timeout_ms,
                wire_cancellable,
                progress,
            }
        ),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(caller, reason)| Op::Cancel { caller, reason }),
        1 => any::<usize>().prop_map(Op::DropCaller),
        2 => any::<usize>().prop_map(Op::Withdraw),
        3 => Just(Op::TakeBatch),
        3 => any::<usize>().prop_map(Op::WriteComplete),
        1 => any::<usize>().prop_map(Op::Hold),
        2 => any::<usize>().prop_map(Op::Release),
        3 => any::<usize>().prop_map(Op::Respond),
        1 => Just(Op::RespondUnknown),
        1 => any::<usize>().prop_map(Op::Progress),
        2 => (1u16..120).prop_map(Op::Advance),
        1 => any::<bool>().prop_map(|drain| Op::Close { drain }),
    ]
}

struct Caller {
    id: RequestId,
    rx: Option<oneshot::Receiver<Outcome>>,
    outcome: Option<Result<String, Error>>,
    wire_cancellable: bool,
    timeout: Option<Duration>,
    /// Since when its timeout runs; `None` while the transport holds it (waiting for sign-in),
    /// when it is paused.
    clock_from: Option<Instant>,
}

impl Caller {
    /// A timeout ends a request only once it ran in full, never while the request was held.
    fn check_timeout(&self, now: Instant) {
        let Some(timeout) = self.timeout else {
            return;
        };
        if matches!(self.outcome, Some(Err(Error::Timeout { .. }))) {
            let from = self.clock_from.expect("timed out while held for sign-in");
            assert!(now >= from + timeout, "{} timed out early", self.id);
        }
        // Overdue by a tick (the deadlines' grain), a caller still waiting was forgotten.
        if let (None, Some(_), Some(from)) = (&self.outcome, &self.rx, self.clock_from) {
            assert!(
                now < from + timeout + Duration::from_millis(10),
                "{} outlived its timeout",
                self.id
            );
        }
    }
}

/// The wire as the model sees it, and the checks on it.
struct Wire {
    style: CancelStyle,
    /// A message transport (each request written on its own; may hold requests).
    message: bool,
    /// Requests held (not at the server) until written again.
    held: HashSet<RequestId>,
    /// Requests whose frame was in some batch.
    emitted: HashSet<RequestId>,
    /// Requests reported written (their batch completed, or their own write event).
    written: HashSet<RequestId>,
    /// Stream transport: batches being written, oldest first.
    writing: Vec<Outbound>,
    /// Message transport: requests taken but not yet reported written.
    unwritten: Vec<RequestId>,
    cancelled_on_wire: HashSet<RequestId>,
    known: HashSet<RequestId>,
    /// Requests the server answered.
    responded: HashSet<RequestId>,
    /// Requests withdrawn, and requests cancelled.
    withdrawn: HashSet<RequestId>,
    cancelled: HashSet<RequestId>,
}

impl Wire {
    fn check_batch(&mut self, batch: &Outbound) {
        for frame in batch.frames() {
            match frame.kind {
                FrameKind::Request(id) => {
                    assert!(self.known.contains(&id), "a frame names an unknown id");
                    assert!(self.emitted.insert(id), "{id} written twice");
                    assert!(frame.bytes.ends_with(b"\n"));
                }
                FrameKind::Cancel(id) => self.check_cancel(id),
                FrameKind::Notification | FrameKind::Response => {}
            }
        }
    }

    fn check_cancel(&mut self, id: RequestId) {
        assert!(self.known.contains(&id), "a cancel names an unknown id");
        assert!(
            self.emitted.contains(&id),
            "{id} was never written but is cancelled on the wire"
        );
        assert!(
            self.written.contains(&id),
            "the cancel of {id} precedes its request's write-complete event"
        );
        assert!(self.cancelled_on_wire.insert(id), "{id} cancelled twice");
    }
}

fn run(ops: Vec<Op>, style: CancelStyle, message: bool) {
    let epoch = Instant::now();
    let mut now = epoch;
    let mut requests = Requests::new(epoch);
    requests.set_cancel_style(style);
    let mut callers: Vec<Caller> = Vec::new();
    let mut wire = Wire {
        style,
        message,
        held: HashSet::new(),
        emitted: HashSet::new(),
        written: HashSet::new(),
        writing: Vec::new(),
        unwritten: Vec::new(),
        cancelled_on_wire: HashSet::new(),
        known: HashSet::new(),
        responded: HashSet::new(),
        withdrawn: HashSet::new(),
        cancelled: HashSet::new(),
    };
    let mut closed = false;
    let progress_seen = std::sync::Arc::new(std::sync::Mutex::new(HashMap::<u64, u32>::new()));

    for op in ops {
        match op {
            Op::Submit {
                timeout_ms,
                wire_cancellable,
                progress,
            } => {
                let request = Request::new("tools/call", Some(json!({"name": "t"})));
                let id = request.id();
                let seen = progress_seen.clone();
                let options = RequestOptions {
                    cancel_on_wire: wire_cancellable,
                    progress: progress.then(|| {
                        Box::new(move |_| {
                            *seen.lock().unwrap().entry(id.as_u64()).or_default() += 1;
                        }) as _
                    }),
                    timeout: timeout_ms.map(|ms| Duration::from_millis(ms.into())),
                };
                let (reply, rx) = oneshot::channel();
                wire.known.insert(id);
                requests.accept(Box::new(request.with_options(options)), reply, now);
                callers.push(Caller {
                    id,
                    rx: Some(rx),
                    outcome: None,
                    wire_cancellable,
                    timeout: timeout_ms.map(|ms| Duration::from_millis(ms.into())),
                    clock_from: Some(now),
                });
                if closed {
                    let caller = callers.last_mut().unwrap();
                    poll(caller);
                    assert!(caller.outcome.is_some(), "a call after close fails at once");
                }
            }
            Op::Cancel { caller, reason } => {
                let Some(caller) = pick(&mut callers, caller) else {
                    continue;
                };
                let reason = reason.then(|| "stop".to_owned());
                wire.cancelled.insert(caller.id);
                let done_before = caller.outcome.is_some() || caller.rx.is_none();
                requests.cancel(caller.id, reason.clone(), Error::cancelled(reason));
                poll(caller);
                if !done_before && caller.rx.is_some() {
                    // Cancelling wakes the caller at once, whatever the request's phase.
                    assert!(
                        matches!(caller.outcome, Some(Err(Error::Cancelled { .. }))),
                        "a cancelled caller is answered at once"
                    );
                }
            }
            Op::Withdraw(caller) => {
                if let Some(caller) = pick(&mut callers, caller) {
                    wire.withdrawn.insert(caller.id);
                    requests.withdraw(caller.id, Error::cancelled(None));
                    poll(caller);
                }
            }
            Op::DropCaller(caller) => {
                // The caller went away; its cancel (if any) comes as a later `Cancel` op, so a
                // batch may meet the request first and must skip it.
                if let Some(caller) = pick(&mut callers, caller) {
                    if caller.outcome.is_none() {
                        caller.rx = None;
                    }
                }
            }
            Op::TakeBatch => {
                let idle = wire.message || wire.writing.is_empty();
                if idle {
                    if let Some(batch) = requests.next_batch() {
                        wire.check_batch(&batch);
                        if wire.message {
                            wire.unwritten.extend(batch.requests());
                            requests.recycle(batch);
                        } else {
                            wire.writing.push(batch);
                        }
                    }
                }
            }
            Op::WriteComplete(pick_one) => {
                if !wire.message {
                    if !wire.writing.is_empty() {
                        let batch = wire.writing.remove(0);
                        wire.written.extend(batch.requests());
                        requests.batch_written(batch);
                    }
                } else if !wire.unwritten.is_empty() {
                    let id = wire.unwritten.remove(pick_one % wire.unwritten.len());
                    wire.held.remove(&id);
                    wire.written.insert(id);
                    requests.written(id, now);
                    // Sent again after sign-in: its timeout starts again in full.
                    if let Some(caller) = callers.iter_mut().find(|c| c.id == id) {
                        caller.clock_from.get_or_insert(now);
                    }
                }
            }
            Op::Hold(pick_one) => {
                // Only a request the transport has (taken, written, not cancelled on the wire).
                let candidates: Vec<RequestId> = wire
                    .emitted
                    .iter()
                    .filter(|id| !wire.cancelled_on_wire.contains(id) && !wire.held.contains(id))
                    .copied()
                    .collect();
                if wire.message && !candidates.is_empty() {
                    let mut candidates = candidates;
                    candidates.sort();
                    let id = candidates[pick_one % candidates.len()];
                    wire.written.remove(&id);
                    wire.held.insert(id);
                    if !wire.unwritten.contains(&id) {
                        wire.unwritten.push(id);
                    }
                    requests.held(id, Hold::ForAuthorization);
                    // Its timeout pauses, unless it has ended already.
                    if let Some(caller) = callers.iter_mut().find(|c| c.id == id) {
                        poll(caller);
                        if caller.outcome.is_none() {
                            caller.clock_from = None;
                        }
                    }
                }
            }
            Op::Release(pick_one) => {
                let mut held: Vec<RequestId> = wire.held.iter().copied().collect();
                if !held.is_empty() {
                    held.sort();
                    wire.held.remove(&held[pick_one % held.len()]);
                }
            }
            Op::Respond(caller) => {
                let Some(caller) = pick(&mut callers, caller) else {
                    continue;
                };
                // The server answers only what it has read.
                if wire.emitted.contains(&caller.id) {
                    wire.responded.insert(caller.id);
                    let result = serde_json::value::to_raw_value(&json!(caller.id.as_u64()))
                        .expect("a number serializes");
                    requests.answered(Some(caller.id), Ok(result));
                }
            }
            Op::RespondUnknown => {
                let result = serde_json::value::to_raw_value(&json!(0)).expect("serializes");
                assert!(!requests.answered(None, Ok(result.clone())));
                assert!(!requests.answered(Some(RequestId::next()), Ok(result)));
            }
            Op::Progress(caller) => {
                if let Some(caller) = pick(&mut callers, caller) {
                    let progress = serde_json::from_value(json!({"progress": 1})).expect("valid");
                    requests.progress(Some(caller.id), progress);
                }
            }
            Op::Advance(ms) => {
                now += Duration::from_millis(ms.into());
                requests.expire(now);
            }
            Op::Close { drain } => {
                let closed_error = Error::Closed {
                    reason: crate::error::CloseReason::ClosedByClient,
                };
                requests.close(closed_error, drain);
                closed = true;
            }
        }
        for caller in callers.iter_mut() {
            poll(caller);
            caller.check_timeout(now);
        }
        for id in requests.take_aborts() {
            abort(&mut wire, id);
        }
        withdraw(&mut wire, &mut requests);
        // A request answered with a result got its own.
        for caller in &callers {
            if let Some(Ok(text)) = &caller.outcome {
                assert_eq!(
                    text,
                    &caller.id.as_u64().to_string(),
                    "a response went to another caller"
                );
            }
        }
    }

    // The end: close, let the wire finish, and check nothing is left.
    let drain = !closed;
    requests.close(
        Error::Closed {
            reason: crate::error::CloseReason::ClosedByClient,
        },
        drain,
    );
    withdraw(&mut wire, &mut requests);
    for batch in std::mem::take(&mut wire.writing) {
        wire.written.extend(batch.requests());
        requests.batch_written(batch);
    }
    for id in std::mem::take(&mut wire.unwritten) {
        if wire.held.remove(&id) {
            continue; // a held request the transport drops with the connection
        }
        wire.written.insert(id);
        requests.written(id, now);
    }
    while let Some(batch) = requests.next_batch() {
        wire.check_batch(&batch);
        wire.written.extend(batch.requests());
        requests.batch_written(batch);
    }
    for id in requests.take_aborts() {
        abort(&mut wire, id);
    }
    withdraw(&mut wire, &mut requests);
    requests.discard_wire();
    assert!(requests.is_empty(), "something was left in a table");
    for caller in callers.iter_mut() {
        poll(caller);
        if caller.rx.is_some() {
            assert!(
                caller.outcome.is_some(),
                "caller {} got no outcome",
                caller.id
            );
        }
        if !caller.wire_cancellable {
            assert!(!wire.cancelled_on_wire.contains(&caller.id));
        }
        // A withdrawn request (never cancelled) the server read is not answered with an error
        // by the withdrawal: its answer (a task's id) must reach the caller.
        if wire.withdrawn.contains(&caller.id)
            && !wire.cancelled.contains(&caller.id)
            && wire.written.contains(&caller.id)
        {
            assert!(
                !matches!(caller.outcome, Some(Err(Error::Cancelled { .. }))),
                "{} was read by the server, yet withdrawn with an error",
                caller.id
            );
        }
        // Nothing left running orphaned: a cancelled request the server has read and not
        // answered got its cancel (unless the connection was closed without draining).
        let gave_up = matches!(
            caller.outcome,
            Some(Err(Error::Cancelled { .. } | Error::Timeout { .. }))
        );
        if drain
            && gave_up
            && caller.wire_cancellable
            && wire.written.contains(&caller.id)
            && !wire.responded.contains(&caller.id)
        {
            assert!(
                wire.cancelled_on_wire.contains(&caller.id),
                "{} was read by the server, cancelled, and never cancelled on the wire",
                caller.id
            );
        }
    }
}

/// The withdrawn held requests, taken back if the transport still holds them; one it let go
/// is being written (and, if cancelled, is cancelled after its write-complete event).
fn withdraw(wire: &mut Wire, requests: &mut Requests) {
    for withdrawal in requests.take_withdrawals() {
        let id = withdrawal.id;
        let taken_back = if wire.held.remove(&id) {
            wire.unwritten.retain(|u| *u != id);
            true
        } else {
            assert!(
                wire.unwritten.contains(&id),
                "a withdrawn request the transport no longer holds is being written"
            );
            false
        };
        requests.withdrawn(withdrawal, taken_back);
    }
}

/// An abort: of a held request (nothing at the server, nothing written), or the cancel of a
/// written one on an abort-style transport.
fn abort(wire: &mut Wire, id: RequestId) {
    if wire.held.remove(&id) {
        wire.unwritten.retain(|u| *u != id);
        return;
    }
    assert_eq!(
        wire.style,
        CancelStyle::Abort,
        "only held requests are aborted here"
    );
    wire.check_cancel(id);
}

fn pick(callers: &mut [Caller], n: usize) -> Option<&mut Caller> {
    if callers.is_empty() {
        return None;
    }
    let len = callers.len();
    callers.get_mut(n % len)
}

fn poll(caller: &mut Caller) {
    if caller.outcome.is_some() {
        return;
    }
    if let Some(rx) = &caller.rx {
        if let Ok(outcome) = rx.try_recv() {
            caller.outcome = Some(outcome.map(|raw| raw.get().to_owned()).map_err(|e| *e));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
    ))]

    #[test]
    fn stream_transport_interleavings_keep_every_promise(ops in prop::collection::vec(op(), 1..80)) {
        run(ops, CancelStyle::Notification, false);
    }

    /// Streamable HTTP, 2026-07-28: each POST on its own, cancel = abort, requests held for
    /// authorization.
    #[test]
    fn aborting_message_transport_interleavings_keep_every_promise(ops in prop::collection::vec(op(), 1..80)) {
        run(ops, CancelStyle::Abort, true);
    }

    /// Streamable HTTP, 2025-11-25: each POST on its own, cancel = a notification, requests held
    /// for authorization.
    #[test]
    fn notifying_message_transport_interleavings_keep_every_promise(ops in prop::collection::vec(op(), 1..80)) {
        run(ops, CancelStyle::Notification, true);
    }
}
