//! [`Servers`], the many-server manager, with real demo server processes: one connection per
//! server shared by every caller, a crashed server replaced on next use, a server that cannot be
//! started backed off.

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use actix_mcp::{Client, Error, Servers, StdioTransport};
use common::*;
use serde_json::json;

fn two_servers() -> Servers {
    let servers = Servers::new(Client::builder());
    servers.add("a", demo_server);
    servers.add("b", demo_server);
    servers
}

/// Concurrent first callers share one connect; later callers reuse it; servers are separate.
#[actix::test]
async fn each_server_is_connected_once_and_shared() {
    let servers = two_servers();
    let (a1, a2, b) = futures::join!(
        servers.client("a"),
        servers.client("a"),
        servers.client("b")
    );
    let (a1, a2, b) = (a1.unwrap(), a2.unwrap(), b.unwrap());
    let pid_a = server_pid(&a1).await;
    assert_eq!(server_pid(&a2).await, pid_a);
    assert_ne!(server_pid(&b).await, pid_a);
    let echo = servers
        .call_tool("a", "echo", json!({"text": "via a"}))
        .await
        .unwrap();
    assert_eq!(echo.text(), "via a");
    assert_eq!(servers.connects("a"), Some(1));
    assert_eq!(servers.connects("b"), Some(1));
    assert!(matches!(
        servers.client("c").await,
        Err(Error::UnknownServer(name)) if name == "c"
    ));
    let tools = servers.tools().await;
    assert_eq!(tools.len(), 2);
    for (_, listed) in &tools {
        assert!(listed.as_ref().unwrap().iter().any(|t| t.name == "echo"));
    }
    servers.shutdown().await;
    assert!(!process_exists(pid_a));
}

/// A server process that dies takes its connection with it; the next use starts a new process.
#[actix::test]
async fn a_crashed_server_is_replaced_on_next_use() {
    let servers = two_servers();
    let first = servers.client("a").await.unwrap();
    let pid = server_pid(&first).await;
    let crash = servers.call_tool("a", "crash", json!({"code": 3})).await;
    assert!(crash.is_err(), "{crash:?}");
    eventually("the connection notices the exit", || first.is_closed()).await;
    assert!(first.call_tool("echo", json!({"text": "x"})).await.is_err());

    let second = servers.client("a").await.unwrap();
    assert!(!second.is_closed());
    assert_ne!(server_pid(&second).await, pid);
    assert_eq!(servers.connects("a"), Some(2));
    assert_eq!(
        servers
            .call_tool("a", "echo", json!({"text": "again"}))
            .await
            .unwrap()
            .text(),
        "again"
    );
}

/// A server that cannot be started is not retried on every call: during the back-off its
/// callers get the last error at once, and nothing is spawned.
#[actix::test]
async fn a_server_that_cannot_start_is_backed_off() {
    let servers = Servers::new(Client::builder());
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    servers.add("missing", move || {
        counted.fetch_add(1, Ordering::SeqCst);
        StdioTransport::new("/nonexistent/mcp-server")
    });
    let first = servers.client("missing").await;
    assert!(first.is_err());
    for _ in 0..5 {
        let again = servers.client("missing").await;
        assert_eq!(
            again.unwrap_err().to_string(),
            first.as_ref().unwrap_err().to_string()
        );
    }
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "no retry during the back-off"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(servers.client("missing").await.is_err());
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "retried once the back-off passed"
    );
}
