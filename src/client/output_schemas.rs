//! Structured tool results checked against their tool's `outputSchema` (JSON Schema 2020-12 by
//! default; a schema's own `$schema` is honoured). Schemas are compiled once per tool list, never
//! per call; a remote `$ref` is never fetched (the `jsonschema` crate's resolvers are not built
//! in), so a schema that needs one is skipped with a warning.
//!
//! Only with the `output-schema` feature (on by default): without it no schema is compiled and
//! no result is checked.

use std::collections::HashMap;
#[cfg(feature = "output-schema")]
use std::sync::Arc;

#[cfg(feature = "output-schema")]
use serde::Deserialize;
use serde_json::value::RawValue;
#[cfg(feature = "output-schema")]
use serde_json::Value;

use crate::error::Error;

/// A tool's compiled `outputSchema`.
#[cfg(feature = "output-schema")]
pub(crate) type Schema = Arc<jsonschema::Validator>;

/// Without the `output-schema` feature no schema is ever compiled: there is none.
#[cfg(not(feature = "output-schema"))]
#[derive(Clone)]
pub(crate) enum Schema {}

/// Per tool name, its compiled `outputSchema`.
pub(crate) type OutputSchemas = HashMap<String, Schema>;

/// Without the `output-schema` feature, nothing is learned.
#[cfg(not(feature = "output-schema"))]
pub(crate) fn learn(_: &RawValue, _: &mut OutputSchemas) {}

/// Learns the output schemas of a `tools/list` result (one page: tools on other pages are kept).
#[cfg(feature = "output-schema")]
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

/// One `tools/call`'s check of its result: the tool, and its schema.
#[cfg(feature = "output-schema")]
pub(crate) struct OutputCheck {
    tool: String,
    schema: Schema,
}

/// Without the `output-schema` feature no call has a schema to check: there is none.
#[cfg(not(feature = "output-schema"))]
pub(crate) enum OutputCheck {}

impl OutputCheck {
    /// The check of a call of `tool`, if it has a schema.
    #[cfg(feature = "output-schema")]
    pub fn for_tool(tool: &str, schema: Option<Schema>) -> Option<Self> {
        schema.map(|schema| Self::new(tool, schema))
    }

    #[cfg(not(feature = "output-schema"))]
    pub fn for_tool(_: &str, schema: Option<Schema>) -> Option<Self> {
        schema.map(|schema| match schema {})
    }

    #[cfg(feature = "output-schema")]
    pub fn new(tool: &str, schema: Schema) -> Self {
        Self {
            tool: tool.to_owned(),
            schema,
        }
    }

    #[cfg(not(feature = "output-schema"))]
    pub fn check(&self, _: &RawValue) -> Result<(), Error> {
        match *self {}
    }

    /// Checks a `tools/call` result against the tool's schema. A tool error (`isError`) is not
    /// checked: its content says what went wrong.
    #[cfg(feature = "output-schema")]
    pub fn check(&self, result: &RawValue) -> Result<(), Error> {
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
                tool: self.tool.clone(),
                path: String::new(),
                problem: "no structuredContent, though the tool declares an outputSchema".into(),
            });
        };
        match self.schema.validate(&structured) {
            Ok(()) => Ok(()),
            Err(error) => Err(Error::InvalidOutput {
                tool: self.tool.clone(),
                path: error.instance_path().to_string(),
                problem: error.to_string(),
            }),
        }
    }
}

#[cfg(test)]
#[cfg(feature = "output-schema")]
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
        let add = OutputCheck::new("add", schemas["add"].clone());
        let check = |result| add.check(&raw(result));
        assert!(check(json!({"content": [], "structuredContent": {"sum": 3}})).is_ok());
        match check(json!({"content": [], "structuredContent": {"sum": "3"}})) {
            Err(Error::InvalidOutput { path, problem, .. }) => {
                assert_eq!(path, "/sum");
                assert!(problem.contains("number"), "{problem}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check(json!({"content": []})),
            Err(Error::InvalidOutput { .. })
        ));
        assert!(check(json!({"content": [], "isError": true})).is_ok());
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
