//! The caller's trace reaches the server: a call made inside a span carries, in
//! `params._meta.traceparent`, the trace id and the id of its own client span, which
//! `tracing-opentelemetry` exports as a CLIENT span named by the MCP conventions, child of the
//! caller's. Seen in what the demo server read, and in the spans a server on the official
//! Python SDK (with OpenTelemetry's Python SDK) makes of the call, over stdio and Streamable HTTP.

mod common;

use std::time::Duration;

use actix_mcp::{Client, HttpTransport, Placement, StdioTransport, Transport};
use common::*;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{json, Value};
use tracing_subscriber::prelude::*;

/// Spans exported to memory through `tracing-opentelemetry`, on this thread, while the guard
/// lives.
fn exporting() -> (
    InMemorySpanExporter,
    SdkTracerProvider,
    tracing::subscriber::DefaultGuard,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let guard = tracing::subscriber::set_default(subscriber);
    (exporter, provider, guard)
}

/// Calls `echo` inside a span of the caller's; the spans exported, and the `tools/call` the
/// server read.
async fn traced_call(
    transport: impl Transport,
    journal: &Journal,
    carry: bool,
) -> (Vec<SpanData>, Value) {
    let (exporter, provider, _guard) = exporting();

    let client = Client::builder()
        .placement(Placement::Current)
        .trace_context(carry)
        .connect(transport)
        .await
        .expect("connects");
    {
        let caller = tracing::info_span!("handle the user's request");
        let _in = caller.enter();
        client
            .call_tool("echo", json!({"text": "hi"}))
            .await
            .expect("answered");
    }
    client.shutdown().await;
    provider.force_flush().expect("flushed");
    let spans = exporter.get_finished_spans().expect("spans");
    let call = journal
        .frames()
        .into_iter()
        .find(|f| f["method"] == "tools/call")
        .expect("the server read the call");
    (spans, call)
}

fn check(spans: &[SpanData], call: &Value) {
    let client = spans
        .iter()
        .find(|s| s.name == "tools/call echo")
        .unwrap_or_else(|| panic!("no client span in {spans:#?}"));
    let caller = spans
        .iter()
        .find(|s| s.name == "handle the user's request")
        .expect("the caller's span");
    assert_eq!(client.span_kind, SpanKind::Client);
    assert_eq!(client.parent_span_id, caller.span_context.span_id());
    let expected = format!(
        "00-{:032x}-{:016x}-01",
        caller.span_context.trace_id(),
        client.span_context.span_id()
    );
    assert_eq!(call["params"]["_meta"]["traceparent"], expected, "{call}");
}

#[actix::test]
async fn a_call_over_stdio_carries_its_client_span_as_the_servers_parent() {
    let journal = Journal::new("trace-context-stdio");
    let (spans, call) = traced_call(journal.server(), &journal, true).await;
    check(&spans, &call);
}

#[actix::test]
async fn a_call_over_http_carries_its_client_span_as_the_servers_parent() {
    let journal = Journal::new("trace-context-http");
    let path = journal.path.to_string_lossy().into_owned();
    let server = demo_http(&["--journal", &path]);
    let (spans, call) = traced_call(HttpTransport::new(&server.url), &journal, true).await;
    check(&spans, &call);
}

#[actix::test]
async fn trace_context_is_left_out_when_turned_off() {
    let journal = Journal::new("trace-context-off");
    let (spans, call) = traced_call(journal.server(), &journal, false).await;
    assert!(spans.iter().any(|s| s.name == "tools/call echo"));
    assert!(call["params"].get("_meta").is_none(), "{call}");
}

/// The spans the Python server wrote so far.
fn python_spans(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Calls `echo` on the Python SDK server inside a span, then checks that the server's span of
/// the call is in the caller's trace, the client span its parent.
async fn python_joins_the_trace(transport: impl Transport, spans_file: &std::path::Path) {
    let (exporter, provider, _guard) = exporting();
    let client = Client::builder()
        .placement(Placement::Current)
        .connect(transport)
        .await
        .expect("connects");
    {
        let caller = tracing::info_span!("handle the user's request");
        let _in = caller.enter();
        let answer = client
            .call_tool("echo", json!({"text": "hi"}))
            .await
            .expect("answered");
        assert_eq!(answer.text(), "hi");
    }
    provider.force_flush().expect("flushed");
    let ours = exporter.get_finished_spans().expect("spans");
    let call = ours
        .iter()
        .find(|s| s.name == "tools/call echo")
        .expect("the client span");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let server = loop {
        let found = python_spans(spans_file)
            .into_iter()
            .find(|s| s["name"] == "tools/call echo");
        match found {
            Some(span) => break span,
            None if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            None => panic!("the Python server made no span of the call"),
        }
    };
    client.shutdown().await;
    assert_eq!(server["kind"], "SERVER");
    assert_eq!(
        server["trace_id"],
        format!("{:032x}", call.span_context.trace_id())
    );
    assert_eq!(
        server["parent_span_id"],
        format!("{:016x}", call.span_context.span_id())
    );
}

#[actix::test]
async fn a_python_sdk_server_over_stdio_joins_the_callers_trace() {
    let (python, script) = common::python::traced_python_server();
    let spans = Journal::new("python-spans-stdio").path;
    let transport = StdioTransport::new(python)
        .arg(script)
        .env("SPANS_FILE", &spans);
    python_joins_the_trace(transport, &spans).await;
}

#[actix::test]
async fn a_python_sdk_server_over_http_joins_the_callers_trace() {
    let (python, script) = common::python::traced_python_server();
    let spans = Journal::new("python-spans-http").path;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = std::process::Command::new(python)
        .arg(script)
        .args(["--http", &port.to_string()])
        .env("SPANS_FILE", &spans)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the Python server starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the Python server never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    python_joins_the_trace(HttpTransport::new(&url), &spans).await;
    let _ = child.kill();
    let _ = child.wait();
}

/// A server's request carrying a `traceparent` runs its handler in a SERVER span that is the
/// child of the server's span: the handler's work is in the server's trace.
#[actix::test]
async fn a_servers_request_runs_its_handler_in_the_servers_trace() {
    use actix_mcp::{protocol::sampling::CreateMessageResult, transport::memory};

    let (exporter, provider, _guard) = exporting();

    let (transport, mut peer) = memory::pair();
    let options = Client::builder()
        .placement(Placement::Current)
        .on_sampling(|_, _| async { Ok(CreateMessageResult::text("assistant", "model")) });
    let server = async move {
        peer.accept_handshake("2025-11-25")
            .await
            .expect("handshake");
        peer
    };
    let (client, mut peer) = futures::join!(options.connect(transport), server);
    let client = client.expect("connects");
    peer.send(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
        "params": {
            "messages": [], "maxTokens": 1,
            "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        }
    }));
    let answer = tokio::time::timeout(Duration::from_secs(10), peer.recv())
        .await
        .expect("an answer")
        .expect("open");
    assert_eq!(answer["id"], 1);
    assert!(answer.get("result").is_some(), "{answer}");
    provider.force_flush().expect("flushed");
    let spans = exporter.get_finished_spans().expect("spans");
    let handler = spans
        .iter()
        .find(|s| s.name == "sampling/createMessage")
        .unwrap_or_else(|| panic!("no handler span in {spans:#?}"));
    assert_eq!(handler.span_kind, SpanKind::Server);
    assert_eq!(
        format!("{:032x}", handler.span_context.trace_id()),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(
        format!("{:016x}", handler.parent_span_id),
        "00f067aa0ba902b7"
    );
    drop(client);
}
