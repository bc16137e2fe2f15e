//! Resources, prompts and completion.

use serde_json::{json, Map, Value};

use crate::{jsonrpc::INVALID_PARAMS, server::Reply};

pub(crate) const GREET_DESCRIPTION: &str = "Greet someone by name, casually or formally.";
pub(crate) const SUMMARIZE_DESCRIPTION: &str = "Ask for a summary of a text.";

pub(crate) fn resource_list() -> Vec<Value> {
    let mut resources: Vec<Value> = (1..=3)
        .map(|n| {
            json!({
                "uri": format!("demo://text/{n}"),
                "name": format!("text {n}"),
                "mimeType": "text/plain",
            })
        })
        .collect();
    resources.push(json!({
        "uri": "demo://blob/1",
        "name": "blob 1",
        "mimeType": "application/octet-stream",
    }));
    resources.push(json!({"uri": "demo://counter", "name": "counter", "mimeType": "text/plain"}));
    resources
}

pub(crate) fn resource_template_list() -> Vec<Value> {
    vec![json!({"uriTemplate": "demo://text/{id}", "name": "text by id", "mimeType": "text/plain"})]
}

pub(crate) fn prompt_list() -> Vec<Value> {
    vec![
        json!({
            "name": "greet",
            "description": GREET_DESCRIPTION,
            "arguments": [
                {"name": "name", "description": "Who to greet.", "required": true},
                {
                    "name": "style",
                    "description": "`formal` for a formal greeting.",
                    "required": false,
                },
            ],
        }),
        json!({
            "name": "summarize",
            "description": SUMMARIZE_DESCRIPTION,
            "arguments": [{"name": "text", "description": "Text to summarize.", "required": true}],
        }),
    ]
}

pub(crate) fn get_prompt(params: &Value) -> Reply {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((
            INVALID_PARAMS,
            "prompts/get needs a string `name`".to_owned(),
        ));
    };
    let no_arguments = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &no_arguments,
        Some(Value::Object(args)) => args,
        Some(other) => {
            return Err((
                INVALID_PARAMS,
                format!("prompt `arguments` must be an object, got {other}"),
            ))
        }
    };
    let (description, text) = match name {
        "greet" => {
            let who = required_prompt_arg(args, "name")?;
            let greeting = match prompt_arg(args, "style")? {
                Some("formal") => "Good day",
                _ => "Hello",
            };
            (GREET_DESCRIPTION, format!("{greeting} {who}"))
        }
        "summarize" => {
            let text = required_prompt_arg(args, "text")?;
            (SUMMARIZE_DESCRIPTION, format!("Summarize: {text}"))
        }
        _ => return Err((INVALID_PARAMS, format!("unknown prompt: {name}"))),
    };
    Ok(json!({
        "description": description,
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }))
}

pub(crate) fn prompt_arg<'a>(
    args: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, (i64, String)> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(other) => Err((
            INVALID_PARAMS,
            format!("prompt argument `{name}` must be a string, got {other}"),
        )),
    }
}

pub(crate) fn required_prompt_arg<'a>(
    args: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a str, (i64, String)> {
    prompt_arg(args, name)?.ok_or_else(|| {
        (
            INVALID_PARAMS,
            format!("missing required prompt argument `{name}`"),
        )
    })
}

/// `completion/complete`: the fixed candidates of the argument that start with its
/// current value.
pub(crate) fn complete(params: &Value) -> Reply {
    let invalid = |what: &str| (INVALID_PARAMS, format!("completion/complete needs {what}"));
    let reference = params
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("an object `ref`"))?;
    let argument = params
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("an object `argument`"))?;
    let name = argument
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("a string `argument.name`"))?;
    let value = argument.get("value").and_then(Value::as_str).unwrap_or("");
    let field = |key: &str| reference.get(key).and_then(Value::as_str);
    let style = params
        .pointer("/context/arguments/style")
        .and_then(Value::as_str);
    let candidates: &[&str] = match (field("type"), name) {
        (Some("ref/prompt"), "style") if field("name") == Some("greet") => {
            &["formal", "friendly", "funny"]
        }
        (Some("ref/prompt"), "name") if field("name") == Some("greet") => {
            if style == Some("formal") {
                &["Dr. Smith", "Ms. Jones"]
            } else {
                &["Alice", "Bob", "Bobby"]
            }
        }
        (Some("ref/resource"), "id") if field("uri") == Some("demo://text/{id}") => {
            &["1", "2", "3", "10"]
        }
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|candidate| candidate.starts_with(value))
        .collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
