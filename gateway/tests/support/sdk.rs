//! The official SDKs' client scripts (`tests/data/python_client.py`, `typescript_client.mjs`):
//! each agrees an era, lists the tools, has `b__echo` answer, counts a call's progress, answers
//! an elicitation of server `b` (through `input_required` in 2026-07-28) and abandons a call of
//! `a__sleep` in its own way, step by step on its stdout (`clients.rs`, and `replicas.rs` through a
//! load balancer before replicas).
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::{cancel_after_request, python_with, typescript, upstream_call, Upstreams, PYTHON_V1};

/// An SDK's client script (`tests/data/`), to be run with the gateway's URL and an era.
pub struct SdkClient {
    command: tokio::process::Command,
    pub language: &'static str,
    /// Which SDK: a name for the test's directory.
    pub name: String,
    /// It runs a tool call as a task (v1's experimental tasks, in 2025-11-25).
    pub tasks: bool,
}

/// The TypeScript SDK `package` (`sdk`: v1, `client`: v2) running `typescript_client.mjs`.
pub fn typescript_client(package: &str) -> SdkClient {
    let (node, sdk) = typescript(&format!("@modelcontextprotocol/{package}"));
    let mut command = tokio::process::Command::new(node);
    command
        .arg(data("typescript_client.mjs"))
        .env("TS_SDK", sdk);
    SdkClient {
        command,
        language: "typescript",
        name: format!("ts-{package}"),
        tasks: package == "sdk",
    }
}

/// The Python SDK `sdk` ([`PYTHON_V1`], [`PYTHON_V2`]) running `python_client.py`.
pub fn python_client(sdk: (&str, &str)) -> SdkClient {
    let mut command = tokio::process::Command::new(python_with(sdk));
    command.arg(data("python_client.py"));
    SdkClient {
        command,
        language: "python",
        name: sdk.0.to_owned(),
        tasks: sdk == PYTHON_V1,
    }
}

fn data(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// When an SDK's abandoned call reaches the upstream server as a cancel.
#[derive(PartialEq)]
pub enum When {
    /// Once it is abandoned, while the client stays.
    Abandoned,
    /// Only once the client has left.
    Left,
}

/// Runs `client` in `era` through the gateway at `url` before `upstreams` `a` and `b`: it agrees
/// `era`, lists the tools under their gateway names, has `b__echo` answer, gets the 3 progress
/// updates of `a__progress`, answers the elicitation `b__ask_client` asks (the name of its
/// language, which the server gets back), runs `a__task_sleep` as a task and finds it in the
/// session's list (the SDKs with tasks, in 2025-11-25), and abandons a call of `a__sleep` once server `a` has
/// read it. The cancel server `a` then read (`when` said), after the call.
pub async fn script_through(
    mut client: SdkClient,
    url: &str,
    upstreams: &Upstreams,
    era: &str,
    when: When,
) -> Value {
    let mut child = client
        .command
        .arg(url)
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
    assert_eq!(
        script.step().await["progress"],
        3,
        "every progress update came"
    );
    let elicited = script.step().await;
    assert_eq!(
        elicited["elicited"], client.language,
        "the server got the answer"
    );
    let task = script.step().await;
    if client.tasks && era == "2025-11-25" {
        assert_eq!(task["task"], "slept 200 ms in 2 steps", "{task}");
        assert_eq!(task["listed"], true, "{task}");
    } else {
        assert_eq!(task["task"], Value::Null, "{task}");
    }
    assert_eq!(script.step().await["calling"], true);
    let id = upstream_call(upstreams, "a", "sleep").await;
    script.say("cancel").await;
    assert_eq!(script.step().await["abandoned"], true);
    let cancelled = if when == When::Abandoned {
        cancel_after_request(upstreams, "a", &id).await
    } else {
        Value::Null
    };
    script.say("leave").await;
    script.ends().await;
    if when == When::Left {
        return cancel_after_request(upstreams, "a", &id).await;
    }
    cancelled
}

pub fn assert_reason(cancelled: &Value, reason: &str) {
    assert_eq!(cancelled["params"]["reason"], reason, "{cancelled}");
}

/// A client script's steps (a JSON line each on its stdout) and its stdin.
pub struct Script<'a> {
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
