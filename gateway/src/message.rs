//! A downstream message as the gateway takes it, over HTTP or stdio: one JSON-RPC object whose
//! id, if any, is a string or a number, whose method, if any, is a string, and which is a
//! request, a notification or an answer. Anything else is answered `-32600` (`-32700` for what
//! is not JSON) before anything runs.

use serde_json::{json, Value};

/// JSON-RPC: the message is not a valid request.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the body is not JSON.
const PARSE_ERROR: i64 = -32700;

/// One JSON-RPC message, or the error that answers it (id `null`: the message has none the
/// gateway can name).
pub fn parse(body: &[u8]) -> Result<Value, Value> {
    let refuse = |code, why: &str| json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": why}});
    let message = serde_json::from_slice::<Value>(body)
        .map_err(|_| refuse(PARSE_ERROR, "the body is not a JSON-RPC message"))?;
    let Some(object) = message.as_object() else {
        return Err(refuse(
            INVALID_REQUEST,
            "one JSON-RPC message (an object) per POST",
        ));
    };
    if let Some(id) = object.get("id") {
        if !(id.is_string() || id.is_number()) {
            return Err(refuse(INVALID_REQUEST, "an id is a string or a number"));
        }
    }
    let method = object.get("method");
    if method.is_some_and(|m| !m.is_string()) {
        return Err(refuse(INVALID_REQUEST, "a method is a string"));
    }
    let answer = object.contains_key("result") || object.contains_key("error");
    if method.is_none() && !(answer && object.contains_key("id")) {
        return Err(refuse(
            INVALID_REQUEST,
            "neither a request, a notification nor an answer",
        ));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> i64 {
        let answer = parse(body.as_bytes()).expect_err(body);
        assert_eq!(answer["id"], Value::Null, "{answer}");
        answer["error"]["code"].as_i64().unwrap_or_default()
    }

    #[test]
    fn ids_that_are_not_strings_or_numbers_are_refused_before_anything_runs() {
        let call = |id: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{}}}}"#)
        };
        assert_eq!(refused(&call(r#"{"a":1}"#)), INVALID_REQUEST);
        assert_eq!(refused(&call("[1]")), INVALID_REQUEST);
        assert_eq!(refused(&call("true")), INVALID_REQUEST);
        assert_eq!(refused(&call("null")), INVALID_REQUEST);
        assert!(parse(call("7").as_bytes()).is_ok());
        assert!(parse(call(r#""seven""#).as_bytes()).is_ok());
    }

    #[test]
    fn what_is_not_one_message_is_refused_saying_so() {
        assert_eq!(refused("{"), PARSE_ERROR);
        assert_eq!(refused("[]"), INVALID_REQUEST);
        assert_eq!(refused(r#"{"jsonrpc":"2.0","method":7}"#), INVALID_REQUEST);
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(parse(answer.as_bytes()).is_ok());
        let notification = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(parse(notification.as_bytes()).is_ok());
    }

    proptest::proptest! {
        /// Whatever a client sends, the gateway answers it or takes it: it never panics, and
        /// what it takes has an id it can name.
        #[test]
        fn any_body_is_refused_or_taken_with_a_nameable_id(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            if let Ok(message) = parse(&body) {
                let id = message.get("id");
                proptest::prop_assert!(id.is_none_or(|id| id.is_string() || id.is_number()));
            }
        }

        #[test]
        fn any_json_value_as_an_id_is_taken_only_if_a_string_or_a_number(id in json_value()) {
            let message = json!({"jsonrpc": "2.0", "id": id.clone(), "method": "tools/call"});
            let taken = parse(message.to_string().as_bytes()).is_ok();
            proptest::prop_assert_eq!(taken, id.is_string() || id.is_number());
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }
}
