//! Cancellation over Streamable HTTP, observed at a real server process: the demo server in its
//! HTTP mode counts the cancels that reached a running request, whichever way they came.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{future::IntoFuture, time::Duration};

use actix_mcp::{Cancellation, Client, HttpTransport, ProtocolEra};
use common::*;
use serde_json::json;

async fn cancel_one_sleep(client: &Client) {
    let token = Cancellation::new();
    let sleep = spawn_sleep(client, &token);
    // The server has the sleep once it counts it as pending.
    let mut stats = server_stats(client).await;
    while stats["pending"] != 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        stats = server_stats(client).await;
    }
    token.cancel_with_reason("enough");
    assert!(sleep.await.unwrap().unwrap_err().is_cancelled());
    let mut stats = server_stats(client).await;
    for _ in 0..1000 {
        if stats["cancels_matched"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        stats = server_stats(client).await;
    }
    assert_eq!(stats["cancels_matched"], 1, "{stats}");
    assert_eq!(stats["cancels_ahead"], 0);
    assert_eq!(stats["pending"], 0, "the server stopped the sleep");
}

/// 2025-11-25 over HTTP: the cancel is a `notifications/cancelled` POST, and the server stops the
/// sleep it names.
#[actix::test]
async fn a_legacy_cancel_stops_the_sleep_at_the_server() {
    let server = demo_http(&[]);
    let client = Client::connect(HttpTransport::new(&server.url))
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), "2025-11-25");
    cancel_one_sleep(&client).await;
}

/// 2026-07-28 over HTTP: the cancel is the request's POST aborted; the server sees the
/// connection go and stops the sleep. No notification is sent.
#[actix::test]
async fn a_modern_cancel_aborts_the_post_and_stops_the_sleep_at_the_server() {
    let server = demo_http(&["--era", "modern"]);
    let client = Client::builder()
        .era(ProtocolEra::Modern)
        .connect(HttpTransport::new(&server.url))
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    cancel_one_sleep(&client).await;
    assert_eq!(client.stats().await.unwrap().cancels_sent, 0);
}

/// The same over HTTP/2 without TLS (h2c): every request is a stream of one connection, and the
/// cancel resets just that stream; the server still sees the request go and stops the sleep.
#[actix::test]
async fn over_http2_a_modern_cancel_resets_the_stream_and_stops_the_sleep() {
    let server = demo_http(&["--era", "modern"]);
    let client = Client::builder()
        .era(ProtocolEra::Modern)
        .connect(HttpTransport::new(&server.url).http2_prior_knowledge())
        .await
        .unwrap();
    let echoes = futures::future::join_all((0..50).map(|i| {
        client
            .call_tool("echo", json!({"text": format!("h2 {i}")}))
            .into_future()
    }))
    .await;
    for (i, echo) in echoes.into_iter().enumerate() {
        assert_eq!(echo.unwrap().text(), format!("h2 {i}"));
    }
    cancel_one_sleep(&client).await;
}

/// From plain tokio (no actix System): the actor and its HTTP tasks run on a thread of their own,
/// and calls and cancels work from any task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_works_from_plain_tokio() {
    let server = demo_http(&["--era", "modern"]);
    let client = Client::builder()
        .era(ProtocolEra::Modern)
        .connect(HttpTransport::new(&server.url))
        .await
        .unwrap();
    let echo = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .call_tool("echo", json!({"text": "from tokio"}))
                .await
        }
    });
    assert_eq!(echo.await.unwrap().unwrap().text(), "from tokio");
    cancel_one_sleep(&client).await;
    client.shutdown().await;
}

/// Issue 20: an MCP App's page of megabytes is read over HTTP, in both eras, with the default
/// cap (the old 4 MiB cap refused the official PDF viewer's 4.3 MB page).
#[actix::test]
async fn a_five_megabyte_app_resource_is_read_in_both_eras() {
    for era in ["legacy", "modern"] {
        let server = demo_http(&["--era", era]);
        let chosen = if era == "modern" {
            ProtocolEra::Modern
        } else {
            ProtocolEra::Legacy
        };
        let client = Client::builder()
            .era(chosen)
            .connect(HttpTransport::new(&server.url))
            .await
            .unwrap();
        let read = client.read_resource("demo://big/5242880").await.unwrap();
        let text = read.contents[0].text().expect("a text resource");
        assert_eq!(text.len(), 5_242_880, "{era}");
        client.shutdown().await;
    }
}
