//! The three clients under test, behind one small trait the scenarios are written against.

pub mod actix;
pub mod raw;
pub mod raw_http;
pub mod rmcp;

use std::{
    future::Future,
    time::{Duration, Instant},
};

use futures::future::LocalBoxFuture;
use serde_json::Value;

/// How to start the server under test.
#[derive(Clone, Debug)]
pub struct ServerCmd {
    pub program: String,
    pub args: Vec<String>,
    /// Run it as a Streamable HTTP server (`--http 127.0.0.1:0`, the demo server's HTTP mode)
    /// and connect over HTTP instead of stdio.
    pub http: bool,
    /// Over HTTP/2 without TLS (h2c, prior knowledge) rather than HTTP/1.1.
    pub http2: bool,
    /// The protocol era asked for (`--era`; it is passed to the server as well); `None`: each
    /// client's default.
    pub era: Option<Era>,
}

/// A protocol era, for the server (`--era`) and the clients that can pick one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Era {
    /// 2025-11-25: `initialize`, cancel by `notifications/cancelled`.
    Legacy,
    /// 2026-07-28: `server/discover`, stateless; over HTTP a cancel aborts the request's POST.
    Modern,
}

impl Era {
    pub fn name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// A server started in its HTTP mode: killed when dropped.
pub struct HttpServer {
    child: std::process::Child,
    pub url: String,
}

impl HttpServer {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(server: &ServerCmd) -> Result<Self, String> {
        use std::io::{BufRead, BufReader};
        let mut child = std::process::Command::new(&server.program)
            .args(&server.args)
            .args(["--http", "127.0.0.1:0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server.program))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let port = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(port) = line.strip_prefix("LISTENING ") {
                        break port.trim().to_owned();
                    }
                }
                _ => return Err("the HTTP server did not report its port".into()),
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Ok(Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        })
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a cancellable sleep call reports when it ends.
pub struct SleepOutcome {
    pub cancelled: bool,
    /// When the caller learned the outcome.
    pub seen_at: Instant,
    /// For clients whose cancel call is itself asynchronous (rmcp): how long it took.
    pub cancel_call: Option<Duration>,
}

/// One client library, driven by the scenarios. Futures are polled in one task (no spawning),
/// so the same scenario code runs on any runtime and with non-`Send` futures.
pub trait Driver: Sized {
    /// The handle the scenario uses to cancel one call explicitly.
    type Cancel;

    fn connect(server: &ServerCmd) -> impl Future<Output = Result<Self, String>>;

    /// `tools/call echo {text}`, checking the answer.
    fn echo(&self, text: &str) -> impl Future<Output = Result<(), String>> + 'static;

    /// `tools/call sleep {ms}`; the future is dropped to cancel it.
    fn sleep(&self, ms: u64) -> impl Future<Output = Result<(), String>> + 'static;

    /// `tools/call sleep {ms}` that the scenario cancels through the client's explicit API.
    fn sleep_cancellable(
        &self,
        ms: u64,
    ) -> (Self::Cancel, impl Future<Output = SleepOutcome> + 'static);

    /// The explicit cancel call. Must not wait for I/O if the client can help it.
    fn cancel(&self, handle: &Self::Cancel);

    /// The server's counters (`stats` tool).
    fn stats(&self) -> impl Future<Output = Result<Value, String>>;

    /// Scenario `soak`: one call carried out to `plan`'s end (`None`: this client cannot).
    /// [`SoakPlan::Drop`] is the scenario's own business (it drops a [`Driver::sleep`]).
    fn soak_call(&self, _plan: SoakPlan) -> Option<LocalBoxFuture<'static, SoakOutcome>> {
        None
    }

    /// Scenario `soak`: the client's own counters and how it cancels (`None`: not exposed).
    fn soak_counters(&self) -> LocalBoxFuture<'_, Option<ClientCounters>> {
        Box::pin(async { None })
    }

    /// `tools/call task_sleep {ms}` run as a task, cancelled through the client's explicit API
    /// (`tasks/cancel`); `None` for a client without tasks.
    #[allow(
        clippy::type_complexity,
        reason = "a boxed future of a boxed future, said once"
    )]
    fn task_cancellable(
        &self,
        _ms: u64,
    ) -> Option<(
        Self::Cancel,
        std::pin::Pin<Box<dyn Future<Output = SleepOutcome>>>,
    )> {
        None
    }
}

/// A soak request meant to be cancelled sleeps this long: no answer can race its cancel, and one
/// whose cancel is lost is still running at the server at the end of the run.
pub const SOAK_LONG_SLEEP_MS: u64 = 600_000;

/// How one request of scenario `soak` is to end, chosen by the scenario's seeded generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoakPlan {
    /// `echo` of a text unique to the request: completes with that text.
    Echo(u64),
    /// A short `sleep`: completes with `slept {ms} ms`.
    Sleep(u64),
    /// A long `sleep`, cancelled through a token once it runs at the server (its first progress
    /// notification proves it): ends `Cancelled`.
    Token,
    /// A long `sleep` whose future is dropped this many ms after its first poll (0: right after it).
    Drop(u64),
    /// A long `sleep` with a per-call timeout of this many ms: ends `Timeout`.
    Timeout(u64),
    /// A long `sleep` with a token cancelled before the call: ends `Cancelled` at its first
    /// poll, nothing written.
    PreCancelled,
}

/// What the caller of a soak request saw.
#[derive(Debug)]
pub enum SoakOutcome {
    /// A result, with its text.
    Ok(String),
    Cancelled,
    Timeout,
    /// Another error, in words.
    Failed(String),
    /// A pre-cancelled call that was not over at its first poll.
    NotAtOnce,
}

/// The client's own counters (scenario `soak`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientCounters {
    /// Requests in the client's tables.
    pub in_flight: u64,
    pub requests_written: u64,
    pub cancelled_before_write: u64,
    /// Of `requests_written`, those cancelled while the transport held them (nothing of them
    /// reached the server); also in `cancelled_before_write`.
    pub cancelled_while_held: u64,
    /// `notifications/cancelled` written.
    pub cancels_sent: u64,
    /// Written requests cancelled by aborting them (2026-07-28 over HTTP).
    pub requests_aborted: u64,
    pub late_responses: u64,
    /// Whether a written request is cancelled by aborting it rather than by a notification.
    pub cancels_by_abort: bool,
    /// Over HTTP (each message its own POST) rather than one stream.
    pub http: bool,
    /// Over HTTP/2 (one connection) rather than HTTP/1.1 (a connection per POST in flight).
    pub http2: bool,
}
