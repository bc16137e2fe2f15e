//! What an HTTP connection remembers between POSTs: the session id the server gave with its
//! `initialize` answer (2025-11-25), the protocol version the connection settled on, and, for
//! 2026-07-28, the routing headers each POST carries.

use reqwest::header::{HeaderName, HeaderValue};

use crate::protocol::routing::Routing;

#[derive(Debug, Default)]
pub(super) struct Session {
    /// `Mcp-Session-Id`, echoed on every later request once the server gave one.
    pub id: Option<HeaderValue>,
    /// `MCP-Protocol-Version`, sent on every request once the version is settled.
    pub protocol_version: Option<HeaderValue>,
    /// The 2026-07-28 era: no session, routing headers on every POST, cancel = abort the POST.
    pub modern: bool,
    /// The GET stream was opened (once, after `notifications/initialized`; again after a
    /// renewal).
    pub event_stream_opened: bool,
    /// Which session this is: 0 for the first, one more for each renewal (`renew.rs`). A POST
    /// remembers the generation it was sent on, so a late `404` of an older session is told from
    /// the expiry of the current one.
    pub generation: u64,
}

impl Session {
    /// The session id a request carries (2025-11-25 only).
    pub fn header_id(&self) -> Option<&HeaderValue> {
        self.id.as_ref().filter(|_| !self.modern)
    }
}

/// The 2026-07-28 routing headers of one outgoing message: `Mcp-Method`, `Mcp-Name` for the
/// methods that name something, and a tool call's `Mcp-Param-*` headers. Built from what the
/// frame carries ([`Frame`](crate::transport::Frame)), never from its JSON.
pub(super) fn routing_headers(
    method: Option<&str>,
    routing: Option<&Routing>,
) -> Vec<(HeaderName, HeaderValue)> {
    let Some(method) = method else {
        return Vec::new(); // a response: no routing headers
    };
    let mut headers = Vec::with_capacity(2);
    if let Some(value) = header_value(method) {
        headers.push((HeaderName::from_static("mcp-method"), value));
    }
    let Some(routing) = routing else {
        return headers;
    };
    if let Some(value) = routing.name.as_deref().and_then(header_value) {
        headers.push((HeaderName::from_static("mcp-name"), value));
    }
    for (name, value) in &routing.params {
        let header = HeaderName::from_bytes(format!("mcp-param-{name}").as_bytes());
        if let (Ok(header), Some(value)) = (header, header_value(value)) {
            headers.push((header, value));
        }
    }
    headers
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_headers_name_the_method_and_the_target_encoded_when_needed() {
        let call = Routing {
            name: Some("add".into()),
            params: vec![
                ("Region".into(), " us-west1".into()),
                ("N".into(), "42".into()),
            ],
        };
        let headers = routing_headers(Some("tools/call"), Some(&call));
        let find = |name: &str| {
            headers
                .iter()
                .find(|(h, _)| h.as_str() == name)
                .map(|(_, v)| v.to_str().unwrap().to_owned())
        };
        assert_eq!(find("mcp-method").unwrap(), "tools/call");
        assert_eq!(find("mcp-name").unwrap(), "add");
        assert_eq!(find("mcp-param-region").unwrap(), "=?base64?IHVzLXdlc3Qx?=");
        assert_eq!(find("mcp-param-n").unwrap(), "42");
        let read = Routing {
            name: Some("file:///é".into()),
            params: Vec::new(),
        };
        let headers = routing_headers(Some("resources/read"), Some(&read));
        assert_eq!(headers[1].1, "=?base64?ZmlsZTovLy/DqQ==?=");
        assert_eq!(routing_headers(Some("tools/list"), None).len(), 1);
        assert!(
            routing_headers(None, None).is_empty(),
            "a response carries none"
        );
        assert_eq!(header_value(" padded").unwrap(), "=?base64?IHBhZGRlZA==?=");
    }
}
