//! 2026-07-28 has no server requests: a server that needs its client's input answers the call
//! `input_required`, with the requests (`inputRequests`, by key) and a `requestState`; the client
//! retries the call with a new id, adding `inputResponses` and echoing the state (MRTR).
//!
//! Upstream, the call goes on: the server asked its request (the legacy way, or through the
//! library's own MRTR) and waits for the answer. So what it asks of a 2026-07-28 caller is
//! answered downstream `input_required`, the call left in flight; the retry's responses answer
//! the upstream server's requests, and the call's answer goes to the retry (see `http.rs`,
//! which holds the waiting call by its `requestState`).

use serde_json::{json, Map, Value};

use super::Session;

impl Session {
    /// Answers call `related` `input_required`, with every request asked of it not answered
    /// yet, unless it was so answered already and not retried (the next retry gets what was
    /// asked meanwhile).
    pub(super) fn ask_for_input(&self, related: &Value) {
        let mut state = self.state.borrow_mut();
        if state.awaiting_input.contains(related) {
            return;
        }
        let requests: Map<String, Value> = state
            .asked
            .iter()
            .filter(|(_, asked)| asked.related == *related)
            .map(|(key, asked)| (key.clone(), asked.request.clone()))
            .collect();
        if requests.is_empty() {
            return;
        }
        state.awaiting_input.push(related.clone());
        drop(state);
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": uuid::Uuid::new_v4().simple().to_string(),
        });
        let answer = json!({"jsonrpc": "2.0", "id": related, "result": result});
        (self.out)(answer, None);
    }

    /// The retry of call `id` brought `responses` (`inputResponses`): each answers the upstream
    /// request of its key; what is still unanswered is asked again at once.
    pub fn resume(&self, id: &Value, responses: &Value) {
        let answered: Vec<_> = {
            let mut state = self.state.borrow_mut();
            state.awaiting_input.retain(|waiting| waiting != id);
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
