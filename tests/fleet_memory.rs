//! What an idle connection holds, counted by the allocator: bytes of heap, not time, so the
//! figure is the same on a busy machine. Issue 21's bounds: an idle stdio connection at most
//! 32 KB (it was 180 KB: a 90 KB notification ring and a 64 KB read chunk made at connect),
//! an idle HTTP client at most 20 KB (10,000 in 200 MB).
//!
//! One test in its own binary: the counting allocator sees the whole process, so nothing else
//! may run beside it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{alloc::System, time::Duration};

use actix_mcp::{Client, HttpTransport, Placement};
use cap::Cap;
use common::*;
use serde_json::json;

#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, usize::MAX);

/// Heap held per connection by `n` idle connections made by `connect`, after one call each (so
/// that buffers grown for a call had to be given back). A first connection is made before
/// counting: the pool's arbiters, the shared HTTP clients and lazy statics are per process.
async fn heap_per_idle_connection<F, Fut>(n: usize, connect: F) -> usize
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Client>,
{
    let first = connect().await;
    echo(&first, 0).await;
    let before = HEAP.allocated();
    let clients = futures::future::join_all((0..n).map(|_| connect())).await;
    let calls = clients.iter().enumerate().map(|(i, c)| echo(c, i));
    futures::future::join_all(calls).await;
    // Idle: every answer read, every write done.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = HEAP.allocated().saturating_sub(before);
    futures::future::join_all(clients.iter().chain([&first]).map(Client::shutdown)).await;
    held / n
}

async fn echo(client: &Client, i: usize) {
    let text = i.to_string();
    let answer = client
        .call_tool("echo", json!({ "text": text }))
        .await
        .expect("answered");
    assert_eq!(answer.text(), text);
}

#[tokio::test(flavor = "current_thread")]
async fn an_idle_connection_holds_a_few_kilobytes_of_heap() {
    actix_mcp::set_pool_size(2);
    let stdio = heap_per_idle_connection(100, || async {
        Client::builder()
            .placement(Placement::Pool)
            .connect(demo_server())
            .await
            .expect("connects")
    })
    .await;
    eprintln!("stdio: {stdio} bytes of heap per idle connection");
    assert!(
        stdio <= 32 * 1024,
        "stdio: {stdio} bytes per idle connection"
    );

    let server = demo_http(&[]);
    let url = server.url.clone();
    let http = heap_per_idle_connection(200, || {
        let url = url.clone();
        async move {
            Client::builder()
                .placement(Placement::Pool)
                .connect(HttpTransport::new(&url).http2_prior_knowledge())
                .await
                .expect("connects")
        }
    })
    .await;
    eprintln!("HTTP/2: {http} bytes of heap per idle client");
    assert!(http <= 20 * 1024, "HTTP: {http} bytes per idle client");
}
