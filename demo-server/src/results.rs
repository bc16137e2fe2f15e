//! What a 2026-07-28 result must say about itself: its `resultType` on every result, and on the
//! cacheable ones (the list methods, `resources/read`) how long and by whom it may be cached.
//! A request is of that revision when its `_meta` names its protocol version; the results of
//! 2025-11-25 requests are left as they are.

use serde_json::Value;

use crate::server::{Reply, Step};

/// The `_meta` key a 2026-07-28 request names its protocol version under.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The revision's rules for one request's result, or `None` for a request of an older revision.
#[derive(Clone, Copy)]
pub(crate) struct Modern {
    /// The result may be cached (`ttlMs`, `cacheScope` required).
    cacheable: bool,
    /// How long a cacheable result may be kept (`--list-ttl-ms`; 0: not at all).
    ttl_ms: u64,
}

impl Modern {
    /// The rules for `method`'s result, if its `params` are of the 2026-07-28 revision.
    pub(crate) fn of(method: &str, params: &Value, ttl_ms: u64) -> Option<Self> {
        params.get("_meta")?.get(PROTOCOL_VERSION_META)?.as_str()?;
        let cacheable = matches!(
            method,
            "tools/list"
                | "prompts/list"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
        );
        Some(Self { cacheable, ttl_ms })
    }

    /// A cacheable result (the `tools/list` built once) as a 2026-07-28 request gets it.
    pub(crate) fn cacheable(result: &Value, ttl_ms: u64) -> Value {
        let modern = Self {
            cacheable: true,
            ttl_ms,
        };
        modern.complete(Ok(result.clone())).unwrap_or_default()
    }

    /// `step`, its result (now or once its task ends) made complete for the revision.
    pub(crate) fn complete_step(self, step: Step) -> Step {
        match step {
            Step::Reply(reply) => Step::Reply(self.complete(reply)),
            Step::PauseReading(reply, pause) => Step::PauseReading(self.complete(reply), pause),
            Step::Spawn { task, cancellable } => Step::Spawn {
                task: Box::pin(async move { self.complete(task.await) }),
                cancellable,
            },
            Step::Crash(code) => Step::Crash(code),
        }
    }

    /// `reply` with what the revision requires of a result, where it says nothing of its own
    /// (a task's `resultType: "task"`, an `input_required`, a `ttlMs` set by `--list-ttl-ms`
    /// are kept).
    pub(crate) fn complete(self, reply: Reply) -> Reply {
        let mut result = reply?;
        if let Value::Object(fields) = &mut result {
            fields
                .entry("resultType")
                .or_insert_with(|| Value::from("complete"));
            if self.cacheable {
                fields
                    .entry("ttlMs")
                    .or_insert_with(|| Value::from(self.ttl_ms));
                fields
                    .entry("cacheScope")
                    .or_insert_with(|| Value::from("private"));
            }
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn modern() -> Value {
        json!({"_meta": {PROTOCOL_VERSION_META: "2026-07-28"}})
    }

    #[test]
    fn only_a_request_naming_its_revision_is_modern() {
        assert!(Modern::of("tools/call", &modern(), 0).is_some());
        assert!(Modern::of("tools/call", &json!({}), 0).is_none());
        assert!(Modern::of("tools/call", &Value::Null, 0).is_none());
        let not_a_version = json!({"_meta": {PROTOCOL_VERSION_META: 7}});
        assert!(Modern::of("tools/call", &not_a_version, 0).is_none());
    }

    #[test]
    fn every_result_says_complete_and_a_cacheable_one_how_long() {
        let call = Modern::of("tools/call", &modern(), 500).unwrap();
        assert_eq!(
            call.complete(Ok(json!({"content": []}))),
            Ok(json!({"content": [], "resultType": "complete"}))
        );
        let list = Modern::of("prompts/list", &modern(), 500).unwrap();
        assert_eq!(
            list.complete(Ok(json!({"prompts": []}))),
            Ok(
                json!({"prompts": [], "resultType": "complete", "ttlMs": 500,
                "cacheScope": "private"})
            )
        );
    }

    #[test]
    fn what_a_result_says_of_itself_is_kept_and_errors_pass() {
        let call = Modern::of("tools/call", &modern(), 0).unwrap();
        let task = json!({"resultType": "task", "taskId": "t"});
        assert_eq!(call.complete(Ok(task.clone())), Ok(task));
        let error = Err((-32602, "no".to_owned()));
        assert_eq!(call.complete(error.clone()), error);
        let read = Modern::of("resources/read", &modern(), 0).unwrap();
        let kept = json!({"contents": [], "ttlMs": 9, "cacheScope": "public"});
        let completed = read.complete(Ok(kept)).unwrap();
        assert_eq!(
            (completed["ttlMs"].clone(), completed["cacheScope"].clone()),
            (json!(9), json!("public"))
        );
    }
}
