//! A downstream message as the gateway takes it, over HTTP or stdio: parsed once into what it
//! is (a request, a notification or an answer), its id, if any, a string or a number, its
//! method, if any, a string. Anything else is answered `-32600` (`-32700` for what is not JSON)
//! before anything runs.

use serde_json::{json, Value};

use crate::method::Method;

/// JSON-RPC: the message is not a valid request.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the body is not JSON.
const PARSE_ERROR: i64 = -32700;

/// One downstream message.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A request: answered under its id.
    Request(Request),
    /// A notification: nothing answers it.
    Notification { method: String, params: Value },
    /// The client's answer to a request an upstream server asked of it (the whole message: its
    /// `result` or `error` goes back upstream as it came).
    Answer { id: Value, message: Value },
}

/// A downstream request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// A string or a number, kept as sent: the answer goes back under it.
    pub id: Value,
    /// What it asks.
    pub method: Method,
    /// Its method as sent (for what the gateway does not serve, and for spans).
    pub name: String,
    /// Its params (`null` when it has none).
    pub params: Value,
}

impl Request {
    /// Its `_meta` (`null` when it has none).
    pub fn meta(&self) -> &Value {
        &self.params["_meta"]
    }
}

impl Incoming {
    pub fn is_request(&self) -> bool {
        matches!(self, Self::Request(_))
    }

    /// The request this is, if it is one.
    pub fn request(&self) -> Option<&Request> {
        match self {
            Self::Request(request) => Some(request),
            _ => None,
        }
    }

    /// The request id a `notifications/cancelled` names.
    pub fn cancels(&self) -> Option<&Value> {
        match self {
            Self::Notification { method, params } if method == "notifications/cancelled" => {
                params.get("requestId")
            }
            _ => None,
        }
    }
}

/// One JSON-RPC message, or the error that answers it (id `null`: the message has none the
/// gateway can name).
pub fn parse(body: &[u8]) -> Result<Incoming, Value> {
    let refuse = |code, why: &str| json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": why}});
    let message = serde_json::from_slice::<Value>(body)
        .map_err(|_| refuse(PARSE_ERROR, "the body is not a JSON-RPC message"))?;
    let Value::Object(mut object) = message else {
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
    let method = match object.remove("method") {
        None => None,
        Some(Value::String(method)) => Some(method),
        Some(_) => return Err(refuse(INVALID_REQUEST, "a method is a string")),
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (method, object.remove("id")) {
        (Some(name), Some(id)) => Ok(Incoming::Request(Request {
            id,
            method: Method::of(&name),
            name,
            params,
        })),
        (Some(method), None) => Ok(Incoming::Notification { method, params }),
        (None, Some(id)) if object.contains_key("result") || object.contains_key("error") => {
            object.insert("id".into(), id.clone());
            Ok(Incoming::Answer {
                id,
                message: Value::Object(object),
            })
        }
        _ => Err(refuse(
            INVALID_REQUEST,
            "neither a request, a notification nor an answer",
        )),
    }
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
    fn a_request_is_read_once_into_its_method_id_and_params() {
        let body = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}"#;
        let Ok(Incoming::Request(request)) = parse(body.as_bytes()) else {
            panic!("a request");
        };
        assert_eq!(request.id, json!("a"));
        assert_eq!(request.method, Method::of("tools/call"));
        assert_eq!(request.name, "tools/call");
        assert_eq!(request.meta()["progressToken"], 1);
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#;
        let cancel = parse(cancel.as_bytes()).expect("a notification");
        assert_eq!(cancel.cancels(), Some(&json!("a")));
        assert!(!cancel.is_request());
    }

    #[test]
    fn what_is_not_one_message_is_refused_saying_so() {
        assert_eq!(refused("{"), PARSE_ERROR);
        assert_eq!(refused("[]"), INVALID_REQUEST);
        assert_eq!(refused(r#"{"jsonrpc":"2.0","method":7}"#), INVALID_REQUEST);
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let Ok(Incoming::Answer { id, message }) = parse(answer.as_bytes()) else {
            panic!("an answer");
        };
        assert_eq!(
            (id, message),
            (json!(1), json!({"jsonrpc":"2.0","id":1,"result":{}}))
        );
        let notification = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(
            parse(notification.as_bytes()),
            Ok(Incoming::Notification { method, params: Value::Null }) if method == "notifications/initialized"
        ));
    }

    proptest::proptest! {
        /// Whatever a client sends, the gateway answers it or takes it: it never panics, and
        /// what it takes has an id it can name.
        #[test]
        fn any_body_is_refused_or_taken_with_a_nameable_id(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let id = match parse(&body) {
                Ok(Incoming::Request(request)) => Some(request.id),
                Ok(Incoming::Answer { id, .. }) => Some(id),
                _ => None,
            };
            proptest::prop_assert!(id.is_none_or(|id| id.is_string() || id.is_number()));
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
