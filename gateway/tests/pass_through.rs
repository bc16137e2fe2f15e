//! Results the gateway only forwards reach the client as the upstream server wrote them: keys in
//! their order, an integer past 2^64 and a decimal's trailing zero kept, in both eras (the
//! 2026-07-28 fields it must add put in front, nothing else changed).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use serde_json::json;
use support::*;
use wire::*;

const TOOL: &str = r#"{"structuredContent":{"z":1,"a":123456789012345678901234567890,"f":1.10},"content":[{"type":"text","text":"exact"}],"isError":false}"#;
const PROMPT: &str =
    r#"{"messages":[{"role":"user","content":{"type":"text","text":"exact"}}],"description":"z"}"#;
const READ: &str = r#"{"contents":[{"uri":"verbatim://n","text":"1.10"}],"_meta":{"z":1,"a":2}}"#;

/// A gateway before one server, `v`, answering with the texts above (`name`: the test's own
/// directory, since tests run at once).
fn verbatim(name: &str) -> Upstreams {
    let results = json!({
        "initialize": r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{},"resources":{}},"serverInfo":{"name":"verbatim","version":"1"}}"#,
        "tools/list": r#"{"tools":[{"name":"exact","inputSchema":{"type":"object"}}]}"#,
        "prompts/list": r#"{"prompts":[{"name":"exact"}]}"#,
        "resources/list": r#"{"resources":[{"uri":"verbatim://n","name":"n"}]}"#,
        "resources/templates/list": r#"{"resourceTemplates":[]}"#,
        "tools/call": TOOL,
        "prompts/get": PROMPT,
        "resources/read": READ,
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/verbatim_server.py");
    let upstreams = Upstreams::of(name, json!({}));
    let given = upstreams.dir.join("results.json");
    std::fs::write(&given, results.to_string()).unwrap();
    let servers = json!({"v": {"command": "python3", "args": [script, given]}});
    let text = json!({ "mcpServers": servers });
    std::fs::write(&upstreams.config, text.to_string()).unwrap();
    upstreams
}

/// The three routed requests, with the result text each is answered with.
fn routed() -> [(serde_json::Value, &'static str); 3] {
    [
        (tool_call(3, "v__exact", json!({})), TOOL),
        (
            request(4, "prompts/get", json!({"name": "v__exact"})),
            PROMPT,
        ),
        (
            request(5, "resources/read", json!({"uri": "verbatim://n"})),
            READ,
        ),
    ]
}

/// `text` with `fields` put first, as the gateway adds what an era asks for.
fn with_first(fields: &str, text: &str) -> String {
    format!("{{{fields},{}", &text[1..])
}

#[actix_rt::test]
async fn a_sessions_results_are_the_upstream_servers_text() {
    let upstreams = verbatim("verbatim-session");
    let gateway = listen(&upstreams);
    let session = open_session(&gateway.1);
    for (message, text) in routed() {
        let body = String::from_utf8(post(&gateway.1, Some(&session), &message).body).unwrap();
        let expected = format!(r#""result":{text}}}"#);
        assert!(body.contains(&expected), "{body}\nexpected {expected}");
    }
}

#[actix_rt::test]
async fn a_stateless_calls_results_gain_only_what_their_era_asks() {
    let upstreams = verbatim("verbatim-stateless");
    let gateway = listen(&upstreams);
    for (message, text) in routed() {
        let method = message["method"].clone();
        let body = String::from_utf8(post_modern(&gateway.1, &modern(message)).body).unwrap();
        let expected = match method.as_str() {
            Some("resources/read") => with_first(
                r#""resultType":"complete","ttlMs":0,"cacheScope":"private""#,
                text,
            ),
            _ => with_first(r#""resultType":"complete""#, text),
        };
        assert!(
            body.contains(&format!(r#""result":{expected}}}"#)),
            "{body}\nexpected {expected}"
        );
    }
}
