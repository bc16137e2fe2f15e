//! A downstream session over HTTP: the POSTs waiting for what belongs to their requests, by
//! request id, and the session's GET stream, each with its bounded outbox (`outbox.rs`). A
//! 2026-07-28 request is a session of its own; when it is answered `input_required` it waits in
//! the `Parking` for its retry, which takes over its call (the answer goes out under the retry's
//! id).
//!
//! A session lives on the worker that opened it (its upstream calls' tasks run there). Requests
//! that reach another worker talk to it through its [`SessionHandle`]: commands to a driver
//! task on its home worker. The session ends when told to, or when every handle is gone.

use std::{
    cell::RefCell,
    collections::HashMap,
    rc::{Rc, Weak},
    sync::Arc,
};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::parking::Parking;
use crate::{
    changes::Event,
    message::{Incoming, Request},
    outbound::Outbound,
    outbox::{self, Inbox, Outbox, Outgoing},
    owner::{Caller, Owner},
    replies::{error, INVALID_PARAMS},
    session::{Answers, Session},
    upstream::Upstream,
};

/// A POST waiting for what belongs to its request.
struct Post {
    outbox: Outbox,
    /// The id the answer goes out under: the retry's, for a call resumed after
    /// `input_required` (the call keeps its first id inside the gateway).
    answer_as: Option<Value>,
}

/// What a session is made of, besides its upstream side.
pub struct Setup {
    pub upstream: Upstream,
    /// Who opened it (its owner), with what their token grants.
    pub caller: Arc<Caller>,
    /// The bound of each stream's outbox, in bytes.
    pub stream_buffer: usize,
}

/// A downstream session and the POSTs waiting for their answers, by request id.
pub struct HttpSession {
    pub session: Rc<Session>,
    owner: Owner,
    waiting: RefCell<HashMap<String, Post>>,
    /// The session's GET stream, while one is open: what belongs to no request (`list_changed`).
    stream: RefCell<Option<Outbox>>,
    stream_buffer: usize,
    /// 2026-07-28: where it waits for a retry after `input_required`; an answer that comes
    /// while no POST waits for it is kept for the retry.
    parking: Option<Parking>,
    unclaimed: RefCell<HashMap<String, Outbound>>,
    /// Its driver's commands, while it has one.
    driver: RefCell<Option<mpsc::WeakUnboundedSender<Box<Command>>>>,
    /// Its id among this worker's sessions (`here`), while it is one of them.
    known_here_as: RefCell<Option<String>>,
}

thread_local! {
    /// The sessions that live on this worker, by id: a request that lands on its session's own
    /// worker talks to it directly, without the hop through its driver.
    static HERE: RefCell<HashMap<String, Weak<HttpSession>>> = RefCell::default();
}

/// The session `id` if it lives on this worker (ask the table first: this knows no owners).
pub fn here(id: &str) -> Option<Rc<HttpSession>> {
    HERE.with(|here| here.borrow().get(id).and_then(Weak::upgrade))
}

/// What a request on another worker (or any request of a 2025-11-25 session) asks of it.
enum Command {
    /// A message, and for a request the outbox of its POST.
    Exchange(Incoming, Option<Outbox>, Arc<Caller>),
    Resume(Value, Request, oneshot::Sender<Inbox>),
    OpenStream(oneshot::Sender<Inbox>),
    Abandon(Value, &'static str),
    /// A message another replica relayed (a cancel, an answer): no caller of its own.
    Relayed(Incoming),
    /// A request another replica relayed (a task's), and the outbox of its messages.
    RelayedRequest(Incoming, Outbox),
    /// The session's shared record changed at another replica.
    Follow(crate::session::Followed),
    End(String, oneshot::Sender<()>),
}

/// A session, from any worker. When the last handle is dropped, the session ends. Commands are
/// boxed: an idle session's channel holds a block of slots, each the size of one.
#[derive(Clone)]
pub struct SessionHandle {
    commands: mpsc::UnboundedSender<Box<Command>>,
    /// The bound of the outboxes it makes for its POSTs.
    stream_buffer: usize,
}

/// The session has ended.
#[derive(Debug)]
pub struct Gone;

impl SessionHandle {
    /// One message; for a request, the messages its POST carries back. The POST's outbox is
    /// made here and sent with it: the POST waits on its own side at once, with no round trip
    /// to the session's worker first.
    pub fn exchange(&self, message: Incoming, caller: Arc<Caller>) -> Result<Option<Inbox>, Gone> {
        let (outbox, inbox) = match message.is_request() {
            true => {
                let (outbox, inbox) = outbox::channel(self.stream_buffer);
                (Some(outbox), Some(inbox))
            }
            false => (None, None),
        };
        let command = Box::new(Command::Exchange(message, outbox, caller));
        self.commands.send(command).map_err(|_| Gone)?;
        Ok(inbox)
    }

    /// The retry `retry` of call `id` (see [`HttpSession::resume`]).
    pub async fn resume(&self, id: Value, retry: Request) -> Result<Inbox, Gone> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Box::new(Command::Resume(id, retry, reply)))
            .map_err(|_| Gone)?;
        answer.await.map_err(|_| Gone)
    }

    /// The session's stream of what belongs to no request (a new one replaces the last).
    pub async fn open_stream(&self) -> Result<Inbox, Gone> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Box::new(Command::OpenStream(reply)))
            .map_err(|_| Gone)?;
        answer.await.map_err(|_| Gone)
    }

    /// A message of the session's client that another replica relayed: a cancel of a call
    /// made here, an answer to what was asked here.
    pub fn relayed(&self, message: Incoming) {
        let _ = self.commands.send(Box::new(Command::Relayed(message)));
    }

    /// A request of the session's client that another replica relayed (a request of a task
    /// made here): the messages for its POST there.
    pub fn relayed_request(&self, message: Incoming) -> Option<Inbox> {
        let (outbox, inbox) = outbox::channel(self.stream_buffer);
        let command = Box::new(Command::RelayedRequest(message, outbox));
        self.commands.send(command).ok()?;
        Some(inbox)
    }

    /// The session's shared record says `record` (changed at another replica): this copy
    /// follows it.
    pub fn follow(&self, record: crate::session::Followed) {
        let _ = self.commands.send(Box::new(Command::Follow(record)));
    }

    /// The client gave up request `id` (its POST went away): cancelled upstream.
    pub fn abandon(&self, id: Value, reason: &'static str) {
        let _ = self.commands.send(Box::new(Command::Abandon(id, reason)));
    }

    /// Ends the session: its POSTs and stream end, what it left in flight is cancelled
    /// upstream (each cancel handed to its connection when this returns).
    pub async fn end(&self, reason: &str) {
        let (done, ended) = oneshot::channel();
        if self
            .commands
            .send(Box::new(Command::End(reason.to_owned(), done)))
            .is_ok()
        {
            let _ = ended.await;
        }
    }
}

impl HttpSession {
    /// A 2025-11-25 session (`parking` none), or a 2026-07-28 request on its own (which follows
    /// the upstream `changes` only if it is a listen).
    pub fn new(
        setup: Setup,
        changes: Option<&broadcast::Sender<Event>>,
        parking: Option<Parking>,
    ) -> Rc<Self> {
        Rc::new_cyclic(|this: &Weak<Self>| {
            let this = this.clone();
            let answers: Answers = Rc::new(move |message: Outbound, related: Option<&Value>| {
                if let Some(this) = this.upgrade() {
                    this.deliver(message, related);
                }
            });
            let owner = setup.caller.owner.clone();
            Self {
                session: Session::start(setup.upstream, answers, changes, setup.caller),
                owner,
                waiting: RefCell::default(),
                stream: RefCell::default(),
                stream_buffer: setup.stream_buffer,
                parking,
                unclaimed: RefCell::default(),
                driver: RefCell::default(),
                known_here_as: RefCell::default(),
            }
        })
    }

    /// Known on this worker as `id` until it ends.
    pub fn live_here_as(self: &Rc<Self>, id: &str) {
        HERE.with(|here| here.borrow_mut().insert(id.to_owned(), Rc::downgrade(self)));
        *self.known_here_as.borrow_mut() = Some(id.to_owned());
    }

    /// A handle to this session, for other workers: its driver started if none runs. The
    /// driver keeps the session alive while a handle exists.
    pub fn handle(self: &Rc<Self>) -> SessionHandle {
        let running = self
            .driver
            .borrow()
            .as_ref()
            .and_then(|weak| weak.upgrade());
        let stream_buffer = self.stream_buffer;
        if let Some(commands) = running {
            return SessionHandle {
                commands,
                stream_buffer,
            };
        }
        let (commands, received) = mpsc::unbounded_channel();
        *self.driver.borrow_mut() = Some(commands.downgrade());
        actix_rt::spawn(self.clone().drive(received));
        SessionHandle {
            commands,
            stream_buffer,
        }
    }

    /// Serves the commands of the session's handles until it is told to end, or every handle
    /// is gone (then it ends too: nothing it left in flight runs on for no one).
    async fn drive(self: Rc<Self>, mut commands: mpsc::UnboundedReceiver<Box<Command>>) {
        let reason = loop {
            let Some(command) = commands.recv().await else {
                break "the downstream session was dropped".to_owned();
            };
            match *command {
                Command::Exchange(message, outbox, caller) => {
                    self.session.called_by(caller);
                    self.exchange_into(message, outbox);
                }
                Command::Resume(id, retry, reply) => {
                    let _ = reply.send(self.resume(&id, &retry));
                }
                Command::OpenStream(reply) => {
                    let _ = reply.send(self.open_stream());
                }
                Command::Abandon(id, reason) => self.session.abandoned(&id, reason),
                Command::Relayed(message) => self.exchange_into(message, None),
                Command::RelayedRequest(message, outbox) => {
                    self.exchange_into(message, Some(outbox));
                }
                Command::Follow(record) => self.session.follow_record(record),
                Command::End(reason, done) => {
                    // Boxed: the end is rare, and an idle driver stays small.
                    Box::pin(self.end(&reason)).await;
                    let _ = done.send(());
                    return;
                }
            }
        };
        Box::pin(self.end(&reason)).await;
    }

    /// Ends the session: its POSTs and stream end without more, its calls are cancelled.
    pub async fn end(&self, reason: &str) {
        if let Some(id) = self.known_here_as.borrow_mut().take() {
            HERE.with(|here| here.borrow_mut().remove(&id));
        }
        self.waiting.borrow_mut().clear();
        self.stream.borrow_mut().take();
        self.session.end(reason).await;
    }

    /// Hands `message` to the POST it belongs to.
    fn deliver(self: &Rc<Self>, mut message: Outbound, related: Option<&Value>) {
        match (related, message.id().cloned()) {
            // A notification or a request of a request in flight: on that request's POST (if it
            // has gone, on the GET stream).
            (Some(id), _) => {
                let waiting = self.waiting.borrow();
                let on_post = waiting
                    .get(&id.to_string())
                    .map(|p| p.outbox.send(&message));
                drop(waiting);
                match on_post {
                    Some(Ok(())) => {}
                    Some(Err(outbox::Overflow)) => self.fell_behind(id),
                    None => self.to_stream(&message),
                }
            }
            // An answer: the last message of its POST.
            (None, Some(id)) => {
                let Some(post) = self.waiting.borrow_mut().remove(&id.to_string()) else {
                    if self.parking.is_some() {
                        self.unclaimed.borrow_mut().insert(id.to_string(), message);
                    }
                    return;
                };
                self.park_if_waiting_for_input(&id, &message);
                if let Some(answer_as) = post.answer_as {
                    message.answer_as(answer_as);
                }
                // An answer goes whatever was queued before it: it is the stream's last.
                let _ = post.outbox.send_outgoing(Outgoing::of(&message));
            }
            // A notification of no request: on the GET stream, if one is open.
            (None, None) => self.to_stream(&message),
        }
    }

    /// 2026-07-28: a call answered `input_required` waits for its retry.
    fn park_if_waiting_for_input(self: &Rc<Self>, id: &Value, answer: &Outbound) {
        let Some(parking) = &self.parking else {
            return;
        };
        if let Some(state) = answer.input_required_state() {
            parking.park(state, self.handle(), id.clone(), self.owner.clone());
        }
    }

    /// The POST of request `id` is not read fast enough: its stream ends, and the request with
    /// it (cancelled upstream), rather than the gateway holding what it cannot deliver.
    fn fell_behind(&self, id: &Value) {
        self.waiting.borrow_mut().remove(&id.to_string());
        let reason = "the downstream client did not read its stream (over --stream-buffer)";
        tracing::info!(%id, "{reason}");
        self.session.abandoned(id, reason);
    }

    /// On the GET stream, if one is open; one whose reader fell behind is ended.
    fn to_stream(&self, message: &Outbound) {
        let mut stream = self.stream.borrow_mut();
        if let Some(Err(outbox::Overflow)) = stream.as_ref().map(|s| s.send(message)) {
            tracing::info!("a GET stream was ended: its reader fell behind (--stream-buffer)");
            *stream = None;
        }
    }

    /// One message; for a request, the messages its POST carries back.
    pub fn exchange(&self, message: Incoming, caller: Arc<Caller>) -> Option<Inbox> {
        self.session.called_by(caller);
        if !message.is_request() {
            self.exchange_into(message, None);
            return None;
        }
        let (outbox, inbox) = outbox::channel(self.stream_buffer);
        self.exchange_into(message, Some(outbox));
        Some(inbox)
    }

    /// One message; for a request, what belongs to it goes to `outbox` (its POST's).
    fn exchange_into(&self, message: Incoming, outbox: Option<Outbox>) {
        if let Some(cancelled) = message.cancels() {
            // The cancelled request's POST ends without an answer.
            self.waiting.borrow_mut().remove(&cancelled.to_string());
        }
        let (Some(outbox), Some(request)) = (outbox, message.request()) else {
            return self.session.message(message);
        };
        let key = request.id.to_string();
        if self.waiting.borrow().contains_key(&key) {
            // The client reused the id of a request still in flight: refused on its own POST,
            // leaving the first's alone.
            let why = "a request with this id is in flight";
            let _ = outbox.send(&error(&request.id, INVALID_PARAMS, why).into());
            return;
        }
        let post = Post {
            outbox,
            answer_as: None,
        };
        self.waiting.borrow_mut().insert(key, post);
        self.session.message(message);
    }

    /// The retry `retry` of call `id`, answered `input_required` before: its responses go to
    /// the upstream requests, and what belongs to the call now to the retry's POST.
    pub fn resume(&self, id: &Value, retry: &Request) -> Inbox {
        let messages = self.wait_for(id, Some(retry.id.clone()));
        let kept = self.unclaimed.borrow_mut().remove(&id.to_string());
        match kept {
            // The call ended while it waited for its retry.
            Some(answer) => self.deliver_kept(id, answer),
            None => self.session.resume(id, &retry.params["inputResponses"]),
        }
        messages
    }

    fn deliver_kept(&self, id: &Value, mut answer: Outbound) {
        if let Some(post) = self.waiting.borrow_mut().remove(&id.to_string()) {
            if let Some(answer_as) = post.answer_as {
                answer.answer_as(answer_as);
            }
            let _ = post.outbox.send(&answer);
        }
    }

    fn wait_for(&self, id: &Value, answer_as: Option<Value>) -> Inbox {
        let (outbox, inbox) = outbox::channel(self.stream_buffer);
        let post = Post { outbox, answer_as };
        self.waiting.borrow_mut().insert(id.to_string(), post);
        inbox
    }

    /// Opens the session's stream of what belongs to no request (a new one replaces the last).
    pub fn open_stream(&self) -> Inbox {
        let (outbox, inbox) = outbox::channel(self.stream_buffer);
        *self.stream.borrow_mut() = Some(outbox);
        inbox
    }
}

/// Whom a request's POST going away cancels it at: the session itself (on this worker) or its
/// handle.
pub enum Target {
    Here(Rc<HttpSession>),
    Handle(SessionHandle),
    /// Served at another replica (`relay.rs`).
    Relayed(super::relay::RelayedPost),
}

/// A stateless (2026-07-28) request in flight: its POST aborted (this dropped before the
/// answer) is its cancel. It keeps the request's session alive for as long as its POST lasts
/// (an event stream outlives the handler that made it).
pub struct AbortIsCancel {
    pub target: Target,
    pub id: Value,
    pub answered: bool,
}

impl Drop for AbortIsCancel {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let reason = "the downstream client aborted the request";
        match &self.target {
            Target::Here(session) => session.session.abandoned(&self.id, reason),
            Target::Handle(handle) => handle.abandon(self.id.clone(), reason),
            Target::Relayed(post) => post.abandon(),
        }
    }
}
