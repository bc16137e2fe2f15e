//! Each call's span, by the OpenTelemetry semantic conventions for MCP, as a `tracing`
//! subscriber (and so `tracing-opentelemetry`) receives it: its name, kind and attributes, and
//! each outcome (answered, a tool's error, the server's error, cancelled, timed out, dropped)
//! as `error.type` and the span status. Calls to a real demo server process over stdio.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{
    collections::BTreeMap,
    future::IntoFuture,
    sync::{Arc, Mutex},
    time::Duration,
};

use actix_mcp::{Cancellation, Client, Error, Placement};
use common::*;
use serde_json::json;
use tracing::{
    field::{Field, Visit},
    span, Subscriber,
};
use tracing_subscriber::{layer::Context, prelude::*, registry::LookupSpan, Layer};

/// A closed span: its name, its fields, and the messages of its events.
#[derive(Debug, Clone, Default)]
struct Closed {
    name: &'static str,
    fields: BTreeMap<String, String>,
    events: Vec<BTreeMap<String, String>>,
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Closed>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut closed = Closed {
            name: attrs.metadata().name(),
            ..Closed::default()
        };
        attrs.record(&mut Fields(&mut closed.fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(closed);
        }
    }
    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(closed) = span.extensions_mut().get_mut::<Closed>() {
                values.record(&mut Fields(&mut closed.fields));
            }
        }
    }
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.event_span(event) {
            if let Some(closed) = span.extensions_mut().get_mut::<Closed>() {
                let mut fields = BTreeMap::new();
                event.record(&mut Fields(&mut fields));
                closed.events.push(fields);
            }
        }
    }
    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(closed) = span.extensions_mut().remove::<Closed>() {
                self.0.lock().unwrap().push(closed);
            }
        }
    }
}

impl Spans {
    /// The call spans closed so far, by their `otel.name`.
    fn call(&self, name: &str) -> Closed {
        let spans = self.0.lock().unwrap();
        let found = spans.iter().rev().find(|s| {
            s.name == "mcp.client" && s.fields.get("otel.name").map(String::as_str) == Some(name)
        });
        found
            .cloned()
            .unwrap_or_else(|| panic!("no span {name:?} in {spans:#?}"))
    }
}

/// The calls' spans, as a subscriber on this thread sees them.
fn traced() -> (Spans, tracing::subscriber::DefaultGuard) {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(
        spans
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO),
    );
    (spans, tracing::subscriber::set_default(subscriber))
}

async fn connected() -> Client {
    Client::builder()
        .placement(Placement::Current)
        .connect(demo_server())
        .await
        .expect("connects")
}

fn field<'a>(span: &'a Closed, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

#[actix::test]
async fn an_answered_tool_call_has_the_conventions_name_kind_and_attributes() {
    let (spans, _guard) = traced();
    let client = connected().await;
    let call = client.call_tool("echo", json!({"text": "hi"}));
    let id = call.id();
    call.await.expect("answered");
    let span = spans.call("tools/call echo");
    assert_eq!(field(&span, "otel.kind"), Some("client"));
    assert_eq!(field(&span, "mcp.method.name"), Some("tools/call"));
    assert_eq!(field(&span, "gen_ai.tool.name"), Some("echo"));
    assert_eq!(field(&span, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(
        field(&span, "jsonrpc.request.id"),
        Some(id.as_u64().to_string().as_str())
    );
    assert_eq!(field(&span, "error.type"), None, "{span:?}");
    assert_eq!(field(&span, "otel.status_code"), None);

    client.resources().await.expect("listed");
    let span = spans.call("resources/list");
    assert_eq!(field(&span, "mcp.method.name"), Some("resources/list"));
    client.shutdown().await;
}

#[actix::test]
async fn a_tools_error_and_the_servers_error_are_errors_of_their_own() {
    let (spans, _guard) = traced();
    let client = connected().await;
    // The demo server's echo without its text: a result with isError.
    let result = client.call_tool("echo", json!({})).await.expect("a result");
    assert!(result.is_error.unwrap_or(false));
    let span = spans.call("tools/call echo");
    assert_eq!(field(&span, "error.type"), Some("tool_error"));
    assert_eq!(field(&span, "otel.status_code"), Some("ERROR"));

    let refused = client.call_tool("no-such-tool", json!({})).await;
    let Err(Error::Server { code, .. }) = refused else {
        panic!("a JSON-RPC error: {refused:?}");
    };
    let span = spans.call("tools/call no-such-tool");
    assert_eq!(field(&span, "error.type"), Some(code.to_string().as_str()));
    assert_eq!(
        field(&span, "rpc.response.status_code"),
        Some(code.to_string().as_str())
    );
    assert_eq!(field(&span, "otel.status_code"), Some("ERROR"));
    client.shutdown().await;
}

#[actix::test]
async fn cancelled_timed_out_and_dropped_calls_carry_their_outcome() {
    let (spans, _guard) = traced();
    let client = connected().await;

    let token = Cancellation::new();
    let call = client
        .call_tool("sleep", json!({"ms": 60_000}))
        .cancellation(&token)
        .into_future();
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel_with_reason("the user left");
    };
    let (outcome, ()) = futures::join!(call, cancel);
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{outcome:?}"
    );
    let span = spans.call("tools/call sleep");
    assert_eq!(field(&span, "error.type"), Some("cancelled"));
    let event = span
        .events
        .iter()
        .find(|e| e.get("message").map(String::as_str) == Some("cancelled"));
    assert_eq!(
        event.and_then(|e| e.get("reason")).map(String::as_str),
        Some("the user left"),
        "{span:?}"
    );

    let timed_out = client
        .call_tool("sleep", json!({"ms": 60_000}))
        .timeout(Duration::from_millis(100))
        .await;
    assert!(
        matches!(timed_out, Err(Error::Timeout { .. })),
        "{timed_out:?}"
    );
    assert_eq!(
        field(&spans.call("tools/call sleep"), "error.type"),
        Some("timeout")
    );

    let mut dropped = Box::pin(
        client
            .call_tool("sleep", json!({"ms": 60_000}))
            .into_future(),
    );
    assert!(futures::poll!(dropped.as_mut()).is_pending());
    drop(dropped);
    let span = spans.call("tools/call sleep");
    assert_eq!(field(&span, "error.type"), Some("cancelled"));
    assert!(span
        .events
        .iter()
        .any(|e| e.get("reason").map(String::as_str) == Some("dropped by its caller")));
    client.shutdown().await;
}

#[actix::test]
async fn a_tasks_life_is_told_by_events_on_its_calls_span() {
    let (spans, _guard) = traced();
    let client = connected().await;
    let slept = client
        .call_tool("task_sleep", json!({"ms": 300, "steps": 3}))
        .as_task()
        .await
        .expect("the task's result");
    assert!(slept.text().starts_with("slept"), "{slept:?}");
    let span = spans.call("tools/call task_sleep");
    let statuses: Vec<&str> = span
        .events
        .iter()
        .filter(|e| e.get("message").map(String::as_str) == Some("task status"))
        .filter_map(|e| e.get("task_status").map(String::as_str))
        .collect();
    assert_eq!(statuses.first(), Some(&"working"), "{span:#?}");
    assert_eq!(statuses.last(), Some(&"completed"), "{span:#?}");
    client.shutdown().await;
}
