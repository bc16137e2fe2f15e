//! The fleet: N connections in one process, each to its own stdio server, the way a service
//! that gives each user their own MCP connections holds them. Measured: the process's threads,
//! its memory per idle connection, the time to connect all, one call on each at once, and a
//! sustained load across all with the client's CPU time per request (user + system time over
//! requests: stable on a noisy machine, unlike wall time), beside the same load on one
//! connection.
//!
//! `FLEET_EXIT_IDLE=1` ends a worker once the fleet is idle, so that under `heaptrack` what is
//! left allocated at exit is what the idle fleet holds.

use std::time::{Duration, Instant};

use actix_mcp::{Client, Placement, StdioTransport};
use futures::future::join_all;
use serde_json::json;

use crate::{clients::ServerCmd, scenarios::rss_kib, scenarios::Metrics};

/// Sequential calls per connection in the sustained load.
const ROUNDS: usize = 20;

/// `fleet-N`: the fleet of N connections.
pub fn size(scenario: &str) -> Option<usize> {
    scenario.strip_prefix("fleet-")?.parse().ok()
}

pub async fn run(server: &ServerCmd, n: usize) -> Result<Metrics, String> {
    raise_open_files_limit();
    // One connection first: the pool's arbiters and the allocator's first arenas are not the
    // fleet's per-connection cost.
    let first = connect(server).await?;
    echo(&first, 0).await?;
    let (threads_before, rss_before) = (threads(), rss_kib("VmRSS:"));

    let started = Instant::now();
    let fleet: Vec<Client> = join_all((0..n).map(|_| connect(server)))
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let connect_all = started.elapsed();
    // Idle: the handshakes are over, nothing in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (threads_idle, rss_idle) = (threads(), rss_kib("VmRSS:"));
    if std::env::var_os("FLEET_EXIT_IDLE").is_some() {
        // For heaptrack: what is still allocated at exit is what the idle fleet holds.
        eprintln!(
            "idle: {} KiB per connection",
            (rss_idle - rss_before) / n as f64
        );
        std::process::exit(0);
    }

    let started = Instant::now();
    let answered = join_all(fleet.iter().enumerate().map(|(i, c)| echo(c, i)))
        .await
        .into_iter()
        .filter(Result::is_ok)
        .count();
    let one_call_each = started.elapsed();

    let (fleet_rate, fleet_cpu) = sustained(fleet.iter().collect(), ROUNDS).await?;
    // The same requests from one caller on one connection: what a request costs when the
    // process holds one connection. And from N callers on one connection (batched writes).
    let (one_rate, one_cpu) = sustained(vec![&first], ROUNDS * n).await?;
    let (shared_rate, shared_cpu) = sustained(vec![&first; n], ROUNDS).await?;
    let pool = actix_mcp::pool_load();
    drop(fleet);
    Ok(vec![
        ("connections", n as f64),
        ("threads_before", threads_before as f64),
        ("threads", threads_idle as f64),
        ("pool_arbiters", pool.len() as f64),
        (
            "pool_busiest",
            pool.iter().copied().max().unwrap_or(0) as f64,
        ),
        (
            "rss_per_idle_connection_kib",
            (rss_idle - rss_before) / n as f64,
        ),
        ("connect_all_ms", connect_all.as_secs_f64() * 1e3),
        ("one_call_each_ms", one_call_each.as_secs_f64() * 1e3),
        ("calls_unanswered", (n - answered) as f64),
        ("req_per_s_across_all", fleet_rate),
        ("cpu_us_per_request", fleet_cpu),
        ("req_per_s_one_connection", one_rate),
        ("cpu_us_per_request_one_connection", one_cpu),
        ("cpu_per_request_ratio", fleet_cpu / one_cpu),
        ("req_per_s_n_callers_one_connection", shared_rate),
        ("cpu_us_per_request_n_callers_one_connection", shared_cpu),
    ])
}

/// `rounds` sequential calls from each caller, all callers at once (caller `i` on
/// `callers[i]`): requests/s, and the process's CPU time per request in µs.
async fn sustained(callers: Vec<&Client>, rounds: usize) -> Result<(f64, f64), String> {
    let requests = callers.len() * rounds;
    let (started, cpu) = (Instant::now(), cpu_time());
    let callers = callers.into_iter().map(|client| async move {
        for round in 0..rounds {
            echo(client, round).await?;
        }
        Ok::<(), String>(())
    });
    for outcome in join_all(callers).await {
        outcome?;
    }
    let (wall, cpu) = (started.elapsed(), cpu_time() - cpu);
    Ok((
        requests as f64 / wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / requests as f64,
    ))
}

/// The fleet's connections go to the process's pool of arbiters, from actix as from tokio.
async fn connect(server: &ServerCmd) -> Result<Client, String> {
    Client::builder()
        .placement(Placement::Pool)
        .connect(StdioTransport::new(&server.program).args(&server.args))
        .await
        .map_err(|e| e.to_string())
}

async fn echo(client: &Client, i: usize) -> Result<(), String> {
    let text = i.to_string();
    let answer = client
        .call_tool("echo", json!({ "text": text }))
        .await
        .map_err(|e| e.to_string())?;
    if answer.text() == text {
        Ok(())
    } else {
        Err(format!("echo {text} answered {:?}", answer.text()))
    }
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
}

/// User + system time of this process (its threads; not its children, the servers).
fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |usage| {
        let micros = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(t.tv_sec().max(0) as u64)
                + Duration::from_micros(t.tv_usec().max(0) as u64)
        };
        micros(usage.user_time()) + micros(usage.system_time())
    })
}

/// Three pipes per server: a fleet of a thousand needs more than the usual 1,024 descriptors.
fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
