//! What every 2026-07-28 result may say about itself: its `resultType`, and for the list
//! methods, `resources/read` and `server/discover`, how long it may be cached (`ttlMs`) and by
//! whom (`cacheScope`).

use serde::{Deserialize, Serialize};

/// `resultType` of a 2026-07-28 result. Absent (any server of an older revision) means
/// [`Complete`](ResultType::Complete).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultType {
    /// The result is final.
    Complete,
    /// The server needs answers first (`inputRequests`); the client retries the request with them.
    InputRequired,
    /// The server made a task of the request (the tasks extension).
    Task,
    /// A value of an extension this crate does not know, as sent.
    #[serde(untagged)]
    Other(String),
}

/// Who may keep a cached result (`cacheScope`, 2026-07-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CacheScope {
    /// Any client may be given the cached result: it does not depend on who asked.
    Public,
    /// Only the client (the identity) that asked may reuse it.
    Private,
}

/// A result's caching hints, read without decoding the rest of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheHints {
    /// How long the result stays valid, in milliseconds; `0` or absent: do not cache.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// Who may keep it.
    #[serde(default)]
    pub cache_scope: Option<CacheScope>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_types_known_and_unknown_round_trip() {
        for (text, typed) in [
            ("complete", ResultType::Complete),
            ("input_required", ResultType::InputRequired),
            ("task", ResultType::Task),
            ("x-later", ResultType::Other("x-later".into())),
        ] {
            assert_eq!(
                serde_json::from_value::<ResultType>(json!(text)).unwrap(),
                typed
            );
            assert_eq!(serde_json::to_value(&typed).unwrap(), json!(text));
        }
    }

    #[test]
    fn cache_hints_are_read_from_any_result() {
        let hints: CacheHints =
            serde_json::from_value(json!({"tools": [], "ttlMs": 500, "cacheScope": "private"}))
                .unwrap();
        assert_eq!(hints.ttl_ms, Some(500));
        assert_eq!(hints.cache_scope, Some(CacheScope::Private));
        let none: CacheHints = serde_json::from_value(json!({"tools": []})).unwrap();
        assert_eq!(none, CacheHints::default());
    }
}
