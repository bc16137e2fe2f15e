//! A small, fast MCP server speaking newline-delimited JSON-RPC 2.0 over stdio.
//!
//! It is the real child process behind the library's integration tests, demo and
//! benchmark. It deliberately shares no code with the library, so a protocol bug in the
//! library cannot be hidden by the same bug on this side.
//!
//! Design:
//! - one reader task parses stdin line by line and never waits for a handler: instant
//!   requests are answered inline, anything that sleeps runs in its own local task;
//! - one writer owns stdout and writes every line queued so far as one batch;
//! - all protocol work runs on one thread (`current_thread` runtime + `LocalSet`), so
//!   state is a plain `RefCell` behind an `Rc`, with no locks.
//!
//! Besides tools it serves small fixed resources (`demo://...`), two prompts, completions
//! and logging, with `*/list` pagination shaped by `--page-size` / `--cursor-mode` so a
//! client's cursor handling (cycles, endless cursors) can be tested.
//!
//! tokio's `io-std` feature is not enabled for this crate, so the blocking stdio calls
//! live on two plain OS threads: one reads raw stdin chunks into a small bounded channel
//! (a paused reader therefore backs the pipe up, as with direct reads), the other is the
//! writer. Both threads only move bytes; all parsing and state stay on the runtime.
//!
//! Modules: `args` (the command line), `stdio` (the two threads and the line splitting),
//! `jsonrpc` (messages and error codes), `server` (state, dispatch of each line, cancellation,
//! the MCP methods), `tools` (every tool), `tasks` (2025-11-25 tasks: `task_sleep`,
//! `task_required`, `task_input`, `tasks/get|result|cancel|list`, and the 2026-07-28 tasks
//! extension with `tasks/update`),
//! `listen` (`subscriptions/listen` for `notifications/tasks`, 2026-07-28),
//! `catalog` (resources, prompts, completion), `stats` (the counters), `journal` (the record of
//! every line read, SIGTERM), `http` (`--http ADDR`).
//!
//! Tasks: `initialize` declares `capabilities.tasks` (`list`, `cancel`, `requests.tools.call`);
//! a `tools/call` of `task_sleep` (taskSupport `optional`), `task_required` or `task_input`
//! (`required`) with `params.task: {ttl?}` is answered at once with `{task}` and runs on its own.
//! `task_input` stops midway in `input_required` (asked with `elicitation/create` during
//! `tasks/result`; 2026-07-28: `inputRequests` in `tasks/get`, answered by `tasks/update`). The
//! `stats` tool counts tasks (`tasks.{created,working,input_required,completed,failed,
//! cancelled}`; `working` and `input_required` are current counts), `task_cancels`,
//! `task_cancels_unknown_or_terminal`, `cancels_for_tasks` (forbidden `notifications/cancelled`
//! naming a task-creating request), `task_gets`, `task_results`, `task_lists`, `task_updates`
//! and `task_inputs_answered` (accept/decline/cancel answers applied, either era).
//!
//! `subscriptions/listen {notifications: {taskIds}}` (modern and dual eras, with the tasks
//! extension declared) stays open and carries `notifications/tasks` for the tasks listed, until
//! cancelled; `stats` counts `listens` (received), `listens_open` and `task_notifications`.

mod args;
mod catalog;
mod http;
mod journal;
mod jsonrpc;
mod listen;
mod results;
mod server;
mod skills;
mod stats;
mod stdio;
mod tasks;
mod tools;

use std::{cell::RefCell, ffi::OsString, process::ExitCode, rc::Rc};

use clap::Parser;
use tokio::{
    sync::mpsc,
    task::{spawn_local, LocalSet},
};

use crate::{
    args::Cli,
    journal::Journal,
    server::Server,
    stdio::{spawn_stdin_reader, spawn_thread, write_loop},
    tools::tool_list,
};

const SERVER_NAME: &str = "actix-mcp-demo-server";
const SERVER_VERSION: &str = "0.1.0";
const INSTRUCTIONS: &str = "Demo server for actix-mcp: echo, add, sleep and test tools.";
/// Versions echoed back when the client asks for them; anything else gets the latest.
const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const LATEST_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";

fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// Parses `args` (program name first, as `std::env::args_os()`) and runs the server
/// until stdin reaches EOF.
fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // `--help` and `--version` come through here too, with exit code 0.
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("mcp-demo-server: cannot build tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Caught before anything else happens, so a SIGTERM sent right after spawn is journalled.
    let sigterm = if cli.ignore_sigterm {
        let _guard = runtime.enter();
        match journal::catch_sigterm() {
            Ok(sigterm) => Some(sigterm),
            Err(err) => {
                eprintln!("{SERVER_NAME}: cannot install SIGTERM handler: {err}");
                None
            }
        }
    } else {
        None
    };
    let journal = match Journal::create(cli.journal.as_deref()) {
        Ok(journal) => journal,
        Err(err) => {
            eprintln!("mcp-demo-server: cannot create journal: {err}");
            return ExitCode::from(2);
        }
    };
    let local = LocalSet::new();
    let code = local.block_on(&runtime, run(cli, journal, sigterm));
    {
        // Abandoned tasks (running sleeps) are dropped inside the runtime context.
        let _guard = runtime.enter();
        drop(local);
    }
    // Nothing blocking should be left in tokio's pool, but never hang on the way out.
    runtime.shutdown_background();
    code
}

async fn run(cli: Cli, journal: Journal, sigterm: Option<journal::Sigterm>) -> ExitCode {
    let journal = Rc::new(journal);
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let threads = spawn_thread("mcp-demo-stdout", move || write_loop(out_rx))
        .and_then(|()| spawn_stdin_reader());
    let stdin = match threads {
        Ok(stdin) => stdin,
        Err(err) => {
            eprintln!("{SERVER_NAME}: cannot start stdio threads: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(sigterm) = sigterm {
        spawn_local(journal::watch_sigterm(sigterm, Rc::clone(&journal)));
    }
    eprintln!(
        "{SERVER_NAME} {SERVER_VERSION}: ready (pid {})",
        std::process::id()
    );

    let http_addr = cli.http.clone();
    let list_ttl_ms = cli.list_ttl_ms;
    let server = Rc::new(Server {
        http: http_addr.as_ref().and_then(|_| http::routes()),
        cli,
        journal,
        out: out_tx,
        state: RefCell::default(),
        modern_tools: crate::results::Modern::cacheable(&tool_list(list_ttl_ms), list_ttl_ms),
        tools: tool_list(list_ttl_ms),
    });
    if let Some(addr) = http_addr {
        return http::serve(server, &addr).await;
    }
    let code = server.read_loop(stdin).await;

    server.journal.record(b"#EOF");
    // Whatever was answered before EOF must still reach the client.
    server.flush().await;
    if server.cli.linger_after_eof {
        eprintln!("{SERVER_NAME}: stdin closed, lingering (--linger-after-eof)");
        std::future::pending::<()>().await;
    }
    code
}
