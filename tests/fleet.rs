//! Many connections in one process: placed over the pool of arbiters (no thread per
//! connection), counted there while they live. Counts, not time.

mod common;

use std::{future::IntoFuture, time::Duration};

use actix_mcp::{Client, Placement};
use common::*;
use serde_json::json;

/// The pool's size for this test process (set before any connection makes the pool).
const ARBITERS: usize = 2;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
