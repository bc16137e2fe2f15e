//! [`Servers`], the many-server manager, with real demo server processes: one connection per
//! server shared by every caller, a crashed server replaced on next use, a server that cannot be
//! started backed off.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use actix_mcp::{
    servers::ServersError, Cancellation, Client, Error, HealthProbe, Placement, RestartPolicy,
    Servers, ServersActor, Status, StdioTransport,
};
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
        Err(ServersError::UnknownServer(name)) if name == "c"
    ));
    let tools = servers.tools().await;
    assert_eq!(tools.len(), 2);
    for (_, listed) in &tools {
        assert!(listed.as_ref().unwrap().iter().any(|t| t.name == "echo"));
    }
    servers.stop().await;
    assert!(!process_exists(pid_a));
}

/// A server process that dies takes its connection with it; the next use starts a new process
/// (at once: the first end within the restart window is restarted without delay).
#[actix::test]
async fn a_crashed_server_is_replaced_on_next_use() {
    let servers = two_servers();
    let first = servers.client("a").await.unwrap();
    let pid = server_pid(&first).await;
    let crash = servers.call_tool("a", "crash", json!({"code": 3})).await;
    assert!(
        matches!(&crash, Err(ServersError::Client(e)) if exited_with(e, 3)),
        "the crash is the connection's end, with the exit code: {crash:?}"
    );
    eventually("the connection notices the exit", || first.is_closed()).await;
    let after = first.call_tool("echo", json!({"text": "x"})).await;
    assert!(
        matches!(&after, Err(e) if exited_with(e, 3)),
        "a call on the ended client gets the same end: {after:?}"
    );

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
/// callers get the last error at once, and nothing is spawned; supervision retries it when the
/// back-off has passed (0.5 s, then 1 s).
#[actix::test]
async fn a_server_that_cannot_start_is_backed_off() {
    // On the paused clock: the back-off's times are exact, however busy the machine.
    tokio::time::pause();
    let servers = Servers::new(Client::builder());
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    servers.add("missing", move || {
        counted.fetch_add(1, Ordering::SeqCst);
        StdioTransport::new("/nonexistent/mcp-server")
    });
    let first = servers.client("missing").await;
    assert!(
        matches!(&first, Err(ServersError::Client(Error::Transport { .. }))),
        "a program that cannot be spawned is a transport error: {first:?}"
    );
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
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "0.4 s: still backing off"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let retried = servers.client("missing").await;
    assert!(
        matches!(&retried, Err(ServersError::Client(Error::Transport { .. }))),
        "{retried:?}"
    );
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "retried once by supervision when the back-off passed"
    );
}

/// Status of `name`.
fn status_of(servers: &Servers, name: &str) -> Status {
    servers
        .status()
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.status)
        .expect("a configured server has a status")
}

/// The connection ended because its server process exited with `code`.
fn exited_with(error: &Error, code: i32) -> bool {
    error.exit_status().and_then(|status| status.code()) == Some(code)
}

/// A crash while calls are in flight: each caller gets a typed error (the connection closed),
/// and supervision restarts the server by itself, without waiting for a next use.
#[actix::test]
async fn a_crash_fails_its_callers_with_typed_errors_and_is_restarted_by_supervision() {
    let servers = two_servers();
    let first = servers.client("a").await.unwrap();
    let pid = server_pid(&first).await;
    let sleepers: Vec<_> = (0..3)
        .map(|_| {
            let call = first.call_tool("sleep", json!({"ms": 60_000}));
            tokio::spawn(std::future::IntoFuture::into_future(call))
        })
        .collect();
    let _ = servers.call_tool("a", "crash", json!({"code": 3})).await;
    for sleeper in sleepers {
        let outcome = sleeper.await.unwrap();
        assert!(
            matches!(outcome, Err(Error::Closed { .. })),
            "a caller in flight sees the end: {outcome:?}"
        );
    }
    eventually("supervision restarts the server", || {
        servers.connects("a") == Some(2) && matches!(status_of(&servers, "a"), Status::Ready)
    })
    .await;
    let second = servers.client("a").await.unwrap();
    assert_ne!(server_pid(&second).await, pid);
    assert_eq!(
        servers.connects("b"),
        Some(0),
        "b was never used, never started"
    );
    servers.stop().await;
}

/// Restarts stop at the cap: a server that exits at once is started `max_restarts + 1` times,
/// then reported failed with `GaveUp`, and not started again until an explicit restart.
#[actix::test]
async fn restarts_stop_at_the_cap() {
    let servers = Servers::new(Client::builder()).restart_policy(RestartPolicy {
        max_restarts: 2,
        window: Duration::from_secs(60),
        min_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(40),
    });
    servers.add("flaky", || StdioTransport::new("sh").args(["-c", "exit 3"]));
    let first = servers.client("flaky").await;
    assert!(
        matches!(&first, Err(ServersError::Client(e)) if exited_with(e, 3) || e.is_closed()),
        "{first:?}"
    );
    eventually("supervision gives up", || {
        matches!(status_of(&servers, "flaky"), Status::Failed { .. })
    })
    .await;
    assert_eq!(servers.connects("flaky"), Some(3));
    let status = servers.status().remove(0);
    assert!(
        matches!(status.status, Status::Failed { restarts: 3, .. }),
        "{status:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        servers.connects("flaky"),
        Some(3),
        "no start after giving up"
    );
    let refused = servers.client("flaky").await.unwrap_err();
    assert!(
        matches!(&refused, ServersError::GaveUp { server, restarts: 3, .. } if server == "flaky"),
        "{refused}"
    );
    let restarted = servers.restart("flaky").await;
    assert!(
        matches!(&restarted, Err(ServersError::Client(e)) if exited_with(e, 3) || e.is_closed()),
        "{restarted:?}"
    );
    assert_eq!(
        servers.connects("flaky"),
        Some(4),
        "an explicit restart starts it"
    );
}

/// One catalogue of both servers: each tool once per server; a name both offer is ambiguous
/// bare and callable qualified; a routed call cancelled reaches the right server as a cancel.
#[actix::test]
async fn the_catalogue_keeps_colliding_names_callable_and_routed_calls_cancel_at_the_server() {
    let servers = two_servers();
    let catalogue = servers.catalogue().await;
    assert!(
        catalogue.unavailable.is_empty(),
        "{:?}",
        catalogue.unavailable
    );
    let echoes: Vec<&str> = catalogue
        .tools
        .iter()
        .filter(|t| t.item.name == "echo")
        .map(|t| t.qualified.as_str())
        .collect();
    assert_eq!(echoes, ["a/echo", "b/echo"]);
    assert!(catalogue.tools.iter().all(|t| t.collides));
    assert!(!catalogue.resources.is_empty() && !catalogue.prompts.is_empty());

    let ambiguous = servers
        .call("echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&ambiguous, ServersError::AmbiguousTool { candidates, .. } if candidates.len() == 2),
        "{ambiguous}"
    );
    let echoed = servers
        .call("b/echo", json!({"text": "routed"}))
        .await
        .unwrap();
    assert_eq!(echoed.text(), "routed");
    assert!(matches!(
        servers.call("nope", json!({})).await,
        Err(ServersError::UnknownTool(_))
    ));

    let token = Cancellation::new();
    let call = servers
        .call("b/sleep", json!({"ms": 60_000}))
        .cancellation(&token);
    let running = tokio::spawn(std::future::IntoFuture::into_future(call));
    let b = servers.client("b").await.unwrap();
    eventually_async("b runs the sleep", || async {
        server_stats(&b).await["pending"].as_u64() == Some(1)
    })
    .await;
    token.cancel_with_reason("routed cancel");
    assert!(running.await.unwrap().unwrap_err().is_cancelled());
    eventually_async("the cancel reaches b", || async {
        server_stats(&b).await["cancels_matched"].as_u64() == Some(1)
    })
    .await;
    let a = servers.client("a").await.unwrap();
    assert_eq!(
        server_stats(&a).await["cancels"].as_u64(),
        Some(0),
        "a saw nothing"
    );

    // Cancelled before the route is found: nothing is sent anywhere.
    let before = server_stats(&b).await["requests"].as_u64().unwrap();
    let early = Cancellation::new();
    early.cancel();
    let refused = servers
        .call("b/echo", json!({"text": "no"}))
        .cancellation(&early)
        .await;
    assert!(refused.unwrap_err().is_cancelled());
    // The stats call itself is one request.
    assert_eq!(
        server_stats(&b).await["requests"].as_u64(),
        Some(before + 1)
    );
    servers.stop().await;
}

/// A list change drops the kept lists of that server: the next catalogue asks it again.
#[actix::test]
async fn a_list_change_refreshes_the_catalogue() {
    let servers = two_servers();
    servers.catalogue().await;
    let a = servers.client("a").await.unwrap();
    let asked = || async {
        server_stats(&a).await["lists"]["tools/list"]
            .as_u64()
            .unwrap_or(0)
    };
    let before = asked().await;
    servers.catalogue().await;
    assert_eq!(asked().await, before, "kept lists are reused");
    a.call_tool("notify", json!({"kind": "tools"}))
        .await
        .unwrap();
    let mut refreshed = false;
    for _ in 0..100 {
        servers.catalogue().await;
        if asked().await > before {
            refreshed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        refreshed,
        "the catalogue asked again after tools/list_changed"
    );
    servers.stop().await;
}

/// Stopping the manager stops every server: no process is left, and calls are refused with a
/// typed error until a server is started again.
#[actix::test]
async fn stopping_the_manager_leaves_no_process() {
    let servers = two_servers();
    servers.start_all().await;
    let mut pids = Vec::new();
    for name in ["a", "b"] {
        assert!(matches!(status_of(&servers, name), Status::Ready));
        pids.push(server_pid(&servers.client(name).await.unwrap()).await);
    }
    servers.stop().await;
    for pid in pids {
        assert!(!process_exists(pid), "server {pid} left running");
    }
    assert!(matches!(status_of(&servers, "a"), Status::Stopped));
    assert!(matches!(
        servers.call_tool("a", "echo", json!({"text": "x"})).await,
        Err(ServersError::Stopped(name)) if name == "a"
    ));
    servers.start_all().await;
    assert!(matches!(status_of(&servers, "a"), Status::Ready));
    servers.stop().await;
}

/// A server that stops answering fails its health probe and is restarted.
#[actix::test]
async fn a_server_that_stops_answering_is_restarted_by_the_health_probe() {
    let servers = Servers::new(Client::builder()).health_probe(HealthProbe {
        interval: Duration::from_millis(200),
        timeout: Duration::from_millis(300),
    });
    servers.add("a", demo_server);
    let first = servers.client("a").await.unwrap();
    let pid = server_pid(&first).await;
    first
        .call_tool("pause_reading", json!({"ms": 30_000}))
        .await
        .unwrap();
    eventually("the probe restarts the server", || {
        servers.connects("a") == Some(2)
    })
    .await;
    let second = servers.client("a").await.unwrap();
    assert_ne!(server_pid(&second).await, pid);
    servers.stop().await;
    assert!(!process_exists(pid), "the unresponsive server was stopped");
}

/// The manager as an actor: status, catalogue and routed calls as messages.
#[actix::test]
async fn the_manager_answers_as_an_actor() {
    use actix::Actor;
    let servers = two_servers();
    let addr = ServersActor::new(servers.clone()).start();
    let status = addr.send(actix_mcp::servers::GetStatus).await.unwrap();
    assert_eq!(status.len(), 2);
    let result = addr
        .send(actix_mcp::servers::CallTool {
            tool: "a/echo".into(),
            arguments: json!({"text": "by message"}),
            cancellation: None,
            timeout: None,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.text(), "by message");
    let catalogue = addr.send(actix_mcp::servers::GetCatalogue).await.unwrap();
    assert!(catalogue.tools.iter().any(|t| t.qualified == "b/add"));
    addr.send(actix_mcp::servers::StopAll).await.unwrap();
    assert!(matches!(status_of(&servers, "a"), Status::Stopped));
}

/// A log of many servers can be read: what a connection logs (here, its server's stderr) is in
/// an `mcp.connection` span naming the server, and a call at debug level in an `mcp.request`
/// span with its method and id.
#[actix::test]
async fn logs_name_the_server_and_each_request() {
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // A subscriber set with `set_default` is this thread's only: keep the servers on it
    // rather than on the pool's threads.
    let servers = Servers::new(Client::builder().placement(Placement::Current));
    servers.add("a", demo_server);
    servers.add("b", demo_server);
    for name in ["a", "b"] {
        let text = format!("hello from {name}");
        servers
            .call_tool(name, "stderr", json!({"text": text}))
            .await
            .unwrap();
    }
    let logs = || String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    eventually("both servers' stderr is logged", || {
        logs().contains("hello from a") && logs().contains("hello from b")
    })
    .await;
    servers.stop().await;
    let logs = logs();
    for name in ["a", "b"] {
        let line = logs
            .lines()
            .find(|l| l.contains(&format!("hello from {name}")))
            .unwrap_or_default();
        // The session's span names the server first, then the session's facts.
        assert!(
            line.contains(&format!("mcp.connection{{server={name} ")),
            "{line}"
        );
    }
    assert!(
        logs.contains("mcp.client{") && logs.contains("tools/call stderr"),
        "a call's span: {logs}"
    );
}

/// The manager from plain tokio (no actix System): connections run on threads of their own,
/// supervision on the runtime; stopping it leaves no process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_works_from_plain_tokio() {
    let servers = two_servers();
    let echoed = servers
        .call("a/echo", json!({"text": "tokio"}))
        .await
        .unwrap();
    assert_eq!(echoed.text(), "tokio");
    let a = servers.client("a").await.unwrap();
    let pid = server_pid(&a).await;
    let _ = servers.call_tool("a", "crash", json!({"code": 3})).await;
    eventually("supervision restarts it", || {
        servers.connects("a") == Some(2) && matches!(status_of(&servers, "a"), Status::Ready)
    })
    .await;
    assert_ne!(server_pid(&servers.client("a").await.unwrap()).await, pid);
    let catalogue = servers.catalogue().await;
    assert!(catalogue.tools.iter().any(|t| t.qualified == "b/echo"));
    let second = server_pid(&servers.client("a").await.unwrap()).await;
    servers.stop().await;
    assert!(!process_exists(second));
}

/// `start_all` returns only once every server's status is settled: a caller reading the status
/// right after it sees `Ready`, never `Starting`, from actix and from plain tokio alike.
/// Regression: the outcome was recorded by a separate task that could run after `start_all`
/// returned, so `actix-mcp servers` reported a slow server as `starting`.
#[test]
fn start_all_returns_with_every_status_settled() {
    let check = || async {
        let servers = Servers::new(Client::builder());
        let names: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
        for name in &names {
            servers.add(name, demo_server);
        }
        servers.start_all().await;
        for name in &names {
            let status = status_of(&servers, name);
            assert!(matches!(status, Status::Ready), "{name}: {status:?}");
        }
        servers.stop().await;
    };
    for _ in 0..3 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(check());
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(check());
        // On a thread of its own: a thread that ran an actix System keeps its arbiter handle.
        std::thread::spawn(move || actix::System::new().block_on(check()))
            .join()
            .unwrap();
    }
}
