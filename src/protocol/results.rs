//! What every 2026-07-28 result may say about itself: its `resultType`, and for the list
//! methods, `resources/read` and `server/discover`, how long it may be cached (`ttlMs`) and by
//! whom (`cacheScope`). The list results share these in [`PageInfo`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// What a page of `tools/list`, `resources/list`, `resources/templates/list` or `prompts/list`
/// says besides its items: the `page` of each list result, whose fields sit beside the items on
/// the wire (`result.page.next_cursor` is the result's `nextCursor`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageInfo {
    /// The cursor of the next page; `None` on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// 2026-07-28: `complete` when present (absent means the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// 2026-07-28: how long this result may be cached, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// 2026-07-28: who may keep the cached result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// The result's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields of the result this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
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

    /// Every list result reads its page fields into `page`, keeps what it does not know in
    /// `page.extra`, and writes back exactly what was sent.
    #[test]
    fn list_results_share_one_page_and_keep_unknown_fields() {
        use crate::protocol::{
            prompts::ListPromptsResult,
            resources::{ListResourceTemplatesResult, ListResourcesResult},
            tools::ListToolsResult,
        };

        fn check<T>(items: &str, item: Value, page: impl Fn(&T) -> &PageInfo)
        where
            T: serde::de::DeserializeOwned + Serialize,
        {
            let sent = json!({
                items: [item],
                "nextCursor": "c2",
                "resultType": "x-later",
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"k": 1},
                "x-unknown": {"nested": [1, 2.5, null]},
                "another": "kept",
            });
            let typed: T = serde_json::from_value(sent.clone()).unwrap();
            let info = page(&typed);
            assert_eq!(info.next_cursor.as_deref(), Some("c2"), "{items}");
            assert_eq!(info.result_type, Some(ResultType::Other("x-later".into())));
            assert_eq!(info.ttl_ms, Some(0));
            assert_eq!(info.cache_scope, Some(CacheScope::Public));
            assert_eq!(
                info.meta,
                Some(json!({"k": 1}).as_object().unwrap().clone())
            );
            let extra: Vec<&str> = info.extra.keys().map(String::as_str).collect();
            assert_eq!(extra, ["another", "x-unknown"], "{items}: only the unknown");
            assert_eq!(serde_json::to_value(&typed).unwrap(), sent, "{items}");

            let bare = json!({ items: [] });
            let typed: T = serde_json::from_value(bare.clone()).unwrap();
            assert_eq!(page(&typed), &PageInfo::default(), "{items}");
            assert_eq!(serde_json::to_value(&typed).unwrap(), bare, "{items}");
            assert!(
                serde_json::from_value::<T>(json!({"nextCursor": "c"})).is_err(),
                "{items} are required"
            );
            assert!(
                serde_json::from_value::<T>(json!({ items: [], "ttlMs": "soon" })).is_err(),
                "{items}: a malformed known field is refused, not kept as unknown"
            );
        }

        check::<ListToolsResult>(
            "tools",
            json!({"name": "t", "inputSchema": {"type": "object"}, "x-tool": true}),
            |r| &r.page,
        );
        check::<ListPromptsResult>("prompts", json!({"name": "p", "x-p": 1}), |r| &r.page);
        check::<ListResourcesResult>(
            "resources",
            json!({"uri": "file:///a", "name": "a", "x-r": 1}),
            |r| &r.page,
        );
        check::<ListResourceTemplatesResult>(
            "resourceTemplates",
            json!({"uriTemplate": "file:///{p}", "name": "f", "x-t": 1}),
            |r| &r.page,
        );
    }
}
