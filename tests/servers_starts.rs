//! The manager's start slots, seen at scripted servers: however many servers a config has, at
//! most `start_parallelism` of them are in their handshake at once, and a server's list time
//! limit counts from its own turn, not from the start of a long queue; stopping the manager
//! mid-start leaves no server process, now or later.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

#[path = "support/children.rs"]
mod children;
mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use actix_mcp::{
    transport::memory::{self, MemoryPeer},
    Client, Servers, Status,
};
use children::children;
use common::demo_server;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

/// What the scripted servers saw.
#[derive(Default)]
struct Seen {
    /// `initialize` requests received.
    arrived: AtomicUsize,
    /// Of them answered.
    answered: AtomicUsize,
    /// The most received and not yet answered at one time.
    most_waiting: AtomicUsize,
}

/// `n` servers, each a scripted server behind an in-memory transport, served by `serve`.
fn servers<F, Fut>(n: usize, serve: F) -> Servers
where
    F: Fn(MemoryPeer) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (peers, mut made) = mpsc::unbounded_channel();
    let servers = Servers::new(Client::builder());
    for i in 0..n {
        let peers = peers.clone();
        servers.add(format!("s{i:02}"), move || {
            let (transport, peer) = memory::pair();
            let _ = peers.send(peer);
            transport
        });
    }
    tokio::spawn(async move {
        while let Some(peer) = made.recv().await {
            tokio::spawn(serve(peer));
        }
    });
    servers
}

/// Plays a server offering one tool: `initialize` answered once `ready` resolves.
async fn serve<R>(mut peer: MemoryPeer, ready: impl Fn() -> R)
where
    R: std::future::Future<Output = ()>,
{
    while let Some(message) = peer.recv().await {
        let result = match message["method"].as_str() {
            Some("initialize") => {
                ready().await;
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "scripted", "version": "0"},
                })
            }
            Some("tools/list") => {
                json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
            }
            _ if message["id"] == Value::Null => continue,
            _ => json!({}),
        };
        peer.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
    }
}

/// Regression: a config's servers all connected at once (1,000 processes spawned together).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_servers_than_the_start_parallelism_are_in_their_handshake_at_once() {
    const SERVERS: usize = 12;
    const PARALLEL: usize = 3;
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Semaphore::new(0));
    let servers = {
        let (seen, gate) = (seen.clone(), gate.clone());
        servers(SERVERS, move |peer| {
            let (seen, gate) = (seen.clone(), gate.clone());
            serve(peer, move || {
                let (seen, gate) = (seen.clone(), gate.clone());
                async move {
                    let arrived = seen.arrived.fetch_add(1, Ordering::SeqCst) + 1;
                    let waiting = arrived - seen.answered.load(Ordering::SeqCst);
                    seen.most_waiting.fetch_max(waiting, Ordering::SeqCst);
                    if let Ok(permit) = gate.acquire().await {
                        permit.forget();
                    }
                    seen.answered.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
    }
    .start_parallelism(PARALLEL);
    let starting = tokio::spawn({
        let servers = servers.clone();
        async move { servers.start_all().await }
    });

    // The first three are in their handshake; the other nine wait for a slot.
    while seen.arrived.load(Ordering::SeqCst) < PARALLEL {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(seen.arrived.load(Ordering::SeqCst), PARALLEL);
    let waiting = servers
        .status()
        .into_iter()
        .filter(|s| matches!(s.status, Status::Starting))
        .count();
    assert_eq!(
        waiting, SERVERS,
        "every server is starting, most waiting for a slot"
    );

    gate.add_permits(SERVERS);
    starting.await.expect("start_all");
    assert_eq!(seen.arrived.load(Ordering::SeqCst), SERVERS);
    assert_eq!(seen.most_waiting.load(Ordering::SeqCst), PARALLEL);
    for status in servers.status() {
        assert!(matches!(status.status, Status::Ready), "{status:?}");
    }
    servers.stop().await;
}

/// Regression: the catalogue's time limit covered the wait for a slot, so in a long queue the
/// last servers were listed as timed out though each answered well within it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_list_time_limit_counts_from_its_turn() {
    const SERVERS: usize = 8;
    let servers = servers(SERVERS, |peer| {
        serve(peer, || tokio::time::sleep(Duration::from_millis(150)))
    })
    .start_parallelism(1)
    .list_timeout(Duration::from_millis(900));

    // One at a time, 150 ms each: the last is listed about 1.2 s after the catalogue began.
    let catalogue = servers.catalogue().await;
    assert!(
        catalogue.unavailable.is_empty(),
        "{:?}",
        catalogue.unavailable
    );
    assert_eq!(catalogue.tools.len(), SERVERS);
    servers.stop().await;
}

/// Regression: `stop()` during a long `start_all` returned while queued servers still started
/// afterwards, each spawning its process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_mid_start_leaves_no_process_now_or_later() {
    const SERVERS: usize = 24;
    let servers = Servers::new(Client::builder()).start_parallelism(2);
    for i in 0..SERVERS {
        servers.add(format!("s{i:02}"), demo_server);
    }
    let starting = tokio::spawn({
        let servers = servers.clone();
        async move { servers.start_all().await }
    });
    let ready = || {
        servers
            .status()
            .iter()
            .filter(|s| matches!(s.status, Status::Ready))
            .count()
    };
    while ready() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    servers.stop().await;
    // This process's children: the other tests of this file, running beside, spawn none.
    assert_eq!(children(), 0, "a server process outlived stop()");
    starting.await.expect("start_all ends");
    // Nothing queued starts later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(children(), 0, "a server process started after stop()");
    let stopped = servers
        .status()
        .iter()
        .filter(|s| matches!(s.status, Status::Stopped))
        .count();
    assert_eq!(stopped, SERVERS);
    assert!(matches!(
        servers.client("s23").await,
        Err(actix_mcp::servers::ServersError::Stopped(name)) if name == "s23"
    ));
}
