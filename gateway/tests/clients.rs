//! The official SDKs' clients through the gateway over Streamable HTTP, in each protocol era
//! they speak: 2025-11-25 (`initialize`, then a session by `Mcp-Session-Id`) and 2026-07-28
//! (`server/discover`, then a self-describing POST per request). Each lists the tools under their
//! gateway names, calls one routed to server `b`, and abandons a call of `a__sleep` in its own
//! way (an AbortSignal, an anyio cancel scope); server `a` then reads the cancel of that call,
//! after the call.
//!
//! The pairs not tested here, and why (from the pinned SDKs' sources):
//! - TypeScript v1 (`@modelcontextprotocol/sdk` 1.32.2) at 2026-07-28: it has no such version;
//!   its `LATEST_PROTOCOL_VERSION` is `2025-11-25`, its `Client.connect` always sends
//!   `initialize`, and nothing in it sends `server/discover`.
//! - Python v1 (`mcp` 1.30.0) at 2026-07-28: the same; its `LATEST_PROTOCOL_VERSION` is
//!   `2025-11-25`, `ClientSession` connects only by `initialize`, and nothing in it sends
//!   `server/discover`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const SESSIONS: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";

/// The reason the gateway gives upstream when a 2026-07-28 client aborts its call's POST.
const ABORTED: &str = "the downstream client aborted the request";

#[actix_rt::test]
async fn the_typescript_v1_client_lists_calls_and_cancels_in_a_session() {
    let cancelled = through_the_gateway(typescript_client("sdk"), SESSIONS, When::Abandoned).await;
    assert_reason(
        &cancelled,
        "cancelled by the downstream client: the user left",
    );
}

#[actix_rt::test]
async fn the_typescript_v2_client_lists_calls_and_cancels_in_a_session() {
    let client = typescript_client("client");
    let cancelled = through_the_gateway(client, SESSIONS, When::Abandoned).await;
    assert_reason(
        &cancelled,
        "cancelled by the downstream client: the user left",
    );
}

/// At 2026-07-28 the SDK cancels by aborting its call's POST, so the reason it gave stays home.
#[actix_rt::test]
async fn the_typescript_v2_client_lists_calls_and_cancels_statelessly() {
    let client = typescript_client("client");
    let cancelled = through_the_gateway(client, STATELESS, When::Abandoned).await;
    assert_reason(&cancelled, ABORTED);
}

/// The v1 SDK sends nothing when a call's cancel scope is cancelled (`BaseSession.send_request`
/// has no cancel path, and the call's POST runs on in the transport's task group): its call is
/// cancelled upstream only when the client leaves, closing the session (`DELETE`).
#[actix_rt::test]
async fn the_python_v1_clients_abandoned_call_is_cancelled_when_it_leaves_its_session() {
    let client = python_client(PYTHON_V1);
    let cancelled = through_the_gateway(client, SESSIONS, When::Left).await;
    assert_reason(&cancelled, "the downstream session was closed");
}

#[actix_rt::test]
async fn the_python_v2_client_lists_calls_and_cancels_in_a_session() {
    let client = python_client(PYTHON_V2);
    let cancelled = through_the_gateway(client, SESSIONS, When::Abandoned).await;
    assert_reason(
        &cancelled,
        "cancelled by the downstream client: caller cancelled",
    );
}

/// (Its POST's body goes in a write of its own after the headers: see http.rs's
/// `a_stateless_post_aborted_after_its_body_came_apart_cancels_upstream`.)
#[actix_rt::test]
async fn the_python_v2_client_lists_calls_and_cancels_statelessly() {
    let client = python_client(PYTHON_V2);
    let cancelled = through_the_gateway(client, STATELESS, When::Abandoned).await;
    assert_reason(&cancelled, ABORTED);
}

/// An SDK's client script (`tests/data/`), to be run with the gateway's URL and an era.
struct SdkClient {
    command: tokio::process::Command,
    language: &'static str,
    /// Which SDK: a name for the test's directory.
    name: String,
}

/// The TypeScript SDK `package` (`sdk`: v1, `client`: v2) running `typescript_client.mjs`.
fn typescript_client(package: &str) -> SdkClient {
    let (node, sdk) = typescript(&format!("@modelcontextprotocol/{package}"));
    let mut command = tokio::process::Command::new(node);
    command
        .arg(data("typescript_client.mjs"))
        .env("TS_SDK", sdk);
    SdkClient {
        command,
        language: "typescript",
        name: format!("ts-{package}"),
    }
}

/// The Python SDK `sdk` ([`PYTHON_V1`], [`PYTHON_V2`]) running `python_client.py`.
fn python_client(sdk: (&str, &str)) -> SdkClient {
    let mut command = tokio::process::Command::new(python_with(sdk));
    command.arg(data("python_client.py"));
    SdkClient {
        command,
        language: "python",
        name: sdk.0.to_owned(),
    }
}

fn data(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// When an SDK's abandoned call reaches the upstream server as a cancel.
#[derive(PartialEq)]
enum When {
    /// Once it is abandoned, while the client stays.
    Abandoned,
    /// Only once the client has left.
    Left,
}

/// Runs `client` in `era` through the gateway before servers `a` and `b`: it agrees `era`, lists
/// the tools under their gateway names, has `b__echo` answer, and abandons a call of `a__sleep`
/// once server `a` has read it. The cancel server `a` then read (`when` said), after the call.
async fn through_the_gateway(mut client: SdkClient, era: &str, when: When) -> Value {
    let upstreams = Upstreams::new(&format!("sdk-{}-{era}", client.name));
    let gateway = listen(&upstreams);
    let mut child = client
        .command
        .arg(&gateway.1)
        .arg(era)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the SDK client starts");
    let mut script = Script::of(&mut child);

    assert_eq!(script.step().await["version"], era, "the era agreed");
    let tools = script.step().await;
    for tool in ["a__echo", "a__sleep", "b__echo"] {
        assert!(tools["tools"].as_array().unwrap().contains(&json!(tool)));
    }
    let echo = format!("from {} at {era}", client.language);
    assert_eq!(script.step().await["echo"], echo);
    assert_eq!(script.step().await["calling"], true);
    let id = upstream_call(&upstreams, "a", "sleep").await;
    script.say("cancel").await;
    assert_eq!(script.step().await["abandoned"], true);
    let cancelled = if when == When::Abandoned {
        cancel_after_request(&upstreams, "a", &id).await
    } else {
        Value::Null
    };
    script.say("leave").await;
    script.ends().await;
    if when == When::Left {
        return cancel_after_request(&upstreams, "a", &id).await;
    }
    cancelled
}

fn assert_reason(cancelled: &Value, reason: &str) {
    assert_eq!(cancelled["params"]["reason"], reason, "{cancelled}");
}

/// A client script's steps (a JSON line each on its stdout) and its stdin.
struct Script<'a> {
    child: &'a mut tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    stderr: actix_rt::task::JoinHandle<String>,
}

/// A bound on one step of a client script (it starts Node or Python first), not a timing.
const STEP: Duration = Duration::from_secs(60);

impl<'a> Script<'a> {
    fn of(child: &'a mut tokio::process::Child) -> Self {
        let mut stderr = child.stderr.take().unwrap();
        Self {
            stdin: child.stdin.take().unwrap(),
            stdout: tokio::io::BufReader::new(child.stdout.take().unwrap()).lines(),
            stderr: actix_rt::spawn(async move {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text).await;
                text
            }),
            child,
        }
    }

    async fn step(&mut self) -> Value {
        let line = tokio::time::timeout(STEP, self.stdout.next_line()).await;
        match line {
            Ok(Ok(Some(line))) => serde_json::from_str(&line).expect("a JSON step"),
            _ => {
                let _ = self.child.start_kill();
                let stderr = (&mut self.stderr).await.unwrap_or_default();
                panic!("the client script gave no next step:\n{stderr}")
            }
        }
    }

    async fn say(&mut self, line: &str) {
        let sent = self.stdin.write_all(format!("{line}\n").as_bytes()).await;
        sent.expect("the client script reads");
    }

    async fn ends(self) {
        let status = tokio::time::timeout(STEP, self.child.wait()).await;
        let ok = matches!(status, Ok(Ok(s)) if s.success());
        if !ok {
            let _ = self.child.start_kill();
        }
        let stderr = self.stderr.await.unwrap_or_default();
        assert!(ok, "the client script failed: {status:?}\n{stderr}");
    }
}
