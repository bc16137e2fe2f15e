//! The `actix-mcp` command-line tool, run as a program against the demo server.

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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !journal.lines().iter().any(|l| l.contains("\"sleep\"")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
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
