//! Streamable HTTP over a Unix socket: the demo server listening on a socket file (no TCP port),
//! reached by `HttpTransport::unix_socket`, by an `mcp.json` server's `socket`, and by the
//! command line's `--socket`; in both eras, with a cancel seen at the server.
#![cfg(all(feature = "http", unix))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::time::Duration;

use actix_mcp::{Cancellation, Client, Config, HttpTransport, ProtocolEra};
use common::*;
use serde_json::json;

/// The demo server on a Unix socket of its own (`args` added); the socket's path.
fn demo_on_socket(name: &str, args: &[&str]) -> (HttpProcess, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("mcp-uds-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("mcp.sock");
    let mut command = std::process::Command::new(&*DEMO_SERVER);
    let at = format!("unix:{}", socket.display());
    command.args(["--http", &at]).args(args);
    (HttpProcess::start(command), socket)
}

/// A sleep in flight, then cancelled: the server counts the cancel and stops the sleep.
async fn cancel_one_sleep(client: &Client) {
    let token = Cancellation::new();
    let sleep = spawn_sleep(client, &token);
    eventually_async("the sleep at the server", || async {
        server_stats(client).await["pending"] == 1
    })
    .await;
    token.cancel_with_reason("enough");
    assert!(sleep.await.unwrap().unwrap_err().is_cancelled());
    eventually_async("the cancel at the server", || async {
        server_stats(client).await["cancels_matched"] == 1
    })
    .await;
    let stats = server_stats(client).await;
    assert_eq!(stats["cancels_ahead"], 0, "{stats}");
    assert_eq!(stats["pending"], 0, "the server stopped the sleep: {stats}");
}

#[actix::test]
async fn a_session_over_a_unix_socket_calls_and_cancels_in_both_eras() {
    for (era, args) in [
        (ProtocolEra::Legacy, &["--sessions"][..]),
        (ProtocolEra::Modern, &["--era", "modern"][..]),
    ] {
        let (_server, socket) = demo_on_socket(&format!("{era:?}"), args);
        let transport = HttpTransport::new("http://localhost/mcp").unix_socket(&socket);
        let client = Client::builder()
            .era(era)
            .connect(transport)
            .await
            .expect("connected over the socket");
        let echo = client
            .call_tool("echo", json!({"text": "over a socket"}))
            .await
            .expect("answered");
        assert_eq!(echo.text(), "over a socket");
        cancel_one_sleep(&client).await;
        client.shutdown().await;
    }
}

#[actix::test]
async fn an_mcp_json_server_and_the_command_line_reach_a_socket() {
    let (_server, socket) = demo_on_socket("config", &[]);
    let dir = socket.parent().unwrap();
    let config = dir.join("mcp.json");
    let entry = json!({"type": "http", "url": "http://localhost/mcp", "socket": socket});
    std::fs::write(&config, json!({"mcpServers": {"local": entry}}).to_string()).unwrap();
    let loaded = Config::load(&config).expect("a config");
    let transport = loaded
        .server("local")
        .unwrap()
        .transport()
        .expect("a transport");
    let client = tokio::time::timeout(Duration::from_secs(20), Client::connect(transport))
        .await
        .expect("in time")
        .expect("connected");
    let echo = client.call_tool("echo", json!({"text": "from the config"}));
    assert_eq!(echo.await.unwrap().text(), "from the config");
    client.shutdown().await;

    let output = std::process::Command::new(program(workspace_bins::CLI))
        .args(["--url", "http://localhost/mcp", "--socket"])
        .arg(&socket)
        .args(["call", "echo", r#"{"text":"from the CLI"}"#])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .expect("the CLI runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "from the CLI"
    );

    // Only an http server has a socket.
    let wrong = json!({"mcpServers": {"x": {"command": "true", "socket": socket}}});
    std::fs::write(&config, wrong.to_string()).unwrap();
    let warned = Config::load(&config).expect("a warning, not an error");
    assert!(
        warned
            .warnings
            .iter()
            .any(|w| w.to_string().contains("socket")),
        "{:?}",
        warned.warnings
    );
}
