//! Many connections in one process: placed over the pool of arbiters (no thread per
//! connection), counted there while they live; over HTTP, sharing their thread's HTTP client.
//! Counts, not time.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;
#[path = "common/fault_proxy.rs"]
mod fault_proxy;

use std::future::IntoFuture;

use actix_mcp::{Client, HttpTransport, Placement};
use common::*;
use fault_proxy::FaultProxy;
use serde_json::json;

/// The pool's size for this test process (set before any connection makes the pool).
const ARBITERS: usize = 2;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
}

/// Issue 21: from plain tokio, connections go to the pool's arbiters, spread evenly (the one
/// running the fewest takes the next), with no thread of their own; each answers; dropped, they
/// leave the pool. It used to cost a thread and an actix System per connection.
#[tokio::test(flavor = "current_thread")]
async fn connections_from_plain_tokio_are_spread_over_the_pool_without_a_thread_each() {
    actix_mcp::set_pool_size(ARBITERS);
    const N: usize = 40;
    let before = threads();
    let clients: Vec<Client> = futures::future::join_all((0..N).map(|_| {
        Client::builder()
            .placement(Placement::Pool)
            .connect(demo_server())
    }))
    .await
    .into_iter()
    .map(|c| c.expect("connects"))
    .collect();
    assert_eq!(
        actix_mcp::pool_load(),
        vec![N / ARBITERS; ARBITERS],
        "spread evenly over the pool"
    );
    // The pool's threads, and what the stdio transports share (tokio's blocking pool may add
    // a few): not one per connection.
    let grown = threads() - before;
    assert!(grown <= ARBITERS + 8, "{grown} threads for {N} connections");

    let answers = futures::future::join_all(clients.iter().enumerate().map(|(i, client)| {
        client
            .call_tool("echo", json!({ "text": i.to_string() }))
            .into_future()
    }))
    .await;
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer.expect("answered").text(), i.to_string());
    }

    drop(clients);
    eventually("the connections left the pool", || {
        actix_mcp::pool_load().iter().all(|&load| load == 0)
    })
    .await;
}

/// Issue 21: HTTP connections not given a client of their own share their thread's, so many
/// clients to one server reuse its TCP connections (one, here: one thread, calls one after
/// another over HTTP/1.1, all at once over HTTP/2), yet every request carries its own client's
/// bearer token, as one user's connection each would. Each connection used to build its own
/// HTTP client: a pool, a TLS configuration and TCP connections of its own.
#[actix::test]
async fn http_clients_share_their_threads_connections_each_with_its_own_token() {
    const N: usize = 24;
    for http2 in [false, true] {
        let server = demo_http(&[]);
        let proxy = FaultProxy::start(&server.url);
        let mut clients = Vec::new();
        for i in 0..N {
            let transport =
                HttpTransport::new(&proxy.url).header("authorization", format!("Bearer user-{i}"));
            let transport = if http2 {
                transport.http2_prior_knowledge()
            } else {
                transport
            };
            let client = Client::builder()
                .placement(Placement::Current)
                .connect(transport)
                .await
                .expect("connects");
            clients.push(client);
        }
        let call = |i: usize| {
            clients[i]
                .call_tool("echo", json!({ "text": i.to_string() }))
                .into_future()
        };
        let answers = if http2 {
            futures::future::join_all((0..N).map(call)).await
        } else {
            let mut answers = Vec::new();
            for i in 0..N {
                answers.push(call(i).await);
            }
            answers
        };
        for (i, answer) in answers.into_iter().enumerate() {
            assert_eq!(answer.expect("answered").text(), i.to_string());
        }

        let stats = proxy.stats();
        assert_eq!(stats.tool_calls.len(), N, "{:?}", stats.tool_calls);
        for (authorization, arguments) in &stats.tool_calls {
            let text = arguments["text"].as_str().unwrap_or_default();
            assert_eq!(
                *authorization,
                format!("Bearer user-{text}"),
                "http2: {http2}"
            );
        }
        // HTTP/2 multiplexes everything on one connection. HTTP/1.1 needs one per request in
        // flight; a client connecting sends its GET stream and its `initialized` POST at once, so
        // a few, and never one per client.
        let bound = if http2 { 1 } else { N / 3 };
        assert!(
            stats.connections <= bound,
            "{N} clients over {} TCP connections (http2: {http2})",
            stats.connections
        );
        for client in clients {
            client.shutdown().await;
        }
    }
}
