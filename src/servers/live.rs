//! The routed calls in flight, for an inspector: which server and tool, since when, the last
//! progress, and a way to cancel each. Kept only once [`Servers::track_calls`] is on (an
//! inspector turns it on), so a manager nobody inspects pays nothing.
//!
//! [`Servers::track_calls`]: super::Servers::track_calls

use std::{
    collections::BTreeMap,
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
    started: (Instant, SystemTime),
    progress: Option<Progress>,
    stop: Cancellation,
}

#[derive(Default)]
pub(crate) struct LiveCalls {
    next: u64,
    calls: BTreeMap<u64, Live>,
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
            started: (Instant::now(), SystemTime::now()),
            progress: None,
            stop,
        },
    );
    Registration {
        shared: shared.clone(),
        id,
    }
}

impl Registration {
    pub(crate) fn routed_to(&self, server: &str) {
        if let Some(call) = lock(&self.shared).calls.get_mut(&self.id) {
            call.server = Some(server.to_owned());
        }
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
        lock(&self.shared).calls.remove(&self.id);
    }
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
