//! Tool arguments mirrored into headers (2026-07-28, SEP-2243): a tool's `inputSchema` may mark a
//! property with `"x-mcp-header": "Name"`; a `tools/call` over HTTP then carries that argument as
//! `Mcp-Param-Name` too, so intermediaries can route on it.
//!
//! The client learns the annotations from the `tools/list` results it receives in that era. A
//! tool whose annotations are invalid (empty, not a token, on a non-primitive or a `number`
//! property, or repeated regardless of case) is dropped from the result before the caller sees
//! it, as the spec requires, with a warning. The transport only turns the (name, text) pairs
//! into headers.

use std::collections::HashMap;

use serde_json::{value::RawValue, Map, Value};

/// Per tool: (argument, header name after `Mcp-Param-`) pairs.
pub(crate) type ToolHeaders = HashMap<String, Vec<(String, String)>>;

/// Screens a `tools/list` result: learns the valid tools' annotations into `known` and returns
/// the result without the invalid tools (`None`: unchanged).
pub(crate) fn screen_tools_list(
    result: &RawValue,
    known: &mut ToolHeaders,
) -> Option<Box<RawValue>> {
    let mut result: Value = serde_json::from_str(result.get()).ok()?;
    let tools = result.get_mut("tools")?.as_array_mut()?;
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
    if tools.len() == before {
        return None;
    }
    serde_json::value::to_raw_value(&result).ok()
}

fn annotations(tool: &Value) -> Result<Vec<(String, String)>, &'static str> {
    let Some(properties) = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
    else {
        return Ok(Vec::new());
    };
    let mut headers: Vec<(String, String)> = Vec::new();
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
        if headers.iter().any(|(_, h)| h.eq_ignore_ascii_case(name)) {
            return Err("repeated");
        }
        headers.push((argument.clone(), name.to_owned()));
    }
    Ok(headers)
}

/// RFC 9110 `tchar`: what a header name may be made of.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `Mcp-Param-*` values of a `tools/call` to a tool with annotations, as text. A null or
/// absent argument sends nothing.
pub(crate) fn param_values(
    arguments: Option<&Map<String, Value>>,
    mapped: &[(String, String)],
) -> Vec<(String, String)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    mapped
        .iter()
        .filter_map(|(argument, header)| {
            let value = match arguments.get(argument)? {
                Value::String(text) => text.clone(),
                Value::Bool(flag) => flag.to_string(),
                Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
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
        let list = json!({"tools": [
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
        ]});
        let raw = serde_json::value::to_raw_value(&list).unwrap();
        let mut known = ToolHeaders::new();
        let screened = screen_tools_list(&raw, &mut known).unwrap();
        let screened: Value = serde_json::from_str(screened.get()).unwrap();
        let names: Vec<&str> = screened["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ok", "none"]);

        let arguments = json!({"region": " us-west1", "n": 42, "flag": false, "plain": "x"});
        let mut values = param_values(arguments.as_object(), &known["ok"]);
        values.sort();
        assert_eq!(
            values,
            [
                ("Flag".to_owned(), "false".to_owned()),
                ("N".to_owned(), "42".to_owned()),
                ("Region".to_owned(), " us-west1".to_owned()),
            ],
            "annotated arguments only"
        );
        let nulls = json!({"region": null});
        assert!(param_values(nulls.as_object(), &known["ok"]).is_empty());
        let valid_only =
            serde_json::value::to_raw_value(&json!({"tools": [{"name": "none"}]})).unwrap();
        assert!(
            screen_tools_list(&valid_only, &mut known).is_none(),
            "unchanged"
        );
    }
}
