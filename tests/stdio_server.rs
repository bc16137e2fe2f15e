//! The stdio transport against the bundled demo server, a real child process.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::time::Duration;

use actix_mcp::{Cancellation, Client, CloseReason, Error, StdioTransport};
use common::*;
use serde_json::json;

#[actix::test]
async fn the_handshake_exposes_server_info_and_tools_work() {
    let journal = Journal::new("handshake");
    let client = Client::connect(journal.server()).await.unwrap();
    assert_eq!(client.server_info().name, "actix-mcp-demo-server");
    assert_eq!(client.protocol_version(), "2025-11-25");
    assert!(client.instructions().unwrap_or_default().contains("echo"));
    assert!(client.capabilities().tools.is_some());

    let tools = client.list_tools(None).await.unwrap();
    let names: Vec<_> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    for expected in ["echo", "add", "sleep"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let echo = client
        .call_tool("echo", json!({"text": "héllo"}))
        .await
        .unwrap();
    assert_eq!(echo.text(), "héllo");
    let sum = client
        .call_tool("add", json!({"a": 2, "b": 40.5}))
        .await
        .unwrap();
    assert_eq!(sum.structured_content.unwrap()["sum"], 42.5);
    let bad = client.call_tool("add", json!({"a": "x"})).await.unwrap();
    assert!(
        bad.failed(),
        "a tool failure is a successful call that says so"
    );
    client.ping().await.unwrap();

    let frames = journal.frames();
    assert_eq!(frames[0]["method"], "initialize");
    assert_eq!(frames[1]["method"], "notifications/initialized");
}

#[actix::test]
async fn a_cancelled_sleep_is_stopped_at_the_server_and_the_cancel_follows_its_request() {
    let journal = Journal::new("cancel-sleep");
    let client = Client::connect(journal.server()).await.unwrap();
    let token = Cancellation::new();
    let call = spawn_sleep(&client, &token);
    journal
        .wait_for("the sleep request", |l| {
            l.iter().any(|l| l.contains("\"sleep\""))
        })
        .await;
    token.cancel_with_reason("enough");
    assert!(call.await.unwrap().unwrap_err().is_cancelled());

    let stats = loop {
        let stats = server_stats(&client).await;
        if stats["cancels"] == 1 {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(stats["cancels_matched"], 1);
    assert_eq!(stats["cancels_ahead"], 0);
    assert_eq!(stats["pending"], 0, "the server stopped the sleep");

    let (_, cancel) = journal.cancelled_call("sleep");
    assert_eq!(cancel["params"]["reason"], "enough");
}

#[actix::test]
async fn program_args_and_env_are_passed_without_a_shell() {
    let dir = std::env::temp_dir();
    let client = Client::connect(
        demo_server()
            .env("DEMO_VALUE", "$HOME; echo `id` | cat")
            .current_dir(&dir),
    )
    .await
    .unwrap();
    let value = client
        .call_tool("env", json!({"name": "DEMO_VALUE"}))
        .await
        .unwrap();
    assert_eq!(
        value.text(),
        "$HOME; echo `id` | cat",
        "taken literally, no shell"
    );
    let cwd = client.call_tool("cwd", json!({})).await.unwrap();
    assert_eq!(
        std::fs::canonicalize(cwd.text()).unwrap(),
        std::fs::canonicalize(&dir).unwrap()
    );
}

#[actix::test]
async fn a_program_that_cannot_be_spawned_is_a_transport_error() {
    let err = Client::connect(StdioTransport::new("/nonexistent/mcp-server"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
}

#[actix::test]
async fn a_server_that_exits_mid_flight_fails_every_caller_with_closed_and_its_status() {
    let client = Client::connect(demo_server()).await.unwrap();
    let sleepers: Vec<_> = (0..100)
        .map(|_| {
            let client = client.clone();
            actix_rt::spawn(async move { client.call_tool("sleep", json!({"ms": 60_000})).await })
        })
        .collect();
    eventually_pending(&client, 100).await;
    let crash = client
        .call_tool("crash", json!({"code": 3}))
        .await
        .unwrap_err();
    assert_eq!(
        crash.exit_status().and_then(|s| s.code()),
        Some(3),
        "{crash:?}"
    );
    for sleeper in sleepers {
        let err = sleeper.await.unwrap().unwrap_err();
        assert_eq!(err.exit_status().and_then(|s| s.code()), Some(3), "{err:?}");
    }
    // Later requests fail fast with the same reason.
    let later = client.ping().await.unwrap_err();
    assert_eq!(later.exit_status().and_then(|s| s.code()), Some(3));
}

#[actix::test]
async fn a_server_killed_mid_flight_fails_every_caller_with_closed() {
    use std::os::unix::process::ExitStatusExt;
    let client = Client::connect(demo_server()).await.unwrap();
    let pid = server_pid(&client).await;
    let sleepers: Vec<_> = (0..50)
        .map(|_| {
            let client = client.clone();
            actix_rt::spawn(async move { client.call_tool("sleep", json!({"ms": 60_000})).await })
        })
        .collect();
    eventually_pending(&client, 50).await;
    signal(pid, Signal::SIGKILL);
    for sleeper in sleepers {
        let err = sleeper.await.unwrap().unwrap_err();
        assert_eq!(
            err.exit_status().and_then(|s| s.signal()),
            Some(Signal::SIGKILL as i32),
            "{err:?}"
        );
    }
}

async fn eventually_pending(client: &Client, n: u64) {
    eventually_async(&format!("{n} calls pending at the server"), || async {
        server_stats(client).await["pending"] == n
    })
    .await
}

#[actix::test]
async fn an_oversized_frame_closes_the_connection_with_a_clear_error() {
    let client = Client::connect(demo_server().max_frame_bytes(4096))
        .await
        .unwrap();
    let small = client
        .call_tool("big", json!({"bytes": 1000}))
        .await
        .unwrap();
    assert_eq!(small.text().len(), 1000);
    let err = client
        .call_tool("big", json!({"bytes": 10_000}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Closed {
                reason: CloseReason::FrameTooLarge { limit: 4096 }
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("larger than 4096 bytes"));
    assert!(
        err.to_string().contains("max_frame_bytes"),
        "names the knob: {err}"
    );
    assert!(client.ping().await.unwrap_err().is_closed());
}

/// Issue 20: an MCP App's page of megabytes (the official PDF viewer's is 4.3 MB) was refused by
/// the old 4 MiB cap.
#[actix::test]
async fn the_default_frame_cap_reads_a_five_megabyte_app_resource() {
    let client = Client::connect(demo_server()).await.unwrap();
    let read = client.read_resource("demo://big/5242880").await.unwrap();
    let text = read.contents[0].text().expect("a text resource");
    assert_eq!(text.len(), 5_242_880);
    assert!(text.starts_with("<!doctype html>"));
}

#[actix::test]
async fn the_default_frame_cap_accepts_a_large_result() {
    let client = Client::connect(demo_server()).await.unwrap();
    let big = client
        .call_tool("big", json!({"bytes": 3_000_000}))
        .await
        .unwrap();
    assert_eq!(big.text().len(), 3_000_000);
}

/// A server that writes megabytes to stderr would block on a full pipe if nobody read it.
#[actix::test]
async fn a_chatty_stderr_never_blocks_the_server() {
    let client = Client::connect(demo_server()).await.unwrap();
    let line = "x".repeat(1000);
    let result = client
        .call_tool("stderr", json!({"text": line, "lines": 5000}))
        .await
        .unwrap();
    assert_eq!(result.text(), "wrote 5000");
}

/// redis-rs #1955: if writing stopped reading, a server that writes a lot while we write a lot
/// would deadlock both sides on full pipes.
#[actix::test]
async fn writing_a_lot_while_the_server_writes_a_lot_does_not_deadlock() {
    let client = Client::connect(demo_server()).await.unwrap();
    let flood = actix_rt::spawn({
        let client = client.clone();
        async move {
            client
                .call_tool("flood", json!({"count": 2000, "size": 10_000}))
                .await
        }
    });
    let text = "y".repeat(64 * 1024);
    let echoes: Vec<_> = (0..300)
        .map(|_| {
            let (client, text) = (client.clone(), text.clone());
            actix_rt::spawn(async move { client.call_tool("echo", json!({"text": text})).await })
        })
        .collect();
    for echo in echoes {
        assert_eq!(echo.await.unwrap().unwrap().text().len(), 64 * 1024);
    }
    assert_eq!(flood.await.unwrap().unwrap().text(), "flooded 2000");
}

#[actix::test]
async fn invalid_output_from_the_server_is_skipped_and_an_unknown_response_dropped() {
    let client = Client::connect(demo_server()).await.unwrap();
    let result = client.call_tool("garbage", json!({})).await.unwrap();
    assert_eq!(result.text(), "garbage sent");
    let stats = client.stats().await.unwrap();
    assert!(stats.invalid_frames >= 5, "{stats:?}");
    assert_eq!(
        stats.late_responses, 1,
        "the response for an id nobody asked"
    );
    client.ping().await.unwrap();
}

#[actix::test]
async fn the_server_can_ping_the_client_and_is_refused_other_methods() {
    let client = Client::connect(demo_server()).await.unwrap();
    let pong = client.call_tool("ping_client", json!({})).await.unwrap();
    assert_eq!(
        pong.structured_content.unwrap()["response"]["result"],
        json!({})
    );
    let refused = client
        .call_tool("ask_client", json!({"method": "roots/list"}))
        .await
        .unwrap();
    assert_eq!(
        refused.structured_content.unwrap()["response"]["error"]["code"],
        -32601
    );
}

#[actix::test]
async fn a_refused_protocol_version_fails_connect_and_the_server_gets_eof() {
    let journal = Journal::new("refused-version");
    let err = Client::connect(journal.server().args(["--protocol-version", "1999-01-01"]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Protocol(ref m) if m.contains("1999-01-01")),
        "{err:?}"
    );
    journal
        .wait_for("EOF at the server", |l| {
            l.last().is_some_and(|l| l == "#EOF")
        })
        .await;
    assert!(!journal
        .lines()
        .iter()
        .any(|l| l.contains("notifications/initialized")));

    let adopted = Client::connect(demo_server().args(["--protocol-version", "2025-06-18"]))
        .await
        .unwrap();
    assert_eq!(adopted.protocol_version(), "2025-06-18");
}

#[actix::test]
async fn a_server_error_on_initialize_fails_connect() {
    let err = Client::connect(demo_server().arg("--fail-initialize"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Server { code: -32603, .. }), "{err:?}");
}

#[actix::test]
async fn cancelling_connect_closes_the_connection_without_cancelling_initialize() {
    let journal = Journal::new("cancel-connect");
    let token = Cancellation::new();
    let connect = actix_rt::spawn({
        let token = token.clone();
        let transport = journal.server().args(["--initialize-delay-ms", "60000"]);
        async move {
            Client::builder()
                .cancellation(&token)
                .connect(transport)
                .await
        }
    });
    journal
        .wait_for("initialize", |l| l.iter().any(|l| l.contains("initialize")))
        .await;
    token.cancel();
    assert!(connect.await.unwrap().unwrap_err().is_cancelled());
    journal
        .wait_for("EOF at the server", |l| {
            l.last().is_some_and(|l| l == "#EOF")
        })
        .await;
    assert!(!journal
        .lines()
        .iter()
        .any(|l| l.contains("notifications/cancelled")));
}

/// Closing escalates: EOF on stdin, then SIGTERM, then SIGKILL, each after the grace period.
#[actix::test]
async fn close_escalates_from_eof_to_sigterm_to_sigkill() {
    let journal = Journal::new("escalate");
    let transport = journal
        .server()
        .args(["--linger-after-eof", "--ignore-sigterm"])
        .shutdown_grace(Duration::from_secs(1));
    let client = Client::connect(transport).await.unwrap();
    let pid = server_pid(&client).await;
    client.close().await;
    assert!(client.ping().await.unwrap_err().is_closed());
    eventually("the server is killed", || !process_exists(pid)).await;
    let lines = journal.lines();
    let eof = lines.iter().position(|l| l == "#EOF").expect("EOF first");
    let term = lines
        .iter()
        .position(|l| l == "#SIGTERM")
        .expect("then SIGTERM");
    assert!(eof < term);
}

#[actix::test]
async fn dropping_every_handle_shuts_the_server_down() {
    let journal = Journal::new("drop");
    let client = Client::connect(journal.server()).await.unwrap();
    let pid = server_pid(&client).await;
    drop(client);
    journal
        .wait_for("EOF at the server", |l| {
            l.last().is_some_and(|l| l == "#EOF")
        })
        .await;
    eventually("the server exits", || !process_exists(pid)).await;
}
