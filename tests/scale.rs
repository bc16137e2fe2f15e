//! Many requests at once against the real demo server, and use from plain tokio code.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::sync::Arc;

use actix_mcp::{Client, Error};
use common::*;
use serde_json::json;

/// rmcp loses up to 58% of the cancels of dropped calls under load. Here 10,000 calls, dropped
/// from several threads, must each produce one cancel at the server, none ahead of its request,
/// and leave nothing running there.
///
/// Also shows the crate working from a plain multi-thread tokio runtime: `Client::connect` puts
/// the actor on an arbiter of the process's pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_calls_dropped_from_several_threads_are_all_cancelled_at_the_server() {
    const N: usize = 10_000;
    const THREADS: usize = 4;
    let client = Client::connect(demo_server()).await.unwrap();
    let client = Arc::new(client);

    let mut calls = Vec::with_capacity(N);
    for t in 0..THREADS {
        for _ in 0..N / THREADS {
            let client = client.clone();
            // Spawned on the multi-thread runtime: drops happen on whichever worker runs them.
            calls.push(tokio::spawn(async move {
                let _ = t;
                client.call_tool("sleep", json!({"ms": 600_000})).await
            }));
        }
    }
    wait_for_stat(&client, "pending", N as u64).await;

    // Drop every future: aborting a task drops the call it was awaiting.
    for call in &calls {
        call.abort();
    }
    for call in calls {
        assert!(call.await.unwrap_err().is_cancelled());
    }
    let stats = wait_for_stat(&client, "cancels_matched", N as u64).await;
    assert_eq!(
        stats["cancels"], N as u64,
        "one cancel per dropped call: {stats}"
    );
    assert_eq!(
        stats["cancels_ahead"], 0,
        "no cancel overtook its request: {stats}"
    );
    assert_eq!(
        stats["pending"], 0,
        "nothing left running at the server: {stats}"
    );
    assert_eq!(client.stats().await.unwrap().in_flight, 0);
}

async fn wait_for_stat(client: &Client, key: &str, want: u64) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let stats = server_stats(client).await;
        if stats[key] == want {
            return stats;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} never reached {want}: {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[actix::test]
async fn ten_thousand_concurrent_echo_calls_each_get_their_own_answer() {
    const N: usize = 10_000;
    let client = Client::connect(demo_server()).await.unwrap();
    let calls: Vec<_> = (0..N)
        .map(|i| {
            let client = client.clone();
            actix_rt::spawn(async move {
                let r = client
                    .call_tool("echo", json!({"text": format!("n{i}")}))
                    .await?;
                Ok::<_, Error>((i, r.text()))
            })
        })
        .collect();
    for call in calls {
        let (i, text) = call.await.unwrap().unwrap();
        assert_eq!(text, format!("n{i}"));
    }
}

/// Explicit cancels right after the actor accepted the request, from several threads: the
/// request may be queued, being written or written when its cancel lands, and in every case the
/// cancel must follow its request on the wire or not be sent at all (rmcp lets 1-2% overtake).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancels_issued_right_after_sending_never_overtake_their_request() {
    const N: usize = 5_000;
    let client = Arc::new(Client::connect(demo_server()).await.unwrap());
    let calls: Vec<_> = (0..N)
        .map(|_| {
            let addr = client.addr().clone();
            tokio::spawn(async move {
                let params = json!({"name": "sleep", "arguments": {"ms": 600_000}});
                let pending = addr
                    .send(actix_mcp::Request::new("tools/call", Some(params)))
                    .await
                    .expect("actor alive");
                pending.cancel(Some("at once".into()))
            })
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap().is_cancelled());
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let stats = server_stats(&client).await;
        let conn = client.stats().await.unwrap();
        assert_eq!(stats["cancels_ahead"], 0, "{stats}");
        assert_eq!(
            conn.cancels_sent + conn.cancelled_before_write,
            N as u64,
            "{conn:?}"
        );
        if stats["pending"] == 0 && stats["cancels"] == conn.cancels_sent {
            // Every request that reached the server was cancelled there.
            assert_eq!(stats["cancels_matched"], stats["cancels"], "{stats}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{stats} {conn:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
