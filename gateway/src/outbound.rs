//! A message for the downstream client before it is serialized: JSON the gateway made, or an
//! answer whose result is an upstream server's text, passed on unread (its keys in their order,
//! its numbers as written, and no time spent reading and writing it again).

use actix_mcp::protocol::RawResult;
use serde::Deserialize;
use serde_json::Value;

use crate::replies::{result, uncacheable};

#[derive(Debug)]
pub enum Outbound {
    /// Made by the gateway: an answer, a notification, or a request asked of the client.
    Json(Value),
    /// The answer of request `id`, its result an upstream server's.
    Passed { id: Value, result: RawResult },
}

impl From<Value> for Outbound {
    fn from(message: Value) -> Self {
        Self::Json(message)
    }
}

impl Outbound {
    /// The id of an answer, or of a request asked of the client (`None` for a notification).
    pub fn id(&self) -> Option<&Value> {
        match self {
            Self::Json(message) => message.get("id"),
            Self::Passed { id, .. } => Some(id),
        }
    }

    /// Answered under `id` instead (a retried 2026-07-28 request answers the first one's).
    pub fn answer_as(&mut self, new: Value) {
        match self {
            Self::Json(message) => message["id"] = new,
            Self::Passed { id, .. } => *id = new,
        }
    }

    /// Whether this answers a request (not a request of the client's, nor a notification).
    pub fn is_answer(&self) -> bool {
        match self {
            Self::Json(message) => message.get("id").is_some() && message.get("method").is_none(),
            Self::Passed { .. } => true,
        }
    }

    /// An answer's error code, if it is an error.
    pub fn error_code(&self) -> Option<i64> {
        match self {
            Self::Json(message) => message["error"]["code"].as_i64(),
            Self::Passed { .. } => None,
        }
    }

    /// The scope that would grant what an access rule refused (`FORBIDDEN`, its `data.scope`).
    pub fn scope_needed(&self) -> Option<&str> {
        let Self::Json(message) = self else {
            return None;
        };
        let error = &message["error"];
        let forbidden = error["code"].as_i64() == Some(crate::replies::FORBIDDEN);
        error["data"]["scope"].as_str().filter(|_| forbidden)
    }

    /// 2026-07-28: the `requestState` of an answer that asks the client for input. A passed
    /// result never does: the library answers an upstream server's input requests itself.
    pub fn input_required_state(&self) -> Option<&str> {
        let Self::Json(message) = self else {
            return None;
        };
        let result = &message["result"];
        let state = result["requestState"].as_str();
        state.filter(|_| result["resultType"] == "input_required")
    }

    /// The message as it goes on the wire.
    pub fn to_json(&self) -> String {
        match self {
            Self::Json(message) => message.to_string(),
            Self::Passed { id, result } => {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, result.get())
            }
        }
    }
}

/// What a routed request answers: a result the gateway made, or an upstream server's, passed
/// on unread.
pub enum Answer {
    Made(Value),
    Passed(RawResult),
}

impl Answer {
    /// The answer of request `id`; for a 2026-07-28 client (`modern`) with `resultType`.
    pub fn to(self, id: &Value, modern: bool) -> Outbound {
        match self {
            Self::Made(made) => result(id, made, modern).into(),
            Self::Passed(passed) => {
                let stamp = modern && !Present::in_result(&passed).result_type();
                let passed = match stamp {
                    true => with_fields(&passed, &[r#""resultType":"complete""#]).unwrap_or(passed),
                    false => passed,
                };
                Outbound::Passed {
                    id: id.clone(),
                    result: passed,
                }
            }
        }
    }

    /// [`uncacheable`] for either: the hints put into a passed result unread, unless the server
    /// gave hints of its own (then they are replaced, the result read).
    pub fn uncacheable(self) -> Self {
        let passed = match self {
            Self::Made(made) => return Self::Made(uncacheable(made)),
            Self::Passed(passed) => passed,
        };
        if !Present::in_result(&passed).cache_hint() {
            let hints = [r#""ttlMs":0"#, r#""cacheScope":"private""#];
            return Self::Passed(with_fields(&passed, &hints).unwrap_or(passed));
        }
        match serde_json::from_str(passed.get()) {
            Ok(made) => Self::Made(uncacheable(made)),
            Err(_) => Self::Passed(passed),
        }
    }
}

/// Which of the fields a 2026-07-28 result may need an upstream result already has.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Present {
    result_type: Option<serde::de::IgnoredAny>,
    ttl_ms: Option<serde::de::IgnoredAny>,
    cache_scope: Option<serde::de::IgnoredAny>,
}

impl Present {
    /// What `result` holds of them (nothing if it is not an object).
    pub fn in_result(result: &RawResult) -> Self {
        serde_json::from_str(result.get()).unwrap_or_default()
    }

    pub fn result_type(&self) -> bool {
        self.result_type.is_some()
    }

    /// `ttlMs` or `cacheScope`.
    pub fn cache_hint(&self) -> bool {
        self.ttl_ms.is_some() || self.cache_scope.is_some()
    }
}

/// `result` with `fields` (JSON text `"name":value`, none of them in it already) put first.
/// `None` if `result` is not an object.
pub fn with_fields(result: &RawResult, fields: &[&str]) -> Option<RawResult> {
    let rest = result.get().trim_start().strip_prefix('{')?;
    let empty = rest.trim_start().starts_with('}');
    let mut text = String::with_capacity(result.get().len() + 64);
    text.push('{');
    text.push_str(&fields.join(","));
    if !empty && !fields.is_empty() {
        text.push(',');
    }
    text.push_str(rest);
    serde_json::value::RawValue::from_string(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(text: &str) -> RawResult {
        serde_json::value::RawValue::from_string(text.into()).expect("JSON")
    }

    #[test]
    fn a_passed_answer_keeps_the_servers_text_and_takes_its_requests_id() {
        let text = r#"{"z":1,"a":123456789012345678901234567890,"f":1.10}"#;
        let mut answer = Outbound::Passed {
            id: json!(7),
            result: raw(text),
        };
        assert!(answer.is_answer());
        assert_eq!(answer.id(), Some(&json!(7)));
        answer.answer_as(json!("first"));
        assert_eq!(
            answer.to_json(),
            format!(r#"{{"jsonrpc":"2.0","id":"first","result":{text}}}"#)
        );
        assert_eq!(answer.input_required_state(), None);
    }

    #[test]
    fn gateway_made_messages_tell_answers_from_requests_and_notifications() {
        let asked =
            Outbound::from(json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage"}));
        assert!(!asked.is_answer());
        assert_eq!(asked.id(), Some(&json!(1)));
        let told = Outbound::from(json!({"jsonrpc": "2.0", "method": "notifications/progress"}));
        assert!(!told.is_answer());
        assert_eq!(told.id(), None);
        let refused = Outbound::from(json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32021}}));
        assert_eq!(refused.error_code(), Some(-32021));
        assert_eq!(refused.scope_needed(), None);
        let forbidden = Outbound::from(json!({"jsonrpc": "2.0", "id": 2,
            "error": {"code": crate::replies::FORBIDDEN, "message": "m", "data": {"scope": "admin"}}}));
        assert_eq!(forbidden.scope_needed(), Some("admin"));
        let waiting = Outbound::from(json!({"jsonrpc": "2.0", "id": 3,
            "result": {"resultType": "input_required", "requestState": "s"}}));
        assert_eq!(waiting.input_required_state(), Some("s"));
    }

    #[test]
    fn fields_go_first_into_an_object_and_never_into_anything_else() {
        let stamp = [r#""resultType":"complete""#];
        let stamped = with_fields(&raw(r#" {"content":[]}"#), &stamp).expect("an object");
        assert_eq!(stamped.get(), r#"{"resultType":"complete","content":[]}"#);
        let empty = with_fields(&raw("{ }"), &stamp).expect("an object");
        assert_eq!(empty.get(), r#"{"resultType":"complete" }"#);
        let none = with_fields(&raw(r#"{"a":1}"#), &[]).expect("an object");
        assert_eq!(none.get(), r#"{"a":1}"#);
        assert!(with_fields(&raw("[1]"), &stamp).is_none());
        assert!(with_fields(&raw("\"{\""), &stamp).is_none());
    }

    #[test]
    fn what_a_result_holds_of_the_eras_fields_is_read_without_its_values() {
        let present = Present::in_result(&raw(r#"{"ttlMs":5,"contents":[{"resultType":1}]}"#));
        assert!(present.cache_hint());
        assert!(!present.result_type());
        let none = Present::in_result(&raw("[]"));
        assert!(!none.cache_hint() && !none.result_type());
    }
}
