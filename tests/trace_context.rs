//! The caller's trace reaches the server: a call made inside a span carries, in
//! `params._meta.traceparent`, the trace id and the id of its own client span, which
//! `tracing-opentelemetry` exports as a CLIENT span named by the MCP conventions, child of the
//! caller's. Seen in what the demo server read, over stdio and Streamable HTTP.

mod common;

use actix_mcp::{Client, HttpTransport, Placement, Transport};
use common::*;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{json, Value};
use tracing_subscriber::prelude::*;

/// Calls `echo` inside a span of the caller's; the spans exported, and the `tools/call` the
/// server read.
async fn traced_call(
    transport: impl Transport,
    journal: &Journal,
    carry: bool,
) -> (Vec<SpanData>, Value) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _guard = tracing::subscriber::set_default(subscriber);

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
