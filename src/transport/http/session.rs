//! What an HTTP connection remembers between POSTs (the 2025-11-25 shape): the session id the
//! server gave with its `initialize` answer, and the protocol version that answer settled.

use reqwest::header::HeaderValue;
use serde::{de::IgnoredAny, Deserialize};

use crate::RequestId;

#[derive(Default)]
pub(super) struct Session {
    /// `Mcp-Session-Id`, echoed on every later request once the server gave one.
    pub id: Option<HeaderValue>,
    /// `MCP-Protocol-Version`, sent on every request after the handshake.
    pub protocol_version: Option<HeaderValue>,
    /// Our `initialize` request: its answer carries the protocol version.
    pub initialize: Option<RequestId>,
    /// `notifications/initialized` went out: from then on outgoing frames are not inspected.
    pub initialized: bool,
}

/// The `method` of an outgoing frame (read only during the handshake).
pub(super) fn method_of(frame: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Probe {
        method: Option<String>,
    }
    serde_json::from_slice::<Probe>(frame).ok()?.method
}

/// Whether `frame` is the response (result or error) to our request `id`.
pub(super) fn answers(frame: &[u8], id: RequestId) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        id: Option<serde_json::Value>,
        method: Option<IgnoredAny>,
    }
    match serde_json::from_slice::<Probe>(frame) {
        Ok(probe) => {
            probe.method.is_none() && probe.id.and_then(|v| v.as_u64()) == Some(id.as_u64())
        }
        Err(_) => false,
    }
}

/// `result.protocolVersion` of an `initialize` answer, as a header value.
pub(super) fn negotiated_version(frame: &[u8]) -> Option<HeaderValue> {
    #[derive(Deserialize)]
    struct Answer {
        result: Option<Versioned>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Versioned {
        protocol_version: String,
    }
    let version = serde_json::from_slice::<Answer>(frame)
        .ok()?
        .result?
        .protocol_version;
    HeaderValue::from_str(&version).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_for_method_answer_and_version() {
        let id = RequestId::next();
        let n = id.as_u64();
        assert_eq!(
            method_of(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).as_deref(),
            Some("initialize")
        );
        assert_eq!(method_of(b"not json"), None);
        let answer =
            format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"protocolVersion":"2025-11-25"}}}}"#);
        assert!(answers(answer.as_bytes(), id));
        let request = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
        assert!(
            !answers(request.as_bytes(), id),
            "a server request with our number is not our answer"
        );
        assert!(!answers(br#"{"jsonrpc":"2.0","id":"1","result":{}}"#, id));
        assert_eq!(
            negotiated_version(answer.as_bytes()),
            Some(HeaderValue::from_static("2025-11-25"))
        );
        assert_eq!(negotiated_version(br#"{"id":1,"error":{"code":1}}"#), None);
    }
}
