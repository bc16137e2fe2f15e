//! Helpers shared by the tests that run the bundled demo server as a real child process.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

pub mod everything;
pub mod python;
#[path = "../support/workspace_bins.rs"]
pub mod workspace_bins;

use std::{path::PathBuf, sync::LazyLock, time::Duration};

use actix_mcp::{Client, StdioTransport};
use serde_json::{json, Value};

/// The path of a program of the workspace (built on first use; see `workspace_bins`).
pub fn program(program: workspace_bins::Program) -> String {
    let path = workspace_bins::program(workspace_bins::ALL, program, true);
    path.to_string_lossy().into_owned()
}

/// The demo server's binary (package `actix-mcp-demo-server`).
pub static DEMO_SERVER: LazyLock<String> = LazyLock::new(|| program(workspace_bins::DEMO_SERVER));

pub fn demo_server() -> StdioTransport {
    StdioTransport::new(&*DEMO_SERVER)
}

/// A file the demo server appends every line it reads from stdin to: the wire as the server saw it.
pub struct Journal {
    pub path: PathBuf,
}

impl Journal {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join("actix-mcp-tests");
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(format!("{name}-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Self { path }
    }

    pub fn server(&self) -> StdioTransport {
        demo_server().arg("--journal").arg(&self.path)
    }

    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The JSON frames the server read, in order (markers like `#EOF` are skipped).
    pub fn frames(&self) -> Vec<Value> {
        self.lines()
            .iter()
            .filter(|l| !l.starts_with('#'))
            .map(|l| serde_json::from_str(l).expect("journal holds JSON lines"))
            .collect()
    }

    /// The `tools/call` of `tool` the server read and the `notifications/cancelled` naming it;
    /// asserts that the cancel came after the request, with its exact id.
    pub fn cancelled_call(&self, tool: &str) -> (Value, Value) {
        let frames = self.frames();
        let request = frames
            .iter()
            .position(|f| f["params"]["name"] == tool)
            .unwrap_or_else(|| panic!("no {tool} call reached the server"));
        let cancel = frames
            .iter()
            .position(|f| {
                f["method"] == "notifications/cancelled"
                    && f["params"]["requestId"] == frames[request]["id"]
            })
            .unwrap_or_else(|| panic!("no cancel for the {tool} call reached the server"));
        assert!(request < cancel, "the cancel follows its request");
        (frames[request].clone(), frames[cancel].clone())
    }

    /// Waits until `pred` holds for the journal's lines.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&[String]) -> bool) {
        eventually(what, || pred(&self.lines())).await
    }
}

/// Polls `check` until it holds; fails the test after 30 s. Not a timing assertion: only a bound
/// on how long a broken build may hang.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `eventually` for a check that needs to ask (e.g. the server's stats).
pub async fn eventually_async<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts a one-minute `sleep` call that `token` cancels, on a task of its own.
pub fn spawn_sleep(
    client: &Client,
    token: &actix_mcp::Cancellation,
) -> tokio::task::JoinHandle<Result<actix_mcp::CallToolResult, actix_mcp::Error>> {
    let call = client
        .call_tool("sleep", json!({"ms": 60_000}))
        .cancellation(token);
    tokio::spawn(std::future::IntoFuture::into_future(call))
}

/// The demo server's own counters.
pub async fn server_stats(client: &Client) -> Value {
    let result = client
        .call_tool("stats", json!({}))
        .await
        .expect("stats tool");
    result.structured_content.expect("stats are structured")
}

pub async fn server_pid(client: &Client) -> i32 {
    let result = client.call_tool("pid", json!({})).await.expect("pid tool");
    let pid = result.structured_content.expect("structured")["pid"]
        .as_i64()
        .expect("pid");
    i32::try_from(pid).expect("pid fits")
}

pub use nix::sys::signal::Signal;

pub fn process_exists(pid: i32) -> bool {
    // Signal 0 only checks that the process exists.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// Sends `signal` to the process `pid` (one of ours).
pub fn signal(pid: i32, signal: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("the process exists");
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A server process in a Streamable HTTP mode that prints `LISTENING <port>` on stderr once bound
/// to 127.0.0.1. Killed on drop.
pub struct HttpProcess {
    child: std::process::Child,
    pub url: String,
}

impl HttpProcess {
    pub fn start(mut command: std::process::Command) -> Self {
        use std::io::{BufRead, BufReader};
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the server reports its port before exiting")
                .expect("stderr is readable");
            if let Some(port) = line.strip_prefix("LISTENING ") {
                break port.trim().to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The demo server in its Streamable HTTP mode, on 127.0.0.1 and a free port.
pub fn demo_http(args: &[&str]) -> HttpProcess {
    let mut command = std::process::Command::new(&*DEMO_SERVER);
    command.args(["--http", "127.0.0.1:0"]).args(args);
    HttpProcess::start(command)
}
