//! The tasks around [`HttpRequests`]: the one owner of the connection's request states, borrowed
//! in short sections that never span an `await`. Every task only does I/O (a POST, the GET
//! stream, a resumption, the renewal's handshake, a timer) and reports what happened as an event;
//! the [`Action`]s the machine asks for are carried out here.

use std::{cell::RefCell, collections::HashMap, rc::Rc, time::Duration, time::Instant};

use futures::channel::oneshot;
use reqwest::header::{HeaderMap, HeaderValue};
use tokio::{sync::Notify, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{
    post, renew,
    session::Session,
    states::{Action, HttpRequests, Outgoing},
};
use crate::{
    protocol::jsonrpc::RequestId,
    transport::{EventSender, FrameKind, ResumePoint, TransportEvent},
};

/// The longest a `notifications/cancelled` POST may take before it is abandoned (it gives up
/// its place in the lane: a server that never answers one must not hold back every later one).
const CANCEL_LIMIT: Duration = Duration::from_secs(3);

/// The longest the POST of one of our answers or notifications may take before it is
/// abandoned (the server answers them `202 Accepted` at once; one that never does must not hold
/// a task, and an HTTP/1.1 connection, for each for ever). A request's own POST has no limit:
/// the caller's timeout cancels it.
const MESSAGE_LIMIT: Duration = Duration::from_secs(30);

/// What every task of one connection shares (all on the actor's thread).
pub(super) struct Shared {
    pub client: reqwest::Client,
    /// The endpoint as configured: the resource authorization is for.
    pub url: reqwest::Url,
    /// Where requests go: the endpoint, or where a same-origin 307/308 moved it.
    pub endpoint: RefCell<reqwest::Url>,
    /// The user's own headers (e.g. `Authorization`), on every request: the client is shared.
    pub headers: HeaderMap,
    pub events: EventSender,
    /// Cancelled when the transport is done: every task ends.
    pub shutdown: CancellationToken,
    /// The largest frame (JSON body or event) accepted.
    pub max_frame: usize,
    /// The authorization every request carries (feature `auth`).
    #[cfg(feature = "auth")]
    pub auth: Option<crate::auth::OAuth>,
    state: RefCell<State>,
    /// Woken when the machine's next deadline comes earlier than the timer sleeps.
    rearm: Notify,
}

/// The request states and the handles of the tasks they ask for.
struct State {
    requests: HttpRequests,
    /// The task of each request's POST or resumption, with its number: the end of a task that
    /// was replaced is not reported.
    tasks: HashMap<RequestId, (u64, JoinHandle<()>)>,
    next_task: u64,
    /// The GET stream's task, with its number: one that ended by itself (a `405`, say) gives
    /// its handle back, so that its memory is freed while the connection lives on.
    event_task: Option<(u64, JoinHandle<()>)>,
    /// Closing: where to say that the session may end.
    end_session: Option<oneshot::Sender<Option<HeaderValue>>>,
}

/// The time as the machine sees it (tokio's clock, so a paused clock in tests holds it too).
pub(super) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Shared {
    pub fn new(
        client: reqwest::Client,
        url: reqwest::Url,
        headers: HeaderMap,
        events: EventSender,
        max_frame: usize,
        requests: HttpRequests,
        #[cfg(feature = "auth")] auth: Option<crate::auth::OAuth>,
    ) -> Rc<Self> {
        let shared = Rc::new(Self {
            client,
            endpoint: RefCell::new(url.clone()),
            url,
            headers,
            events,
            shutdown: CancellationToken::new(),
            max_frame,
            #[cfg(feature = "auth")]
            auth,
            state: RefCell::new(State {
                requests,
                tasks: HashMap::new(),
                next_task: 0,
                event_task: None,
                end_session: None,
            }),
            rearm: Notify::new(),
        });
        actix_rt::spawn(run_timer(shared.clone()));
        shared
    }

    /// Reports an event to the machine, then carries out what it asks for.
    pub fn event<R>(self: &Rc<Self>, event: impl FnOnce(&mut HttpRequests) -> R) -> R {
        let (outcome, rearm) = {
            let mut state = self.state.borrow_mut();
            let before = state.requests.next_deadline();
            let outcome = event(&mut state.requests);
            let after = state.requests.next_deadline();
            let rearm = after.is_some_and(|after| before.is_none_or(|before| after < before));
            (outcome, rearm)
        };
        if rearm {
            self.rearm.notify_one();
        }
        self.run_actions();
        outcome
    }

    /// Reads the session (id, version, generation) the next request goes out with.
    pub fn session<R>(&self, read: impl FnOnce(&Session) -> R) -> R {
        read(self.state.borrow().requests.session())
    }

    fn run_actions(self: &Rc<Self>) {
        loop {
            let action = self.state.borrow_mut().requests.next_action();
            match action {
                Some(action) => self.apply(action),
                None => return,
            }
        }
    }

    fn apply(self: &Rc<Self>, action: Action) {
        match action {
            Action::Post(outgoing) => self.start_post(outgoing),
            Action::Abort(id) => {
                let task = self.state.borrow_mut().tasks.remove(&id);
                if let Some((_, task)) = task {
                    task.abort();
                }
            }
            Action::Held(id) => {
                self.events.send(TransportEvent::RequestHeld(id));
            }
            Action::HeldForSession(id) => {
                self.events.send(TransportEvent::RequestHeldForSession(id));
            }
            Action::Fail(id, error) => {
                self.events.send(TransportEvent::RequestFailed(id, error));
            }
            Action::Closed(reason) => {
                self.events.send(TransportEvent::Closed(reason));
            }
            Action::OpenEventStream => self.start_event_stream(),
            Action::StopEventStream => {
                let task = self.state.borrow_mut().event_task.take();
                if let Some((_, task)) = task {
                    task.abort();
                }
            }
            Action::Renew {
                initialize,
                initialized,
            } => renew::start(self, initialize, initialized),
            Action::EndSession(session) => {
                let end = self.state.borrow_mut().end_session.take();
                if let Some(end) = end {
                    let _ = end.send(session);
                }
            }
        }
    }

    /// Starts a request's task (given its number) and keeps it, to abort it.
    fn keep_task(&self, id: RequestId, task: impl FnOnce(u64) -> JoinHandle<()>) {
        let mut state = self.state.borrow_mut();
        let number = state.next_task;
        state.next_task += 1;
        let handle = task(number);
        if let Some((_, previous)) = state.tasks.insert(id, (number, handle)) {
            previous.abort();
        }
    }

    /// A request's task (numbered `number`) ended by itself.
    fn task_ended(self: &Rc<Self>, id: RequestId, number: u64) {
        let current = {
            let mut state = self.state.borrow_mut();
            let current = state.tasks.get(&id).is_some_and(|(n, _)| *n == number);
            if current {
                state.tasks.remove(&id);
            }
            current
        };
        if current {
            self.event(|requests| requests.ended(id));
        }
    }

    fn start_post(self: &Rc<Self>, outgoing: Outgoing) {
        let generation = self.session(|session| session.generation);
        match outgoing.kind {
            FrameKind::Request(id) => self.keep_task(id, |number| {
                actix_rt::spawn(run_post(self.clone(), outgoing, generation, number))
            }),
            _ => drop(actix_rt::spawn(run_post(
                self.clone(),
                outgoing,
                generation,
                0,
            ))),
        }
    }

    /// The GET stream for what the server sends on its own; once it is answered, what waits
    /// at the gate goes.
    fn start_event_stream(self: &Rc<Self>) {
        let generation = self.session(|session| session.generation);
        let shared = self.clone();
        let mut state = self.state.borrow_mut();
        let number = state.next_task;
        state.next_task += 1;
        let task = actix_rt::spawn(async move {
            let answered = || shared.event(|r| r.event_stream_answered(generation, now()));
            tokio::select! {
                _ = shared.shutdown.cancelled() => {}
                _ = post::event_stream(&shared, answered) => {}
            }
            let mut state = shared.state.borrow_mut();
            if state.event_task.as_ref().is_some_and(|(n, _)| *n == number) {
                state.event_task = None;
            }
        });
        let previous = state.event_task.replace((number, task));
        drop(state);
        if let Some((_, previous)) = previous {
            previous.abort();
        }
    }

    /// Picks up `id`'s answer stream from `at`, unless closing.
    pub fn resume(self: &Rc<Self>, id: RequestId, at: ResumePoint) {
        if !self.event(|requests| requests.resume(id)) {
            return;
        }
        self.keep_task(id, |number| {
            let shared = self.clone();
            actix_rt::spawn(async move {
                tokio::select! {
                    _ = shared.shutdown.cancelled() => return,
                    _ = post::resume(&shared, id, at) => {}
                }
                shared.task_ended(id, number);
            })
        });
    }

    /// Starts closing; the answer comes once the cancels still owed went out (or could not):
    /// the session to end, if any.
    pub fn close(self: &Rc<Self>) -> oneshot::Receiver<Option<HeaderValue>> {
        let (end, ended) = oneshot::channel();
        self.state.borrow_mut().end_session = Some(end);
        self.event(|requests| requests.close(now()));
        ended
    }
}

/// One message's POST; reports its end (unless the transport is done first).
async fn run_post(shared: Rc<Shared>, outgoing: Outgoing, generation: u64, number: u64) {
    let Outgoing {
        frame,
        kind,
        routing,
        opens_event_stream,
        sent_again,
    } = outgoing;
    let limit = match kind {
        FrameKind::Request(_) => None,
        FrameKind::Cancel(_) => Some(CANCEL_LIMIT),
        FrameKind::Notification | FrameKind::Response => Some(MESSAGE_LIMIT),
    };
    let request = match kind {
        FrameKind::Request(id) => Some(id),
        _ => None,
    };
    let post = post::post(&shared, frame, request, &routing, sent_again);
    let posted = async {
        match limit {
            Some(limit) => drop(tokio::time::timeout(limit, post).await),
            None => post.await,
        }
    };
    tokio::select! {
        _ = shared.shutdown.cancelled() => return,
        _ = posted => {}
    }
    match kind {
        FrameKind::Request(id) => shared.task_ended(id, number),
        FrameKind::Cancel(_) => shared.event(|requests| requests.cancel_ended()),
        FrameKind::Notification | FrameKind::Response => shared.event(|requests| {
            requests.message_ended(opens_event_stream, generation, now());
        }),
    }
}

/// Ticks the machine at its next deadline, until the transport is done (`shutdown`).
async fn run_timer(shared: Rc<Shared>) {
    loop {
        let deadline = shared.state.borrow().requests.next_deadline();
        let due = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = shared.rearm.notified() => {}
            _ = due => shared.event(|requests| requests.tick(now())),
        }
    }
}
