//! Structured tool results checked against their tool's `outputSchema` (JSON Schema 2020-12 by
//! default; a schema's own `$schema` is honoured). Schemas are compiled once per tool list, never
//! per call; a remote `$ref` is never fetched (the `jsonschema` crate's resolvers are not built
//! in), so a schema that needs one is skipped with a warning.

use std::{collections::HashMap, sync::Arc};

use serde::Deserialize;
use serde_json::{value::RawValue, Value};

use crate::error::Error;

/// Per tool name, its compiled `outputSchema`.
pub(crate) type OutputSchemas = HashMap<String, Arc<jsonschema::Validator>>;

/// Learns the output schemas of a `tools/list` result (one page: tools on other pages are kept).
pub(crate) fn learn(result: &RawValue, schemas: &mut OutputSchemas) {
    #[derive(Deserialize)]
    struct Page {
        #[serde(default)]
        tools: Vec<Listed>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Listed {
        name: String,
        #[serde(default)]
        output_schema: Option<Value>,
    }
    let Ok(page) = serde_json::from_str::<Page>(result.get()) else {
        return; // the typed decoding says what is wrong
    };
    for tool in page.tools {
        let Some(schema) = tool.output_schema else {
            schemas.remove(&tool.name);
            continue;
        };
        match jsonschema::validator_for(&schema) {
            Ok(validator) => {
                schemas.insert(tool.name, Arc::new(validator));
            }
            Err(e) => {
                tracing::warn!(tool = %tool.name, error = %e, "ignoring an outputSchema that does not compile");
                schemas.remove(&tool.name);
            }
        }
    }
}

/// Checks a `tools/call` result against the tool's schema. A tool error (`isError`) is not
/// checked: its content says what went wrong.
pub(crate) fn check(
    tool: &str,
    validator: &jsonschema::Validator,
    result: &RawValue,
) -> Result<(), Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Result {
        #[serde(default)]
        is_error: bool,
        #[serde(default)]
        structured_content: Option<Value>,
    }
    let Ok(result) = serde_json::from_str::<Result>(result.get()) else {
        return Ok(()); // the typed decoding says what is wrong
    };
    if result.is_error {
        return Ok(());
    }
    let Some(structured) = result.structured_content else {
        return Err(Error::InvalidOutput {
            tool: tool.to_owned(),
            path: String::new(),
            problem: "no structuredContent, though the tool declares an outputSchema".into(),
        });
    };
    match validator.validate(&structured) {
        Ok(()) => Ok(()),
        Err(error) => Err(Error::InvalidOutput {
            tool: tool.to_owned(),
            path: error.instance_path().to_string(),
            problem: error.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    #[test]
    fn results_are_checked_against_the_schema_of_their_tool() {
        let mut schemas = OutputSchemas::new();
        learn(
            &raw(json!({"tools": [
                {"name": "add", "inputSchema": {}, "outputSchema": {"type": "object",
                    "properties": {"sum": {"type": "number"}}, "required": ["sum"]}},
                {"name": "plain", "inputSchema": {}}
            ]})),
            &mut schemas,
        );
        assert_eq!(schemas.len(), 1);
        let add = &schemas["add"];
        assert!(check(
            "add",
            add,
            &raw(json!({"content": [], "structuredContent": {"sum": 3}}))
        )
        .is_ok());
        match check(
            "add",
            add,
            &raw(json!({"content": [], "structuredContent": {"sum": "3"}})),
        ) {
            Err(Error::InvalidOutput { path, problem, .. }) => {
                assert_eq!(path, "/sum");
                assert!(problem.contains("number"), "{problem}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check("add", add, &raw(json!({"content": []}))),
            Err(Error::InvalidOutput { .. })
        ));
        assert!(check("add", add, &raw(json!({"content": [], "isError": true}))).is_ok());
        learn(
            &raw(json!({"tools": [{"name": "add", "inputSchema": {}}]})),
            &mut schemas,
        );
        assert!(
            schemas.is_empty(),
            "a tool that lost its schema is no longer checked"
        );
    }

    #[test]
    fn a_remote_reference_is_never_fetched() {
        let mut schemas = OutputSchemas::new();
        learn(
            &raw(json!({"tools": [{"name": "remote", "inputSchema": {},
                "outputSchema": {"$ref": "https://example.com/schema.json"}}]})),
            &mut schemas,
        );
        assert!(schemas.is_empty());
    }
}
