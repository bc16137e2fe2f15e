//! The request states of one Streamable HTTP connection, as a plain state machine: no I/O, time
//! passed in, one method per event. The tasks around it (`driver.rs`) only do I/O: they report
//! what happened (a POST's answer headers came, it was refused, it ended, a cancel's POST ended,
//! time passed...) and carry out the [`Action`]s it asks for, taken with
//! [`HttpRequests::next_action`].
//!
//! What it keeps:
//!
//! - each request's POST (or resumption) while it runs, and its [`Phase`];
//! - the **gate**: while the GET stream opens after the handshake (at most [`GATE_LIMIT`]), or an
//!   expired session is renewed, every message waits there, in order;
//! - the **cancel lane** (2025-11-25): a `notifications/cancelled` waits until the server shows it
//!   read its request (the answer's headers, or the POST's end; at most [`CANCEL_WAIT`]), then
//!   takes one of [`Caps::lane`] places; the request's own POST is aborted as its cancel goes.
//!   While [`Caps::backlog`] cancels wait, new requests wait behind them, until half went out;
//! - the **session** and its **renewal** (on by default): at the first `404` of a session, the
//!   kept handshake runs again while later messages wait at the gate. A request answered `404`
//!   was never processed: it waits at the gate too, first, and goes out again once on the new
//!   session (unless its caller cancelled it meanwhile). Every other request at the old session
//!   fails with [`Error::SessionLost`] (a cancel of one is never sent): the server may have
//!   acted on it;
//! - **closing**: every cancel still owed goes out (within [`CLOSE_LIMIT`]) before the POSTs are
//!   aborted and the session is ended.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};

use bytes::Bytes;
use reqwest::header::{HeaderName, HeaderValue};

use super::session::Session;
use crate::{
    error::{CloseReason, Error},
    protocol::jsonrpc::RequestId,
    transport::FrameKind,
};

/// At most this many `notifications/cancelled` POSTs at once; the rest wait in order. Each is a
/// small POST answered at once, and over HTTP/1.1 each needs a connection of its own: ten
/// thousand cancels at once would otherwise open ten thousand connections together.
pub(super) const CANCEL_LANE_WIDTH: usize = 16;

/// Cancels waiting for a place in the lane beyond which new requests wait too, until half of
/// them went out. A cancelled caller is free at once and sends its next request; cancels first
/// keeps the queue of cancels, and the delay of each, bounded.
pub(super) const CANCEL_BACKLOG: usize = 256;

/// The longest a cancel waits for the server to show it read the request (its answer's
/// headers) before it is sent anyway: a response the network holds back must not keep the
/// cancel from a request the server does run.
pub(super) const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// The longest later requests wait for the GET stream to open after the handshake.
pub(super) const GATE_LIMIT: Duration = Duration::from_secs(5);

/// The longest closing waits for the cancels still owed to go out before it ends the session.
pub(super) const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// One message waiting to be POSTed.
#[derive(Debug)]
pub(super) struct Outgoing {
    /// The JSON text, without its newline.
    pub frame: Bytes,
    /// What it is: a request, our cancel of one, another notification, or an answer.
    pub kind: FrameKind,
    /// The 2026-07-28 routing headers.
    pub routing: Vec<(HeaderName, HeaderValue)>,
    /// `notifications/initialized`: once its POST ends, the GET stream opens.
    pub opens_event_stream: bool,
    /// A request answered `404` once and sent again on a renewed session: a second `404` loses
    /// it.
    pub sent_again: bool,
}

impl Outgoing {
    pub fn new(frame: Bytes, kind: FrameKind, routing: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self {
            frame,
            kind,
            routing,
            opens_event_stream: false,
            sent_again: false,
        }
    }

    pub fn request(&self) -> Option<RequestId> {
        match self.kind {
            FrameKind::Request(id) => Some(id),
            _ => None,
        }
    }
}

/// One of the handshake's frames, kept for a renewal (the connection marks them).
pub(super) use crate::protocol::lifecycle::HandshakeStep as Handshake;

/// Where a request's POST (or the resumption of its stream) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sent (or being sent); the server has not shown it read it.
    Posting,
    /// The answer's headers came: the server has read it.
    Heard,
    /// Refused (`401`/`403`) before the server read it, held while authorization recovers.
    Refused,
}

/// How wide the cancel lane is and how many cancels may wait before new requests do.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    pub lane: usize,
    pub backlog: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            lane: CANCEL_LANE_WIDTH,
            backlog: CANCEL_BACKLOG,
        }
    }
}

/// What the I/O layer is asked to do.
#[derive(Debug)]
pub(super) enum Action {
    /// POST this message. A request's POST runs until [`HttpRequests::ended`] (or an abort); a
    /// cancel's reports [`HttpRequests::cancel_ended`], any other [`HttpRequests::message_ended`].
    Post(Outgoing),
    /// Abort this request's POST or resumption; its end is not reported.
    Abort(RequestId),
    /// Report the request held: nothing of it is at the server (it can be withdrawn).
    Held(RequestId),
    /// Report the request held for the renewed session: answered `404`, it goes again once the
    /// session is renewed; nothing of it is at the server (it can be withdrawn), and its timeout
    /// keeps running.
    HeldForSession(RequestId),
    /// Fail the request with this error.
    Fail(RequestId, Error),
    /// Report the transport closed (the session expired).
    Closed(CloseReason),
    /// Open the GET stream (again), for the current session; report its first answer with
    /// [`HttpRequests::event_stream_answered`].
    OpenEventStream,
    /// Stop the GET stream.
    StopEventStream,
    /// Run the handshake again with these frames; report [`HttpRequests::renewed`] or
    /// [`HttpRequests::renewal_failed`].
    Renew {
        initialize: Bytes,
        initialized: Bytes,
    },
    /// Closing is done: end every task, `DELETE` this session (if any), report the transport
    /// closed. Nothing follows.
    EndSession(Option<HeaderValue>),
}

/// Where renewing an expired session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewal {
    /// No renewal runs; messages go out (unless the GET stream's gate holds them).
    Idle,
    /// A renewal runs: messages wait at the gate.
    Running,
    /// The session is gone for good: the connection is ending, nothing more goes out.
    Failed,
}

/// Messages held while the GET stream opens or a renewal runs.
#[derive(Debug, Default)]
struct Gate {
    held: Vec<Outgoing>,
    /// When it opens by itself (the GET stream took too long to answer).
    opens_at: Option<Instant>,
}

/// The cancels being POSTed, and those waiting (2025-11-25).
#[derive(Debug, Default)]
struct CancelLane {
    running: usize,
    /// Waiting for a place, in order.
    waiting: VecDeque<Outgoing>,
    /// Waiting for the server to show it read their request, until when, in order.
    until_heard: VecDeque<(Instant, Outgoing)>,
    /// New requests held while too many cancels wait.
    behind_cancels: VecDeque<Outgoing>,
}

impl CancelLane {
    /// Cancels not yet on their way.
    fn backlog(&self) -> usize {
        self.waiting.len() + self.until_heard.len()
    }
}

/// The request states of one HTTP connection.
#[derive(Debug)]
pub(super) struct HttpRequests {
    session: Session,
    caps: Caps,
    /// The user wants the GET stream.
    event_stream: bool,
    /// The user opted in to renewing expired sessions.
    renews: bool,
    /// The kept `initialize` and `notifications/initialized` frames (when renewing).
    handshake: (Option<Bytes>, Option<Bytes>),
    renewal: Renewal,
    /// A POST of the current session was answered with something else than `404` (the first
    /// session counts as answered: its `initialize` was).
    answered: bool,
    /// The requests lost with the last expired session: a cancel of one is never sent.
    lost: HashSet<RequestId>,
    /// Each request whose POST or resumption runs.
    posts: HashMap<RequestId, Phase>,
    gate: Option<Gate>,
    lane: CancelLane,
    /// Closing: until when the owed cancels may take.
    closing: Option<Instant>,
    /// Closing is done.
    ended: bool,
    actions: VecDeque<Action>,
}

impl HttpRequests {
    pub fn new(event_stream: bool, renews: bool, caps: Caps) -> Self {
        Self {
            session: Session::default(),
            caps,
            event_stream,
            renews,
            handshake: (None, None),
            renewal: Renewal::Idle,
            answered: true,
            lost: HashSet::new(),
            posts: HashMap::new(),
            gate: None,
            lane: CancelLane::default(),
            closing: None,
            ended: false,
            actions: VecDeque::new(),
        }
    }

    /// The next thing to do, oldest first.
    pub fn next_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// When [`HttpRequests::tick`] has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.lane.until_heard.front().map(|(at, _)| *at),
            self.gate.as_ref().and_then(|gate| gate.opens_at),
            self.closing.filter(|_| !self.ended),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Event: the connection settled on a protocol version (`None`: not settled).
    pub fn use_protocol_version(&mut self, version: Option<HeaderValue>, modern: bool) {
        self.session.modern = modern;
        self.session.protocol_version = version;
        if modern {
            self.session.id = None;
        }
    }

    /// Event: the connection sends a message (`handshake`: one of the handshake's frames).
    pub fn send(&mut self, mut outgoing: Outgoing, handshake: Option<Handshake>, now: Instant) {
        if self.closing.is_some() {
            return;
        }
        if !self.session.modern {
            if self.renews {
                match handshake {
                    Some(Handshake::Initialize) => self.handshake.0 = Some(outgoing.frame.clone()),
                    Some(Handshake::Initialized) => self.handshake.1 = Some(outgoing.frame.clone()),
                    None => {}
                }
            }
            // The handshake is done once `notifications/initialized` goes out.
            outgoing.opens_event_stream = self.event_stream
                && !self.session.event_stream_opened
                && handshake == Some(Handshake::Initialized);
            self.session.event_stream_opened |= outgoing.opens_event_stream;
        }
        let opens = outgoing.opens_event_stream;
        self.queue(outgoing, now);
        if opens {
            // What follows the handshake waits until the GET stream is open.
            self.gate.get_or_insert_with(Gate::default);
        }
    }

    /// A message goes out unless the session is gone or the gate is closed (or, a request, too
    /// many cancels wait).
    fn queue(&mut self, outgoing: Outgoing, now: Instant) {
        if outgoing.request().is_some() {
            return self.queue_request(outgoing, true);
        }
        if self.renewal == Renewal::Failed {
            return; // the connection is ending with the expired session
        }
        if let Some(gate) = &mut self.gate {
            gate.held.push(outgoing);
            return;
        }
        self.dispatch(outgoing, now);
    }

    /// A request goes out unless the session is gone, the gate is closed or (`may_wait`) too
    /// many cancels wait.
    fn queue_request(&mut self, outgoing: Outgoing, may_wait: bool) {
        let Some(id) = outgoing.request() else {
            return;
        };
        match self.renewal {
            Renewal::Failed => return,
            // Nothing of it is at the server until the new session exists.
            Renewal::Running => self.actions.push_back(Action::Held(id)),
            Renewal::Idle => {}
        }
        if let Some(gate) = &mut self.gate {
            gate.held.push(outgoing);
            return;
        }
        let full = self.lane.backlog() >= self.caps.backlog;
        if may_wait && (full || !self.lane.behind_cancels.is_empty()) {
            // Not reported held: the lane may let it go before the connection could take it
            // back, and a cancel must then follow it.
            self.lane.behind_cancels.push_back(outgoing);
            return;
        }
        self.posts.insert(id, Phase::Posting);
        self.actions.push_back(Action::Post(outgoing));
    }

    /// The requests held behind the cancels go once few enough cancels wait.
    fn release_behind(&mut self) {
        let few = self.lane.backlog() <= self.caps.backlog / 2;
        if few && self.closing.is_none() && !self.lane.behind_cancels.is_empty() {
            for request in std::mem::take(&mut self.lane.behind_cancels) {
                self.queue_request(request, false);
            }
        }
    }

    /// Past the gate: a cancel waits for its request to be heard, then for the lane; anything
    /// else is POSTed.
    fn dispatch(&mut self, outgoing: Outgoing, now: Instant) {
        match outgoing.kind {
            FrameKind::Cancel(id) if self.lost.contains(&id) => {
                // Its request was lost with an expired session: the new one never saw it.
            }
            FrameKind::Cancel(id) if !self.server_has(id) => {
                // Sent on another connection (or stream) than its request, it could reach the
                // server first and be ignored, leaving the request to run.
                self.lane
                    .until_heard
                    .push_back((now + CANCEL_WAIT, outgoing));
            }
            FrameKind::Cancel(_) => self.enter_lane(outgoing),
            FrameKind::Request(id) => {
                self.posts.insert(id, Phase::Posting);
                self.actions.push_back(Action::Post(outgoing));
            }
            FrameKind::Notification | FrameKind::Response => {
                self.actions.push_back(Action::Post(outgoing));
            }
        }
    }

    /// Whether the server has read `id` (its answer's headers came), or its POST is over.
    fn server_has(&self, id: RequestId) -> bool {
        self.posts.get(&id) != Some(&Phase::Posting)
    }

    /// A cancel ready to go: its request's own POST is aborted first (over HTTP/1.1 its
    /// connection is freed before the cancel needs one; and a server that never ends that
    /// stream would otherwise keep it for ever), then it takes a place in the lane or waits.
    fn enter_lane(&mut self, cancel: Outgoing) {
        if let FrameKind::Cancel(id) = cancel.kind {
            if self.lost.contains(&id) || self.renewal == Renewal::Failed {
                return; // the server that had its request is gone
            }
            if self.posts.remove(&id).is_some() {
                self.actions.push_back(Action::Abort(id));
            }
        }
        if self.lane.running >= self.caps.lane {
            self.lane.waiting.push_back(cancel);
            return;
        }
        self.lane.running += 1;
        self.actions.push_back(Action::Post(cancel));
    }

    /// Event: the answer's headers to `id`'s POST came: the server has read it.
    pub fn heard(&mut self, id: RequestId) {
        if let Some(phase) = self.posts.get_mut(&id) {
            *phase = Phase::Heard;
            self.release_heard(id);
        }
    }

    /// Event: `id`'s POST was refused (`401`/`403`) before the server read it, and waits for
    /// authorization.
    #[cfg(any(feature = "auth", test))]
    pub fn refused(&mut self, id: RequestId) {
        if let Some(phase) = self.posts.get_mut(&id) {
            *phase = Phase::Refused;
            self.actions.push_back(Action::Held(id));
        }
    }

    /// Event: `id`, refused, is sent again: from here a cancel must follow it on the wire.
    #[cfg(any(feature = "auth", test))]
    pub fn let_go(&mut self, id: RequestId) {
        if let Some(phase) = self.posts.get_mut(&id) {
            *phase = Phase::Posting;
        }
    }

    /// Event: `id`'s POST (or resumption) ended, however it ended.
    pub fn ended(&mut self, id: RequestId) {
        if self.posts.remove(&id).is_some() {
            self.release_heard(id);
            self.finish_if_flushed();
        }
    }

    /// The cancels waiting for `id` to be heard go to the lane.
    fn release_heard(&mut self, id: RequestId) {
        if self.lane.until_heard.is_empty() {
            return;
        }
        let mut at = 0;
        loop {
            let waits_for_id = self.lane.until_heard.get(at).map(|(_, cancel)| cancel.kind);
            match waits_for_id {
                None => break,
                Some(kind) if kind == FrameKind::Cancel(id) => {
                    if let Some((_, cancel)) = self.lane.until_heard.remove(at) {
                        self.enter_lane(cancel);
                    }
                }
                Some(_) => at += 1,
            }
        }
        // Some may have been dropped (their request lost).
        self.release_behind();
    }

    /// Event: a cancel's POST ended (answered, failed or abandoned): the next waiting one goes,
    /// and the requests held behind the cancels once few enough wait.
    pub fn cancel_ended(&mut self) {
        self.lane.running = self.lane.running.saturating_sub(1);
        if let Some(next) = self.lane.waiting.pop_front() {
            self.enter_lane(next);
        }
        self.release_behind();
        self.finish_if_flushed();
    }

    /// Event: the POST of a notification or answer of ours ended; `generation`: the session it
    /// was sent on.
    pub fn message_ended(&mut self, opens_event_stream: bool, generation: u64, now: Instant) {
        // Not if the session expired meanwhile: the renewal opens the GET stream then.
        if opens_event_stream && self.is_current(generation) && self.closing.is_none() {
            self.open_event_stream(now);
        }
    }

    fn open_event_stream(&mut self, now: Instant) {
        if let Some(gate) = &mut self.gate {
            gate.opens_at = Some(now + GATE_LIMIT);
        }
        self.actions.push_back(Action::OpenEventStream);
    }

    /// Event: the GET stream opened for session `generation` was answered: what waits at the
    /// gate goes.
    pub fn event_stream_answered(&mut self, generation: u64, now: Instant) {
        if self.is_current(generation) {
            self.open_gate(now);
        }
    }

    fn open_gate(&mut self, now: Instant) {
        for outgoing in self.gate.take().map(|gate| gate.held).unwrap_or_default() {
            self.dispatch(outgoing, now);
        }
    }

    /// Whether `generation` is still the session's and no renewal runs or failed.
    fn is_current(&self, generation: u64) -> bool {
        self.renewal == Renewal::Idle && self.session.generation == generation
    }

    /// Event: a POST sent on session `generation` was answered with something else than `404`.
    pub fn answered(&mut self, generation: u64) {
        if self.is_current(generation) {
            self.answered = true;
        }
    }

    /// Event: a successful answer carried a session id; the first one is the session's.
    pub fn session_given(&mut self, id: &HeaderValue) {
        if self.session.id.is_none() && !self.session.modern {
            self.session.id = Some(id.clone());
        }
    }

    /// Event: a POST sent with the id of session `generation` was answered `404`: the session
    /// is gone. The session is renewed (the default), or the connection ends. `refused` is the
    /// POST's message if it was a request: never processed, it goes again on the new session.
    pub fn session_expired(&mut self, refused: Option<Outgoing>, generation: u64) {
        let request = refused.as_ref().and_then(Outgoing::request);
        let lost = |error: Error| request.map(|id| Action::Fail(id, error));
        if !self.renews {
            if self.renewal == Renewal::Failed {
                // Part of an ending already reported.
                let error = Error::Closed {
                    reason: CloseReason::SessionExpired,
                };
                self.actions.extend(lost(error));
            } else {
                self.session_ended(request);
            }
            return;
        }
        if self.renewal != Renewal::Idle || generation != self.session.generation {
            // Part of an expiry already handled: the request goes again on the new session if
            // it can, else only it is lost (and its cancel never sent).
            if let Some(refused) = refused.filter(|r| self.may_resend(r)) {
                return self.resend(refused);
            }
            self.lost.extend(request);
            self.actions.extend(lost(Error::SessionLost));
            return;
        }
        let (Some(initialize), Some(initialized)) = self.handshake.clone() else {
            return self.session_ended(request);
        };
        if !self.answered || self.closing.is_some() {
            // A renewed session that expired before any answer is not renewed again.
            return self.session_ended(request);
        }
        let resend = refused.filter(|r| self.may_resend(r));
        self.renew(request, resend, initialize, initialized);
    }

    /// Whether a request answered `404` may go again: once only, while the connection goes on,
    /// and not if its caller cancelled it (its cancel waits here).
    fn may_resend(&self, refused: &Outgoing) -> bool {
        let Some(id) = refused.request() else {
            return false;
        };
        let cancelled = |o: &Outgoing| o.kind == FrameKind::Cancel(id);
        let cancel_waits = self.lane.waiting.iter().any(cancelled)
            || self.lane.until_heard.iter().any(|(_, o)| cancelled(o))
            || self.gate.iter().flat_map(|g| &g.held).any(cancelled);
        self.renewal != Renewal::Failed
            && self.closing.is_none()
            && !refused.sent_again
            && !self.lost.contains(&id)
            && !cancel_waits
    }

    /// A request answered `404` goes again: at the gate while the session is renewed, first
    /// (in the order the requests were sent), reported held meanwhile; else at once.
    fn resend(&mut self, mut refused: Outgoing) {
        let Some(id) = refused.request() else {
            return;
        };
        refused.sent_again = true;
        match &mut self.gate {
            Some(gate) => {
                let first = |o: &Outgoing| o.sent_again && o.request().is_some_and(|r| r < id);
                let at = gate.held.iter().take_while(|o| first(o)).count();
                gate.held.insert(at, refused);
                self.actions.push_back(Action::HeldForSession(id));
            }
            None => self.queue_request(refused, true),
        }
    }

    /// The session is gone for good: nothing more goes out.
    fn session_ended(&mut self, request: Option<RequestId>) {
        self.renewal = Renewal::Failed;
        self.gate = Some(Gate::default());
        if let Some(id) = request {
            let error = Error::Closed {
                reason: CloseReason::SessionExpired,
            };
            self.actions.push_back(Action::Fail(id, error));
        }
        self.actions
            .push_back(Action::Closed(CloseReason::SessionExpired));
    }

    /// Starts renewing: the old session's requests are lost (but `resend`, answered `404`),
    /// later messages wait.
    fn renew(
        &mut self,
        request: Option<RequestId>,
        resend: Option<Outgoing>,
        initialize: Bytes,
        initialized: Bytes,
    ) {
        self.session.generation += 1;
        self.renewal = Renewal::Running;
        // Every later message waits at the gate; what already waits there (the GET stream was
        // opening) waits for the new session too.
        let gate = self.gate.get_or_insert_with(Gate::default);
        gate.opens_at = None;
        // The cancels not yet sent are for requests of the old session: the new one never
        // saw them.
        gate.held
            .retain(|outgoing| !matches!(outgoing.kind, FrameKind::Cancel(_)));
        self.lane.waiting.clear();
        self.lane.until_heard.clear();
        // The requests held behind them wait for the new session, first.
        let behind = std::mem::take(&mut self.lane.behind_cancels);
        gate.held.splice(0..0, behind);
        let waiting: Vec<RequestId> = gate.held.iter().filter_map(Outgoing::request).collect();
        self.actions.push_back(Action::StopEventStream);
        // Every request still at the old session is lost with it (the POST of this one ends by
        // itself), but the one answered `404`, which goes again.
        let resent = resend.as_ref().and_then(Outgoing::request);
        self.lost.clear();
        for (id, _) in self.posts.drain() {
            if Some(id) != request {
                self.actions.push_back(Action::Abort(id));
            }
            self.lost.insert(id);
        }
        self.lost.extend(request);
        if let Some(resent) = resent {
            self.lost.remove(&resent);
        }
        let mut lost: Vec<RequestId> = self.lost.iter().copied().collect();
        lost.sort_unstable();
        for id in lost {
            self.actions.push_back(Action::Fail(id, Error::SessionLost));
        }
        for id in waiting {
            self.actions.push_back(Action::Held(id));
        }
        if let Some(resend) = resend {
            self.resend(resend);
        }
        self.actions.push_back(Action::Renew {
            initialize,
            initialized,
        });
        self.finish_if_flushed();
    }

    /// Event: the handshake ran again; `id` is the new session's.
    pub fn renewed(&mut self, id: HeaderValue, now: Instant) {
        if self.renewal != Renewal::Running || self.ended {
            return;
        }
        self.renewal = Renewal::Idle;
        self.answered = false;
        self.session.id = Some(id);
        if self.closing.is_some() {
            return;
        }
        if self.session.event_stream_opened {
            // It opens the gate once answered.
            self.open_event_stream(now);
        } else {
            self.open_gate(now);
        }
    }

    /// Event: the renewal failed: the connection ends as without renewing.
    pub fn renewal_failed(&mut self) {
        if self.renewal == Renewal::Running && !self.ended {
            self.session_ended(None);
            self.finish_if_flushed();
        }
    }

    /// Event: a request whose answer stream ended early is resumed (its stream picked up): it
    /// runs again, as heard. `false`: closing, nothing to resume.
    pub fn resume(&mut self, id: RequestId) -> bool {
        if self.closing.is_some() || self.renewal == Renewal::Failed {
            return false;
        }
        if self.posts.insert(id, Phase::Heard).is_some() {
            self.actions.push_back(Action::Abort(id));
        }
        true
    }

    /// Event: the connection abandons `id` (the 2026-07-28 cancel, or a held request given up):
    /// its POST is aborted.
    pub fn abort(&mut self, id: RequestId) {
        if self.posts.remove(&id).is_some() {
            self.actions.push_back(Action::Abort(id));
            self.release_heard(id);
            self.finish_if_flushed();
        }
    }

    /// Event: the connection takes back a request reported held. `true`: taken back (it was at
    /// the gate, or refused and waiting for authorization: its POST is aborted); `false`: it
    /// was let go meanwhile and is left alone.
    pub fn withdraw(&mut self, id: RequestId) -> bool {
        if let Some(gate) = &mut self.gate {
            if let Some(at) = gate.held.iter().position(|o| o.request() == Some(id)) {
                gate.held.remove(at);
                return true;
            }
        }
        if self.posts.get(&id) == Some(&Phase::Refused) {
            self.abort(id);
            return true;
        }
        false
    }

    /// Event: time passed: cancels that waited long enough for their request go to the lane, a
    /// gate held too long opens, a close that waited long enough ends.
    pub fn tick(&mut self, now: Instant) {
        while self
            .lane
            .until_heard
            .front()
            .is_some_and(|(at, _)| *at <= now)
        {
            if let Some((_, cancel)) = self.lane.until_heard.pop_front() {
                self.enter_lane(cancel);
            }
        }
        let gate_due = self
            .gate
            .as_ref()
            .and_then(|gate| gate.opens_at)
            .is_some_and(|at| at <= now);
        if gate_due && self.renewal == Renewal::Idle {
            self.open_gate(now);
        }
        if self.closing.is_some_and(|until| until <= now) {
            self.finish();
        }
        self.release_behind();
        self.finish_if_flushed();
    }

    /// Event: the connection closes the transport. What waits at the gate or behind the
    /// cancels is dropped (nothing of it is at the server); the cancels still owed go out
    /// first, and only then are the POSTs aborted and the session ended.
    pub fn close(&mut self, now: Instant) {
        if self.closing.is_some() {
            return;
        }
        self.closing = Some(now + CLOSE_LIMIT);
        self.actions.push_back(Action::StopEventStream);
        self.lane.behind_cancels.clear();
        let held = self.gate.take().map(|gate| gate.held).unwrap_or_default();
        if self.renewal == Renewal::Idle {
            for cancel in held {
                if matches!(cancel.kind, FrameKind::Cancel(_)) {
                    self.dispatch(cancel, now);
                }
            }
        }
        self.finish_if_flushed();
    }

    /// Closing, and no cancel is owed any more (or none can go: the session is gone).
    fn finish_if_flushed(&mut self) {
        let flushed = self.lane.running == 0 && self.lane.backlog() == 0;
        if self.closing.is_some() && (flushed || self.renewal != Renewal::Idle) {
            self.finish();
        }
    }

    fn finish(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.lane = CancelLane::default();
        self.gate = None;
        let mut posts: Vec<RequestId> = self.posts.drain().map(|(id, _)| id).collect();
        posts.sort_unstable();
        for id in posts {
            self.actions.push_back(Action::Abort(id));
        }
        let session = self.session.id.clone().filter(|_| !self.session.modern);
        self.actions.push_back(Action::EndSession(session));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the machine asks for, briefly: `post 3`, `cancel 3`, `abort 3`, `end`, ...
    fn actions(machine: &mut HttpRequests) -> Vec<String> {
        std::iter::from_fn(|| machine.next_action())
            .map(|action| match action {
                Action::Post(o) => match o.kind {
                    FrameKind::Request(id) => format!("post {id}"),
                    FrameKind::Cancel(id) => format!("cancel {id}"),
                    _ => "message".into(),
                },
                Action::Abort(id) => format!("abort {id}"),
                Action::Held(id) => format!("held {id}"),
                Action::HeldForSession(id) => format!("held for the new session {id}"),
                Action::Fail(id, error) => format!("fail {id}: {error}"),
                Action::Closed(_) => "closed".into(),
                Action::OpenEventStream => "open stream".into(),
                Action::StopEventStream => "stop stream".into(),
                Action::Renew { .. } => "renew".into(),
                Action::EndSession(_) => "end".into(),
            })
            .collect()
    }

    fn outgoing(kind: FrameKind) -> Outgoing {
        Outgoing::new(Bytes::new(), kind, Vec::new())
    }

    /// The 2025-11-25 handshake through `machine`: session `s1`, `initialize` answered,
    /// `notifications/initialized` sent.
    fn past_the_handshake(machine: &mut HttpRequests, now: Instant) {
        let initialize = RequestId::next();
        machine.send(
            outgoing(FrameKind::Request(initialize)),
            Some(Handshake::Initialize),
            now,
        );
        machine.session_given(&HeaderValue::from_static("s1"));
        machine.ended(initialize);
        let initialized = outgoing(FrameKind::Notification);
        machine.send(initialized, Some(Handshake::Initialized), now);
    }

    /// A 2025-11-25 connection past its handshake (session `s1`, no GET stream), with the
    /// request `id` POSTed.
    fn session_with_request(renews: bool, now: Instant) -> (HttpRequests, RequestId) {
        let mut machine = HttpRequests::new(false, renews, Caps::default());
        past_the_handshake(&mut machine, now);
        let id = RequestId::next();
        machine.send(outgoing(FrameKind::Request(id)), None, now);
        actions(&mut machine);
        (machine, id)
    }

    /// Issue 20: a call given up just before the client closes (Ctrl-C) had its cancel
    /// dropped by the close, which aborted the POSTs and ended the session first.
    #[test]
    fn closing_sends_the_cancels_still_owed_before_it_ends_the_session_regression() {
        let now = Instant::now();
        let (mut machine, id) = session_with_request(false, now);
        machine.send(outgoing(FrameKind::Cancel(id)), None, now);
        machine.close(now);
        assert_eq!(actions(&mut machine), ["stop stream"], "the cancel waits");
        machine.heard(id);
        assert_eq!(
            actions(&mut machine),
            [format!("abort {id}"), format!("cancel {id}")]
        );
        machine.cancel_ended();
        assert_eq!(actions(&mut machine), ["end"]);
    }

    /// A cancel sent on another connection than its request could reach the server first.
    #[test]
    fn a_cancel_waits_until_the_server_has_its_request_at_most_a_second() {
        let now = Instant::now();
        let (mut machine, id) = session_with_request(false, now);
        machine.send(outgoing(FrameKind::Cancel(id)), None, now);
        assert!(actions(&mut machine).is_empty());
        assert_eq!(machine.next_deadline(), Some(now + CANCEL_WAIT));
        machine.tick(now + CANCEL_WAIT);
        assert_eq!(
            actions(&mut machine),
            [format!("abort {id}"), format!("cancel {id}")]
        );
    }

    /// A request lost by a `404` while the session was being renewed had its cancel sent on
    /// the new session, which never saw the request. (Lost: its caller had cancelled it.)
    #[test]
    fn a_cancel_of_a_request_lost_during_a_renewal_is_never_sent_regression() {
        let now = Instant::now();
        let (mut machine, first) = session_with_request(true, now);
        machine.session_expired(Some(outgoing(FrameKind::Request(first))), 0);
        actions(&mut machine);
        let late = RequestId::next();
        assert!(machine.resume(late));
        machine.send(outgoing(FrameKind::Cancel(late)), None, now);
        machine.session_expired(Some(outgoing(FrameKind::Request(late))), 0);
        let failed = format!("fail {late}");
        assert!(actions(&mut machine).iter().any(|a| a.starts_with(&failed)));
        machine.renewed(HeaderValue::from_static("s2"), now);
        let after = actions(&mut machine);
        let about_late = [format!("post {late}"), format!("cancel {late}")];
        assert!(!after.iter().any(|a| about_late.contains(a)), "{after:?}");
    }

    /// A request answered `404` was never processed: it goes again on the renewed session,
    /// first, reported held meanwhile; answered `404` again, it is lost.
    #[test]
    fn a_request_answered_404_goes_again_once_on_the_renewed_session() {
        let now = Instant::now();
        let (mut machine, first) = session_with_request(true, now);
        let later = RequestId::next();
        machine.session_expired(Some(outgoing(FrameKind::Request(first))), 0);
        machine.send(outgoing(FrameKind::Request(later)), None, now);
        let renewing = actions(&mut machine);
        assert!(renewing.contains(&format!("held for the new session {first}")));
        assert!(renewing.contains(&"renew".to_owned()));
        assert!(
            !renewing.iter().any(|a| a.starts_with("fail")),
            "{renewing:?}"
        );
        machine.ended(first); // its old POST's end: nothing of the held one
        machine.renewed(HeaderValue::from_static("s2"), now);
        let posted: Vec<Outgoing> = std::iter::from_fn(|| machine.next_action())
            .filter_map(|action| match action {
                Action::Post(o) if o.request().is_some() => Some(o),
                _ => None,
            })
            .collect();
        let order: Vec<_> = posted.iter().filter_map(Outgoing::request).collect();
        assert_eq!(order, [first, later]);
        assert!(posted[0].sent_again && !posted[1].sent_again);
        machine.answered(1);
        // The driver reports the 404 with the message it POSTed.
        let first_again = posted.into_iter().next().expect("posted");
        machine.session_expired(Some(first_again), 1);
        let again = actions(&mut machine);
        assert!(
            again.contains(&format!("fail {first}: {}", Error::SessionLost)),
            "{again:?}"
        );
    }

    /// A request whose caller cancelled it before its `404` is not sent again.
    #[test]
    fn a_cancelled_request_answered_404_is_not_sent_again() {
        let now = Instant::now();
        let (mut machine, id) = session_with_request(true, now);
        machine.send(outgoing(FrameKind::Cancel(id)), None, now);
        machine.session_expired(Some(outgoing(FrameKind::Request(id))), 0);
        let renewing = actions(&mut machine);
        assert!(renewing
            .iter()
            .any(|a| a.starts_with(&format!("fail {id}"))));
        machine.renewed(HeaderValue::from_static("s2"), now);
        assert!(!actions(&mut machine).contains(&format!("post {id}")));
    }

    /// Cancels waiting for a place in the lane when the session expired went out on the new
    /// session, for requests of the old one.
    #[test]
    fn the_cancels_waiting_when_the_session_is_renewed_are_dropped_regression() {
        let now = Instant::now();
        let mut machine = HttpRequests::new(
            false,
            true,
            Caps {
                lane: 1,
                backlog: 4,
            },
        );
        past_the_handshake(&mut machine, now);
        let (a, b, c) = (RequestId::next(), RequestId::next(), RequestId::next());
        for id in [a, b, c] {
            machine.send(outgoing(FrameKind::Request(id)), None, now);
        }
        for id in [a, b] {
            machine.ended(id);
            machine.send(outgoing(FrameKind::Cancel(id)), None, now);
        }
        actions(&mut machine);
        machine.session_expired(Some(outgoing(FrameKind::Request(c))), 0);
        actions(&mut machine);
        machine.cancel_ended();
        machine.renewed(HeaderValue::from_static("s2"), now);
        assert!(
            !actions(&mut machine).contains(&format!("cancel {b}")),
            "the cancel of {b} waited for the lane"
        );
    }

    /// After the session is gone (no renewal), nothing more is POSTed: a cancel waiting for
    /// its request went out once that request's POST ended.
    #[test]
    fn no_cancel_goes_after_the_session_is_gone_regression() {
        let now = Instant::now();
        let (mut machine, id) = session_with_request(false, now);
        machine.send(outgoing(FrameKind::Cancel(id)), None, now);
        machine.session_expired(Some(outgoing(FrameKind::Request(id))), 0);
        assert_eq!(
            actions(&mut machine).last().map(String::as_str),
            Some("closed")
        );
        machine.ended(id);
        machine.tick(now + CANCEL_WAIT);
        assert!(actions(&mut machine).is_empty());
    }
}
