//! The demo server's results are valid in both revisions it speaks: each checked against the
//! revision's published JSON schema (`tests/data/schema/`, unmodified copies), the one for the
//! result type of the method asked. In 2026-07-28 that holds the `resultType` every result must
//! carry and the cache hints of the list results and `resources/read`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
};

use serde_json::{json, Value};

/// The demo server over stdio, asked one request at a time.
struct Demo {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// The `_meta` of every request (2026-07-28: its version and capabilities).
    meta: Option<Value>,
}

impl Demo {
    fn start(era: &str, meta: Option<Value>) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"))
            .args(["--era", era])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the demo server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next_id: 0,
            meta,
        }
    }

    /// The whole response to `method` (notifications before it skipped).
    fn ask(&mut self, method: &str, mut params: Value) -> Value {
        self.next_id += 1;
        if let Some(meta) = &self.meta {
            params["_meta"] = meta.clone();
        }
        let request = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method,
            "params": params});
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).unwrap();
            assert!(read > 0, "the server ended before answering {method}");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == self.next_id && message.get("method").is_none() {
                return message;
            }
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks each `(method, params, result type)` answer of `demo` against `revision`'s schema.
fn check(revision: &str, demo: &mut Demo, asks: &[(&str, Value, &str)]) {
    let path = format!(
        "{}/tests/data/schema/{revision}/schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut failures = Vec::new();
    for (method, params, kind) in asks {
        let response = demo.ask(method, params.clone());
        let Some(result) = response.get("result") else {
            failures.push(format!("{method}: no result: {response}"));
            continue;
        };
        let of_kind = json!({"$schema": schema["$schema"], "$defs": schema["$defs"],
            "$ref": format!("#/$defs/{kind}")});
        let validator = jsonschema::validator_for(&of_kind).expect("the schema compiles");
        for error in validator.iter_errors(result) {
            let at = error.instance_path();
            failures.push(format!("{revision} {method} ({kind}) at {at}: {error}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What both revisions serve alike, and the result type each answer must be.
fn common() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("tools/list", json!({}), "ListToolsResult"),
        ("tools/list", json!({"cursor": null}), "ListToolsResult"),
        (
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
            "CallToolResult",
        ),
        (
            "tools/call",
            json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
            "CallToolResult",
        ),
        (
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 1}}),
            "CallToolResult",
        ),
        (
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
            "CallToolResult",
        ),
        ("prompts/list", json!({}), "ListPromptsResult"),
        (
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Ada"}}),
            "GetPromptResult",
        ),
        ("resources/list", json!({}), "ListResourcesResult"),
        (
            "resources/templates/list",
            json!({}),
            "ListResourceTemplatesResult",
        ),
        (
            "resources/read",
            json!({"uri": "demo://text/1"}),
            "ReadResourceResult",
        ),
        (
            "resources/read",
            json!({"uri": "demo://blob/1"}),
            "ReadResourceResult",
        ),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"},
                "argument": {"name": "style", "value": "f"}}),
            "CompleteResult",
        ),
    ]
}

#[test]
fn every_2026_07_28_result_is_valid_in_that_revision() {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let mut demo = Demo::start("modern", Some(meta));
    let mut asks = vec![("server/discover", json!({}), "DiscoverResult")];
    asks.extend(common());
    check("2026-07-28", &mut demo, &asks);
}

#[test]
fn every_2025_11_25_result_is_valid_in_that_revision() {
    let mut demo = Demo::start("legacy", None);
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "schema-test", "version": "1"}});
    let mut asks = vec![
        ("initialize", initialize, "InitializeResult"),
        ("ping", json!({}), "EmptyResult"),
        ("logging/setLevel", json!({"level": "info"}), "EmptyResult"),
    ];
    asks.extend(common());
    check("2025-11-25", &mut demo, &asks);
}
