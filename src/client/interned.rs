//! What many connections to the same server were told at the handshake, kept once per process:
//! a parsed `InitializeResult` with its capabilities is a few KB of maps, the same for the
//! 10,000 clients a service holds to one server.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::protocol::lifecycle::InitializeResult;

/// Distinct results kept for sharing; beyond, a result is simply not shared.
const KEPT: usize = 256;

static SEEN: Mutex<Vec<Weak<InitializeResult>>> = Mutex::new(Vec::new());

/// `result`, or an equal one a live connection already holds.
pub(super) fn shared(result: InitializeResult) -> Arc<InitializeResult> {
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    seen.retain(|kept| kept.strong_count() > 0);
    if let Some(same) = seen
        .iter()
        .filter_map(Weak::upgrade)
        .find(|kept| **kept == result)
    {
        return same;
    }
    let result = Arc::new(result);
    if seen.len() < KEPT {
        seen.push(Arc::downgrade(&result));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(name: &str) -> InitializeResult {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}, "tasks": {"list": {}}},
            "serverInfo": {"name": name, "version": "1"},
        }))
        .expect("valid")
    }

    #[test]
    fn equal_results_are_one_allocation_and_different_ones_stay_apart() {
        let a = shared(result("interned-a"));
        let again = shared(result("interned-a"));
        let b = shared(result("interned-b"));
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.server_info.name, "interned-b");
        drop((a, again));
        // Nobody holds it any more: a new one is made, and kept.
        let fresh = shared(result("interned-a"));
        assert_eq!(Arc::strong_count(&fresh), 1);
    }
}
