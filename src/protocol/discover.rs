//! The 2026-07-28 (stateless) era: no handshake; every request carries the client's `_meta`, and
//! `server/discover` tells what the server is.

use serde::{Deserialize, Serialize};
use serde_json::{value::RawValue, Map, Value};

use super::lifecycle::{ClientCapabilities, Implementation, InitializeResult, ServerCapabilities};

/// The stateless revision this client speaks.
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";

/// Stateless revisions this client accepts when a server offers them.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &[MODERN_PROTOCOL_VERSION];

/// `_meta` key of the request's protocol version (required on every 2026-07-28 request).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities (required on every 2026-07-28 request; `{}` for none).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's name and version, an [`Implementation`] (on every request).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the server's name and version, in a 2026-07-28 result.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key of a 2026-07-28 request's log level: the server sends `notifications/message`
/// for that request at this level and above, and none without it.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// `-32020` (2026-07-28 HTTP): a required header is missing or disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// `-32021`: the request needs a client capability it did not declare
/// (`data.requiredCapabilities`).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// `-32022`: the server does not speak the request's protocol version (`data.supported`,
/// `data.requested`).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Whether an error code can only come from a modern server.
pub fn is_modern_error(code: i64) -> bool {
    matches!(
        code,
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION
    )
}

/// The answer to `server/discover`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// The protocol versions the server speaks.
    #[serde(default)]
    pub supported_versions: Vec<String>,
    /// What the server offers.
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// How to use the server (e.g. for a model's system prompt); `None` if it gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long this result may be cached, in milliseconds; `None` if the server gave no hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Who may keep the cached result: `public` or `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<String>,
    /// Fields this crate does not know, as sent (`_meta`, with the server's info, among them).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl DiscoverResult {
    /// The server's name and version, from `_meta` (or the result itself, as some servers do).
    pub fn server_info(&self) -> Option<Implementation> {
        let info = self
            .extra
            .get("_meta")
            .and_then(|meta| meta.get(META_SERVER_INFO))
            .or_else(|| self.extra.get("serverInfo"))?;
        serde_json::from_value(info.clone()).ok()
    }

    /// What the rest of the client reads about a server, whatever the era.
    pub(crate) fn into_description(self, version: &str) -> InitializeResult {
        let server_info = self
            .server_info()
            .unwrap_or_else(|| Implementation::new("unknown", ""));
        InitializeResult {
            protocol_version: version.to_owned(),
            capabilities: self.capabilities,
            server_info,
            instructions: self.instructions,
            extra: self.extra,
        }
    }
}

/// The `_meta` entries every modern request carries, serialized once per connection as the
/// inside of an object (no braces), ready to be spliced into each request's params.
pub(crate) fn request_meta(
    version: &str,
    capabilities: &ClientCapabilities,
    client_info: &Implementation,
) -> Box<str> {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.into(), Value::from(version));
    meta.insert(
        META_CLIENT_CAPABILITIES.into(),
        serde_json::to_value(capabilities).unwrap_or(Value::Null),
    );
    meta.insert(
        META_CLIENT_INFO.into(),
        serde_json::to_value(client_info).unwrap_or(Value::Null),
    );
    let text = Value::Object(meta).to_string();
    // `{...}` → `...`
    text[1..text.len() - 1].into()
}

/// Writes `params` with the connection's `_meta` entries added: spliced in when `params` has no
/// `_meta` of its own (the common case, no parsing), merged otherwise.
pub(crate) fn write_params_with_meta(
    out: &mut Vec<u8>,
    params: Option<&RawValue>,
    meta: &str,
) -> serde_json::Result<()> {
    let text = params.map(|p| p.get().trim());
    match text {
        None | Some("{}") => {
            out.extend_from_slice(b"{\"_meta\":{");
            out.extend_from_slice(meta.as_bytes());
            out.extend_from_slice(b"}}");
        }
        Some(text) if text.starts_with('{') && !text.contains("\"_meta\"") => {
            out.extend_from_slice(b"{\"_meta\":{");
            out.extend_from_slice(meta.as_bytes());
            out.extend_from_slice(b"},");
            out.extend_from_slice(&text.as_bytes()[1..]);
        }
        Some(text) => {
            let mut params: Map<String, Value> = serde_json::from_str(text)?;
            let ours: Map<String, Value> = serde_json::from_str(&format!("{{{meta}}}"))?;
            match params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()))
            {
                Value::Object(existing) => {
                    for (key, value) in ours {
                        existing.entry(key).or_insert(value);
                    }
                }
                other => *other = Value::Object(ours),
            }
            serde_json::to_writer(&mut *out, &params)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_meta(params: Option<&str>) -> Value {
        let meta = request_meta(
            MODERN_PROTOCOL_VERSION,
            &serde_json::from_value(json!({"elicitation": {}})).unwrap(),
            &Implementation::new("c", "1"),
        );
        let raw = params.map(|p| RawValue::from_string(p.to_owned()).unwrap());
        let mut out = Vec::new();
        write_params_with_meta(&mut out, raw.as_deref(), &meta).unwrap();
        serde_json::from_slice(&out).expect("valid JSON")
    }

    #[test]
    fn every_shape_of_params_gets_the_meta_and_keeps_its_own() {
        let expected_meta = json!({
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {"elicitation": {}},
            META_CLIENT_INFO: {"name": "c", "version": "1"},
        });
        assert_eq!(with_meta(None), json!({"_meta": expected_meta}));
        assert_eq!(with_meta(Some("{}")), json!({"_meta": expected_meta}));
        assert_eq!(
            with_meta(Some(r#"{"name":"t","arguments":{"a":1}}"#)),
            json!({"_meta": expected_meta, "name": "t", "arguments": {"a": 1}})
        );
        let merged = with_meta(Some(r#"{"name":"t","_meta":{"progressToken":7}}"#));
        assert_eq!(merged["_meta"]["progressToken"], 7);
        assert_eq!(merged["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(merged["name"], "t");
        // An argument that merely contains the text "_meta" takes the merge path and stays intact.
        let tricky = with_meta(Some(r#"{"arguments":{"text":"\"_meta\""}}"#));
        assert_eq!(tricky["arguments"]["text"], "\"_meta\"");
        assert_eq!(tricky["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
    }
}
