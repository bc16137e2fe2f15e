//! What a request names, for transports that route on it (2026-07-28 Streamable HTTP:
//! `Mcp-Name`, `Mcp-Param-*`). Built above the transport, from the call, so no transport reads
//! the JSON it carries.

use serde_json::Value;

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

/// The routing values of a request given as a JSON tree (no `Mcp-Param-*`: those need the tool
/// list, which the client has).
pub fn routing_of(method: &str, params: &Value) -> Option<Routing> {
    let name = params.get(target_member(method)?)?.as_str()?;
    Some(Routing {
        name: Some(name.to_owned()),
        params: Vec::new(),
    })
}
