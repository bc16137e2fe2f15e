//! A downstream session over HTTP: the POSTs waiting for what belongs to their requests, by
//! request id, and the session's GET stream. A 2026-07-28 request is a session of its own; when
//! it is answered `input_required` it waits in the `Parking` for its retry, which takes over
//! its call (the answer goes out under the retry's id).

use std::{
    cell::RefCell,
    collections::HashMap,
    rc::{Rc, Weak},
};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::parking::Parking;
use crate::{
    changes::Event,
    session::{Answers, Session},
    upstream::Upstream,
};

/// The messages for one request's POST: its progress, then its answer (the stream ends there).
pub type Messages = mpsc::UnboundedReceiver<Value>;

/// A POST waiting for what belongs to its request.
struct Post {
    messages: mpsc::UnboundedSender<Value>,
    /// The id the answer goes out under: the retry's, for a call resumed after
    /// `input_required` (the call keeps its first id inside the gateway).
    answer_as: Option<Value>,
}

/// A downstream session and the POSTs waiting for their answers, by request id.
pub struct HttpSession {
    pub session: Rc<Session>,
    waiting: RefCell<HashMap<String, Post>>,
    /// The session's GET stream, while one is open: what belongs to no request (`list_changed`).
    stream: RefCell<Option<mpsc::UnboundedSender<Value>>>,
    /// 2026-07-28: where it waits for a retry after `input_required`; an answer that comes
    /// while no POST waits for it is kept for the retry.
    parking: Option<Rc<Parking>>,
    unclaimed: RefCell<HashMap<String, Value>>,
}

impl HttpSession {
    /// A 2025-11-25 session (`parking` none), or a 2026-07-28 request on its own.
    pub fn new(
        upstream: Upstream,
        changes: &broadcast::Sender<Event>,
        parking: Option<Rc<Parking>>,
    ) -> Rc<Self> {
        Rc::new_cyclic(|this: &Weak<Self>| {
            let this = this.clone();
            let answers: Answers = Rc::new(move |message: Value, related: Option<&Value>| {
                if let Some(this) = this.upgrade() {
                    this.deliver(message, related);
                }
            });
            Self {
                session: Session::start(upstream, answers, changes),
                waiting: RefCell::default(),
                stream: RefCell::default(),
                parking,
                unclaimed: RefCell::default(),
            }
        })
    }

    /// Hands `message` to the POST it belongs to.
    fn deliver(self: &Rc<Self>, mut message: Value, related: Option<&Value>) {
        let mut waiting = self.waiting.borrow_mut();
        let post = match (related, message.get("id").cloned()) {
            // A notification or a request of a request in flight: on that request's POST (if it
            // has gone, on the GET stream).
            (Some(id), _) => match waiting.get(&id.to_string()) {
                Some(post) => Some(post.messages.clone()),
                None => self.stream.borrow().clone(),
            },
            // An answer: the last message of its POST.
            (None, Some(id)) => {
                let Some(post) = waiting.remove(&id.to_string()) else {
                    if self.parking.is_some() {
                        self.unclaimed.borrow_mut().insert(id.to_string(), message);
                    }
                    return;
                };
                // 2026-07-28: a call answered `input_required` waits for its retry.
                if let Some(parking) = &self.parking {
                    let result = &message["result"];
                    let state = result["requestState"].as_str();
                    if let Some(state) = state.filter(|_| result["resultType"] == "input_required")
                    {
                        parking.park(state, self.clone(), id);
                    }
                }
                if let Some(answer_as) = post.answer_as {
                    message["id"] = answer_as;
                }
                Some(post.messages)
            }
            // A notification of no request: on the GET stream, if one is open.
            (None, None) => self.stream.borrow().clone(),
        };
        if let Some(post) = post {
            let _ = post.send(message);
        }
    }

    /// One message; for a request, the messages its POST carries back.
    pub fn exchange(&self, message: Value) -> Option<Messages> {
        let is_request = message["method"].is_string() && message.get("id").is_some();
        if message["method"] == "notifications/cancelled" {
            // The cancelled request's POST ends without an answer.
            let id = message["params"]["requestId"].to_string();
            self.waiting.borrow_mut().remove(&id);
        }
        if !is_request {
            self.session.message(message);
            return None;
        }
        let messages = self.wait_for(&message["id"], None);
        self.session.message(message);
        Some(messages)
    }

    /// The retry `retry` of call `id`, answered `input_required` before: its responses go to
    /// the upstream requests, and what belongs to the call now to the retry's POST.
    pub fn resume(&self, id: &Value, retry: &Value) -> Messages {
        let messages = self.wait_for(id, retry.get("id").cloned());
        let kept = self.unclaimed.borrow_mut().remove(&id.to_string());
        match kept {
            // The call ended while it waited for its retry.
            Some(answer) => self.deliver_kept(id, answer),
            None => self.session.resume(id, &retry["params"]["inputResponses"]),
        }
        messages
    }

    fn deliver_kept(&self, id: &Value, mut answer: Value) {
        if let Some(post) = self.waiting.borrow_mut().remove(&id.to_string()) {
            if let Some(answer_as) = post.answer_as {
                answer["id"] = answer_as;
            }
            let _ = post.messages.send(answer);
        }
    }

    fn wait_for(&self, id: &Value, answer_as: Option<Value>) -> Messages {
        let (messages, waiting) = mpsc::unbounded_channel();
        let post = Post {
            messages,
            answer_as,
        };
        self.waiting.borrow_mut().insert(id.to_string(), post);
        waiting
    }

    /// The session's POSTs still waiting end without an answer.
    pub fn forget_posts(&self) {
        self.waiting.borrow_mut().clear();
    }

    /// Opens the session's stream of what belongs to no request (a new one replaces the last).
    pub fn open_stream(&self) -> Messages {
        let (tx, rx) = mpsc::unbounded_channel::<Value>();
        *self.stream.borrow_mut() = Some(tx);
        rx
    }
}

/// A stateless (2026-07-28) request in flight: its POST aborted (this dropped before the
/// answer) is its cancel. It keeps the request's session alive for as long as its POST lasts
/// (an event stream outlives the handler that made it).
pub struct AbortIsCancel {
    pub session: Rc<HttpSession>,
    pub id: Value,
    pub answered: bool,
}

impl Drop for AbortIsCancel {
    fn drop(&mut self) {
        if !self.answered {
            let reason = "the downstream client aborted the request";
            self.session.session.abandoned(&self.id, reason);
        }
    }
}
