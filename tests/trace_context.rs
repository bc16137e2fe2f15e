//! The caller's trace reaches the server: a call made inside a span carries, in
//! `params._meta.traceparent`, the trace id and the id of its own client span, which
//! `tracing-opentelemetry` exports as a CLIENT span named by the MCP conventions, child of the
//! caller's. Seen in what the demo server read, and in the spans a server on the official
//! Python SDK (with OpenTelemetry's Python SDK) makes of the call, over stdio and Streamable HTTP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{future::IntoFuture, time::Duration};

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

/// The value of attribute `key` of `span`, as text.
fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// Waits for the session's span, which ends when the connection actor is gone.
async fn session_span(exporter: &InMemorySpanExporter, provider: &SdkTracerProvider) -> SpanData {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        provider.force_flush().expect("flushed");
        let spans = exporter.get_finished_spans().expect("spans");
        if let Some(span) = spans.into_iter().find(|s| s.name == "mcp.connection") {
            return span;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the session span never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Over a 2025-11-25 session, each call's span names the session the server gave, the
/// protocol version and where the server is; the session's own span names them too.
#[actix::test]
async fn a_call_span_names_its_http_session_and_server() {
    let (exporter, provider, _guard) = exporting();
    let server = demo_http(&["--sessions"]);
    let client = Client::builder()
        .placement(Placement::Current)
        .connect(HttpTransport::new(&server.url))
        .await
        .expect("connects");
    client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .expect("answered");
    let session = client.session_id().expect("the server gave a session");
    let version = client.protocol_version().to_owned();
    client.shutdown().await;
    drop(client);
    let connection = session_span(&exporter, &provider).await;
    let spans = exporter.get_finished_spans().expect("spans");
    let call = spans
        .iter()
        .find(|s| s.name == "tools/call echo")
        .expect("the client span");
    let port = server
        .url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .expect("a port")
        .to_owned();
    for span in [call, &connection] {
        assert_eq!(
            attribute(span, "mcp.session.id").as_deref(),
            Some(&*session)
        );
        assert_eq!(
            attribute(span, "mcp.protocol.version"),
            Some(version.clone())
        );
        assert_eq!(attribute(span, "network.transport").as_deref(), Some("tcp"));
        assert_eq!(
            attribute(span, "network.protocol.name").as_deref(),
            Some("http")
        );
        assert_eq!(
            attribute(span, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(attribute(span, "server.port"), Some(port.clone()));
    }
}

/// Over stdio there is no session id; the transport is a pipe.
#[actix::test]
async fn a_call_span_over_stdio_names_a_pipe_and_no_session() {
    let journal = Journal::new("session-attributes-stdio");
    let (spans, _) = traced_call(journal.server(), &journal, true).await;
    let call = spans
        .iter()
        .find(|s| s.name == "tools/call echo")
        .expect("the client span");
    assert_eq!(
        attribute(call, "network.transport").as_deref(),
        Some("pipe")
    );
    assert_eq!(attribute(call, "mcp.session.id"), None);
    assert!(attribute(call, "mcp.protocol.version").is_some());
}

/// With a tracer (`ConnectOptions::tracer`) and no `tracing-opentelemetry`, the client span is
/// made straight through the OpenTelemetry API: the child of the caller's current context, named
/// and attributed by the conventions, named by the request's `traceparent`; cancelled and failed
/// calls carry their outcome.
#[actix::test]
async fn a_tracer_makes_client_spans_through_the_opentelemetry_api() {
    use actix_mcp::Cancellation;
    use opentelemetry::{
        context::FutureExt as _,
        global::BoxedTracer,
        trace::{Status, TraceContextExt, Tracer as _},
        Context,
    };

    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let journal = Journal::new("tracer-direct");
    let client = Client::builder()
        .placement(Placement::Current)
        .tracer(BoxedTracer::new(Box::new(provider.tracer("actix-mcp"))))
        .connect(journal.server())
        .await
        .expect("connects");
    let app = provider.tracer("app");
    let caller = Context::current_with_span(app.start("handle the user's request"));
    let token = Cancellation::new();
    async {
        client
            .call_tool("echo", json!({"text": "hi"}))
            .await
            .expect("answered");
        let sleeping = client
            .call_tool("sleep", json!({"ms": 60_000}))
            .cancellation(&token)
            .into_future();
        let cancel = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            token.cancel_with_reason("the user left");
        };
        let (cancelled, ()) = futures::join!(sleeping, cancel);
        assert!(cancelled.is_err());
        let unknown = client.call_tool("no-such-tool", json!({})).await;
        assert!(unknown.is_err());
    }
    .with_context(caller.clone())
    .await;
    caller.span().end();
    client.shutdown().await;
    provider.force_flush().expect("flushed");
    let spans = exporter.get_finished_spans().expect("spans");
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
    };
    let parent = find("handle the user's request");
    let echo = find("tools/call echo");
    assert_eq!(echo.span_kind, SpanKind::Client);
    assert_eq!(echo.parent_span_id, parent.span_context.span_id());
    assert_eq!(
        attribute(echo, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(attribute(echo, "gen_ai.tool.name").as_deref(), Some("echo"));
    assert_eq!(
        attribute(echo, "network.transport").as_deref(),
        Some("pipe")
    );
    assert!(attribute(echo, "jsonrpc.request.id").is_some());
    assert_eq!(echo.status, Status::Unset);
    let read = journal
        .frames()
        .into_iter()
        .find(|f| f["method"] == "tools/call" && f["params"]["name"] == "echo")
        .expect("the server read the call");
    let expected = format!(
        "00-{:032x}-{:016x}-01",
        parent.span_context.trace_id(),
        echo.span_context.span_id()
    );
    assert_eq!(read["params"]["_meta"]["traceparent"], expected, "{read}");

    let sleep = find("tools/call sleep");
    assert_eq!(attribute(sleep, "error.type").as_deref(), Some("cancelled"));
    assert!(
        matches!(sleep.status, Status::Error { .. }),
        "{:?}",
        sleep.status
    );
    let event = sleep
        .events
        .iter()
        .find(|e| e.name == "cancelled")
        .expect("the cancel as an event");
    assert!(
        event
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == "reason" && kv.value.to_string() == "the user left"),
        "{event:?}"
    );
    let unknown = find("tools/call no-such-tool");
    assert!(matches!(unknown.status, Status::Error { .. }));
    assert!(attribute(unknown, "error.type").is_some());
}
