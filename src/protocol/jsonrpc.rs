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
    #[serde(default, borrow)]
    pub result: Option<&'a RawValue>,
    #[serde(default)]
    pub error: Option<ErrorObject>,
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

    #[test]
    fn string_ids_of_our_requests_are_tolerated() {
        assert_eq!(
            WireId::String("7".into()).as_request_id(),
            Some(RequestId(7))
        );
        assert_eq!(WireId::String("x".into()).as_request_id(), None);
    }
}
