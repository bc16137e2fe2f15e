//! The CLI under the standard OpenTelemetry environment: with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! set it exports, before it exits, the call's CLIENT span named by the MCP conventions inside
//! the command's own span, itself a child of `TRACEPARENT`'s; the server reads the same trace
//! in the request's `_meta`. Without it, nothing is exported and nothing added to the wire.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;
#[path = "common/otlp.rs"]
mod otlp;

use std::process::Command;

use common::*;

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn call_echo(journal: &Journal, env: &[(&str, &str)]) -> std::process::Output {
    let server = format!("{} --journal '{}'", *DEMO_SERVER, journal.path.display());
    let mut command = Command::new(program(workspace_bins::CLI));
    command
        .args(["--stdio", &server, "call", "echo", r#"{"text":"hi"}"#])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("TRACEPARENT");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the CLI runs")
}

#[test]
fn the_cli_exports_the_calls_span_in_the_callers_trace_and_the_server_joins_it() {
    let receiver = otlp::Receiver::start();
    let journal = Journal::new("cli-otel");
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let output = call_echo(
        &journal,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("TRACEPARENT", &traceparent),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "hi");

    let spans = receiver.spans();
    let (service, call) = spans
        .iter()
        .find(|(_, s)| s.name == "tools/call echo")
        .unwrap_or_else(|| panic!("no call span in {spans:#?}"));
    assert_eq!(service, "actix-mcp");
    // SPAN_KIND_CLIENT.
    assert_eq!(call.kind, 3);
    let attribute = |key| otlp::string(&call.attributes, key);
    assert_eq!(attribute("mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attribute("gen_ai.tool.name").as_deref(), Some("echo"));
    assert_eq!(
        attribute("gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert!(attribute("jsonrpc.request.id").is_some());
    assert_eq!(hex(&call.trace_id), CALLER_TRACE);

    let (_, command) = spans
        .iter()
        .find(|(_, s)| s.name == "actix-mcp call")
        .expect("the command's span");
    assert_eq!(call.parent_span_id, command.span_id);
    assert_eq!(hex(&command.parent_span_id), CALLER_SPAN);

    let histograms = receiver.histograms();
    let duration = histograms.iter().find(|(name, point)| {
        name == "mcp.client.operation.duration"
            && otlp::string(&point.attributes, "mcp.method.name").as_deref() == Some("tools/call")
            && otlp::string(&point.attributes, "gen_ai.tool.name").as_deref() == Some("echo")
    });
    let (_, duration) = duration.unwrap_or_else(|| panic!("no duration in {histograms:#?}"));
    assert_eq!(duration.count, 1);
    assert!(otlp::string(&duration.attributes, "error.type").is_none());

    let request = journal
        .frames()
        .into_iter()
        .find(|f| f["method"] == "tools/call")
        .expect("the server read the call");
    assert_eq!(
        request["params"]["_meta"]["traceparent"],
        format!("00-{CALLER_TRACE}-{}-01", hex(&call.span_id))
    );
}

#[test]
fn without_the_environment_nothing_is_exported_or_sent() {
    let journal = Journal::new("cli-no-otel");
    let output = call_echo(&journal, &[]);
    assert!(output.status.success());
    let request = journal
        .frames()
        .into_iter()
        .find(|f| f["method"] == "tools/call")
        .expect("the server read the call");
    // The CLI's progress token only.
    assert!(
        request["params"]["_meta"].get("traceparent").is_none(),
        "{request}"
    );
}

#[test]
fn an_unsupported_exporter_protocol_is_a_usage_error() {
    let journal = Journal::new("cli-otel-grpc");
    let output = call_echo(
        &journal,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("http/protobuf"));
}
