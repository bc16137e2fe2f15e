//! The fleet: N connections in one process, the way a service that gives each user their own
//! MCP connections holds them: over stdio each to its own server, over HTTP (`--http`) all to
//! one Streamable HTTP server, each with its own bearer token. Measured: the process's threads,
//! its memory per idle connection, the time to connect all, one call on each at once, and a
//! sustained load across all with the client's CPU time per request (user + system time over
//! requests: stable on a noisy machine, unlike wall time), beside the same load on one
//! connection. Over HTTP also the TCP connections open and the memory per connection with a
//! call in flight (one long call on each, then all cancelled: none may be left running at the
//! server).
//!
//! `FLEET_EXIT_IDLE=1` ends a worker once the fleet is idle, so that under `heaptrack` what is
//! left allocated at exit is what the idle fleet holds.

use std::{
    future::IntoFuture,
    time::{Duration, Instant},
};

use actix_mcp::{Client, HttpTransport, Placement, StdioTransport};
use futures::{future::join_all, stream::FuturesUnordered, StreamExt};
use serde_json::json;

use crate::{
    clients::{HttpServer, ServerCmd},
    scenarios::rss_kib,
    scenarios::Metrics,
};

/// Sequential calls per connection in the sustained load.
const ROUNDS: usize = 20;
/// The most requests of the one-connection comparison (one caller, one after another).
const ONE_CONNECTION_MAX: usize = 20_000;
/// The call each HTTP connection has in flight while its memory is measured; cancelled then.
const IN_FLIGHT_MS: u64 = 120_000;

/// Where the fleet connects.
enum Target {
    /// Each connection starts its own server.
    Stdio(ServerCmd),
    /// Every connection to this one server.
    Http { server: HttpServer, http2: bool },
}

/// `fleet-N`: the fleet of N connections.
pub fn size(scenario: &str) -> Option<usize> {
    scenario.strip_prefix("fleet-")?.parse().ok()
}

pub async fn run(server: &ServerCmd, n: usize) -> Result<Metrics, String> {
    raise_open_files_limit();
    let target = if server.http {
        // Started after the limit was raised: the server inherits it.
        let http2 = server.http2;
        let server = HttpServer::start(server)?;
        Target::Http { server, http2 }
    } else {
        Target::Stdio(server.clone())
    };
    // One connection first: the pool's arbiters and the allocator's first arenas are not the
    // fleet's per-connection cost.
    let first = target.connect(0).await?;
    echo(&first, 0).await?;
    let (threads_before, rss_before) = (threads(), rss_kib("VmRSS:"));

    let started = Instant::now();
    let fleet: Vec<Client> = join_all((1..=n).map(|i| target.connect(i)))
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let connect_all = started.elapsed();
    // Idle: the handshakes are over, nothing in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (threads_idle, rss_idle, sockets_idle) = (threads(), rss_kib("VmRSS:"), sockets());
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
    let one = (ROUNDS * n).min(ONE_CONNECTION_MAX);
    let (one_rate, one_cpu) = sustained(vec![&first], one).await?;
    let (shared_rate, shared_cpu) = sustained(vec![&first; n], ROUNDS).await?;
    let pool = actix_mcp::pool_load();
    let mut metrics = vec![
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
        ("rss_idle_mib", rss_idle / 1024.0),
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
    ];
    if let Target::Http { .. } = target {
        metrics.push(("tcp_connections_idle", sockets_idle as f64));
        metrics.extend(in_flight(&first, &fleet, rss_before).await?);
    }
    drop(fleet);
    Ok(metrics)
}

/// A long call on every connection: the memory and the TCP connections while all are in
/// flight, then all cancelled (dropped); the server must be left running none of them.
async fn in_flight(first: &Client, fleet: &[Client], rss_before: f64) -> Result<Metrics, String> {
    let n = fleet.len();
    let mut calls: FuturesUnordered<_> = fleet
        .iter()
        .map(|client| {
            client
                .call_tool("sleep", json!({ "ms": IN_FLIGHT_MS }))
                .into_future()
        })
        .collect();
    let sampled = async {
        let running = until_pending(first, |pending| pending >= n as u64).await?;
        Ok::<_, String>((running, rss_kib("VmRSS:"), sockets()))
    };
    let (running, rss, sockets) = tokio::select! {
        sampled = sampled => sampled?,
        outcome = calls.next() => return Err(format!("a long call ended early: {outcome:?}")),
    };
    drop(calls); // every call is cancelled
    let left = until_pending(first, |pending| pending == 0).await?;
    Ok(vec![
        ("calls_in_flight", running as f64),
        (
            "rss_per_connection_in_flight_kib",
            (rss - rss_before) / n as f64,
        ),
        ("tcp_connections_in_flight", sockets as f64),
        ("left_running", left as f64),
    ])
}

/// Polls the server's count of requests running until `done` holds (or a minute passed):
/// that count.
async fn until_pending(client: &Client, done: impl Fn(u64) -> bool) -> Result<u64, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = client
            .call_tool("stats", json!({}))
            .await
            .map_err(|e| e.to_string())?;
        let pending = stats
            .structured_content
            .as_ref()
            .and_then(|s| s["pending"].as_u64())
            .ok_or("stats without pending")?;
        if done(pending) || Instant::now() > deadline {
            return Ok(pending);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

impl Target {
    /// Connection `i`, on the process's pool of arbiters from actix as from tokio. Over HTTP
    /// each has a bearer token of its own, as each user of a service would.
    async fn connect(&self, i: usize) -> Result<Client, String> {
        let options = Client::builder().placement(Placement::Pool);
        let connected = match self {
            Target::Stdio(server) => {
                options
                    .connect(StdioTransport::new(&server.program).args(&server.args))
                    .await
            }
            Target::Http { server, http2 } => {
                let transport = HttpTransport::new(&server.url)
                    .header("authorization", format!("Bearer user-{i}"));
                let transport = if *http2 {
                    transport.http2_prior_knowledge()
                } else {
                    transport
                };
                options.connect(transport).await
            }
        };
        connected.map_err(|e| e.to_string())
    }
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

/// TCP sockets of this process.
fn sockets() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| {
        dir.filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    })
}

/// Three pipes per server, or a socket per HTTP connection: a fleet of a thousand needs more
/// than the usual 1,024 descriptors.
pub fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
