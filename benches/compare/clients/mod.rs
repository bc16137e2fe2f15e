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
}
