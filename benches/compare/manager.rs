//! The manager at scale (`--scenarios manager`): a config of N stdio servers (100, 1,000) read
//! the way a user's `mcp.json` is, then `start_all` (at most `start_parallelism` at once), the
//! catalogue of every server, one routed call on each at once, and `stop()`. Measured: the time
//! of each step, servers listed and calls answered, how the connections spread over the pool,
//! the memory per server, and the server processes left after `stop()` (must be none).

use std::time::Instant;

use actix_mcp::{Client, Config, Servers, Status};
use futures::future::join_all;
use serde_json::json;

use crate::{children::children, clients::ServerCmd, scenarios::rss_kib, scenarios::Metrics};

/// `manager-N`: a config of N servers.
pub fn size(scenario: &str) -> Option<usize> {
    scenario.strip_prefix("manager-")?.parse().ok()
}

pub async fn run(server: &ServerCmd, n: usize) -> Result<Metrics, String> {
    crate::fleet::raise_open_files_limit();
    let config = config(server, n)?;
    let rss_before = rss_kib("VmRSS:");
    let servers = Servers::from_config(&config, Client::builder());

    let started = Instant::now();
    servers.start_all().await;
    let start_all = started.elapsed();
    let ready = servers
        .status()
        .iter()
        .filter(|s| matches!(s.status, Status::Ready))
        .count();
    let rss_ready = rss_kib("VmRSS:");

    let started = Instant::now();
    let catalogue = servers.catalogue().await;
    let catalogue_time = started.elapsed();

    let started = Instant::now();
    let calls = (0..n).map(|i| {
        let servers = &servers;
        async move {
            let text = i.to_string();
            let answer = servers
                .call(&format!("{}/echo", name(i)), json!({ "text": text }))
                .await;
            answer.is_ok_and(|answer| answer.text() == text)
        }
    });
    let answered = join_all(calls).await.into_iter().filter(|ok| *ok).count();
    let routed_calls = started.elapsed();
    let pool = actix_mcp::pool_load();
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count());

    let started = Instant::now();
    servers.stop().await;
    let stop = started.elapsed();
    let left = children();

    Ok(vec![
        ("servers", n as f64),
        ("servers_not_ready", (n - ready) as f64),
        ("threads", threads as f64),
        ("pool_arbiters", pool.len() as f64),
        (
            "pool_busiest",
            pool.iter().copied().max().unwrap_or(0) as f64,
        ),
        ("rss_per_server_kib", (rss_ready - rss_before) / n as f64),
        ("start_all_ms", start_all.as_secs_f64() * 1e3),
        ("catalogue_ms", catalogue_time.as_secs_f64() * 1e3),
        ("servers_unlisted", catalogue.unavailable.len() as f64),
        ("catalogue_tools", catalogue.tools.len() as f64),
        ("routed_call_each_ms", routed_calls.as_secs_f64() * 1e3),
        ("calls_unanswered", (n - answered) as f64),
        ("stop_ms", stop.as_secs_f64() * 1e3),
        ("processes_left", left as f64),
    ])
}

fn name(i: usize) -> String {
    format!("s{i:04}")
}

/// An `mcp.json` of `n` servers, each the benchmark's server command, read as a user's is.
fn config(server: &ServerCmd, n: usize) -> Result<Config, String> {
    let entry = json!({ "command": server.program, "args": server.args });
    let servers: serde_json::Map<_, _> = (0..n).map(|i| (name(i), entry.clone())).collect();
    let text = json!({ "mcpServers": servers }).to_string();
    Config::parse(&text, "fleet.json", &|_| None).map_err(|e| e.to_string())
}
