//! 2026-07-28 has no server requests: a server that needs its client's input answers the call
//! `input_required`, with the requests (`inputRequests`, by key) and a `requestState`; the client
//! retries the call with a new id, adding `inputResponses` and echoing the state (MRTR).
//!
//! Upstream, the call goes on: the server asked its request (the legacy way, or through the
//! library's own MRTR) and waits for the answer. So what it asks of a 2026-07-28 caller is
//! answered downstream `input_required`, the call left in flight; the retry's responses answer
//! the upstream server's requests, and the call's answer goes to the retry (see `http.rs`,
//! which holds the waiting call by its `requestState`).

use std::{rc::Rc, time::Duration};

use actix_mcp::HandlerError;
use serde_json::{json, Map, Value};

use super::Session;
use crate::replies::{error, METHOD_NOT_FOUND, MISSING_CAPABILITY};

/// How long what an upstream server asks is gathered before the call is answered
/// `input_required`: a server that asks several things at once is asked of the client in one
/// round, not one round each.
const GATHER: Duration = Duration::from_millis(25);

impl Session {
    /// [`ask_for_input`](Self::ask_for_input) once what is asked with this has come too.
    pub(super) fn ask_for_input_soon(self: &Rc<Self>, related: &Value) {
        {
            let mut state = self.state.borrow_mut();
            if state.gathering.contains(related) {
                return;
            }
            state.gathering.push(related.clone());
        }
        let (session, related) = (Rc::downgrade(self), related.clone());
        actix_rt::spawn(async move {
            actix_rt::time::sleep(GATHER).await;
            if let Some(session) = session.upgrade() {
                session
                    .state
                    .borrow_mut()
                    .gathering
                    .retain(|r| *r != related);
                session.ask_for_input(&related);
            }
        });
    }

    /// Answers call `related` `input_required`, with every request asked of it not answered
    /// yet, unless it was so answered already and not retried (the next retry gets what was
    /// asked meanwhile). What the client did not declare is refused to the server; if nothing
    /// else is asked, the call fails with `MissingRequiredClientCapability` (cancelled upstream).
    pub(super) fn ask_for_input(&self, related: &Value) {
        // Its client has the requests already; what was asked since goes with the retry.
        if self
            .upstream
            .downstream
            .is_awaiting_input(self.key, related)
        {
            return;
        }
        let mut state = self.state.borrow_mut();
        let keys: Vec<String> = state
            .asked
            .iter()
            .filter(|(_, asked)| asked.related == *related)
            .map(|(key, _)| key.clone())
            .collect();
        let (mut requests, mut required) = (Map::new(), Map::new());
        for key in keys {
            let Some(asked) = state.asked.get(&key) else {
                continue;
            };
            let Some(needs) = asked.required.clone() else {
                requests.insert(key, asked.request.clone());
                continue;
            };
            required.extend(needs.as_object().cloned().unwrap_or_default());
            if let Some(asked) = state.asked.remove(&key) {
                let why = "the downstream client did not declare the capability";
                let _ = asked
                    .reply
                    .send(Err(HandlerError::new(METHOD_NOT_FOUND, why)));
            }
        }
        if requests.is_empty() {
            let reason = "the downstream client did not declare what the server needs";
            // Cancelled first: the call's own end sends nothing after this answer.
            let failed = !required.is_empty() && state.in_flight.cancel(related, Some(reason));
            drop(state);
            if failed {
                let why = "the server needs a capability the client did not declare";
                let mut answer = error(related, MISSING_CAPABILITY, why);
                answer["error"]["data"] = json!({"requiredCapabilities": required});
                (self.out)(answer.into(), None);
            }
            return;
        }
        drop(state);
        self.upstream
            .downstream
            .awaiting_input(self.key, related, true);
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": crate::replicas::here_named(
                self.upstream.replicas.as_ref(),
                &uuid::Uuid::new_v4().simple().to_string(),
            ),
        });
        let answer = json!({"jsonrpc": "2.0", "id": related, "result": result});
        (self.out)(answer.into(), None);
    }

    /// The retry of call `id` brought `responses` (`inputResponses`): each answers the upstream
    /// request of its key; what is still unanswered is asked again at once.
    pub fn resume(&self, id: &Value, responses: &Value) {
        let answered: Vec<_> = {
            self.upstream.downstream.awaiting_input(self.key, id, false);
            let mut state = self.state.borrow_mut();
            let responses = responses.as_object().into_iter().flatten();
            responses
                .filter_map(|(key, response)| {
                    let asked = state.asked.remove(key)?;
                    Some((asked, response.clone()))
                })
                .collect()
        };
        for (asked, response) in answered {
            let _ = asked.reply.send(Ok(response));
        }
        self.ask_for_input(id);
    }
}
