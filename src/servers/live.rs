//! The routed calls in flight, for an inspector: which server and tool, since when, the last
//! progress, and a way to cancel each; and per server and tool, the calls that ended: how
//! many, how many failed or were cancelled, and their durations' p50 and p99 (over the last
//! [`DURATIONS_KEPT`]). Kept only once [`Servers::track_calls`] is on (an inspector turns it
//! on), so a manager nobody inspects pays nothing.
//!
//! [`Servers::track_calls`]: super::Servers::track_calls

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use crate::{cancellation::Cancellation, protocol::notifications::Progress};

/// One routed call in flight, as [`Servers::calls_in_flight`](super::Servers::calls_in_flight)
/// reports it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallInFlight {
    /// The manager's number for the call (never reused), to cancel it with
    /// [`Servers::cancel_call`](super::Servers::cancel_call).
    pub id: u64,
    /// The tool's name as the caller gave it.
    pub tool: String,
    /// The server it was routed to; `None` while the server is being found or started.
    pub server: Option<String>,
    /// When the call started.
    pub started: SystemTime,
    /// How long it has been running.
    pub elapsed: Duration,
    /// The last progress the server reported, if any.
    pub progress: Option<Progress>,
}

struct Live {
    tool: String,
    server: Option<String>,
    /// The tool's name on its server, once routed.
    routed_tool: Option<String>,
    started: (Instant, SystemTime),
    progress: Option<Progress>,
    stop: Cancellation,
}

/// The durations kept per server and tool for the percentiles.
pub const DURATIONS_KEPT: usize = 1024;

/// The calls to one tool of one server that ended, as
/// [`Servers::tool_stats`](super::Servers::tool_stats) reports them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolStats {
    /// The server the calls were routed to.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// Calls that ended, whatever their outcome.
    pub calls: u64,
    /// Of them, failed (an error other than a cancel, or a tool's `isError` result).
    pub errors: u64,
    /// Of them, cancelled (by a token, the inspector, a timeout, or dropped).
    pub cancels: u64,
    /// The median duration, over the last calls kept.
    pub p50: Duration,
    /// The 99th percentile of the durations, over the last calls kept.
    pub p99: Duration,
}

#[derive(Default)]
struct Ended {
    calls: u64,
    errors: u64,
    cancels: u64,
    durations: VecDeque<Duration>,
}

/// How a routed call ended, for the tool's figures.
pub(crate) enum Outcome {
    Answered { tool_error: bool },
    Failed,
    Cancelled,
}

#[derive(Default)]
pub(crate) struct LiveCalls {
    next: u64,
    calls: BTreeMap<u64, Live>,
    ended: BTreeMap<(String, String), Ended>,
}

pub(crate) type Shared = Arc<Mutex<LiveCalls>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, LiveCalls> {
    // A panic elsewhere while holding it leaves a table that is still consistent.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A call's place in the table: it leaves the table when the call ends or is dropped.
pub(crate) struct Registration {
    shared: Shared,
    id: u64,
    /// Set once its outcome was recorded; dropped without one, it was cancelled.
    finished: std::sync::atomic::AtomicBool,
}

pub(crate) fn register(shared: &Shared, tool: &str, stop: Cancellation) -> Registration {
    let mut live = lock(shared);
    live.next += 1;
    let id = live.next;
    live.calls.insert(
        id,
        Live {
            tool: tool.to_owned(),
            server: None,
            routed_tool: None,
            started: (Instant::now(), SystemTime::now()),
            progress: None,
            stop,
        },
    );
    Registration {
        shared: shared.clone(),
        id,
        finished: std::sync::atomic::AtomicBool::new(false),
    }
}

impl Registration {
    pub(crate) fn routed_to(&self, server: &str, tool: &str) {
        if let Some(call) = lock(&self.shared).calls.get_mut(&self.id) {
            call.server = Some(server.to_owned());
            call.routed_tool = Some(tool.to_owned());
        }
    }

    /// The call ended so: counted for its server's tool (once routed).
    pub(crate) fn finished(&self, outcome: Outcome) {
        self.finished
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut live = lock(&self.shared);
        let Some(call) = live.calls.get(&self.id) else {
            return;
        };
        let (Some(server), Some(tool)) = (call.server.clone(), call.routed_tool.clone()) else {
            return;
        };
        let key = (server, tool);
        let took = call.started.0.elapsed();
        let ended = live.ended.entry(key).or_default();
        ended.calls += 1;
        match outcome {
            Outcome::Answered { tool_error } => ended.errors += u64::from(tool_error),
            Outcome::Failed => ended.errors += 1,
            Outcome::Cancelled => ended.cancels += 1,
        }
        if ended.durations.len() == DURATIONS_KEPT {
            ended.durations.pop_front();
        }
        ended.durations.push_back(took);
    }

    /// A callback that keeps the call's last progress.
    pub(crate) fn progress_keeper(&self) -> impl FnMut(Progress) + Send + 'static {
        let shared = self.shared.clone();
        let id = self.id;
        move |progress| {
            if let Some(call) = lock(&shared).calls.get_mut(&id) {
                call.progress = Some(progress);
            }
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if !self.finished.load(std::sync::atomic::Ordering::Relaxed) {
            // Dropped by its caller before its end.
            self.finished(Outcome::Cancelled);
        }
        lock(&self.shared).calls.remove(&self.id);
    }
}

/// Every server's tools' figures, by server and tool.
pub(crate) fn tool_stats(shared: &Shared) -> Vec<ToolStats> {
    lock(shared)
        .ended
        .iter()
        .map(|((server, tool), ended)| {
            let mut sorted: Vec<Duration> = ended.durations.iter().copied().collect();
            sorted.sort_unstable();
            ToolStats {
                server: server.clone(),
                tool: tool.clone(),
                calls: ended.calls,
                errors: ended.errors,
                cancels: ended.cancels,
                p50: percentile(&sorted, 50),
                p99: percentile(&sorted, 99),
            }
        })
        .collect()
}

/// The `p`th percentile of `sorted` (nearest rank); zero when empty.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

pub(crate) fn snapshot(shared: &Shared) -> Vec<CallInFlight> {
    lock(shared)
        .calls
        .iter()
        .map(|(id, call)| CallInFlight {
            id: *id,
            tool: call.tool.clone(),
            server: call.server.clone(),
            started: call.started.1,
            elapsed: call.started.0.elapsed(),
            progress: call.progress.clone(),
        })
        .collect()
}

/// Cancels call `id` (as its own token would). `false` if it is not in flight.
pub(crate) fn cancel(shared: &Shared, id: u64, reason: &str) -> bool {
    let stop = lock(shared).calls.get(&id).map(|call| call.stop.clone());
    match stop {
        Some(stop) => {
            stop.cancel_with_reason(reason);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let ms = |n: u64| Duration::from_millis(n);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 50), ms(50));
        assert_eq!(percentile(&sorted, 99), ms(99));
        assert_eq!(percentile(&[ms(7)], 99), ms(7));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }
}
