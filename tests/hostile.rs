//! A hostile-server suite (issue 13, point 4): `tests/data/hostile/server.py` misbehaves in one
//! way per mode, over stdio and over Streamable HTTP, and the library and the CLI must end every
//! call in one clear outcome: the call's result when the hostile bytes can be skipped, else one
//! typed [`Error`]; never a hang, a panic, unbounded memory or a server process left behind.
//!
//! Each mode's expected outcome is in [`CASES`], one row per mode: the table the tests check.
#![cfg(unix)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use actix_mcp::{Client, CloseReason, Error, HttpTransport, StdioTransport, Transport};
use common::*;
use serde_json::json;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hostile/server.py");

/// The Python interpreter itself, found once: `python3` may be a shim (pyenv) that costs a
/// quarter of a second per start, which a connect timeout would feel with many servers starting.
static PYTHON: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for the hostile server");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!path.is_empty(), "python3 names its executable");
    path
});

/// The timeout a silent mode is expected to meet (connect or request).
const SHORT: Duration = Duration::from_secs(2);
/// The timeout of everything else: long, because a busy 2-core machine must not turn a mode
/// that answers into a timeout.
const LONG: Duration = Duration::from_secs(40);
/// Only turns a hang into a failure; never reached by a working build.
const HANG: Duration = Duration::from_secs(75);

/// The connect and request timeouts for a run expected to end in `expected`.
fn timeouts(expected: &Outcome) -> (Duration, Duration) {
    match expected {
        Connect(Timeout) => (SHORT, LONG),
        Call(Timeout) => (LONG, SHORT),
        _ => (LONG, LONG),
    }
}

/// How one run ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The call returned its text, and the connection took another request.
    Echoed,
    /// Connecting failed with this.
    Connect(Failure),
    /// The call failed with this.
    Call(Failure),
}

/// An [`Error`], reduced to what the tests tell apart.
#[derive(Debug, Clone, PartialEq)]
enum Failure {
    Server(i64),
    Protocol,
    Timeout,
    Transport,
    Exited(i32),
    EndOfStream,
    FrameTooLarge,
    Other(String),
}

impl From<&Error> for Failure {
    fn from(e: &Error) -> Self {
        match e {
            Error::Server { code, .. } => Failure::Server(*code),
            Error::Protocol(_) => Failure::Protocol,
            Error::Timeout { .. } => Failure::Timeout,
            Error::Transport { .. } => Failure::Transport,
            Error::Closed {
                reason: CloseReason::ProcessExited { status },
            } => Failure::Exited(status.code().unwrap_or(-1)),
            Error::Closed {
                reason: CloseReason::EndOfStream,
            } => Failure::EndOfStream,
            Error::Closed {
                reason: CloseReason::FrameTooLarge { .. },
            } => Failure::FrameTooLarge,
            other => Failure::Other(format!("{other:?}")),
        }
    }
}

use Failure::*;
use Outcome::*;

/// One mode: what the library sees over stdio and over HTTP, and the CLI's exit code.
#[derive(Clone)]
struct Case {
    mode: &'static str,
    stdio: Outcome,
    http: Outcome,
    cli: i32,
}

fn cases() -> Vec<Case> {
    let case = |mode, stdio, http, cli| Case {
        mode,
        stdio,
        http,
        cli,
    };
    vec![
        case("well-behaved", Echoed, Echoed, 0),
        case("garbage", Echoed, Echoed, 0),
        case("non-object", Echoed, Echoed, 0),
        case("ids", Echoed, Echoed, 0),
        case("flood", Echoed, Echoed, 0),
        case("bad-utf8", Echoed, Echoed, 0),
        case(
            "result-and-error",
            Call(Server(-32050)),
            Call(Server(-32050)),
            1,
        ),
        case("batch", Echoed, Echoed, 0),
        case("huge-line", Call(FrameTooLarge), Call(Transport), 1),
        case("exit-mid-call", Call(Exited(3)), Call(Transport), 1),
        case("close-stdout", Call(EndOfStream), Call(Transport), 1),
        case("silent", Connect(Timeout), Connect(Timeout), 124),
        case("no-init-answer", Connect(Timeout), Connect(Timeout), 124),
        case("mute-after-init", Call(Timeout), Call(Timeout), 124),
        case("bad-version", Connect(Protocol), Connect(Protocol), 1),
        case(
            "init-error",
            Connect(Server(-32603)),
            Connect(Server(-32603)),
            1,
        ),
        case("wrong-shapes", Call(Protocol), Call(Protocol), 1),
        case("stderr-flood", Echoed, Echoed, 0),
        case("stop-reading", Call(Timeout), Call(Timeout), 124),
    ]
}

/// The text the call sends: more than a pipe holds for `stop-reading` (so our writes block),
/// small otherwise. Under the 128 KiB a single command-line argument may have.
fn text_for(mode: &str) -> String {
    if mode == "stop-reading" {
        "w".repeat(100_000)
    } else {
        format!("hello {mode}")
    }
}

/// Where a stdio server writes its pid.
fn pidfile(mode: &str, who: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("actix-mcp-tests");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("hostile-{who}-{mode}-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn read_pid(path: &PathBuf) -> i32 {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the server wrote its pid to {}: {e}", path.display()));
    text.trim().parse().expect("a pid")
}

/// Whether `pid` is a live process (a zombie waiting for its reaper counts as gone).
fn alive(pid: i32) -> bool {
    process_exists(pid)
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
}

fn stdio_transport(mode: &str, pidfile: &PathBuf) -> StdioTransport {
    StdioTransport::new(&*PYTHON)
        .arg(SCRIPT)
        .arg(mode)
        .arg("--pidfile")
        .arg(pidfile)
        // A server that ignores EOF is signalled sooner (the escalation itself is tested in
        // stdio_server.rs).
        .shutdown_grace(Duration::from_millis(500))
}

fn http_server(mode: &str) -> HttpProcess {
    let mut command = Command::new(&*PYTHON);
    command.args([SCRIPT, mode, "--http", "127.0.0.1:0"]);
    HttpProcess::start(command)
}

/// Connects, calls `echo`, and on success asks once more (the connection must go on).
async fn run_library(mode: &str, expected: &Outcome, transport: impl Transport) -> Outcome {
    let (connect_timeout, request_timeout) = timeouts(expected);
    let connected = Client::builder()
        .connect_timeout(connect_timeout)
        .request_timeout(request_timeout)
        .connect(transport)
        .await;
    let client = match connected {
        Ok(client) => client,
        Err(e) => return Connect(Failure::from(&e)),
    };
    let text = text_for(mode);
    // Subscribed and never read while the flood comes: it must hold a bounded buffer.
    let mut unread = client.notifications();
    let rss_before = rss_bytes();
    let outcome = match client.call_tool("echo", json!({ "text": text })).await {
        Ok(result) if result.text() == text => match client.ping().await {
            Ok(_) => {
                match skipped_as_they_should_be(mode, &client, &mut unread, rss_before).await {
                    None => Echoed,
                    Some(problem) => Call(Other(problem)),
                }
            }
            Err(e) => Call(Other(format!("the connection broke after the call: {e}"))),
        },
        Ok(result) => Call(Other(format!("wrong text {:?}", result.text()))),
        Err(e) => Call(Failure::from(&e)),
    };
    client.shutdown().await;
    outcome
}

/// The notifications the flood mode sends (the server's default).
const FLOOD: u64 = 200_000;

/// This process's resident memory, from procfs (0 where there is none).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// For a mode whose call succeeded: the hostile frames were counted where the library says it
/// counts them, and a flood left memory bounded. `None` when all is well.
async fn skipped_as_they_should_be(
    mode: &str,
    client: &Client,
    unread: &mut actix_mcp::client::NotificationStream,
    rss_before: u64,
) -> Option<String> {
    let stats = client.stats().await.ok()?;
    let problem = match mode {
        "garbage" | "non-object" if stats.invalid_frames < 3 => {
            format!("invalid frames not counted: {stats:?}")
        }
        // Over HTTP the event stream's decoding replaces the bad bytes (U+FFFD), which makes
        // one of the three lines valid JSON; on stdio all three are skipped.
        "bad-utf8" if stats.invalid_frames < 2 => {
            format!("invalid frames not counted: {stats:?}")
        }
        // Four answers for ids never sent, and the duplicate.
        "ids" if stats.late_responses < 5 => format!("late responses not counted: {stats:?}"),
        "flood" => {
            // Half the flood is progress for tokens nobody sent: dropped and counted.
            if stats.progress_dropped < FLOOD / 2 || stats.notifications < FLOOD / 2 {
                return Some(format!("the flood was not counted: {stats:?}"));
            }
            // The unread subscriber lost all but its buffer (1024 entries), oldest first.
            let _ = unread.next().await;
            let kept = FLOOD / 2 - unread.dropped();
            if kept > 1024 + 1 {
                return Some(format!("an unread stream kept {kept} notifications"));
            }
            // Generous: every mode runs at once in this process; what matters is that the
            // flood (tens of MB on the wire, hundreds as parsed values) was not kept.
            let grown = rss_bytes().saturating_sub(rss_before);
            if grown > 256 * 1024 * 1024 {
                return Some(format!("memory grew by {} MiB", grown >> 20));
            }
            return None;
        }
        _ => return None,
    };
    Some(problem)
}

type Run = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>>;

/// Runs every mode at once (each on its own task of this thread) and fails listing every mode
/// whose outcome differs from the table.
async fn check_every_mode(
    expected: impl Fn(&Case) -> Outcome,
    run: impl Fn(&'static str, Outcome) -> Run,
) {
    init_tracing();
    let mut cases = cases();
    // HOSTILE_ONLY=mode runs one mode (when looking into one).
    if let Ok(only) = std::env::var("HOSTILE_ONLY") {
        cases.retain(|c| c.mode == only);
    }
    let runs = cases.iter().map(|case| {
        let run = run(case.mode, expected(case));
        async move {
            tokio::time::timeout(HANG, run)
                .await
                .unwrap_or_else(|_| Call(Other("hung".into())))
        }
    });
    let outcomes = futures::future::join_all(runs).await;
    let wrong: Vec<String> = cases
        .iter()
        .zip(&outcomes)
        .filter(|(case, outcome)| expected(case) != **outcome)
        .map(|(case, outcome)| {
            format!(
                "{}: expected {:?}, got {outcome:?}",
                case.mode,
                expected(case)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[actix::test]
async fn every_hostile_mode_over_stdio_ends_in_its_one_outcome_and_leaves_no_process() {
    check_every_mode(
        |case| case.stdio.clone(),
        |mode, expected| {
            Box::pin(async move {
                let path = pidfile(mode, "lib");
                let outcome = run_library(mode, &expected, stdio_transport(mode, &path)).await;
                // Whatever happened, the server is gone once the client shut down.
                let pid = read_pid(&path);
                eventually(&format!("{mode}: the server process is gone"), || {
                    !alive(pid)
                })
                .await;
                let _ = std::fs::remove_file(&path);
                outcome
            })
        },
    )
    .await;
}

#[actix::test]
async fn every_hostile_mode_over_http_ends_in_its_one_outcome() {
    check_every_mode(
        |case| case.http.clone(),
        |mode, expected| {
            Box::pin(async move {
                let server = http_server(mode);
                run_library(mode, &expected, HttpTransport::new(&server.url)).await
            })
        },
    )
    .await;
}

/// The CLI against every mode over stdio and over HTTP: exit 0 with the echoed text where the
/// call can succeed; otherwise exactly one line on stderr and the table's non-zero code. No
/// server process outlives a stdio run.
#[test]
fn the_cli_ends_every_hostile_mode_with_one_line_and_its_exit_code() {
    let _ = program(workspace_bins::CLI); // built once, before the threads start
    let runs: Vec<(&'static str, Case)> = cases()
        .into_iter()
        .flat_map(|case| [("stdio", case.clone()), ("http", case)])
        .collect();
    // A few at a time: every run starts a Python interpreter, and a 2-core machine that starts
    // dozens at once is slow enough to miss even a connect timeout meant to be met by silence.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let wrong = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((via, case)) = runs.get(i) else {
                    return;
                };
                let problems = check_cli(via, case);
                wrong.lock().expect("no panic holds it").extend(problems);
            });
        }
    });
    let wrong = wrong.into_inner().expect("no panic held it");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One CLI run against `case` over `via`: what is wrong with it.
fn check_cli(via: &str, case: &Case) -> Vec<String> {
    // The silent modes meet a short --timeout; a long one elsewhere.
    let timeout = if case.cli == 124 { SHORT } else { LONG };
    let started = Instant::now();
    let ((code, stdout, stderr), pid) = if via == "stdio" {
        let path = pidfile(case.mode, "cli");
        let command = format!(
            "'{}' '{SCRIPT}' {} --pidfile '{}'",
            *PYTHON,
            case.mode,
            path.display()
        );
        let run = run_cli(case.mode, timeout, &["--stdio", &command]);
        // A server killed by a short connect timeout before it ran a line of Python wrote no
        // pid; it is gone with the CLI's shutdown all the same.
        let pid = std::fs::read_to_string(&path)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        assert!(
            pid.is_some() || case.cli == 124,
            "{}: the server wrote no pid",
            case.mode
        );
        let _ = std::fs::remove_file(&path);
        (run, pid)
    } else {
        let server = http_server(case.mode);
        (run_cli(case.mode, timeout, &["--url", &server.url]), None)
    };
    let took = started.elapsed();
    eprintln!(
        "cli {via} {}: exit {code} in {took:?}: {}",
        case.mode,
        stderr.trim()
    );
    let lines = stderr.lines().filter(|l| !l.trim().is_empty()).count();
    let mut problems = Vec::new();
    if code != case.cli {
        problems.push(format!("exit {code}, expected {}", case.cli));
    }
    if case.cli == 0 && stdout.trim() != text_for(case.mode) {
        problems.push(format!("printed {stdout:?}"));
    }
    if case.cli != 0 && lines != 1 {
        problems.push(format!("{lines} lines on stderr"));
    }
    if stderr.contains("panicked") {
        problems.push("a panic".into());
    }
    // Gone with the CLI (after a failed connect it was killed as the CLI ended: allow the
    // kernel a moment to finish it).
    if let Some(pid) = pid {
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) {
            problems.push(format!("server {pid} outlived the CLI"));
        }
    }
    problems
        .into_iter()
        .map(|p| format!("{} over {via}: {p} ({stderr:?})", case.mode))
        .collect()
}

/// The CLI's run against one mode: exit code, stdout and stderr; killed (and failed) if it
/// outlives [`HANG`].
fn run_cli(mode: &str, timeout: Duration, server: &[&str]) -> (i32, String, String) {
    let timeout = timeout.as_secs().to_string();
    let args_json = json!({ "text": text_for(mode) }).to_string();
    let mut child = Command::new(program(workspace_bins::CLI))
        .args(server)
        .args(["--timeout", &timeout, "--connect-timeout", &timeout])
        .args(["call", "echo", &args_json])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the CLI runs");
    // Read both pipes while waiting, so a chatty run never blocks on a full pipe.
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let (stdout, stderr) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let deadline = Instant::now() + HANG;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the CLI") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{mode}: the CLI hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code().unwrap_or(-1),
        stdout.join().expect("reader"),
        stderr.join().expect("reader"),
    )
}

/// Regression: `call` lists the tools first (for their output schemas); a server that let that
/// list time out was then called anyway, so the user waited a second --timeout. Now the list's
/// timeout ends the run, and the call is never sent.
#[test]
fn the_cli_gives_up_when_the_tool_list_times_out_instead_of_waiting_twice() {
    let journal = std::env::temp_dir()
        .join("actix-mcp-tests")
        .join(format!("hostile-cli-journal-{}.txt", std::process::id()));
    std::fs::create_dir_all(journal.parent().expect("a parent")).expect("temp dir");
    let _ = std::fs::remove_file(&journal);
    let command = format!(
        "'{}' '{SCRIPT}' mute-after-init --journal '{}'",
        *PYTHON,
        journal.display()
    );
    let (code, _, stderr) = run_cli("mute-after-init", SHORT, &["--stdio", &command]);
    assert_eq!(code, 124, "{stderr}");
    assert!(stderr.contains("listing the tools"), "{stderr}");
    let methods = std::fs::read_to_string(&journal).unwrap_or_default();
    assert!(methods.lines().any(|m| m == "tools/list"), "{methods}");
    assert!(
        !methods.lines().any(|m| m == "tools/call"),
        "the call was sent after the list timed out: {methods}"
    );
    let _ = std::fs::remove_file(&journal);
}

/// Regression: a CLI run whose connect failed exited without shutting its server down; only the
/// direct child was killed (`kill_on_drop`), so the real server behind a wrapper (`sh -c`, like
/// `npx` or `uvx`) lived on. The whole group is killed now.
#[test]
fn a_cli_connect_timeout_leaves_no_wrapped_server_behind() {
    let path = pidfile("no-init-answer", "wrapped");
    // `; :` keeps the shell as the server's parent instead of exec'ing it.
    let script = format!(
        "'{}' '{SCRIPT}' no-init-answer --pidfile '{}'; :",
        *PYTHON,
        path.display()
    );
    let command = format!("sh -c \"{script}\"");
    let (code, _, stderr) = run_cli("no-init-answer", SHORT, &["--stdio", &command]);
    assert_eq!(code, 124, "{stderr}");
    let pid = read_pid(&path);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the wrapped server {pid} outlived the CLI"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&path);
}

/// The CLI with `args` against the hostile server in `hostile-text` mode over stdio:
/// (exit code, stdout, stderr).
fn cli_against_hostile_text(args: &[&str]) -> (i32, String, String) {
    let server = format!("'{}' '{SCRIPT}' hostile-text", *PYTHON);
    let out = Command::new(program(workspace_bins::CLI))
        .args(["--stdio", &server])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the CLI runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// Issue 20: every server-supplied string the CLI shows has its control characters written
/// out. Printed raw, the server's "\n ESC[1A ESC[2K ESC[32m ok: signed in" erased the real line
/// and printed a fake success. Also: one line per tool, app-only tools marked, "(none)" for an
/// empty list, and a capability the server lacks named instead of its `-32601`.
#[test]
fn the_cli_shows_hostile_text_with_its_controls_written_out() {
    let raw = |text: &str| text.contains(['\u{1b}', '\r']);
    let (code, tools, _) = cli_against_hostile_text(&["tools"]);
    assert_eq!(code, 0);
    assert!(!raw(&tools), "{tools:?}");
    let lines: Vec<&str> = tools.lines().collect();
    assert_eq!(lines.len(), 3, "one line per tool: {tools:?}");
    assert!(lines[1].contains("first line …"), "{tools:?}");
    assert!(lines[2].contains("[app only]"), "{tools:?}");
    assert!(lines[2].contains("denied\\r\\u{1b}[2K"), "{tools:?}");

    let (code, info, _) = cli_against_hostile_text(&["info"]);
    assert_eq!(code, 0);
    assert!(
        !raw(&info) && info.contains("hostile\\n\\u{1b}[1A"),
        "{info:?}"
    );

    let (code, out, err) = cli_against_hostile_text(&["call", "viewer"]);
    assert_eq!(code, 1, "{out:?} {err:?}");
    assert!(!raw(&err) && err.trim().lines().count() == 1, "{err:?}");
    assert!(err.contains("denied\\n\\u{1b}[1A"), "{err:?}");

    let (code, prompts, _) = cli_against_hostile_text(&["prompts"]);
    assert_eq!((code, prompts.trim()), (0, "(none)"));

    let (code, _, err) = cli_against_hostile_text(&["resources"]);
    assert_eq!(code, 1);
    assert!(err.contains("the server offers no resources"), "{err:?}");
}
