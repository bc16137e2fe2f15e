//! Model-based property test of the HTTP request states: random interleavings of messages sent,
//! answer headers heard, refusals for authorization and re-sends, POST ends, cancels (a
//! notification in 2025-11-25, an abort in 2026-07-28), withdrawals, `404`s (session expired)
//! and renewals, the GET stream's answer, time passing and close, for both eras and with the
//! real or small caps. The I/O is simulated from the [`Action`]s the machine produces, and the
//! promises are checked on them, after every step and at the end:
//!
//! - no cancel goes before its request was heard (or its POST ended), unless it waited
//!   [`CANCEL_WAIT`]; a request's own POST is closed as its cancel goes; a lost request's cancel
//!   never goes; a 2026-07-28 cancel of a running POST aborts it at once;
//! - every cancel owed goes out, once, and closing sends them all before it ends the session
//!   (unless it waited [`CLOSE_LIMIT`], or the session is gone);
//! - at most `lane` cancels run at once, and no new request goes while `backlog` cancels wait;
//! - nothing goes while the session is renewed or after it is gone; every request sent is
//!   posted, failed, withdrawn, or dropped by close;
//! - a request answered `404` (never processed) is either held for the new session and POSTed
//!   again, once, marked so, or failed; a request is POSTed twice only so.
//!
//! Cases per era: `HTTP_MODEL_CASES` (default 1,000; CI sets 10,000).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use bytes::Bytes;
use proptest::prelude::*;
use reqwest::header::HeaderValue;

use super::states::{Action, Caps, Handshake, HttpRequests, Outgoing, CANCEL_WAIT, CLOSE_LIMIT};
use crate::{
    error::{CloseReason, Error},
    protocol::jsonrpc::RequestId,
    transport::FrameKind,
};

#[derive(Debug, Clone)]
enum Op {
    /// The connection sends this many requests.
    Send(u8),
    /// The connection sends a notification (or an answer) of ours.
    Notify,
    /// A request's POST gets its answer's headers.
    Heard(usize),
    /// A request's POST is refused for authorization before the server read it.
    Refuse(usize),
    /// A refused request is sent again.
    LetGo(usize),
    /// A request's POST ends (its answer read, or it failed).
    End(usize),
    /// A request's POST, sent with the session id, is answered `404`.
    Expire(usize),
    /// A request's POST sent again after a `404` is answered `404` again.
    ExpireAgain(usize),
    /// A POST of the current session is answered with something else than `404`.
    Answered,
    /// The connection cancels written requests (2025-11-25: a notification; 2026-07-28: an
    /// abort).
    Cancel {
        pick: usize,
        count: u8,
    },
    /// The connection takes back a request reported held.
    Withdraw(usize),
    /// A cancel's POST ends.
    CancelEnded(usize),
    /// A notification's POST ends (`initialized` then opens the GET stream).
    MessageEnded(usize),
    /// The GET stream is answered.
    StreamAnswered,
    /// The renewal's handshake ends, well or not.
    RenewalDone(bool),
    /// A request whose stream ended early is picked up again.
    Resume(usize),
    Advance(u16),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u8..4).prop_map(Op::Send),
        1 => (10u8..40).prop_map(Op::Send),
        1 => Just(Op::Notify),
        4 => any::<usize>().prop_map(Op::Heard),
        1 => any::<usize>().prop_map(Op::Refuse),
        1 => any::<usize>().prop_map(Op::LetGo),
        3 => any::<usize>().prop_map(Op::End),
        1 => any::<usize>().prop_map(Op::Expire),
        1 => any::<usize>().prop_map(Op::ExpireAgain),
        1 => Just(Op::Answered),
        3 => (any::<usize>(), 1u8..3).prop_map(|(pick, count)| Op::Cancel { pick, count }),
        1 => (any::<usize>(), 10u8..40).prop_map(|(pick, count)| Op::Cancel { pick, count }),
        1 => any::<usize>().prop_map(Op::Withdraw),
        3 => any::<usize>().prop_map(Op::CancelEnded),
        1 => any::<usize>().prop_map(Op::MessageEnded),
        1 => Just(Op::StreamAnswered),
        1 => any::<bool>().prop_map(Op::RenewalDone),
        1 => any::<usize>().prop_map(Op::Resume),
        2 => (1u16..1500).prop_map(Op::Advance),
        1 => Just(Op::Close),
    ]
}

/// A request's POST as the simulated server sees it.
#[derive(Debug, Clone, Copy)]
struct Post {
    heard: bool,
    refused: bool,
    had_session: bool,
    generation: u64,
}

/// The simulated I/O, and the checks on what the machine asks of it.
struct Net {
    modern: bool,
    caps: Caps,
    now: Instant,
    /// The session id is known (2025-11-25, after the handshake's answer).
    session: bool,
    generation: u64,
    posting: BTreeMap<RequestId, Post>,
    /// Requests the server showed it read (answer headers, or a refusal), or whose POST
    /// ended.
    read: BTreeSet<RequestId>,
    /// Every request sent, in order.
    sent: Vec<RequestId>,
    /// Requests POSTed (their body went out): the connection may cancel them.
    written: BTreeSet<RequestId>,
    /// Reported held and not let go since.
    held: BTreeSet<RequestId>,
    ever_held: Vec<RequestId>,
    withdrawn: BTreeSet<RequestId>,
    failed: BTreeSet<RequestId>,
    /// Answered `404` and held for the new session: to be POSTed again.
    resending: BTreeSet<RequestId>,
    /// POSTed again after a `404`.
    resent: BTreeSet<RequestId>,
    lost: BTreeSet<RequestId>,
    /// Cancels the connection queued (2025-11-25), and when.
    cancels: BTreeMap<RequestId, Instant>,
    cancelled: BTreeSet<RequestId>,
    cancels_sent: BTreeSet<RequestId>,
    cancels_running: Vec<RequestId>,
    /// Our notifications' POSTs running: whether it opens the GET stream, and its session.
    messages: Vec<(bool, u64)>,
    event_stream: Option<u64>,
    /// `settle` answered the GET stream already.
    stream_answered: bool,
    renewing: bool,
    session_gone: bool,
    closing: Option<Instant>,
    ended: bool,
}

impl Net {
    fn new(modern: bool, caps: Caps) -> Self {
        Self {
            modern,
            caps,
            now: Instant::now(),
            session: false,
            generation: 0,
            posting: BTreeMap::new(),
            read: BTreeSet::new(),
            sent: Vec::new(),
            written: BTreeSet::new(),
            held: BTreeSet::new(),
            ever_held: Vec::new(),
            withdrawn: BTreeSet::new(),
            failed: BTreeSet::new(),
            resending: BTreeSet::new(),
            resent: BTreeSet::new(),
            lost: BTreeSet::new(),
            cancels: BTreeMap::new(),
            cancelled: BTreeSet::new(),
            cancels_sent: BTreeSet::new(),
            cancels_running: Vec::new(),
            messages: Vec::new(),
            event_stream: None,
            stream_answered: false,
            renewing: false,
            session_gone: false,
            closing: None,
            ended: false,
        }
    }

    /// Cancels queued that must still go out.
    fn owed(&self) -> Vec<RequestId> {
        self.cancels
            .keys()
            .filter(|id| !self.cancels_sent.contains(id) && !self.lost.contains(id))
            .copied()
            .collect()
    }

    /// Carries out (and checks) every action the machine asks for; returns the requests
    /// reported held or failed.
    fn drain(&mut self, machine: &mut HttpRequests) -> Vec<RequestId> {
        let mut seen = Vec::new();
        while let Some(action) = machine.next_action() {
            assert!(!self.ended, "{action:?} after the session ended");
            if let Action::Held(id) | Action::HeldForSession(id) | Action::Fail(id, _) = &action {
                seen.push(*id);
            }
            self.apply(action);
            assert!(
                self.cancels_running.len() <= self.caps.lane,
                "more than {} cancels at once",
                self.caps.lane
            );
        }
        seen
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Post(outgoing) => self.posted(outgoing),
            Action::Abort(id) => {
                assert!(
                    self.posting.remove(&id).is_some(),
                    "{id} aborted, not running"
                );
                self.held.remove(&id);
            }
            Action::HeldForSession(id) => {
                assert!(
                    !self.posting.contains_key(&id),
                    "{id} held for the new session while its POST runs"
                );
                assert!(
                    self.resending.insert(id),
                    "{id} held for a new session twice"
                );
                self.held.insert(id);
                self.ever_held.push(id);
            }
            Action::Held(id) => {
                let running = self.posting.get(&id);
                assert!(
                    running.is_none_or(|post| post.refused),
                    "{id} reported held while the server may have it"
                );
                self.held.insert(id);
                self.ever_held.push(id);
            }
            Action::Fail(id, error) => {
                assert!(!self.withdrawn.contains(&id), "{id} withdrawn, then failed");
                if matches!(error, Error::SessionLost) {
                    assert!(self.written.contains(&id), "{id} lost before it was sent");
                    self.lost.insert(id);
                }
                self.failed.insert(id);
            }
            Action::Closed(reason) => {
                assert!(matches!(reason, CloseReason::SessionExpired));
                self.session_gone = true;
                self.resending.clear();
                // What waits at the gate is dropped with the session.
                let posting = &self.posting;
                self.held.retain(|id| posting.contains_key(id));
            }
            Action::OpenEventStream => {
                assert!(!self.modern);
                self.event_stream = Some(self.generation);
            }
            Action::StopEventStream => self.event_stream = None,
            Action::Renew { .. } => {
                assert!(!self.renewing && !self.session_gone);
                // The cancels not sent yet were for the old session: they are dropped.
                let owed = self.owed();
                self.lost.extend(owed);
                self.renewing = true;
                self.generation += 1;
            }
            Action::EndSession(session) => self.session_ends(session),
        }
    }

    fn posted(&mut self, outgoing: Outgoing) {
        assert!(
            !self.renewing,
            "{outgoing:?} POSTed while the session is renewed"
        );
        assert!(
            !self.session_gone,
            "{outgoing:?} POSTed after the session is gone"
        );
        match outgoing.kind {
            FrameKind::Request(id) => {
                let again = !self.written.insert(id);
                assert_eq!(
                    outgoing.sent_again, again,
                    "{id} marked as sent again or not"
                );
                if again {
                    assert!(self.resending.remove(&id), "{id} POSTed twice");
                    assert!(self.resent.insert(id), "{id} sent again twice");
                    // The new POST must be heard again before a cancel may follow it.
                    self.read.remove(&id);
                }
                self.held.remove(&id);
                let post = Post {
                    heard: false,
                    refused: false,
                    had_session: self.session && !self.modern,
                    generation: self.generation,
                };
                self.posting.insert(id, post);
            }
            FrameKind::Cancel(id) => self.cancel_posted(id),
            FrameKind::Notification | FrameKind::Response => self
                .messages
                .push((outgoing.opens_event_stream, self.generation)),
        }
    }

    fn cancel_posted(&mut self, id: RequestId) {
        assert!(!self.modern, "a 2026-07-28 cancel is an abort");
        let queued = *self
            .cancels
            .get(&id)
            .expect("a cancel the connection queued");
        assert!(
            self.cancels_sent.insert(id),
            "the cancel of {id} sent twice"
        );
        assert!(
            !self.lost.contains(&id),
            "the cancel of {id}, lost, was sent"
        );
        // Checked before the POST is closed: `Abort` came just before.
        assert!(
            !self.posting.contains_key(&id),
            "the cancel of {id} went while its own POST stays open"
        );
        assert!(
            self.read.contains(&id) || self.now >= queued + CANCEL_WAIT,
            "the cancel of {id} went before the server had its request"
        );
        self.cancels_running.push(id);
    }

    fn session_ends(&mut self, session: Option<HeaderValue>) {
        let Some(until) = self.closing else {
            panic!("the session ended without a close");
        };
        assert!(
            self.posting.is_empty(),
            "POSTs left open: {:?}",
            self.posting
        );
        assert_eq!(
            session.is_some(),
            self.session && !self.modern,
            "DELETE iff there is a session"
        );
        let may_drop = self.now >= until || self.session_gone || self.renewing;
        let owed = self.owed();
        assert!(
            may_drop || owed.is_empty(),
            "the session ended with cancels owed: {owed:?}"
        );
        self.ended = true;
    }
}

/// The `n`th (modulo) of `ids`.
fn pick(ids: impl Iterator<Item = RequestId> + Clone, n: usize) -> Option<RequestId> {
    let count = ids.clone().count();
    (count > 0).then(|| ids.clone().nth(n % count)).flatten()
}

fn request(id: RequestId) -> Outgoing {
    Outgoing::new(Bytes::new(), FrameKind::Request(id), Vec::new())
}

fn session_id(text: &'static str) -> HeaderValue {
    HeaderValue::from_static(text)
}

/// The handshake: 2025-11-25, `initialize` (its answer gives the session) and
/// `notifications/initialized`; 2026-07-28, the version settled.
fn handshake(machine: &mut HttpRequests, net: &mut Net) {
    if net.modern {
        machine.use_protocol_version(Some(HeaderValue::from_static("2026-07-28")), true);
        net.drain(machine);
        return;
    }
    let initialize = RequestId::next();
    net.sent.push(initialize);
    machine.send(request(initialize), Some(Handshake::Initialize), net.now);
    net.drain(machine);
    machine.heard(initialize);
    machine.session_given(&session_id("s1"));
    machine.answered(0);
    machine.ended(initialize);
    net.posting.remove(&initialize);
    net.read.insert(initialize);
    net.session = true;
    let initialized = Outgoing::new(Bytes::new(), FrameKind::Notification, Vec::new());
    machine.send(initialized, Some(Handshake::Initialized), net.now);
    machine.use_protocol_version(Some(HeaderValue::from_static("2025-11-25")), false);
    net.drain(machine);
}

/// The connection sends `count` requests; none goes while `backlog` cancels wait.
fn send(machine: &mut HttpRequests, net: &mut Net, count: u8) {
    for _ in 0..count {
        let full = net.owed().len() >= net.caps.backlog;
        let id = RequestId::next();
        net.sent.push(id);
        machine.send(request(id), None, net.now);
        let before = net.written.len();
        net.drain(machine);
        assert!(
            !(full && net.written.len() > before),
            "a request went while {} cancels wait",
            net.caps.backlog
        );
    }
}

/// The connection cancels `id`, which it saw written.
fn cancel(machine: &mut HttpRequests, net: &mut Net, id: RequestId) {
    net.cancelled.insert(id);
    if net.modern {
        let running = net.posting.contains_key(&id);
        machine.abort(id);
        net.drain(machine);
        assert!(
            !(running && net.posting.contains_key(&id)),
            "the 2026-07-28 cancel of {id} left its POST running"
        );
    } else {
        net.cancels.insert(id, net.now);
        let cancel = Outgoing::new(Bytes::new(), FrameKind::Cancel(id), Vec::new());
        machine.send(cancel, None, net.now);
        net.drain(machine);
    }
}

fn step(machine: &mut HttpRequests, net: &mut Net, op: Op) {
    let connection_acts = matches!(op, Op::Send(_) | Op::Notify | Op::Cancel { .. });
    if connection_acts && net.closing.is_some() {
        return; // the connection gave the transport up: it sends nothing more
    }
    if request_event(machine, net, &op) {
        net.drain(machine);
        return;
    }
    match op {
        Op::Send(count) => send(machine, net, count),
        Op::Notify => {
            let message = Outgoing::new(Bytes::new(), FrameKind::Notification, Vec::new());
            machine.send(message, None, net.now);
        }
        Op::Answered => machine.answered(net.generation),
        Op::Cancel { pick: n, count } => {
            for _ in 0..count {
                let candidates = net.written.iter().copied().filter(|id| {
                    !net.cancelled.contains(id)
                        && !net.held.contains(id)
                        && !net.withdrawn.contains(id)
                        && !net.lost.contains(id)
                        && !net.failed.contains(id)
                });
                if let Some(id) = pick(candidates, n) {
                    cancel(machine, net, id);
                }
            }
        }
        Op::Withdraw(n) => {
            if let Some(id) = pick(net.ever_held.iter().copied(), n) {
                let held = net.held.remove(&id);
                let taken_back = machine.withdraw(id);
                assert_eq!(taken_back, held, "{id} withdrawn");
                if taken_back {
                    net.withdrawn.insert(id);
                }
            }
        }
        Op::CancelEnded(n) => {
            if !net.cancels_running.is_empty() {
                let at = n % net.cancels_running.len();
                net.cancels_running.remove(at);
                machine.cancel_ended();
            }
        }
        Op::MessageEnded(n) => {
            if !net.messages.is_empty() {
                let (opens, generation) = net.messages.remove(n % net.messages.len());
                machine.message_ended(opens, generation, net.now);
            }
        }
        Op::StreamAnswered => {
            if let Some(generation) = net.event_stream {
                machine.event_stream_answered(generation, net.now);
            }
        }
        Op::RenewalDone(well) => {
            if net.renewing {
                net.renewing = false;
                if well {
                    machine.renewed(session_id("s2"), net.now);
                } else {
                    machine.renewal_failed();
                }
            }
        }
        Op::Advance(ms) => {
            net.now += Duration::from_millis(ms.into());
            machine.tick(net.now);
        }
        Op::Close => {
            net.closing.get_or_insert(net.now + CLOSE_LIMIT);
            // What waits at the gate is dropped: nothing to take back.
            let posting = &net.posting;
            net.held.retain(|id| posting.contains_key(id));
            machine.close(net.now);
        }
        // Handled by `request_event`.
        Op::Heard(_)
        | Op::Refuse(_)
        | Op::LetGo(_)
        | Op::End(_)
        | Op::Expire(_)
        | Op::ExpireAgain(_)
        | Op::Resume(_) => {}
    }
    net.drain(machine);
}

/// The simulated server and I/O: a request's POST heard, refused, let go, ended, answered
/// `404`, or its stream resumed. `false`: not one of those.
fn request_event(machine: &mut HttpRequests, net: &mut Net, op: &Op) -> bool {
    let running = |net: &Net, keep: fn(&Post) -> bool| {
        let posts: Vec<RequestId> = net
            .posting
            .iter()
            .filter(|(_, post)| keep(post))
            .map(|(id, _)| *id)
            .collect();
        posts.into_iter()
    };
    match *op {
        Op::Heard(n) => {
            if let Some(id) = pick(running(net, |p| !p.heard && !p.refused), n) {
                machine.heard(id);
                net.read.insert(id);
                if let Some(post) = net.posting.get_mut(&id) {
                    post.heard = true;
                }
            }
        }
        Op::Refuse(n) => {
            if let Some(id) = pick(running(net, |p| !p.heard && !p.refused), n) {
                if let Some(post) = net.posting.get_mut(&id) {
                    post.refused = true;
                }
                // The HTTP exchange is over (a cancel cannot overtake it), nothing is at the
                // server.
                net.read.insert(id);
                machine.refused(id);
                assert!(net.drain(machine).contains(&id), "{id} refused, not held");
            }
        }
        Op::LetGo(n) => {
            if let Some(id) = pick(running(net, |p| p.refused), n) {
                machine.let_go(id);
                net.held.remove(&id);
                net.read.remove(&id);
                if let Some(post) = net.posting.get_mut(&id) {
                    post.refused = false;
                }
            }
        }
        Op::End(n) => {
            if let Some(id) = pick(running(net, |_| true), n) {
                net.posting.remove(&id);
                net.read.insert(id);
                net.held.remove(&id);
                machine.ended(id);
            }
        }
        Op::Expire(n) | Op::ExpireAgain(n) => {
            let again = matches!(op, Op::ExpireAgain(_));
            let expiring = running(net, |p| p.had_session && !p.refused)
                .filter(|id| !again || net.resent.contains(id));
            if let Some(id) = pick(expiring, n) {
                // Its POST ends with the `404`.
                let post = net.posting.remove(&id).expect("running");
                net.read.insert(id);
                // Reported with the message it POSTed (marked if it was sent again).
                let posted = Outgoing {
                    sent_again: net.resent.contains(&id),
                    ..request(id)
                };
                machine.session_expired(Some(posted), post.generation);
                let actions = net.drain(machine);
                assert!(
                    actions.contains(&id),
                    "{id}, answered 404, neither held nor failed"
                );
                assert!(
                    !(net.resent.contains(&id) && net.resending.contains(&id)),
                    "{id} held for a new session a second time"
                );
                // The old POST's end is not reported once the request went again (its task
                // was replaced).
                if !net.posting.contains_key(&id) {
                    machine.ended(id);
                }
            }
        }
        Op::Resume(n) => {
            // A request answered `404` has no stream to pick up: it waits to go again.
            let candidates = net.written.iter().copied().filter(|id| {
                !net.posting.contains_key(id)
                    && !net.resending.contains(id)
                    && !net.lost.contains(id)
                    && !net.failed.contains(id)
                    && !net.withdrawn.contains(id)
            });
            if let Some(id) = pick(candidates, n) {
                if machine.resume(id) {
                    let post = Post {
                        heard: true,
                        refused: false,
                        had_session: net.session && !net.modern,
                        generation: net.generation,
                    };
                    net.posting.insert(id, post);
                    net.read.insert(id);
                }
            }
        }
        _ => return false,
    }
    true
}

/// Lets everything run its course without the connection doing anything new (cancels and
/// messages answered, the GET stream and a renewal answered, time passing); a step at most.
fn settle(machine: &mut HttpRequests, net: &mut Net) {
    for _ in 0..10_000 {
        if net.ended {
            return;
        }
        let op = if !net.cancels_running.is_empty() {
            Op::CancelEnded(0)
        } else if !net.messages.is_empty() {
            Op::MessageEnded(0)
        } else if net.renewing {
            Op::RenewalDone(true)
        } else if net.event_stream.is_some() && !net.stream_answered {
            net.stream_answered = true;
            Op::StreamAnswered
        } else if machine.next_deadline().is_some() {
            Op::Advance(1000)
        } else {
            return;
        };
        step(machine, net, op);
    }
    panic!("the machine never settles");
}

fn run(ops: Vec<Op>, modern: bool, small: bool, event_stream: bool, renews: bool) {
    let caps = if small {
        Caps {
            lane: 2,
            backlog: 4,
        }
    } else {
        Caps::default()
    };
    let mut machine = HttpRequests::new(event_stream, renews, caps);
    let mut net = Net::new(modern, caps);
    handshake(&mut machine, &mut net);
    for op in ops {
        if matches!(op, Op::StreamAnswered | Op::Advance(_)) {
            net.stream_answered = false;
        }
        step(&mut machine, &mut net, op);
    }
    if net.closing.is_none() {
        // Left alone, every request sent goes out, is failed or was withdrawn.
        settle(&mut machine, &mut net);
        if !net.session_gone {
            for id in &net.sent {
                assert!(
                    net.written.contains(id)
                        || net.failed.contains(id)
                        || net.withdrawn.contains(id),
                    "{id} was sent and never POSTed"
                );
            }
        }
        step(&mut machine, &mut net, Op::Close);
    }
    settle(&mut machine, &mut net);
    assert!(net.ended, "closing never ended the session");
    // Every cancel queued went out (`session_ends` checked those owed then, unless closing
    // waited too long or the session was gone).
}

/// Cases per era: `HTTP_MODEL_CASES`, else 1,000 (CI runs 10,000).
fn cases() -> u32 {
    std::env::var("HTTP_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// 2025-11-25: a session, cancels as `notifications/cancelled` POSTs through the lane,
    /// the gate, renewal.
    #[test]
    fn session_era_interleavings_keep_every_promise(
        ops in prop::collection::vec(op(), 1..80),
        small in any::<bool>(),
        event_stream in any::<bool>(),
        renews in prop::bool::weighted(0.7),
    ) {
        run(ops, false, small, event_stream, renews);
    }

    /// 2026-07-28: stateless, a cancel aborts the request's POST.
    #[test]
    fn stateless_era_interleavings_keep_every_promise(
        ops in prop::collection::vec(op(), 1..80),
        small in any::<bool>(),
    ) {
        run(ops, true, small, false, false);
    }
}

/// The model's checks on one path random cases seldom take in order: a request answered `404`,
/// sent again on the renewed session, which answers, then `404` again: it is lost, not held a
/// second time.
#[test]
fn a_request_answered_404_on_its_second_session_is_not_held_again() {
    let ops = vec![
        Op::Send(1),
        Op::Expire(0),
        Op::RenewalDone(true),
        Op::Answered,
        Op::ExpireAgain(0),
    ];
    run(ops, false, false, false, true);
}
