//! JSON-RPC 2.0 framing: ids, how outgoing frames are written and incoming ones classified.

use std::{
    borrow::Cow,
    io::Write,
    sync::atomic::{AtomicU64, Ordering},
};

use serde::{Deserialize, Serialize};
use serde_json::{value::RawValue, Value};

/// A request's result as the server sent it, not yet decoded.
pub type RawResult = Box<RawValue>;

/// The internal id of a request: unique in the process and never reused.
///
/// It is also the request's JSON-RPC id on the wire, so a `notifications/cancelled` names exactly
/// the id that was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(u64);

static NEXT_REQUEST_ID: AtomicU64 = AtomicU64::new(1);

impl RequestId {
    /// Allocates a fresh id.
    pub fn next() -> Self {
        RequestId(NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// The id's number, as written on the wire.
    pub fn as_u64(self) -> u64 {
        self.0
    }

    /// The id with this number (for ids carried as plain numbers inside the crate).
    pub(crate) fn from_u64(n: u64) -> Self {
        RequestId(n)
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A JSON-RPC id as a peer sent it: a number or a string, kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WireId {
    /// A numeric id, exactly as sent.
    Number(serde_json::Number),
    /// A string id.
    String(String),
}

impl WireId {
    /// The id of one of our requests this names. Our ids are integers; a server that echoes
    /// one back as a string ("7" for 7) is tolerated, as rmcp does.
    pub fn as_request_id(&self) -> Option<RequestId> {
        match self {
            WireId::Number(n) => n.as_u64().map(RequestId),
            WireId::String(s) => s.parse().ok().map(RequestId),
        }
    }
}

/// The `error` member of a JSON-RPC response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (e.g. `-32601`, method not found).
    pub code: i64,
    /// A short description of the error.
    pub message: String,
    /// More about the error, shaped by its code; `None` if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// `-32601`: the method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// Appends one request frame (compact JSON and a newline) to `out`. With `meta` (the modern era's
/// per-request `_meta` entries), the params carry them.
pub(crate) fn write_request(
    out: &mut Vec<u8>,
    id: RequestId,
    method: &str,
    params: Option<&RawValue>,
    meta: Option<&str>,
) -> serde_json::Result<()> {
    if let Some(meta) = meta {
        let start = out.len();
        let written = write_request_with_meta(out, id, method, params, meta);
        if written.is_err() {
            out.truncate(start);
        }
        return written;
    }
    #[derive(Serialize)]
    struct Frame<'a> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a RawValue>,
    }
    let start = out.len();
    let frame = Frame {
        jsonrpc: "2.0",
        id: id.0,
        method,
        params,
    };
    if let Err(e) = serde_json::to_writer(&mut *out, &frame) {
        out.truncate(start);
        return Err(e);
    }
    out.push(b'\n');
    Ok(())
}

fn write_request_with_meta(
    out: &mut Vec<u8>,
    id: RequestId,
    method: &str,
    params: Option<&RawValue>,
    meta: &str,
) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.0.to_string().as_bytes());
    out.extend_from_slice(b",\"method\":");
    serde_json::to_writer(&mut *out, method)?;
    out.extend_from_slice(b",\"params\":");
    super::discover::write_params_with_meta(out, params, meta)?;
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// One notification frame, newline included.
pub(crate) fn notification_frame(
    method: &str,
    params: Option<&Value>,
) -> serde_json::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Frame<'a> {
        jsonrpc: &'static str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a Value>,
    }
    let mut out = serde_json::to_vec(&Frame {
        jsonrpc: "2.0",
        method,
        params,
    })?;
    out.push(b'\n');
    Ok(out)
}

/// Appends `notifications/cancelled` for one of our requests. `reason` is left out, not null,
/// when absent.
pub(crate) fn write_cancelled(out: &mut Vec<u8>, id: RequestId, reason: Option<&str>) {
    // Infallible: every piece is a plain string or integer.
    let _ = write!(
        out,
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{}"#,
        id.0
    );
    if let Some(reason) = reason {
        out.extend_from_slice(br#","reason":"#);
        let _ = serde_json::to_writer(&mut *out, reason);
    }
    out.extend_from_slice(b"}}\n");
}

#[cfg(test)]
fn cancelled_frame(id: RequestId, reason: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    write_cancelled(&mut out, id, reason);
    out
}

/// A response frame to a server request, newline included.
pub(crate) fn response_frame(
    id: &WireId,
    outcome: Result<Value, ErrorObject>,
) -> serde_json::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Frame<'a> {
        jsonrpc: &'static str,
        id: &'a WireId,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ErrorObject>,
    }
    let (result, error) = match outcome {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    let mut out = serde_json::to_vec(&Frame {
        jsonrpc: "2.0",
        id,
        result,
        error,
    })?;
    out.push(b'\n');
    Ok(out)
}

/// An incoming frame, classified by the members it has. Borrowed from the frame's bytes.
#[derive(Debug, Deserialize)]
pub(crate) struct IncomingFrame<'a> {
    #[serde(default)]
    pub id: Option<WireId>,
    #[serde(default, borrow)]
    pub method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub params: Option<&'a RawValue>,
    /// Present whenever the member is, `null` included (a `null` result is a result).
    #[serde(default, borrow, deserialize_with = "present")]
    pub result: Option<&'a RawValue>,
    #[serde(default)]
    pub error: Option<ErrorObject>,
}

/// A member that is there, whatever its value (`Option` alone reads `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// What an incoming frame is.
pub(crate) enum Incoming<'a> {
    Response {
        id: WireId,
        outcome: Result<&'a RawValue, ErrorObject>,
    },
    ServerRequest {
        id: WireId,
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
}

/// The messages of one incoming frame (a stdio line) or body (an HTTP answer).
pub(crate) enum Messages<'a> {
    /// Not an array: one message.
    One(&'a [u8]),
    /// A JSON array, a batch (allowed by the 2025-03-26 revision only): each element is a
    /// message. An element is never itself split (a batch holds no batches).
    Batch(Vec<&'a RawValue>),
}

impl<'a> Messages<'a> {
    /// Splits `bytes` into its messages (a batch is checked to be a JSON array, nothing more).
    pub fn of(bytes: &'a [u8]) -> Result<Self, FrameProblem> {
        if bytes.trim_ascii_start().first() != Some(&b'[') {
            return Ok(Messages::One(bytes));
        }
        serde_json::from_slice(bytes)
            .map(Messages::Batch)
            .map_err(FrameProblem::NotJson)
    }
}

/// Why an incoming frame was skipped.
#[derive(Debug)]
pub(crate) enum FrameProblem {
    NotJson(serde_json::Error),
    NotJsonRpc(&'static str),
}

impl std::fmt::Display for FrameProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameProblem::NotJson(e) => write!(f, "not JSON: {e}"),
            FrameProblem::NotJsonRpc(what) => write!(f, "not JSON-RPC: {what}"),
        }
    }
}

impl<'a> IncomingFrame<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FrameProblem> {
        // A message is a JSON object. serde would also read a struct from an array of its members
        // in order (`[1,"ping"]` as a request), which no peer means.
        if bytes.trim_ascii_start().first() != Some(&b'{') {
            return Err(FrameProblem::NotJsonRpc("not a JSON object"));
        }
        serde_json::from_slice(bytes).map_err(FrameProblem::NotJson)
    }

    pub fn classify(self) -> Result<Incoming<'a>, FrameProblem> {
        match (self.id, self.method) {
            (Some(id), Some(method)) => Ok(Incoming::ServerRequest {
                id,
                method,
                params: self.params,
            }),
            (None, Some(method)) => Ok(Incoming::Notification {
                method,
                params: self.params,
            }),
            (Some(id), None) => match (self.result, self.error) {
                (_, Some(error)) => Ok(Incoming::Response {
                    id,
                    outcome: Err(error),
                }),
                (Some(result), None) => Ok(Incoming::Response {
                    id,
                    outcome: Ok(result),
                }),
                (None, None) => Err(FrameProblem::NotJsonRpc("response without result or error")),
            },
            (None, None) => Err(FrameProblem::NotJsonRpc("neither a method nor an id")),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn cancelled_frame_omits_absent_reason_and_escapes_a_given_one() {
        let id = RequestId(42);
        let v: Value = serde_json::from_slice(&cancelled_frame(id, None)).unwrap();
        assert_eq!(v["params"], serde_json::json!({"requestId": 42}));
        let v: Value =
            serde_json::from_slice(&cancelled_frame(id, Some("a \"quoted\"\nreason"))).unwrap();
        assert_eq!(v["params"]["reason"], "a \"quoted\"\nreason");
        assert_eq!(v["method"], "notifications/cancelled");
    }

    #[test]
    fn request_frame_is_one_compact_line() {
        let mut out = Vec::new();
        let params =
            serde_json::value::to_raw_value(&serde_json::json!({"text": "two\nlines"})).unwrap();
        write_request(&mut out, RequestId(7), "tools/call", Some(&params), None).unwrap();
        assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(out.last(), Some(&b'\n'));
    }

    // Found while writing the `jsonrpc_classify` fuzz target's invariants (only a JSON object is
    // a message): serde read the struct from an array of its members in order, so a stdio line
    // ` [1,"ping"]` (a leading blank escaped the batch check) was a server request.
    #[test]
    fn an_array_is_never_one_message_regression() {
        for frame in [
            &b"[1,\"ping\"]"[..],
            b" [7,null,null,{}]",
            b"\n[null,\"m\"]",
        ] {
            assert!(matches!(
                IncomingFrame::parse(frame),
                Err(FrameProblem::NotJsonRpc(_))
            ));
        }
    }

    // Found while building the HTTP answer fuzz target: the connection routed a batch's elements
    // as frames again, so an array nested as deep as the body allowed (serde_json reads a raw
    // value without a depth limit) recursed once per level and overflowed the stack.
    #[test]
    fn a_batch_is_split_once_however_deep_it_nests_regression() {
        let depth = 200_000;
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let Ok(Messages::Batch(items)) = Messages::of(deep.as_bytes()) else {
            panic!("an array is a batch");
        };
        assert_eq!(items.len(), 1);
        assert!(matches!(
            IncomingFrame::parse(items[0].get().as_bytes()),
            Err(FrameProblem::NotJsonRpc(_))
        ));
        assert!(matches!(Messages::of(b" {}"), Ok(Messages::One(b" {}"))));
        assert!(matches!(
            Messages::of(b"[1,"),
            Err(FrameProblem::NotJson(_))
        ));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            ".*".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(".*", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The frame without its newline; it must be one line.
    fn line(frame: &[u8]) -> &[u8] {
        let (last, line) = frame.split_last().expect("a frame");
        assert_eq!(*last, b'\n');
        assert!(!line.contains(&b'\n'));
        line
    }

    proptest! {
        /// What we write as a request reads back, as the server would classify it, with the same
        /// id, method and params.
        #[test]
        fn a_written_request_reads_back(
            id in any::<u64>(),
            method in ".*",
            // MCP params are objects (JSON-RPC allows no `null` params).
            params in prop::option::of(
                prop::collection::btree_map(".*", json_value(), 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ),
        ) {
            let raw = params.as_ref().map(|p| serde_json::value::to_raw_value(p).unwrap());
            let mut out = Vec::new();
            write_request(&mut out, RequestId(id), &method, raw.as_deref(), None).unwrap();
            let Ok(Incoming::ServerRequest { id: back, method: m, params: p }) =
                IncomingFrame::parse(line(&out)).and_then(IncomingFrame::classify)
            else {
                panic!("not a request: {}", String::from_utf8_lossy(&out));
            };
            prop_assert_eq!(back.as_request_id(), Some(RequestId(id)));
            prop_assert_eq!(&*m, method.as_str());
            let p = p.map(|p| serde_json::from_str::<Value>(p.get()).unwrap());
            prop_assert_eq!(p, params);
        }

        /// Our response to a server request reads back with the server's id, verbatim, and the
        /// same outcome.
        #[test]
        fn a_written_response_reads_back(
            number in any::<i64>(),
            string in prop::option::of(".*"),
            outcome in prop_oneof![
                json_value().prop_map(Ok),
                // `"data": null` and no data mean the same (`None`).
                (any::<i64>(), ".*", prop::option::of(json_value().prop_filter("null", |v| !v.is_null())))
                    .prop_map(|(code, message, data)| Err(ErrorObject { code, message, data })),
            ],
        ) {
            let id = match string {
                Some(s) => WireId::String(s),
                None => WireId::Number(number.into()),
            };
            let frame = response_frame(&id, outcome.clone()).unwrap();
            let Ok(Incoming::Response { id: back, outcome: read }) =
                IncomingFrame::parse(line(&frame)).and_then(IncomingFrame::classify)
            else {
                panic!("not a response: {}", String::from_utf8_lossy(&frame));
            };
            prop_assert_eq!(back, id);
            match (outcome, read) {
                (Ok(v), Ok(raw)) => {
                    prop_assert_eq!(serde_json::from_str::<Value>(raw.get()).unwrap(), v)
                }
                (Err(e), Err(r)) => {
                    prop_assert_eq!((e.code, e.message, e.data), (r.code, r.message, r.data))
                }
                (a, b) => panic!("the outcome changed: {a:?} -> {b:?}"),
            }
        }

        /// A cancel names exactly the request and reason it was written with.
        #[test]
        fn a_written_cancel_reads_back(
            id in any::<u64>(),
            reason in prop::option::of(".*"),
        ) {
            let frame = cancelled_frame(RequestId(id), reason.as_deref());
            let Ok(Incoming::Notification { method, params }) =
                IncomingFrame::parse(line(&frame)).and_then(IncomingFrame::classify)
            else {
                panic!("not a notification");
            };
            prop_assert_eq!(&*method, "notifications/cancelled");
            let params: Value = serde_json::from_str(params.unwrap().get()).unwrap();
            prop_assert_eq!(&params["requestId"], &Value::from(id));
            prop_assert_eq!(params.get("reason").and_then(Value::as_str), reason.as_deref());
        }
    }

    // Found by the `jsonrpc_classify` fuzz target: without serde_json's exact float parsing, a
    // numeric id outside u64/i64 (here 2^64 + 1, a float to serde_json) came back one unit off
    // in the last place when our answer to it was written, so the server could not match it.
    // Found by the response round-trip property below: `"result": null` read as no result, so
    // the frame was skipped as invalid and the request waited for ever.
    #[test]
    fn a_null_result_is_an_answer_regression() {
        let frame = br#"{"jsonrpc":"2.0","id":3,"result":null}"#;
        let Ok(Incoming::Response {
            id,
            outcome: Ok(result),
        }) = IncomingFrame::parse(frame).and_then(IncomingFrame::classify)
        else {
            panic!("a response");
        };
        assert_eq!(
            (id.as_request_id(), result.get()),
            (Some(RequestId(3)), "null")
        );
        let absent = IncomingFrame::parse(br#"{"jsonrpc":"2.0","id":3}"#).unwrap();
        assert!(matches!(
            absent.classify(),
            Err(FrameProblem::NotJsonRpc(_))
        ));
    }

    #[test]
    fn a_float_id_is_answered_with_the_same_id_regression() {
        for frame in [
            &br#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}"#[..],
            br#"{"jsonrpc":"2.0","id":0.1234567890123456789,"method":"ping"}"#,
        ] {
            let Ok(Incoming::ServerRequest { id, .. }) =
                IncomingFrame::parse(frame).and_then(IncomingFrame::classify)
            else {
                panic!("a server request");
            };
            let answer = response_frame(&id, Ok(Value::Null)).unwrap();
            let Ok(Incoming::Response { id: back, .. }) =
                IncomingFrame::parse(line(&answer)).and_then(IncomingFrame::classify)
            else {
                panic!("a response");
            };
            assert_eq!(back, id);
        }
    }

    #[test]
    fn string_ids_of_our_requests_are_tolerated() {
        assert_eq!(
            WireId::String("7".into()).as_request_id(),
            Some(RequestId(7))
        );
        assert_eq!(WireId::String("x".into()).as_request_id(), None);
    }
}
