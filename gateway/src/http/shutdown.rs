//! The tasks around the session table that keep the gateway within its bounds: the sweeper that
//! ends idle sessions, the stop on a signal, and the connection cap under the file limit.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use super::{parking::Parking, session::SessionHandle, table::Table};

type Sessions = Arc<Mutex<Table<SessionHandle>>>;

/// How long the stop waits for the sessions to hand their owed cancels to the upstream
/// connections before the server stops anyway.
const ENDING_AT_MOST: Duration = Duration::from_millis(500);

/// Descriptors kept for the upstream servers, the log files, the listener.
const RESERVED_FILES: u64 = 256;

/// Ends the sessions idle for longer than the limit, for as long as the gateway runs.
pub async fn sweep(sessions: Sessions) {
    let idle = lock(&sessions).limits().idle;
    let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    loop {
        actix_rt::time::sleep(every).await;
        let expired = lock(&sessions).expire(Instant::now());
        if !expired.is_empty() {
            tracing::debug!(expired = expired.len(), "idle downstream sessions ended");
        }
        for session in expired {
            actix_rt::spawn(async move {
                session
                    .end("the downstream session was idle too long")
                    .await;
            });
        }
    }
}

/// On SIGTERM or SIGINT: every session ends (its calls cancelled upstream), every call waiting
/// for its input too, then the server stops without waiting for the POSTs still open (their
/// stateless calls are dropped, which cancels them).
pub async fn on_signal(server: actix_web::dev::ServerHandle, sessions: Sessions, parking: Parking) {
    signalled().await;
    let ending = lock(&sessions).stop();
    tracing::info!(sessions = ending.len(), "stopping");
    let ends = ending
        .iter()
        .map(|session| session.end("the gateway is stopping"));
    let ended = actix_rt::time::timeout(ENDING_AT_MOST, futures::future::join_all(ends)).await;
    if ended.is_err() {
        tracing::warn!("sessions still ending at the stop");
    }
    parking.stop();
    server.stop(false).await;
}

async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut interrupt)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = interrupt.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// The connections the gateway takes at once: its file limit (raised to the hard limit) less
/// what it keeps for itself, two descriptors each (the connection's and its watcher's).
pub fn connections_allowed() -> usize {
    #[cfg(unix)]
    {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let raised = setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok();
            let files = if raised { hard } else { soft };
            let allowed = files.saturating_sub(RESERVED_FILES) / 2;
            return usize::try_from(allowed)
                .unwrap_or(usize::MAX)
                .clamp(16, 1 << 20);
        }
    }
    25_000
}

fn lock(sessions: &Sessions) -> std::sync::MutexGuard<'_, Table<SessionHandle>> {
    sessions.lock().unwrap_or_else(PoisonError::into_inner)
}
