//! One downstream session's calls in flight, as a plain type: each routed call's downstream id
//! and the token that cancels its upstream call. A downstream cancel, a downstream client that
//! goes away, or the gateway's shutdown fires the token; the library then keeps the upstream
//! promises (nothing sent for a call never written; the cancel after the write for one written).

use std::collections::HashMap;

use actix_mcp::Cancellation;
use serde_json::Value;

#[derive(Default)]
pub struct InFlight {
    calls: HashMap<String, Cancellation>,
}

/// A JSON-RPC id as a key: its JSON text (`1` and `"1"` are two ids).
fn key(id: &Value) -> String {
    id.to_string()
}

impl InFlight {
    /// A routed call begins: its token, or `None` if a call with this id is still in flight
    /// (the downstream client reused an id).
    pub fn begin(&mut self, id: &Value) -> Option<Cancellation> {
        let key = key(id);
        if self.calls.contains_key(&key) {
            return None;
        }
        let token = Cancellation::new();
        self.calls.insert(key, token.clone());
        Some(token)
    }

    /// The downstream client cancelled `id`: its upstream call is cancelled. Whether it was in
    /// flight.
    pub fn cancel(&mut self, id: &Value, reason: Option<&str>) -> bool {
        match self.calls.remove(&key(id)) {
            Some(token) => {
                match reason {
                    Some(reason) => token.cancel_with_reason(reason),
                    None => token.cancel(),
                };
                true
            }
            None => false,
        }
    }

    /// `id`'s upstream call ended: whether its answer is still owed downstream (not if it was
    /// cancelled: a cancelled request gets no answer).
    pub fn end(&mut self, id: &Value) -> bool {
        self.calls.remove(&key(id)).is_some()
    }

    /// Cancels every call in flight with `reason`; how many there were.
    pub fn cancel_all(&mut self, reason: &str) -> usize {
        let calls = std::mem::take(&mut self.calls);
        for token in calls.values() {
            token.cancel_with_reason(reason);
        }
        calls.len()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.calls.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cancelled_call_is_owed_no_answer() {
        let mut calls = InFlight::default();
        let token = calls.begin(&json!(1)).expect("new");
        assert!(calls.cancel(&json!(1), Some("the user left")));
        assert!(token.is_cancelled());
        assert_eq!(token.reason(), Some("the user left"));
        assert!(!calls.end(&json!(1)), "no answer after a cancel");
    }

    #[test]
    fn an_id_in_flight_is_not_taken_twice_and_ids_keep_their_type() {
        let mut calls = InFlight::default();
        assert!(calls.begin(&json!(1)).is_some());
        assert!(calls.begin(&json!(1)).is_none());
        assert!(calls.begin(&json!("1")).is_some(), "\"1\" is another id");
        assert!(calls.end(&json!(1)));
        assert!(!calls.cancel(&json!(1), None), "ended: nothing to cancel");
        assert_eq!(calls.cancel_all("shutdown"), 1);
        assert_eq!(calls.len(), 0);
    }
}
