//! Closing a stdio server that runs behind a wrapper (`sh -c`, like `npx` or `uvx`) stops the real
//! server too: the shutdown signals the server's whole process group, not just the direct child.
#![cfg(unix)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::time::Duration;

use actix_mcp::{Client, StdioTransport};
use common::*;

/// `sh -c SCRIPT` where `$0` is the demo server: the demo server (the one answering MCP) is a
/// grandchild of ours, and the shell stays its parent (it has more to do after it).
fn wrapped(script: &str, journal: &Journal) -> StdioTransport {
    StdioTransport::new("sh")
        .arg("-c")
        .arg(script)
        .arg(&*DEMO_SERVER)
        .arg(&journal.path)
        .shutdown_grace(Duration::from_millis(200))
}

/// Whether `pid` is a live process (a zombie waiting for its reaper counts as gone).
fn alive(pid: i32) -> bool {
    if !process_exists(pid) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        // No procfs (not Linux): signal 0 is all we have.
        Err(_) => true,
    }
}

async fn shutdown_stops_the_grandchild(name: &str, script: &str) {
    init_tracing();
    let journal = Journal::new(name);
    let client = Client::connect(wrapped(script, &journal)).await.unwrap();
    let grandchild = server_pid(&client).await;
    assert!(alive(grandchild));
    client.shutdown().await;
    eventually("the wrapped server is gone", || !alive(grandchild)).await;
    let lines = journal.lines();
    assert!(lines.iter().any(|l| l == "#EOF"), "stdin was closed first");
    assert!(
        lines.iter().any(|l| l == "#SIGTERM"),
        "then the server got SIGTERM"
    );
}

/// The wrapper ignores SIGTERM and waits for a server that ignores EOF and SIGTERM: only a
/// SIGKILL to the group stops the server.
#[actix::test]
async fn a_wrapper_that_ignores_sigterm_does_not_shield_its_server() {
    shutdown_stops_the_grandchild(
        "group-wrapper-ignores",
        r#"trap "" TERM; "$0" --journal "$1" --linger-after-eof --ignore-sigterm; echo wrapper done >&2"#,
    )
    .await;
}

/// The wrapper exits on SIGTERM, but its server ignores it: the group is still killed after the
/// grace, though the direct child is already gone.
#[actix::test]
async fn a_server_outliving_its_wrapper_is_killed_after_the_grace() {
    shutdown_stops_the_grandchild(
        "group-wrapper-exits",
        r#""$0" --journal "$1" --linger-after-eof --ignore-sigterm; echo wrapper done >&2"#,
    )
    .await;
}
