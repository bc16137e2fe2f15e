//! The `actix-mcp` command-line tool, run as a program against the demo server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::Value;

/// The `actix-mcp` binary (package `actix-mcp-cli`).
fn cli_program() -> String {
    program(workspace_bins::CLI)
}

fn cli(args: &[&str]) -> Output {
    Command::new(cli_program())
        .args(args)
        .output()
        .expect("the CLI runs")
}

fn stdio_arg(journal: Option<&Journal>) -> String {
    match journal {
        Some(j) => format!("{} --journal '{}'", *DEMO_SERVER, j.path.display()),
        None => DEMO_SERVER.clone(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn info_and_lists_print_for_humans_and_for_scripts() {
    let server = stdio_arg(None);
    let info = cli(&["--stdio", &server, "info"]);
    assert!(info.status.success());
    assert!(text(&info.stdout).contains("actix-mcp-demo-server"));
    let tools = cli(&["--stdio", &server, "--json", "tools"]);
    let tools: Value = serde_json::from_slice(&tools.stdout).expect("JSON");
    assert!(tools
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "echo"));
    let resources = cli(&["--stdio", &server, "resources"]);
    assert!(text(&resources.stdout).contains("demo://blob/1"));
    let prompts = cli(&["--stdio", &server, "prompts"]);
    assert!(text(&prompts.stdout).contains("greet"));
    let read = cli(&["--stdio", &server, "read", "demo://text/5"]);
    assert_eq!(text(&read.stdout).trim(), "text 5");
    let prompt = cli(&["--stdio", &server, "prompt", "greet", r#"{"name":"Ann"}"#]);
    assert_eq!(text(&prompt.stdout).trim(), "user: Hello Ann");
    let complete = cli(&[
        "--stdio", &server, "complete", "--prompt", "greet", "style", "fr",
    ]);
    assert_eq!(text(&complete.stdout).trim(), "friendly");
}

#[test]
fn call_prints_the_result_and_json_mode_the_whole_result() {
    let server = stdio_arg(None);
    let human = cli(&[
        "--stdio",
        &server,
        "call",
        "echo",
        r#"{"text":"hello there"}"#,
    ]);
    assert!(human.status.success());
    assert_eq!(text(&human.stdout).trim(), "hello there");
    let json = cli(&[
        "--stdio",
        &server,
        "--json",
        "call",
        "add",
        r#"{"a":2,"b":3}"#,
    ]);
    let result: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(result["structuredContent"]["sum"], 5.0);
}

#[test]
fn errors_are_one_line_and_a_non_zero_exit() {
    let server = stdio_arg(None);
    for (args, code) in [
        (vec!["--stdio", server.as_str(), "call", "nope"], 1),
        (
            vec!["--stdio", server.as_str(), "call", "echo", "{not json"],
            2,
        ),
        (vec!["--stdio", "/nonexistent/server", "tools"], 1),
        (vec!["tools"], 2),
    ] {
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
    }
}

#[test]
fn a_timeout_cancels_the_call_on_the_server() {
    let journal = Journal::new("cli-timeout");
    let server = stdio_arg(Some(&journal));
    let out = cli(&[
        "--stdio",
        &server,
        "--timeout",
        "0.3",
        "call",
        "sleep",
        r#"{"ms":60000}"#,
    ]);
    assert_eq!(out.status.code(), Some(124));
    // The cancel reached the server before the CLI exited.
    journal.cancelled_call("sleep");
}

#[test]
fn ctrl_c_cancels_the_call_on_the_server_and_exits_130() {
    let journal = Journal::new("cli-ctrl-c");
    let server = stdio_arg(Some(&journal));
    let child = Command::new(cli_program())
        .args(["--stdio", &server, "call", "sleep", r#"{"ms":60000}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_sleep_at_the_server(&journal);
    signal(i32::try_from(child.id()).expect("pid fits"), Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cancelled"));
    let (_, cancel) = journal.cancelled_call("sleep");
    assert_eq!(cancel["params"]["reason"], "interrupted (Ctrl-C)");
}

#[test]
fn the_same_commands_work_over_streamable_http() {
    let server = everything::http_everything();
    let sum = cli(&[
        "--url",
        &server.url,
        "--header",
        "x-test: yes",
        "call",
        "get-sum",
        r#"{"a":40,"b":2}"#,
    ]);
    assert!(sum.status.success(), "{}", text(&sum.stderr));
    assert!(text(&sum.stdout).contains("42"), "{}", text(&sum.stdout));
    let tools = cli(&["--url", &server.url, "--json", "tools"]);
    let tools: Value = serde_json::from_slice(&tools.stdout).expect("JSON");
    assert!(tools
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "echo"));
    let bad = cli(&["--url", &server.url, "--header", "no colon", "tools"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

/// A structured result that breaks its tool's outputSchema is refused with one line naming the
/// problem and a non-zero exit; a valid one is printed.
#[test]
fn a_result_that_breaks_its_output_schema_is_refused_in_one_line() {
    let server = stdio_arg(None);
    let good = cli(&["--stdio", &server, "call", "add", r#"{"a":1,"b":2}"#]);
    assert!(good.status.success(), "{good:?}");
    assert!(text(&good.stdout).contains('3'));
    let bad = cli(&["--stdio", &server, "call", "add-wrong", r#"{"a":1,"b":2}"#]);
    assert!(!bad.status.success());
    let stderr = text(&bad.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr:?}");
    assert!(
        lines[0].contains("outputSchema") && lines[0].contains("/sum"),
        "{stderr}"
    );
}

fn protocol_version(info: &Output) -> String {
    assert!(info.status.success(), "{}", text(&info.stderr));
    let info: Value = serde_json::from_slice(&info.stdout).expect("JSON");
    info["protocolVersion"]
        .as_str()
        .expect("protocolVersion")
        .to_owned()
}

/// `--era legacy` speaks 2025-11-25 and `--era modern` 2026-07-28, to a server that speaks both;
/// each refuses a server of the other era only.
#[test]
fn era_picks_the_protocol_revision() {
    let dual = format!("{} --era dual", *DEMO_SERVER);
    let legacy = cli(&["--stdio", &dual, "--era", "legacy", "--json", "info"]);
    assert_eq!(protocol_version(&legacy), "2025-11-25");
    let modern = cli(&["--stdio", &dual, "--era", "modern", "--json", "info"]);
    assert_eq!(protocol_version(&modern), "2026-07-28");
    // The flag is global: it may come after the subcommand too.
    let modern_only = format!("{} --era modern", *DEMO_SERVER);
    let modern = cli(&["--stdio", &modern_only, "--json", "info", "--era", "modern"]);
    assert_eq!(protocol_version(&modern), "2026-07-28");
    let refused = cli(&["--stdio", &modern_only, "--era", "legacy", "info"]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(text(&refused.stderr).trim().lines().count(), 1);
    let unknown = cli(&["--stdio", &dual, "--era", "future", "info"]);
    assert_eq!(unknown.status.code(), Some(2));
}

/// `-e KEY=VALUE` reaches the spawned server's environment; a malformed one is a usage error.
#[test]
fn env_sets_the_servers_environment() {
    let server = stdio_arg(None);
    let out = cli(&[
        "--stdio",
        &server,
        "-e",
        "X=42",
        "--env",
        "ACTIX_MCP_CLI_TEST=a=b c",
        "call",
        "env",
        r#"{"name":"X"}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "42");
    let out = cli(&[
        "--stdio",
        &server,
        "--env",
        "ACTIX_MCP_CLI_TEST=a=b c",
        "call",
        "env",
        r#"{"name":"ACTIX_MCP_CLI_TEST"}"#,
    ]);
    assert_eq!(text(&out.stdout).trim(), "a=b c");
    for bad in ["X", "=42"] {
        let out = cli(&["--stdio", &server, "-e", bad, "tools"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = text(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("--env"), "{err}");
    }
}

/// `--tool-arg key=value`: JSON when the value parses as JSON, else a string; it overrides the
/// JSON object's same-named keys.
#[test]
fn tool_args_are_typed_and_override_the_json_object() {
    let server = stdio_arg(None);
    let sum = cli(&[
        "--stdio",
        &server,
        "call",
        "add",
        "--tool-arg",
        "a=2",
        "--tool-arg",
        "b=3",
    ]);
    assert!(sum.status.success(), "{}", text(&sum.stderr));
    assert_eq!(text(&sum.stdout).trim(), "5");
    let sum = cli(&[
        "--stdio",
        &server,
        "--json",
        "call",
        "add",
        r#"{"a":100,"b":3}"#,
        "--tool-arg",
        "a=2.5",
    ]);
    let result: Value = serde_json::from_slice(&sum.stdout).expect("JSON");
    assert_eq!(result["structuredContent"]["sum"], 5.5);
    let echo = cli(&[
        "--stdio",
        &server,
        "call",
        "echo",
        "--tool-arg",
        "text=hello world",
    ]);
    assert_eq!(text(&echo.stdout).trim(), "hello world");
    // A number where the tool wants a string: the value was sent as JSON, not as text.
    let typed = cli(&["--stdio", &server, "call", "echo", "--tool-arg", "text=3"]);
    assert!(!typed.status.success(), "{}", text(&typed.stdout));
    let bad = cli(&["--stdio", &server, "call", "add", "--tool-arg", "a"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(text(&bad.stderr).trim().lines().count(), 1);
}

#[test]
fn ping_prints_pong_and_the_round_trip() {
    let server = stdio_arg(None);
    let human = cli(&["--stdio", &server, "ping"]);
    assert!(human.status.success(), "{}", text(&human.stderr));
    let line = text(&human.stdout);
    let ms = line
        .trim()
        .strip_prefix("pong ")
        .and_then(|rest| rest.strip_suffix(" ms"))
        .unwrap_or_else(|| panic!("pong <ms> ms: {line}"));
    assert!(ms.parse::<f64>().is_ok_and(|ms| ms >= 0.0), "{line}");
    let json = cli(&["--stdio", &server, "--json", "ping"]);
    let json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["ok"], true);
    assert!(json["ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{json}");
}

/// `set-level` sends `logging/setLevel`; an unknown level is a usage error naming the valid ones,
/// reported before any server is started.
#[test]
fn set_level_sends_the_level_and_refuses_an_unknown_one() {
    let journal = Journal::new("cli-set-level");
    let server = stdio_arg(Some(&journal));
    let out = cli(&["--stdio", &server, "set-level", "warning"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(journal
        .frames()
        .iter()
        .any(|f| f["method"] == "logging/setLevel" && f["params"]["level"] == "warning"));
    let json = cli(&["--stdio", &server, "--json", "set-level", "error"]);
    let json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["level"], "error");

    let bad = cli(&["--stdio", "/nonexistent/server", "set-level", "loud"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = text(&bad.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    for level in [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ] {
        assert!(err.contains(level), "{err}");
    }
}

#[test]
fn resource_templates_print_for_humans_and_for_scripts() {
    let server = stdio_arg(None);
    let human = cli(&["--stdio", &server, "resource-templates"]);
    assert!(human.status.success(), "{}", text(&human.stderr));
    let human = text(&human.stdout);
    assert!(
        human.contains("demo://text/{id}") && human.contains("text by id"),
        "{human}"
    );
    let json = cli(&["--stdio", &server, "--json", "resource-templates"]);
    let json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let templates = json.as_array().expect("an array");
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0]["uriTemplate"], "demo://text/{id}");
    assert_eq!(templates[0]["name"], "text by id");
}

/// `--connect-timeout` bounds the connect: a server that never answers `initialize` (or
/// `server/discover`) ends the run with 124 and one line, long before the default 30 s.
#[test]
fn a_connect_timeout_covers_the_connect() {
    let silent = format!("{} --initialize-delay-ms 60000", *DEMO_SERVER);
    for args in [
        vec!["--stdio", silent.as_str(), "--connect-timeout", "2", "info"],
        vec![
            "--stdio",
            "sleep 60",
            "--connect-timeout",
            "1",
            "--era",
            "modern",
            "tools",
        ],
    ] {
        let start = std::time::Instant::now();
        let out = cli(&args);
        let took = start.elapsed();
        assert_eq!(
            out.status.code(),
            Some(124),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            took < std::time::Duration::from_secs(15),
            "{args:?} took {took:?}"
        );
        let err = text(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("timed out"), "{err}");
    }
}

/// An `mcp.json` with the demo server (with a journal), the reference server, a Python SDK
/// server, and a program that does not exist.
fn many_servers_config(name: &str, journal: &Journal) -> tempfile_path::TempConfig {
    let (python, script) = common::python::python_server();
    let config = serde_json::json!({
        "mcpServers": {
            "demo": {"command": &*DEMO_SERVER, "args": ["--journal", journal.path]},
            "everything": {"command": "node", "args": [everything::server_script(), "stdio"]},
            "python": {"command": python, "args": [script]},
            "missing": {"command": "/nonexistent/mcp-server"},
        }
    });
    tempfile_path::TempConfig::new(name, &config)
}

mod tempfile_path {
    /// A config file in the temp dir, removed when dropped.
    pub struct TempConfig(pub std::path::PathBuf);

    impl TempConfig {
        pub fn new(name: &str, config: &serde_json::Value) -> Self {
            let path = std::env::temp_dir()
                .join(format!("actix-mcp-cli-{name}-{}.json", std::process::id()));
            std::fs::write(&path, config.to_string()).expect("write the config");
            Self(path)
        }

        pub fn arg(&self) -> String {
            self.0.display().to_string()
        }
    }

    impl Drop for TempConfig {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// `servers` reports every server; the one that cannot start is `failed` with its error, the
/// others are ready (demo, the reference server, a Python SDK server).
#[test]
fn servers_reports_each_server_of_a_config_file() {
    let journal = Journal::new("cli-config-servers");
    let config = many_servers_config("cli-config-servers", &journal);
    let out = cli(&["--config", &config.arg(), "servers", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let status = |name: &str| {
        rows.as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == name))
            .cloned()
            .unwrap_or_default()
    };
    for name in ["demo", "everything", "python"] {
        assert_eq!(status(name)["status"], "ready", "{name}: {rows}");
    }
    assert_eq!(status("python")["server"]["name"], "python-demo");
    let missing = status("missing");
    assert_eq!(missing["status"], "failed");
    assert!(missing["error"]
        .as_str()
        .unwrap_or_default()
        .contains("/nonexistent/mcp-server"));

    let human = cli(&["--config", &config.arg(), "servers"]);
    assert!(human.status.success());
    let lines = text(&human.stdout);
    assert!(
        lines
            .lines()
            .any(|l| l.starts_with("missing") && l.contains("failed")),
        "{lines}"
    );
}

/// `tools --all`: each tool once per server, names several servers share present under each.
#[test]
fn tools_all_lists_every_ready_servers_tools_with_collisions_kept() {
    let journal = Journal::new("cli-config-tools");
    let config = many_servers_config("cli-config-tools", &journal);
    let out = cli(&["--config", &config.arg(), "tools", "--all", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tools: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let qualified: Vec<&str> = tools
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["qualified"].as_str())
        .collect();
    for name in [
        "demo/echo",
        "everything/echo",
        "python/echo",
        "python/shout",
        "demo/add",
    ] {
        assert!(
            qualified.contains(&name),
            "{name} missing from {qualified:?}"
        );
    }
    let echo = tools
        .as_array()
        .and_then(|t| t.iter().find(|t| t["qualified"] == "python/echo"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(echo["collides"], true);
    assert!(
        text(&out.stderr).contains("missing"),
        "{}",
        text(&out.stderr)
    );
}

/// `--server NAME`: every subcommand against one server of the file; Ctrl-C cancels the call
/// on that server and exits 130.
#[test]
fn one_server_of_a_config_file_by_name_with_ctrl_c_cancelling_on_it() {
    let journal = Journal::new("cli-config-server");
    let config = many_servers_config("cli-config-server", &journal);
    let shout = cli(&[
        "--config",
        &config.arg(),
        "--server",
        "python",
        "call",
        "shout",
        "--tool-arg",
        "text=hi",
    ]);
    assert!(shout.status.success(), "{}", text(&shout.stderr));
    assert_eq!(text(&shout.stdout).trim(), "HI");
    let unknown = cli(&["--config", &config.arg(), "--server", "nope", "ping"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("demo"), "lists the names");

    let child = Command::new(cli_program())
        .args([
            "--config",
            &config.arg(),
            "--server",
            "demo",
            "call",
            "sleep",
            r#"{"ms":60000}"#,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_sleep_at_the_server(&journal);
    signal(i32::try_from(child.id()).expect("pid fits"), Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let (_, cancel) = journal.cancelled_call("sleep");
    assert_eq!(cancel["params"]["reason"], "interrupted (Ctrl-C)");
}

/// A malformed config file: one line naming the file, the line and the column; exit 1.
#[test]
fn a_malformed_config_file_is_one_line_with_its_position() {
    let path = std::env::temp_dir().join(format!("actix-mcp-cli-bad-{}.json", std::process::id()));
    std::fs::write(
        &path,
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": }\n  }\n}\n",
    )
    .unwrap();
    let out = cli(&["--config", &path.display().to_string(), "servers"]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("{}:3:", path.display())),
        "{stderr}"
    );
}

/// A tool that must run as a task: `call` creates it, follows it and prints its result.
#[test]
fn call_on_a_task_tool_prints_the_tasks_result() {
    let server = stdio_arg(None);
    let out = cli(&[
        "--stdio",
        &server,
        "call",
        "task_required",
        "--tool-arg",
        "ms=300",
        "--tool-arg",
        "steps=3",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "slept 300 ms in 3 steps");
}

/// Ctrl-C during a task: `tasks/cancel` reaches the server (never `notifications/cancelled`)
/// and the CLI exits 130.
#[test]
fn ctrl_c_during_a_task_sends_tasks_cancel_and_exits_130() {
    let journal = Journal::new("cli-task-ctrl-c");
    let server = stdio_arg(Some(&journal));
    let child = Command::new(cli_program())
        .args([
            "--stdio",
            &server,
            "call",
            "task_sleep",
            "--task",
            r#"{"ms":60000}"#,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !journal.lines().iter().any(|l| l.contains("tasks/get")) {
        assert!(std::time::Instant::now() < deadline, "the task never ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    signal(i32::try_from(child.id()).expect("pid fits"), Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cancelled"),
        "{}",
        text(&out.stderr)
    );
    let lines = journal.lines();
    assert!(
        lines.iter().any(|l| l.contains("tasks/cancel")),
        "tasks/cancel sent"
    );
    assert!(!lines.iter().any(|l| l.contains("notifications/cancelled")));
}

/// `--detach` prints the task's id; later runs (other processes) read, wait for and cancel it
/// by id, over HTTP where the server outlives each run.
#[test]
fn a_detached_task_is_followed_by_id_from_other_runs() {
    let server = demo_http(&[]);
    let started = cli(&[
        "--url",
        &server.url,
        "call",
        "task_sleep",
        "--detach",
        "--tool-arg",
        "ms=400",
    ]);
    assert!(started.status.success(), "{}", text(&started.stderr));
    let id = text(&started.stdout).trim().to_owned();
    assert!(id.starts_with("task-"), "{id}");
    let got = cli(&["--url", &server.url, "task", "get", &id]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert!(text(&got.stdout).starts_with(&id));
    let result = cli(&["--url", &server.url, "task", "result", &id]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert_eq!(text(&result.stdout).trim(), "slept 400 ms in 5 steps");

    let long = cli(&[
        "--url",
        &server.url,
        "call",
        "task_sleep",
        "--detach",
        "--tool-arg",
        "ms=60000",
    ]);
    let long_id = text(&long.stdout).trim().to_owned();
    let cancelled = cli(&["--url", &server.url, "--json", "task", "cancel", &long_id]);
    assert!(cancelled.status.success(), "{}", text(&cancelled.stderr));
    let task: Value = serde_json::from_slice(&cancelled.stdout).expect("JSON");
    assert_eq!(task["status"], "cancelled");
}

/// The reference server's research tool requires a task: the CLI prints its report.
#[test]
fn the_reference_servers_research_task_prints_its_report() {
    let command = format!("node {} stdio", everything::server_script().display());
    let out = cli(&[
        "--stdio",
        &command,
        "call",
        "simulate-research-query",
        r#"{"topic":"x"}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("research report"),
        "{}",
        text(&out.stdout)
    );
}

/// Issue 20: an MCP App's page of megabytes is read with the default cap; a smaller
/// `--max-message-size` refuses it, and the error names the knob to raise.
#[test]
fn a_big_resource_is_read_and_the_cap_is_named_when_it_is_too_small() {
    let server = stdio_arg(None);
    let out = cli(&["--stdio", &server, "--json", "read", "demo://big/5242880"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        read["contents"][0]["text"].as_str().map(str::len),
        Some(5_242_880)
    );
    let out = cli(&[
        "--stdio",
        &server,
        "--max-message-size",
        "100000",
        "read",
        "demo://big/5242880",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("--max-message-size"), "names the knob: {err}");
}

/// Issue 20: `--timeout` bounds requests only. It was also the connect bound, so a server slower
/// to start than one request's timeout (a Python server takes 2 s) failed `--timeout 1`.
#[test]
fn a_request_timeout_does_not_bound_the_connect() {
    let slow_start = format!("{} --initialize-delay-ms 2500", *DEMO_SERVER);
    let out = cli(&["--stdio", &slow_start, "--timeout", "1", "tools"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("echo"));
}

/// Issue 20: `--era modern` against a server of the older era says what to do instead of only
/// relaying the server's refusal of `server/discover`.
#[test]
fn era_modern_against_a_legacy_server_hints_at_era_auto() {
    let legacy = format!("{} --era legacy", *DEMO_SERVER);
    let out = cli(&["--stdio", &legacy, "--era", "modern", "tools"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("--era auto"), "{err}");
}

/// Issue 20: a client secret need not be on the command line (visible in `ps`): a file, or
/// the environment.
#[test]
fn the_client_secret_comes_from_a_file_or_the_environment() {
    let out = cli(&[
        "--url",
        "http://127.0.0.1:9/mcp",
        "--client-id",
        "app",
        "--client-secret-file",
        "/nonexistent/secret",
        "tools",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("/nonexistent/secret"),
        "{}",
        text(&out.stderr)
    );
    let help = text(&cli(&["--help"]).stdout);
    assert!(help.contains("ACTIX_MCP_CLIENT_SECRET"), "{help}");
}

/// Issue 20: Ctrl-C on a 2025-11-25 Streamable HTTP call against a server that answers `DELETE`
/// with 405 (it does not end sessions on request, as the spec allows): only the cancel can stop
/// the call, and it reaches the server before the CLI exits 130. (Closing cleared the cancel
/// lane before the cancel went out; the `DELETE` usually hid it.)
#[test]
fn ctrl_c_over_http_cancels_on_a_server_that_refuses_delete() {
    let journal = Journal::new("cli-ctrl-c-http");
    let path = journal.path.display().to_string();
    let server = demo_http(&["--sessions", "--refuse-delete", "--journal", &path]);
    let child = Command::new(cli_program())
        .args(["--url", &server.url, "call", "sleep", r#"{"ms":60000}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_sleep_at_the_server(&journal);
    signal(i32::try_from(child.id()).expect("pid fits"), Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let (_, cancel) = journal.cancelled_call("sleep");
    assert_eq!(cancel["params"]["reason"], "interrupted (Ctrl-C)");
    eprintln!("the server saw:");
    for line in journal.lines() {
        eprintln!("  {line}");
    }
}

/// Waits (bounded) until the server's journal shows the `sleep` call.
fn wait_for_sleep_at_the_server(journal: &Journal) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !journal.lines().iter().any(|l| l.contains("\"sleep\"")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
