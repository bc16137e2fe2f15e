//! Requests an upstream server sends its client (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`), carried to the downstream session whose call caused them, and their cancels
//! both ways.
//!
//! Over stdio and the 2025-11-25 era the protocol does not say which call a server request
//! belongs to, and one upstream connection carries every session's calls. So the gateway carries
//! a server request only when there is one candidate: exactly one downstream session has calls
//! in flight on that server (sent on the stream of one of them; to a 2026-07-28 caller, as an
//! `input_required` answer to its call, see `session/input.rs`). With none, with several, or to
//! a client that did not declare the capability, the server gets a clear error instead of a
//! guess.
//!
//! A 2026-07-28 request that asked for logs (`_meta` `logLevel`) gets an upstream log message
//! by the same rule: when it is the one call in flight on that server ([`Downstream::log_recipient`]).
//!
//! The registry is shared with the upstream connections' handlers (on the library's threads);
//! each session reads what is carried to it on its own thread (`ToSession`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use actix_mcp::{Cancellation, ConnectOptions, HandlerError, LoggingLevel};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// The server requests carried downstream.
pub const METHODS: [&str; 3] = ["sampling/createMessage", "elicitation/create", "roots/list"];

/// JSON-RPC: the downstream side cannot take the request.
const METHOD_NOT_FOUND: i64 = -32601;
const INTERNAL_ERROR: i64 = -32603;

/// What the registry hands a session, in order.
pub enum ToSession {
    /// Send `method` downstream as request `id`, on the stream of downstream request
    /// `related`; answer `reply` with the client's response.
    Ask {
        id: String,
        method: String,
        params: Value,
        related: Value,
        reply: oneshot::Sender<Result<Value, HandlerError>>,
        /// 2026-07-28: what the client did not declare and this needs (as client
        /// capabilities); the session decides, with what else is asked, how to refuse it.
        required: Option<Value>,
    },
    /// The upstream server cancelled request `id`: cancel it downstream, if still asked.
    Withdraw { id: String, reason: String },
}

/// A session's key in the registry.
pub type SessionKey = u64;

/// Who may be asked: every session, its capabilities and its calls in flight by server.
#[derive(Clone, Default)]
pub struct Downstream(Arc<Mutex<Registry>>);

#[derive(Default)]
struct Registry {
    next_session: SessionKey,
    next_ask: u64,
    sessions: HashMap<SessionKey, Link>,
}

struct Link {
    reach: Reach,
    /// Calls in flight: (server, downstream id).
    calls: Vec<(String, Value)>,
    /// 2026-07-28: the calls in flight whose request asked for logs, at that level.
    log_levels: Vec<(Value, LoggingLevel)>,
    /// 2026-07-28: its calls answered `input_required` and not retried yet. Such a call's
    /// server waits for the answers it asked for: what it asks next is not of this call.
    awaiting_input: Vec<Value>,
    /// Boxed: an idle session's channel holds a block of slots, each the size of one.
    to_session: mpsc::UnboundedSender<Box<ToSession>>,
}

/// Whether a session can be asked, and what.
#[derive(Clone)]
enum Reach {
    /// Not initialized yet.
    Undeclared,
    /// A 2025-11-25 session, with the capabilities its client declared.
    Session(Value),
    /// A 2026-07-28 request of its own, with the capabilities its `_meta` declared: asked
    /// through its answer (`input_required`), not on a stream.
    Stateless(Value),
}

/// A call in flight on a server, registered until dropped.
pub struct CallInFlight {
    downstream: Downstream,
    key: SessionKey,
    server: String,
    id: Value,
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        let mut registry = self.downstream.lock();
        if let Some(link) = registry.sessions.get_mut(&self.key) {
            if let Some(at) = link
                .calls
                .iter()
                .position(|(server, id)| *server == self.server && *id == self.id)
            {
                link.calls.remove(at);
            }
            link.log_levels.retain(|(id, _)| *id != self.id);
        }
    }
}

impl Downstream {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new session: its key, and what will be carried to it.
    pub fn join(&self) -> (SessionKey, mpsc::UnboundedReceiver<Box<ToSession>>) {
        let (to_session, carried) = mpsc::unbounded_channel();
        let mut registry = self.lock();
        registry.next_session += 1;
        let key = registry.next_session;
        let link = Link {
            reach: Reach::Undeclared,
            calls: Vec::new(),
            log_levels: Vec::new(),
            awaiting_input: Vec::new(),
            to_session,
        };
        registry.sessions.insert(key, link);
        (key, carried)
    }

    /// Whether session `key`'s client declared what `method` with `params` needs (URL-mode
    /// elicitation: `elicitation.url`).
    pub fn declared(&self, key: SessionKey, method: &str, params: &Value) -> bool {
        let registry = self.lock();
        match registry.sessions.get(&key).map(|link| &link.reach) {
            Some(Reach::Session(capabilities) | Reach::Stateless(capabilities)) => {
                declares(capabilities, method, params)
            }
            _ => false,
        }
    }

    /// A new id for a request the gateway itself asks of a client (the same series as the
    /// upstream servers' requests, so no two collide).
    pub fn ask_id(&self) -> String {
        let mut registry = self.lock();
        registry.next_ask += 1;
        format!("gateway-{}", registry.next_ask)
    }

    /// The session's client declared `capabilities` (`initialize`).
    pub fn initialized(&self, key: SessionKey, capabilities: Value) {
        self.set_reach(key, Reach::Session(capabilities));
    }

    /// The session is one 2026-07-28 request, whose client declared `capabilities`.
    pub fn stateless(&self, key: SessionKey, capabilities: Value) {
        self.set_reach(key, Reach::Stateless(capabilities));
    }

    fn set_reach(&self, key: SessionKey, reach: Reach) {
        if let Some(link) = self.lock().sessions.get_mut(&key) {
            link.reach = reach;
        }
    }

    /// Session `key`'s call `id` was answered `input_required` (`waiting`), or retried.
    pub fn awaiting_input(&self, key: SessionKey, id: &Value, waiting: bool) {
        if let Some(link) = self.lock().sessions.get_mut(&key) {
            link.awaiting_input.retain(|call| call != id);
            if waiting {
                link.awaiting_input.push(id.clone());
            }
        }
    }

    /// Whether session `key`'s call `id` was answered `input_required` and not retried yet.
    pub fn is_awaiting_input(&self, key: SessionKey, id: &Value) -> bool {
        let registry = self.lock();
        let link = registry.sessions.get(&key);
        link.is_some_and(|link| link.awaiting_input.contains(id))
    }

    pub fn leave(&self, key: SessionKey) {
        self.lock().sessions.remove(&key);
    }

    /// Session `key`'s request `id` is in flight on `server` until the guard is dropped.
    pub fn call_begins(&self, key: SessionKey, server: &str, id: &Value) -> CallInFlight {
        if let Some(link) = self.lock().sessions.get_mut(&key) {
            link.calls.push((server.to_owned(), id.clone()));
        }
        CallInFlight {
            downstream: self.clone(),
            key,
            server: server.to_owned(),
            id: id.clone(),
        }
    }

    /// Session `key`'s call `id` (in flight) asked for logs at `level` and above.
    pub fn wants_logs(&self, key: SessionKey, id: &Value, level: LoggingLevel) {
        if let Some(link) = self.lock().sessions.get_mut(&key) {
            link.log_levels.push((id.clone(), level));
        }
    }

    /// The call a log message of `server` at `level` is for: the one call in flight on
    /// `server`, if its request asked for logs at `level` or below. With several calls in flight
    /// there, the message could be any one's: it goes to none rather than to the wrong client.
    pub fn log_recipient(&self, server: &str, level: LoggingLevel) -> Option<(SessionKey, Value)> {
        let registry = self.lock();
        let mut on_server = registry.sessions.iter().flat_map(|(key, link)| {
            let calls = link.calls.iter().filter(|(on, _)| on == server);
            calls.map(move |(_, id)| (*key, link, id))
        });
        let (key, link, id) = on_server.next()?;
        if on_server.next().is_some() {
            return None;
        }
        let (_, wanted) = link.log_levels.iter().find(|(call, _)| call == id)?;
        (*wanted <= level).then(|| (key, id.clone()))
    }

    /// `options` for upstream `server`, with the handlers that carry its requests downstream
    /// (declaring sampling, elicitation and roots upstream).
    pub fn handlers(&self, server: &str, mut options: ConnectOptions) -> ConnectOptions {
        for method in METHODS {
            let (downstream, server) = (self.clone(), server.to_owned());
            options = options.on_request_raw(method, move |params, token| {
                downstream
                    .clone()
                    .carry(server.clone(), method, params, token)
            });
        }
        options
    }

    /// Carries one server request downstream and waits for the answer, or for the upstream
    /// server's cancel (then the downstream request is cancelled too).
    async fn carry(
        self,
        server: String,
        method: &'static str,
        params: Value,
        token: Cancellation,
    ) -> Result<Value, HandlerError> {
        let (reply, answer) = oneshot::channel();
        let (id, to_session) = self.ask(&server, method, params, reply)?;
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| {
                Err(HandlerError::internal("the downstream session ended before answering"))
            }),
            () = token.cancelled() => {
                let reason = token.reason().unwrap_or("cancelled by the server").to_owned();
                let _ = to_session.send(Box::new(ToSession::Withdraw { id, reason }));
                Err(HandlerError::internal("cancelled"))
            }
        }
    }

    /// Picks the one session to ask and hands it the request.
    fn ask(
        &self,
        server: &str,
        method: &str,
        params: Value,
        reply: oneshot::Sender<Result<Value, HandlerError>>,
    ) -> Result<(String, mpsc::UnboundedSender<Box<ToSession>>), HandlerError> {
        let mut registry = self.lock();
        let mut callers = registry.sessions.values().filter_map(|link| {
            let call = link
                .calls
                .iter()
                .find(|(on, id)| on == server && !link.awaiting_input.contains(id))?;
            Some((link, call.1.clone()))
        });
        let refuse = |why: String| HandlerError::new(METHOD_NOT_FOUND, why);
        let (link, related) = match (callers.next(), callers.next()) {
            (Some(one), None) => one,
            (None, _) => {
                return Err(refuse(format!(
                    "{method}: no downstream call in flight on this server to carry it to"
                )))
            }
            (Some(_), Some(_)) => {
                return Err(refuse(format!(
                    "{method}: several downstream sessions have calls in flight on this server, \
                     and the protocol does not say which one this request belongs to"
                )))
            }
        };
        let declared = match &link.reach {
            Reach::Session(capabilities) | Reach::Stateless(capabilities) => {
                declares(capabilities, method, &params)
            }
            Reach::Undeclared => false,
        };
        let stateless = matches!(link.reach, Reach::Stateless(_));
        if !declared && !stateless {
            return Err(refuse(format!(
                "{method}: the downstream client did not declare the capability"
            )));
        }
        let required = (!declared).then(|| required(method, &params));
        let to_session = link.to_session.clone();
        registry.next_ask += 1;
        let id = format!("gateway-{}", registry.next_ask);
        let ask = ToSession::Ask {
            id: id.clone(),
            method: method.to_owned(),
            params,
            related,
            reply,
            required,
        };
        if to_session.send(Box::new(ask)).is_err() {
            return Err(HandlerError::new(
                INTERNAL_ERROR,
                "the downstream session ended",
            ));
        }
        Ok((id, to_session))
    }
}

/// The client capabilities `method` needs, as `MissingRequiredClientCapability` names them.
fn required(method: &str, params: &Value) -> Value {
    match method {
        "sampling/createMessage" => serde_json::json!({"sampling": {}}),
        "roots/list" => serde_json::json!({"roots": {}}),
        _ if params["mode"] == "url" => serde_json::json!({"elicitation": {"url": {}}}),
        _ => serde_json::json!({"elicitation": {}}),
    }
}

/// Whether `capabilities` cover `method` (URL-mode elicitation needs `elicitation.url`).
fn declares(capabilities: &Value, method: &str, params: &Value) -> bool {
    match method {
        "sampling/createMessage" => capabilities.get("sampling").is_some(),
        "roots/list" => capabilities.get("roots").is_some(),
        _ if params["mode"] == "url" => capabilities["elicitation"].get("url").is_some(),
        _ => capabilities.get("elicitation").is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked(downstream: &Downstream, server: &str) -> Result<String, HandlerError> {
        let (reply, _answer) = oneshot::channel();
        let params = json!({"messages": []});
        downstream
            .ask(server, "sampling/createMessage", params, reply)
            .map(|(id, _)| id)
    }

    #[test]
    fn a_log_goes_to_the_one_call_on_its_server_if_it_asked_for_that_level() {
        use actix_mcp::LoggingLevel::{Error, Info, Warning};
        let downstream = Downstream::default();
        let (a, _to_a) = downstream.join();
        let (b, _to_b) = downstream.join();
        let on_x = downstream.call_begins(a, "x", &json!(7));
        assert_eq!(downstream.log_recipient("x", Error), None, "it did not ask");
        downstream.wants_logs(a, &json!(7), Warning);
        assert_eq!(downstream.log_recipient("x", Error), Some((a, json!(7))));
        assert_eq!(downstream.log_recipient("x", Info), None, "below its level");
        assert_eq!(
            downstream.log_recipient("y", Error),
            None,
            "another server's"
        );
        let also_on_x = downstream.call_begins(b, "x", &json!(1));
        assert_eq!(
            downstream.log_recipient("x", Error),
            None,
            "could be either's"
        );
        drop(also_on_x);
        assert_eq!(downstream.log_recipient("x", Error), Some((a, json!(7))));
        drop(on_x);
        let again = downstream.call_begins(a, "x", &json!(7));
        assert_eq!(
            downstream.log_recipient("x", Error),
            None,
            "the wish ended with its call"
        );
        drop(again);
    }

    #[test]
    fn a_server_request_goes_to_the_one_session_with_a_call_on_that_server() {
        let downstream = Downstream::default();
        let (a, mut to_a) = downstream.join();
        let (b, mut to_b) = downstream.join();
        downstream.initialized(a, json!({"sampling": {}}));
        downstream.initialized(b, json!({"sampling": {}}));
        let _on_x = downstream.call_begins(a, "x", &json!(7));
        let _on_y = downstream.call_begins(b, "y", &json!(1));
        asked(&downstream, "x").expect("carried to a");
        match to_a.try_recv().map(|next| *next) {
            Ok(ToSession::Ask { related, .. }) => assert_eq!(related, json!(7)),
            _ => panic!("a was not asked"),
        }
        assert!(to_b.try_recv().is_err(), "b has no call on x");
    }

    #[test]
    fn two_sessions_on_one_server_or_none_is_refused_not_guessed() {
        let downstream = Downstream::default();
        let (a, _to_a) = downstream.join();
        let (b, _to_b) = downstream.join();
        downstream.initialized(a, json!({"sampling": {}}));
        downstream.initialized(b, json!({"sampling": {}}));
        assert!(asked(&downstream, "x").is_err(), "no call in flight");
        let on_a = downstream.call_begins(a, "x", &json!(1));
        let _on_b = downstream.call_begins(b, "x", &json!(1));
        let refused = asked(&downstream, "x").expect_err("ambiguous");
        assert!(refused.message.contains("several"), "{}", refused.message);
        drop(on_a);
        asked(&downstream, "x").expect("only b now");
    }

    #[test]
    fn a_call_waiting_for_its_retry_is_not_what_asks_next() {
        let downstream = Downstream::default();
        let (a, _to_a) = downstream.join();
        let (b, _to_b) = downstream.join();
        downstream.stateless(a, json!({"sampling": {}}));
        downstream.stateless(b, json!({"sampling": {}}));
        let _on_a = downstream.call_begins(a, "x", &json!(1));
        let _on_b = downstream.call_begins(b, "x", &json!(1));
        asked(&downstream, "x").expect_err("ambiguous");
        downstream.awaiting_input(a, &json!(1), true);
        asked(&downstream, "x").expect("b's call asks");
        downstream.awaiting_input(a, &json!(1), false);
        asked(&downstream, "x").expect_err("a was retried: ambiguous again");
    }

    #[test]
    fn a_client_is_asked_only_what_it_declared_in_either_era() {
        let downstream = Downstream::default();
        let (a, mut to_a) = downstream.join();
        downstream.initialized(a, json!({"roots": {}}));
        let _call = downstream.call_begins(a, "x", &json!(1));
        let refused = asked(&downstream, "x").expect_err("no sampling declared");
        assert!(
            refused.message.contains("capability"),
            "{}",
            refused.message
        );
        // A 2026-07-28 request is handed what it did not declare, marked so: it refuses it
        // itself, as what else is asked of the same call decides.
        downstream.stateless(a, json!({}));
        asked(&downstream, "x").expect("handed over");
        match to_a.try_recv().map(|next| *next) {
            Ok(ToSession::Ask { required, .. }) => {
                assert_eq!(required, Some(json!({"sampling": {}})))
            }
            _ => panic!("a was not handed the request"),
        }
        downstream.stateless(a, json!({"sampling": {}}));
        asked(&downstream, "x").expect("a 2026-07-28 request that declared it");
        match to_a.try_recv().map(|next| *next) {
            Ok(ToSession::Ask { required, .. }) => assert_eq!(required, None),
            _ => panic!("a was not asked"),
        }
    }
}
