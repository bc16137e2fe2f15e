//! What a request names, for transports that route on it (2026-07-28 Streamable HTTP:
//! `Mcp-Name`, `Mcp-Param-*`). Built above the transport, from the call, so no transport reads
//! the JSON it carries.

use serde::Deserialize;
use serde_json::value::RawValue;

/// The routing values of one request besides its method.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    /// The tool or prompt name (`tools/call`, `prompts/get`), or the resource URI
    /// (`resources/read`).
    pub name: Option<String>,
    /// A tool's `x-mcp-header` arguments: (the header name after `Mcp-Param-`, the argument's
    /// value as text). Only annotations the client validated reach here.
    pub params: Vec<(String, String)>,
}

/// The member of `params` that names the target of `method`, if the method names one.
pub fn target_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// What the serialized params of `method` name (`Mcp-Name`), if the method names something.
/// For requests whose sender did not say (raw requests); the client says it for its own calls.
pub fn target_in(method: &str, params: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Probe {
        name: Option<String>,
        uri: Option<String>,
    }
    let member = target_member(method)?;
    let probe: Probe = serde_json::from_str(params.get()).ok()?;
    match member {
        "uri" => probe.uri,
        _ => probe.name,
    }
}
