//! The three clients under test, behind one small trait the scenarios are written against.

pub mod actix;
pub mod raw;
pub mod rmcp;

use std::{
    future::Future,
    time::{Duration, Instant},
};

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
}

/// A server started in its HTTP mode: killed when dropped.
pub struct HttpServer {
    child: std::process::Child,
    pub url: String,
}

impl HttpServer {
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

    /// `tools/call task_sleep {ms}` run as a task, cancelled through the client's explicit API
    /// (`tasks/cancel`); `None` for a client without tasks.
    #[allow(clippy::type_complexity)]
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
