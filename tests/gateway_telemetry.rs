//! The gateway under the standard OpenTelemetry environment: a routed call is a SERVER span named
//! by the MCP conventions (`tools/call a__echo`), a child of the span the downstream client
//! named in `_meta.traceparent`; the upstream call is a CLIENT span (`tools/call echo`) inside
//! it, and the upstream server reads that CLIENT span as its parent. The duration histogram is
//! exported too, before the gateway exits, and the call's audit record (`--audit`) as a log
//! record.
#![cfg(feature = "otel")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;
#[path = "support/gateway_stdio.rs"]
mod gateway_stdio;
#[path = "common/otlp.rs"]
mod otlp;

use std::process::{Command, Stdio};

use common::*;
use serde_json::{json, Value};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs the gateway over stdio in front of one demo server: the handshake, one traced call of
/// `a__echo`, then end of input, and waits for it to exit (it exports on the way out).
fn one_traced_call(journal: &Journal, endpoint: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("gateway-otel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let config = dir.join("mcp.json");
    let trail = dir.join("audit.jsonl");
    let server = json!({"command": *DEMO_SERVER, "args": ["--journal", journal.path]});
    std::fs::write(&config, json!({"mcpServers": {"a": server}}).to_string()).expect("written");
    let gateway = Command::new(program(workspace_bins::GATEWAY))
        .arg("--config")
        .arg(&config)
        .arg("--stdio")
        .arg("--audit")
        .arg(&trail)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("TRACEPARENT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let mut downstream = gateway_stdio::Downstream::start(gateway);
    downstream.until_offered("a__echo");
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let params = json!({"arguments": {"text": "traced"}, "_meta": {"traceparent": traceparent}});
    let called = downstream.call("a__echo", params);
    // End of input: the gateway stops, exporting what is left.
    assert!(downstream.finish(), "the gateway failed");
    called
}

#[test]
fn a_routed_call_is_a_server_span_in_the_callers_trace_around_the_upstream_client_span() {
    let receiver = otlp::Receiver::start();
    let journal = Journal::new("gateway-otel");
    let called = one_traced_call(&journal, &receiver.endpoint);
    assert_eq!(called["result"]["content"][0]["text"], "traced", "{called}");

    let spans = receiver.spans();
    let find = |name: &str| {
        spans
            .iter()
            .find(|(_, s)| s.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
    };
    let (service, routed) = find("tools/call a__echo");
    assert_eq!(service, "actix-mcp-gateway");
    // SPAN_KIND_SERVER.
    assert_eq!(routed.kind, 2);
    assert_eq!(hex(&routed.trace_id), CALLER_TRACE);
    assert_eq!(hex(&routed.parent_span_id), CALLER_SPAN);
    let attribute = |key| otlp::string(&routed.attributes, key);
    assert_eq!(attribute("mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attribute("gen_ai.tool.name").as_deref(), Some("a__echo"));

    let (_, upstream) = find("tools/call echo");
    // SPAN_KIND_CLIENT, inside the routed call's span.
    assert_eq!(upstream.kind, 3);
    assert_eq!(upstream.parent_span_id, routed.span_id);
    assert_eq!(upstream.trace_id, routed.trace_id);

    let request = journal
        .frames()
        .into_iter()
        .find(|f| f["method"] == "tools/call")
        .expect("the server read the call");
    assert_eq!(
        request["params"]["_meta"]["traceparent"],
        format!("00-{CALLER_TRACE}-{}-01", hex(&upstream.span_id))
    );

    let histograms = receiver.histograms();
    let duration = histograms.iter().find(|(name, point)| {
        name == "mcp.client.operation.duration"
            && otlp::string(&point.attributes, "gen_ai.tool.name").as_deref() == Some("echo")
    });
    let (_, duration) = duration.unwrap_or_else(|| panic!("no duration in {histograms:#?}"));
    assert_eq!(duration.count, 1);

    let logs = receiver.logs();
    let audited = logs
        .iter()
        .find(|r| r.event_name == "actix-mcp-gateway.audit");
    let audited = audited.unwrap_or_else(|| panic!("no audit record in {logs:#?}"));
    let field = |key| otlp::string(&audited.attributes, key);
    assert_eq!(field("item").as_deref(), Some("echo"));
    assert_eq!(field("server").as_deref(), Some("a"));
    assert_eq!(field("outcome").as_deref(), Some("answered"));
}
