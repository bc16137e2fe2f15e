//! The client's metrics through the OpenTelemetry metrics API, read back from the SDK's
//! in-memory exporter: `mcp.client.operation.duration` by method, tool and `error.type`, the
//! requests given up by way, the requests in flight back to zero, and the session's duration
//! once the client is gone. Calls to a real demo server process over stdio.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{future::IntoFuture, time::Duration};

use actix_mcp::{Cancellation, Client, Placement};
use common::*;
use opentelemetry::{metrics::MeterProvider as _, KeyValue};
use opentelemetry_sdk::metrics::{
    data::{AggregatedMetrics, MetricData, ResourceMetrics},
    InMemoryMetricExporter, PeriodicReader, SdkMeterProvider,
};
use serde_json::json;

fn attributes<'a>(points: impl Iterator<Item = &'a KeyValue>) -> Vec<(String, String)> {
    let mut all: Vec<_> = points
        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect();
    all.sort();
    all
}

/// `(attributes, count or value)` of every point of metric `name`.
fn points(metrics: &[ResourceMetrics], name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    let mut found = Vec::new();
    for resource in metrics {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                match metric.data() {
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => found.extend(
                        h.data_points()
                            .map(|p| (attributes(p.attributes()), p.count() as f64)),
                    ),
                    AggregatedMetrics::U64(MetricData::Sum(s)) => found.extend(
                        s.data_points()
                            .map(|p| (attributes(p.attributes()), p.value() as f64)),
                    ),
                    AggregatedMetrics::I64(MetricData::Sum(s)) => found.extend(
                        s.data_points()
                            .map(|p| (attributes(p.attributes()), p.value() as f64)),
                    ),
                    _ => {}
                }
            }
        }
    }
    found
}

fn has(point: &[(String, String)], key: &str, value: &str) -> bool {
    point.iter().any(|(k, v)| k == key && v == value)
}

#[actix::test]
async fn calls_are_measured_by_method_tool_and_outcome() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let client = Client::builder()
        .placement(Placement::Current)
        .name("demo")
        .metrics(provider.meter("actix-mcp"))
        .connect(demo_server())
        .await
        .expect("connects");

    client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .expect("answered");
    client
        .call_tool("echo", json!({}))
        .await
        .expect("a tool error");
    let token = Cancellation::new();
    let cancelled = client
        .call_tool("sleep", json!({"ms": 60_000}))
        .cancellation(&token)
        .into_future();
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    };
    let _ = futures::join!(cancelled, cancel);
    let _ = client
        .call_tool("sleep", json!({"ms": 60_000}))
        .timeout(Duration::from_millis(50))
        .await;
    let mut dropped = Box::pin(
        client
            .call_tool("sleep", json!({"ms": 60_000}))
            .into_future(),
    );
    assert!(futures::poll!(dropped.as_mut()).is_pending());
    drop(dropped);
    client.shutdown().await;
    drop(client);
    provider.force_flush().expect("flushed");
    let metrics = exporter.get_finished_metrics().expect("metrics");

    let durations = points(&metrics, "mcp.client.operation.duration");
    let count = |tool: &str, error: Option<&str>| -> f64 {
        durations
            .iter()
            .filter(|(a, _)| has(a, "gen_ai.tool.name", tool) && has(a, "mcp.server.name", "demo"))
            .filter(|(a, _)| match error {
                Some(error) => has(a, "error.type", error),
                None => !a.iter().any(|(k, _)| k == "error.type"),
            })
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(count("echo", None), 1.0, "{durations:#?}");
    assert_eq!(count("echo", Some("tool_error")), 1.0, "{durations:#?}");
    assert_eq!(count("sleep", Some("cancelled")), 2.0, "{durations:#?}");
    assert_eq!(count("sleep", Some("timeout")), 1.0, "{durations:#?}");

    let given_up = points(&metrics, "mcp.client.requests.given_up");
    for way in ["token", "timeout", "drop"] {
        let n: f64 = given_up
            .iter()
            .filter(|(a, _)| has(a, "way", way))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(n, 1.0, "{way}: {given_up:#?}");
    }
    // What the wire saw: the cancelled and the timed-out calls were written, so each got its
    // `notifications/cancelled`; the dropped one was given up before its write, and nothing
    // went out for it.
    let on_wire = points(&metrics, "mcp.client.requests.cancelled");
    let wire = |what: &str| -> f64 {
        on_wire
            .iter()
            .filter(|(a, _)| has(a, "wire", what) && has(a, "mcp.server.name", "demo"))
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(wire("notification"), 2.0, "{on_wire:#?}");
    assert_eq!(wire("not_written"), 1.0, "{on_wire:#?}");
    assert_eq!(wire("abort"), 0.0, "{on_wire:#?}");
    // Every call after the handshake names the session's protocol version; every one its
    // transport.
    assert!(
        durations
            .iter()
            .all(|(a, _)| has(a, "network.transport", "pipe")),
        "{durations:#?}"
    );
    assert!(
        durations
            .iter()
            .filter(|(a, _)| has(a, "mcp.method.name", "tools/call"))
            .all(|(a, _)| a.iter().any(|(k, _)| k == "mcp.protocol.version")),
        "{durations:#?}"
    );
    let in_flight: f64 = points(&metrics, "mcp.client.requests.in_flight")
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert_eq!(in_flight, 0.0);
    let sessions = points(&metrics, "mcp.client.session.duration");
    assert_eq!(
        sessions.iter().map(|(_, n)| n).sum::<f64>(),
        1.0,
        "{sessions:#?}"
    );
}
