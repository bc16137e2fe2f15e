//! Side-by-side benchmark: actix-mcp, rmcp and a raw no-SDK client against the same stdio server.
//!
//! ```text
//! cargo bench --bench compare                      # every scenario, 3 runs, medians
//! cargo bench --bench compare -- --smoke           # a few thousand requests; checks correctness only
//! cargo bench --bench compare -- --scenarios a,b --runs 5
//! cargo bench --bench compare -- --server "node my-server.js"
//! cargo bench --bench compare -- --http            # over Streamable HTTP: actix-mcp vs rmcp
//! cargo bench --bench compare -- --scenarios soak --runs 1 --era modern   # the soak, one era
//! ```
//!
//! The soak (1,000,000 requests, ~40% cancelled four ways, every outcome checked, tables and
//! memory checked after) runs for actix-mcp only and only when asked for; `benches/compare/soak.sh`
//! runs it over stdio, HTTP/1.1 and HTTP/2 in both eras. The fleet (`--scenarios fleet`: 100 and
//! 1,000 connections in one process, each to its own server; with `--http` also 10,000, all to
//! one server; `--connections` for other sizes) also runs only when asked for, from actix and
//! from plain tokio (`--clients actix-mcp-tokio`, or `actix-mcp-tokio-http`/`-h2` over HTTP).
//! The manager (`--scenarios manager`): a config of 100 and 1,000 stdio servers started,
//! catalogued, called and stopped by `Servers`. The refresh storm (`--scenarios refresh`; Redis
//! too with `--features redis`): processes sharing one credential store against an
//! authorization server that rotates refresh tokens and revokes on reuse.
//!
//! Each (scenario, client, run) runs in a fresh worker process of this program against a fresh
//! server process, so memory figures are the client's own. The default server is the crate's
//! demo server, which counts requests, cancels, cancels that matched, cancels that arrived ahead
//! of their request and requests still running: correctness is measured at the server.
//!
//! New transports plug in as new `Driver`s (clients/) and scenarios (scenarios.rs).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark: a panic is a failed run"
)]

#[path = "../../tests/support/children.rs"]
mod children;
mod clients;
mod fleet;
mod gateway;
mod manager;
mod refresh;
mod scenarios;
#[path = "../../tests/support/workspace_bins.rs"]
mod workspace_bins;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Command, ExitCode, Stdio},
    time::Duration,
};

use clap::Parser;
use clients::{actix::ActixMcp, raw::Raw, raw_http::RawHttp, rmcp::Rmcp, Driver, Era, ServerCmd};
use scenarios::{Metrics, Sizes};
use serde_json::{json, Value};

const CLIENTS: [&str; 4] = ["actix-mcp", "actix-mcp-tokio", "raw", "rmcp"];
const SCENARIOS: [&str; 9] = ["a", "b", "c1", "c2", "c3", "c4", "d", "scale", "t"];
/// `--http`: the same server over Streamable HTTP (its `--http` mode), actix-mcp vs rmcp.
/// `raw-http`/`raw-h2`: the ceiling, no SDK (reqwest with the same settings).
const HTTP_CLIENTS: [&str; 6] = [
    "actix-mcp-http",
    "raw-http",
    "rmcp-http",
    "actix-mcp-h2",
    "raw-h2",
    "rmcp-h2",
];
const HTTP_SCENARIOS: [&str; 5] = ["a", "b", "c1", "c2", "d"];
/// Counters that must be zero for actix-mcp in every run.
const MUST_BE_ZERO: [&str; 16] = [
    "lost_cancels",
    "overtaking_cancels",
    "left_running",
    "task_cancel_notifications",
    // soak
    "mismatched_outcomes",
    "in_flight_after",
    "server_pending_after",
    "cancels_ahead",
    "cancels_unknown",
    "cancel_counter_mismatch",
    "write_count_mismatch",
    "rss_over_budget_mib",
    // fleet and manager
    "calls_unanswered",
    "servers_not_ready",
    "servers_unlisted",
    "processes_left",
];
/// Scenarios only actix-mcp can run (tasks; the soak's cancellation ways and client counters;
/// the fleet's `fleet-N`).
const ACTIX_ONLY: [&str; 4] = ["t", "soak", "fleet", "manager"];
/// The fleet's sizes by default, and at smoke size.
const FLEET: [usize; 2] = [100, 1000];
/// Over HTTP, also ten thousand (all to one server).
const FLEET_HTTP: [usize; 3] = [100, 1000, 10_000];
const FLEET_SMOKE: [usize; 1] = [20];

#[derive(Parser, Debug)]
#[command(about = "actix-mcp vs rmcp vs raw, side by side")]
struct Args {
    /// A few thousand requests, one run; checks correctness counters, not speed.
    #[arg(long)]
    smoke: bool,
    /// Runs per scenario and client; the table shows medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Comma-separated scenarios (a,b,c1,c2,c3,c4,d,scale,t; soak only when named).
    #[arg(long, value_delimiter = ',')]
    scenarios: Option<Vec<String>>,
    /// Comma-separated clients (actix-mcp,actix-mcp-tokio,raw,rmcp; with --http:
    /// actix-mcp-http,rmcp-http over HTTP/1.1, actix-mcp-h2,rmcp-h2 over HTTP/2).
    #[arg(long, value_delimiter = ',')]
    clients: Option<Vec<String>>,
    /// Over Streamable HTTP: the server runs in its HTTP mode (`--http 127.0.0.1:0`; the demo
    /// server has one) and the clients connect over HTTP. Scenarios a, b, c1, c2 by default.
    #[arg(long)]
    http: bool,
    /// The stdio server to run, as a command line. It needs `echo {text}` and `sleep {ms}`;
    /// the correctness counters also need the demo server's `stats` tool.
    #[arg(long)]
    server: Option<String>,
    /// The protocol era: passed to the server (`--era legacy|modern`, as the demo server takes
    /// it) and to actix-mcp (`ProtocolEra::Legacy|Modern`). Default: the server's and the
    /// clients' own (legacy).
    #[arg(long, value_enum)]
    era: Option<Era>,
    /// Through a front: the demo server behind actix-mcp-gateway, the npm and the PyPI
    /// `mcp-proxy`, and directly (its own HTTP mode), reached over HTTP by the same client.
    /// Scenarios a, b, c1, c2, c3; `--clients` picks fronts.
    #[arg(long)]
    gateway: bool,
    /// The fleet's sizes (comma-separated connection counts; default 100,1000).
    #[arg(long, value_delimiter = ',')]
    connections: Option<Vec<usize>>,
    /// Internal: run one scenario for one client and print its metrics as JSON.
    #[arg(long, hide = true)]
    worker: Option<String>,
    #[arg(long, hide = true)]
    scenario: Option<String>,
    // `cargo bench` passes --bench to harness=false targets.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let server = match server_cmd(args.server.as_deref(), args.gateway) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let sizes = match (args.http || args.gateway, args.smoke) {
        (false, true) => Sizes::SMOKE,
        (false, false) => Sizes::FULL,
        (true, true) => Sizes::HTTP_SMOKE,
        (true, false) => Sizes::HTTP,
    };
    if args.scenario.as_deref() == Some("refresh-storm") {
        return refresh::worker();
    }
    if args.scenarios.as_deref() == Some(&["refresh".to_owned()][..]) {
        return refresh::orchestrate(args.smoke);
    }
    if let (Some(front), Some(scenario), true) = (&args.worker, &args.scenario, args.gateway) {
        let result =
            actix_rt::System::new().block_on(gateway::worker(front, scenario, &server, sizes));
        return report(front, scenario, result);
    }
    if let (Some(client), Some(scenario)) = (&args.worker, &args.scenario) {
        let mut server = ServerCmd {
            http: args.http,
            http2: client.ends_with("-h2"),
            era: args.era,
            ..server
        };
        if let Some(era) = args.era {
            server
                .args
                .extend(["--era".to_owned(), era.name().to_owned()]);
        }
        return worker(client, scenario, &server, sizes);
    }
    let runs = if args.smoke { 1 } else { args.runs.max(1) };
    let (default_clients, default_scenarios): (&[&str], &[&str]) = if args.gateway {
        (&gateway::FRONTS, &gateway::SCENARIOS)
    } else if args.http {
        (&HTTP_CLIENTS, &HTTP_SCENARIOS)
    } else {
        (&CLIENTS, &SCENARIOS)
    };
    let clients = pick(args.clients.clone(), default_clients);
    let fleet = match (&args.connections, args.smoke, args.http) {
        (Some(sizes), _, _) => sizes.clone(),
        (None, true, _) => FLEET_SMOKE.to_vec(),
        (None, false, false) => FLEET.to_vec(),
        (None, false, true) => FLEET_HTTP.to_vec(),
    };
    let scenarios = pick(args.scenarios.clone(), default_scenarios)
        .into_iter()
        .flat_map(|s| match s.as_str() {
            "fleet" => fleet.iter().map(|n| format!("fleet-{n}")).collect(),
            // Stdio servers only: the manager's processes.
            "manager" => fleet
                .iter()
                .filter(|n| **n <= 1000)
                .map(|n| format!("manager-{n}"))
                .collect(),
            _ => vec![s],
        })
        .collect::<Vec<_>>();
    orchestrate(&args, &server, &clients, &scenarios, runs)
}

fn pick(chosen: Option<Vec<String>>, all: &[&str]) -> Vec<String> {
    chosen.unwrap_or_else(|| all.iter().map(|s| s.to_string()).collect())
}

fn server_cmd(line: Option<&str>, gateway: bool) -> Result<ServerCmd, String> {
    // With --gateway, the gateway is built with it (one build: later calls ask for the same).
    let programs: &[_] = if gateway {
        &[workspace_bins::DEMO_SERVER, workspace_bins::GATEWAY]
    } else {
        &[workspace_bins::DEMO_SERVER]
    };
    match line {
        // The demo server, its own package: built here (with the benchmark's profile) if needed.
        // The orchestrator passes the workers its path with `--server`.
        None => Ok(ServerCmd {
            program: workspace_bins::program(programs, workspace_bins::DEMO_SERVER, true)
                .to_string_lossy()
                .into_owned(),
            args: Vec::new(),
            http: false,
            http2: false,
            era: None,
        }),
        Some(line) => {
            let mut words = shlex::split(line).ok_or("--server: unbalanced quotes")?;
            if words.is_empty() {
                return Err("--server: empty command".into());
            }
            let program = words.remove(0);
            Ok(ServerCmd {
                program,
                args: words,
                http: false,
                http2: false,
                era: None,
            })
        }
    }
}

fn worker(client: &str, scenario: &str, server: &ServerCmd, sizes: Sizes) -> ExitCode {
    if let Some(n) = manager::size(scenario) {
        let result = match client {
            c if c.starts_with("actix-mcp-tokio") => {
                multi_thread().block_on(manager::run(server, n))
            }
            c if c.starts_with("actix-mcp") => {
                actix_rt::System::new().block_on(manager::run(server, n))
            }
            _ => Err(format!("the manager is actix-mcp's, not {client}")),
        };
        return report(client, scenario, result);
    }
    let result = match (client, fleet::size(scenario)) {
        // Inside an actix System, and from plain tokio: the fleet goes to the pool either way.
        (c, Some(n)) if c.starts_with("actix-mcp-tokio") => {
            multi_thread().block_on(fleet::run(server, n))
        }
        (c, Some(n)) if c.starts_with("actix-mcp") => {
            actix_rt::System::new().block_on(fleet::run(server, n))
        }
        (_, Some(_)) => Err(format!(
            "the fleet is for actix-mcp's clients, not {client}"
        )),
        (_, None) => one_connection(client, scenario, server, sizes),
    };
    report(client, scenario, result)
}

fn one_connection(
    client: &str,
    scenario: &str,
    server: &ServerCmd,
    sizes: Sizes,
) -> Result<Metrics, String> {
    match client {
        "actix-mcp" | "actix-mcp-http" | "actix-mcp-h2" => {
            actix_rt::System::new().block_on(measure::<ActixMcp>(server, scenario, sizes))
        }
        // The same client from plain tokio code: the actor runs on an arbiter of the pool.
        "actix-mcp-tokio" | "actix-mcp-tokio-http" | "actix-mcp-tokio-h2" => {
            multi_thread().block_on(measure::<ActixMcp>(server, scenario, sizes))
        }
        "raw" => multi_thread().block_on(measure::<Raw>(server, scenario, sizes)),
        "raw-http" | "raw-h2" => {
            multi_thread().block_on(measure::<RawHttp>(server, scenario, sizes))
        }
        "rmcp" | "rmcp-http" | "rmcp-h2" => {
            multi_thread().block_on(measure::<Rmcp>(server, scenario, sizes))
        }
        other => Err(format!("unknown client {other}")),
    }
}

fn report(client: &str, scenario: &str, result: Result<Metrics, String>) -> ExitCode {
    match result {
        Ok(metrics) => {
            let map: serde_json::Map<String, Value> = metrics
                .into_iter()
                .map(|(k, v)| (k.to_owned(), json!(v)))
                .collect();
            println!("{}", Value::Object(map));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{client} {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

async fn measure<D: Driver>(
    server: &ServerCmd,
    scenario: &str,
    sizes: Sizes,
) -> Result<Metrics, String> {
    let driver = D::connect(server).await?;
    scenarios::run(&driver, scenario, sizes).await
}

/// Runs every (scenario, run, client) in a worker process of its own, then prints the table of
/// medians and one JSON line per scenario and client. Fails if an actix-mcp run failed or left a
/// [`MUST_BE_ZERO`] counter above zero; the other clients' failures are only reported (they are
/// the comparison, not what is under test).
fn orchestrate(
    args: &Args,
    server: &ServerCmd,
    clients: &[String],
    scenarios: &[String],
    runs: usize,
) -> ExitCode {
    let workers = match Workers::new(args, server) {
        Ok(workers) => workers,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut results, runs_failed) = run_all(&workers, clients, scenarios, runs);
    // Through a front, the latency each front adds over the direct connection: computed before
    // the table so that it shows there as metrics of their own.
    if args.gateway {
        gateway::add_latency_added(&mut results);
    }
    print_table(&results, clients, ratio_pairs(args));
    let counters_failed = print_medians(&results);
    if runs_failed || counters_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// (scenario's position on the command line, scenario) → its runs' metrics by client. The
/// position keeps the table in the order the scenarios were asked for.
type Results = BTreeMap<(usize, String), PerClient>;

/// client → metric → one value per run.
type PerClient = BTreeMap<String, BTreeMap<String, Vec<f64>>>;

/// How the orchestrator starts a worker: this same program, with the options every worker of
/// the run shares.
struct Workers<'a> {
    exe: PathBuf,
    /// The workers run the same server command line (the demo server's path, unless --server).
    server_line: String,
    args: &'a Args,
}

impl<'a> Workers<'a> {
    fn new(args: &'a Args, server: &ServerCmd) -> Result<Self, String> {
        let server_line = match &args.server {
            Some(line) => line.clone(),
            None => shlex::try_quote(&server.program)
                .map_err(|e| format!("cannot quote {:?}: {e}", server.program))?
                .into_owned(),
        };
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        Ok(Workers {
            exe,
            server_line,
            args,
        })
    }

    /// The worker for one client and scenario, passed on the orchestrator's own options (size,
    /// server, transport, front, era) so that it measures what was asked for.
    fn command(&self, client: &str, scenario: &str) -> Command {
        let args = self.args;
        let mut cmd = Command::new(&self.exe);
        cmd.args(["--worker", client, "--scenario", scenario]);
        if args.smoke {
            cmd.arg("--smoke");
        }
        cmd.args(["--server", &self.server_line]);
        if args.http {
            cmd.arg("--http");
        }
        if args.gateway {
            cmd.arg("--gateway");
        }
        if let Some(era) = args.era {
            cmd.args(["--era", era.name()]);
        }
        cmd
    }
}

/// Every scenario `runs` times, each run through every client in turn (so that a slow spell of
/// the machine falls on all clients alike), one worker process each. Returns the metrics and
/// whether an actix-mcp run failed.
fn run_all(
    workers: &Workers,
    clients: &[String],
    scenarios: &[String],
    runs: usize,
) -> (Results, bool) {
    let mut results = Results::new();
    let mut failed = false;
    for (si, scenario) in scenarios.iter().enumerate() {
        for run in 0..runs {
            for client in clients {
                // `fleet-100` is of the family `fleet`: the families only actix-mcp can run.
                let family = scenario.split('-').next().unwrap_or(scenario);
                if ACTIX_ONLY.contains(&family) && !client.starts_with("actix-mcp") {
                    continue;
                }
                eprintln!("scenario {scenario}, run {}/{runs}, {client}", run + 1);
                match run_worker(workers.command(client, scenario)) {
                    Ok(metrics) => record(&mut results, (si, scenario), client, metrics),
                    Err(e) => {
                        eprintln!("  failed: {e}");
                        if client.starts_with("actix-mcp") {
                            failed = true;
                        }
                    }
                }
            }
        }
    }
    (results, failed)
}

/// Adds one run's metrics to the scenario's and client's values.
fn record(
    results: &mut Results,
    (si, scenario): (usize, &str),
    client: &str,
    metrics: Vec<(String, f64)>,
) {
    let per_client = results
        .entry((si, scenario.to_owned()))
        .or_default()
        .entry(client.to_owned())
        .or_default();
    for (k, v) in metrics {
        per_client.entry(k).or_default().push(v);
    }
}

/// The table's ratio columns: each of ours against the others it is compared with.
type Pairs = &'static [(&'static str, &'static [&'static str])];

/// actix-mcp against the raw client and rmcp on the same transport (over HTTP: HTTP/1.1, then
/// HTTP/2); through a front, the gateway against each proxy.
fn ratio_pairs(args: &Args) -> Pairs {
    if args.gateway {
        &[("actix-mcp-gateway", &["mcp-proxy-npm", "mcp-proxy-py"])]
    } else if args.http {
        &[
            ("actix-mcp-http", &["raw-http", "rmcp-http"]),
            ("actix-mcp-h2", &["raw-h2", "rmcp-h2"]),
        ]
    } else {
        &[("actix-mcp", &["raw", "rmcp"])]
    }
}

/// The Markdown table: a row per scenario and metric, a column of medians per client, then the
/// ratio columns; a blank line after it.
fn print_table(results: &Results, clients: &[String], pairs: Pairs) {
    print!("\n| scenario | metric |");
    for client in clients {
        print!(" {client} |");
    }
    for (ours, others) in pairs {
        for other in *others {
            print!(" {ours} ÷ {other} |");
        }
    }
    println!();
    let ratios: usize = pairs.iter().map(|(_, others)| others.len()).sum();
    println!(
        "|---|---|{}{}",
        "---|".repeat(clients.len()),
        "---|".repeat(ratios)
    );
    for ((_, scenario), per_client) in results {
        // Every metric any client reported: a client without it shows a dash.
        let mut metrics: Vec<&String> = per_client.values().flat_map(|m| m.keys()).collect();
        metrics.sort();
        metrics.dedup();
        for metric in metrics {
            let median_of = |client: &str| {
                per_client
                    .get(client)
                    .and_then(|m| m.get(metric))
                    .map(|v| median(v))
            };
            print!("| {scenario} | {metric} |");
            for client in clients {
                print!(" {} |", fmt(median_of(client)));
            }
            for (ours, others) in pairs {
                let a = median_of(ours);
                for other in *others {
                    print!(" {} |", ratio(a, median_of(other)));
                }
            }
            println!();
        }
    }
    println!();
}

/// One JSON line per scenario and client (the medians, for scripts to read), each followed by
/// the check of actix-mcp's [`MUST_BE_ZERO`] counters. Returns whether a check failed.
fn print_medians(results: &Results) -> bool {
    let mut failed = false;
    for ((_, scenario), per_client) in results {
        for (client, metrics) in per_client {
            let medians: serde_json::Map<String, Value> = metrics
                .iter()
                .map(|(k, v)| (k.clone(), json!(median(v))))
                .collect();
            let runs_done = metrics.values().map(Vec::len).max().unwrap_or(0);
            println!(
                "{}",
                json!({"scenario": scenario, "client": client, "runs": runs_done, "median": medians})
            );
            if client.starts_with("actix-mcp") {
                failed |= !zero_counters_hold(scenario, metrics);
            }
        }
    }
    failed
}

/// Whether each of [`MUST_BE_ZERO`] that actix-mcp reported was zero in every run (not only in
/// the median: one bad run is a bug). Says which was not.
fn zero_counters_hold(scenario: &str, metrics: &BTreeMap<String, Vec<f64>>) -> bool {
    let mut hold = true;
    for key in MUST_BE_ZERO {
        if let Some(values) = metrics.get(key) {
            if values.iter().any(|v| *v != 0.0) {
                eprintln!("actix-mcp {scenario}: {key} = {values:?}, must be 0 in every run");
                hold = false;
            }
        }
    }
    hold
}

fn run_worker(mut cmd: Command) -> Result<Vec<(String, f64)>, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let last = BufReader::new(stdout).lines().map_while(Result::ok).last();
        let _ = tx.send(last);
    });
    let line = match rx.recv_timeout(Duration::from_secs(600)) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            return Err("worker timed out".into());
        }
    };
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("worker exited with {status}"));
    }
    let line = line.ok_or("worker printed nothing")?;
    let value: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
    let map = value.as_object().ok_or("worker output is not an object")?;
    Ok(map
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(f64::NAN)))
        .collect())
}

fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn fmt(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v.is_nan() => "n/a".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 && a.is_finite() && b.is_finite() => format!("{:.2}", a / b),
        _ => "–".into(),
    }
}
