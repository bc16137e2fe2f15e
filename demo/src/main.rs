//! The actix-mcp demo: spawns the bundled demo server, runs many concurrent calls, cancels some
//! (by token, by dropping the future, by timeout) and prints what the client and the server saw.
//!
//! ```text
//! cargo run --release -p actix-mcp-demo
//! ```
//!
//! The demo server is a package of its own (`demo-server/`); the demo builds it first (with
//! `cargo build`, in the demo's profile) if needed, so one command runs both.

#[path = "../../tests/support/workspace_bins.rs"]
mod workspace_bins;

use std::time::{Duration, Instant};

use actix_mcp::{CallToolResult, Cancellation, Client, Error, StdioTransport};
use actix_rt::task::JoinHandle;
use clap::Parser;
use serde_json::json;

#[derive(Parser)]
#[command(about = "actix-mcp demo: concurrent and cancelled MCP calls against a real server")]
struct Args {
    /// Concurrent `echo` calls.
    #[arg(long, default_value_t = 2000)]
    echoes: usize,
    /// `sleep` calls, a third cancelled by token, a third dropped, a third timed out.
    #[arg(long, default_value_t = 300)]
    sleepers: usize,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let server = match workspace_bins::try_program(
        &[workspace_bins::DEMO_SERVER],
        workspace_bins::DEMO_SERVER,
        false,
    ) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("demo failed: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let system = actix_rt::System::new();
    match system.block_on(run(args, server)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args, server: std::path::PathBuf) -> Result<(), Error> {
    let client = Client::connect(StdioTransport::new(server)).await?;
    println!(
        "connected to {} {} (protocol {})",
        client.server_info().name,
        client.server_info().version,
        client.protocol_version()
    );
    concurrent_echoes(&client, args.echoes).await;
    cancelled_three_ways(&client, args.sleepers).await?;

    let stats = wait_until(&client, "pending", 0).await?;
    println!(
        "server saw {} cancels, {} matched a running call, {} arrived ahead of their request, {} calls left running",
        stats["cancels"], stats["cancels_matched"], stats["cancels_ahead"], stats["pending"]
    );
    let conn = client.stats().await?;
    println!(
        "client: {} requests written, {} cancels sent, {} late responses dropped",
        conn.requests_written, conn.cancels_sent, conn.late_responses
    );
    client.close().await;
    Ok(())
}

/// 1. Many concurrent calls on one connection, answered out of order.
async fn concurrent_echoes(client: &Client, echoes: usize) {
    let started = Instant::now();
    let calls: Vec<_> = (0..echoes)
        .map(|i| {
            let client = client.clone();
            actix_rt::spawn(async move {
                let text = format!("message {i}");
                let result = client.call_tool("echo", json!({ "text": text })).await?;
                Ok::<_, Error>(result.text() == text)
            })
        })
        .collect();
    let mut correct = 0;
    for echo in calls {
        if matches!(echo.await, Ok(Ok(true))) {
            correct += 1;
        }
    }
    let elapsed = started.elapsed();
    println!(
        "{correct}/{echoes} concurrent echo calls answered correctly in {:.1} ms ({:.0} calls/s)",
        elapsed.as_secs_f64() * 1e3,
        echoes as f64 / elapsed.as_secs_f64()
    );
}

/// The long calls of [`cancelled_three_ways`], by how each is ended.
#[derive(Default)]
struct Sleepers {
    by_token: Vec<JoinHandle<Result<CallToolResult, Error>>>,
    dropped: Vec<JoinHandle<Result<CallToolResult, Error>>>,
    timed: Vec<JoinHandle<Result<CallToolResult, Error>>>,
}

/// 2. Long calls, cancelled three ways: by a token, by dropping the future, by a timeout.
async fn cancelled_three_ways(client: &Client, sleepers: usize) -> Result<(), Error> {
    let token = Cancellation::new();
    let calls = start_sleepers(client, sleepers, &token);
    wait_until(client, "pending", sleepers as u64).await?;
    println!("{sleepers} sleep calls running at the server");

    let cancel_started = Instant::now();
    token.cancel_with_reason("demo: user pressed stop");
    let mut cancelled = 0;
    for call in calls.by_token {
        if matches!(call.await, Ok(Err(Error::Cancelled { .. }))) {
            cancelled += 1;
        }
    }
    println!(
        "{cancelled}/{} cancelled by token, callers woken in {:.2} ms",
        sleepers / 3,
        cancel_started.elapsed().as_secs_f64() * 1e3
    );
    for call in &calls.dropped {
        call.abort();
    }
    println!("{} dropped futures", calls.dropped.len());
    let mut timeouts = 0;
    for call in calls.timed {
        if matches!(call.await, Ok(Err(Error::Timeout { .. }))) {
            timeouts += 1;
        }
    }
    println!("{timeouts} timed out after 300 ms");
    Ok(())
}

/// Starts `sleepers` one-minute calls, a third under `token`, a third to be dropped, a third
/// with a 300 ms timeout.
fn start_sleepers(client: &Client, sleepers: usize, token: &Cancellation) -> Sleepers {
    let mut calls = Sleepers::default();
    for i in 0..sleepers {
        let client = client.clone();
        let sleep = json!({ "ms": 60_000 });
        match i % 3 {
            0 => {
                let token = token.clone();
                calls.by_token.push(actix_rt::spawn(async move {
                    client.call_tool("sleep", sleep).cancellation(&token).await
                }));
            }
            1 => calls.dropped.push(actix_rt::spawn(async move {
                client.call_tool("sleep", sleep).await
            })),
            _ => calls.timed.push(actix_rt::spawn(async move {
                client
                    .call_tool("sleep", sleep)
                    .timeout(Duration::from_millis(300))
                    .await
            })),
        }
    }
    calls
}

async fn wait_until(client: &Client, key: &str, want: u64) -> Result<serde_json::Value, Error> {
    loop {
        let stats = client
            .call_tool("stats", json!({}))
            .await?
            .structured_content
            .unwrap_or_default();
        if stats[key] == want {
            return Ok(stats);
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}
