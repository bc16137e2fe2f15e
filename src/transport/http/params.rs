//! Tool arguments mirrored into headers (2026-07-28, SEP-2243): a tool's `inputSchema` may mark a
//! property with `"x-mcp-header": "Name"`; a `tools/call` over HTTP then carries that argument as
//! `Mcp-Param-Name` too, so intermediaries can route on it.
//!
//! The transport learns the annotations from the `tools/list` answers it carries. A tool whose
//! annotations are invalid (empty, not a token, on a non-primitive or a `number` property, or
//! repeated regardless of case) is dropped from the answer before the client sees it, as the spec
//! requires, with a warning.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::session::header_value;

/// Per tool: (argument, header name) pairs.
pub(super) type ToolHeaders = HashMap<String, Vec<(String, HeaderName)>>;

/// Screens a `tools/list` answer: learns the valid tools' annotations into `known` and returns
/// the answer without the invalid tools (`None`: unchanged).
pub(super) fn screen_tools_list(frame: &[u8], known: &mut ToolHeaders) -> Option<Vec<u8>> {
    let mut answer: Value = serde_json::from_slice(frame).ok()?;
    let tools = answer.pointer_mut("/result/tools")?.as_array_mut()?;
    let before = tools.len();
    tools.retain(|tool| {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        match annotations(tool) {
            Ok(headers) => {
                known.insert(name.to_owned(), headers);
                true
            }
            Err(why) => {
                tracing::warn!(
                    tool = name,
                    why,
                    "dropping a tool with an invalid x-mcp-header"
                );
                known.remove(name);
                false
            }
        }
    });
    (tools.len() != before).then(|| answer.to_string().into_bytes())
}

fn annotations(tool: &Value) -> Result<Vec<(String, HeaderName)>, &'static str> {
    let Some(properties) = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
    else {
        return Ok(Vec::new());
    };
    let mut headers: Vec<(String, HeaderName)> = Vec::new();
    for (argument, schema) in properties {
        let Some(annotation) = schema.get("x-mcp-header") else {
            continue;
        };
        let name = annotation.as_str().ok_or("not a string")?;
        if name.is_empty() {
            return Err("empty");
        }
        if !name.bytes().all(is_token_char) {
            return Err("not an HTTP token");
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            _ => return Err("only on string, integer or boolean properties"),
        }
        let header = HeaderName::from_bytes(format!("mcp-param-{name}").as_bytes())
            .map_err(|_| "not a header name")?;
        if headers.iter().any(|(_, h)| *h == header) {
            return Err("repeated");
        }
        headers.push((argument.clone(), header));
    }
    Ok(headers)
}

/// RFC 9110 `tchar`: what a header name may be made of.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `Mcp-Param-*` headers of a `tools/call` to a tool with annotations. A null or absent
/// argument sends no header.
pub(super) fn param_headers(
    arguments: Option<&Map<String, Value>>,
    mapped: &[(String, HeaderName)],
) -> Vec<(HeaderName, HeaderValue)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    mapped
        .iter()
        .filter_map(|(argument, header)| {
            let value = match arguments.get(argument)? {
                Value::String(text) => header_value(text)?,
                Value::Bool(flag) => HeaderValue::from_static(if *flag { "true" } else { "false" }),
                Value::Number(n) if n.is_i64() || n.is_u64() => {
                    HeaderValue::from_str(&n.to_string()).ok()?
                }
                _ => return None,
            };
            Some((header.clone(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_annotations_drop_the_tool_and_valid_ones_are_mirrored() {
        let list = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "ok", "inputSchema": {"properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "n": {"type": "integer", "x-mcp-header": "N"},
                "flag": {"type": "boolean", "x-mcp-header": "Flag"},
                "plain": {"type": "string"}}}},
            {"name": "empty", "inputSchema": {"properties": {"v": {"type": "string", "x-mcp-header": ""}}}},
            {"name": "number", "inputSchema": {"properties": {"v": {"type": "number", "x-mcp-header": "V"}}}},
            {"name": "object", "inputSchema": {"properties": {"v": {"type": "object", "x-mcp-header": "V"}}}},
            {"name": "space", "inputSchema": {"properties": {"v": {"type": "string", "x-mcp-header": "A B"}}}},
            {"name": "colon", "inputSchema": {"properties": {"v": {"type": "string", "x-mcp-header": "A:B"}}}},
            {"name": "accent", "inputSchema": {"properties": {"v": {"type": "string", "x-mcp-header": "Régi"}}}},
            {"name": "twice", "inputSchema": {"properties": {
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"}}}},
            {"name": "none"}
        ]}});
        let mut known = ToolHeaders::new();
        let screened = screen_tools_list(list.to_string().as_bytes(), &mut known).unwrap();
        let screened: Value = serde_json::from_slice(&screened).unwrap();
        let names: Vec<&str> = screened["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ok", "none"]);

        let arguments = json!({"region": " us-west1", "n": 42, "flag": false, "plain": "x"});
        let headers = param_headers(arguments.as_object(), &known["ok"]);
        let find = |name: &str| {
            headers
                .iter()
                .find(|(h, _)| h.as_str() == name)
                .map(|(_, v)| v.to_str().unwrap().to_owned())
        };
        assert_eq!(find("mcp-param-region").unwrap(), "=?base64?IHVzLXdlc3Qx?=");
        assert_eq!(find("mcp-param-n").unwrap(), "42");
        assert_eq!(find("mcp-param-flag").unwrap(), "false");
        assert_eq!(headers.len(), 3, "unannotated arguments are not mirrored");
        let nulls = json!({"region": null});
        assert!(param_headers(nulls.as_object(), &known["ok"]).is_empty());
    }
}
