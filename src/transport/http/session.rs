//! What an HTTP connection remembers between POSTs (the 2025-11-25 shape): the session id the
//! server gave with its `initialize` answer, and the protocol version that answer settled.

use reqwest::header::{HeaderName, HeaderValue};
use serde::{de::IgnoredAny, Deserialize};
use serde_json::{Map, Value};

use super::params::{param_headers, ToolHeaders};

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
    /// The 2026-07-28 era: no session, routing headers on every POST, cancel = abort the POST.
    pub modern: bool,
}

/// The 2026-07-28 routing headers of one outgoing frame: `Mcp-Method`, `Mcp-Name` for the methods
/// that name something (`tools/call`, `prompts/get`: `params.name`; `resources/read`:
/// `params.uri`), and a tool call's `Mcp-Param-*` headers (`params.rs`). Also returns the method.
pub(super) fn routing_headers(
    frame: &[u8],
    tools: &ToolHeaders,
) -> (Option<String>, Vec<(HeaderName, HeaderValue)>) {
    #[derive(Deserialize)]
    struct Probe {
        method: Option<String>,
        params: Option<Named>,
    }
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
        uri: Option<String>,
        arguments: Option<Map<String, Value>>,
    }
    let Ok(probe) = serde_json::from_slice::<Probe>(frame) else {
        return (None, Vec::new());
    };
    let Some(method) = probe.method else {
        return (None, Vec::new()); // a response: no routing headers
    };
    let mut headers = Vec::with_capacity(2);
    if let Some(value) = header_value(&method) {
        headers.push((HeaderName::from_static("mcp-method"), value));
    }
    if let Some(params) = probe.params {
        let name = match method.as_str() {
            "tools/call" | "prompts/get" => params.name,
            "resources/read" => params.uri,
            _ => None,
        };
        if let Some(value) = name.as_deref().and_then(header_value) {
            headers.push((HeaderName::from_static("mcp-name"), value));
        }
        if method == "tools/call" {
            if let Some(mapped) = name.as_ref().and_then(|tool| tools.get(tool)) {
                headers.extend(param_headers(params.arguments.as_ref(), mapped));
            }
        }
    }
    (Some(method), headers)
}

/// A header value as the 2026-07-28 transport encodes it: as is when it is plain visible ASCII,
/// else `=?base64?<base64 of the UTF-8>?=` (also for a value that already looks like that).
pub(super) fn header_value(text: &str) -> Option<HeaderValue> {
    use base64::Engine;
    let plain = text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && text.trim() == text
        && !(text.starts_with("=?base64?") && text.ends_with("?="));
    if plain {
        HeaderValue::from_str(text).ok()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        HeaderValue::from_str(&format!("=?base64?{encoded}?=")).ok()
    }
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
    fn routing_headers_name_the_method_and_the_target_encoded_when_needed() {
        let none = ToolHeaders::new();
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}"#;
        let (method, headers) = routing_headers(call, &none);
        assert_eq!(method.as_deref(), Some("tools/call"));
        assert_eq!(headers[0].0, "mcp-method");
        assert_eq!(headers[0].1, "tools/call");
        assert_eq!(headers[1].0, "mcp-name");
        assert_eq!(headers[1].1, "add");
        let read = r#"{"id":2,"method":"resources/read","params":{"uri":"file:///é"}}"#;
        let (_, headers) = routing_headers(read.as_bytes(), &none);
        assert_eq!(headers[1].1, "=?base64?ZmlsZTovLy/DqQ==?=");
        let list = br#"{"id":3,"method":"tools/list","params":{"name":"x"}}"#;
        assert_eq!(
            routing_headers(list, &none).1.len(),
            1,
            "only the named methods carry Mcp-Name"
        );
        assert!(routing_headers(br#"{"id":3,"result":{}}"#, &none)
            .1
            .is_empty());
        assert_eq!(header_value(" padded").unwrap(), "=?base64?IHBhZGRlZA==?=");
    }

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
