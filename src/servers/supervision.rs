//! One server's supervision as a plain state machine: no actix, no I/O, no clock (time is
//! passed in). [`Servers`](super::Servers) feeds it what happened and does what it answers.
//!
//! ```text
//!  Idle ──start──▶ Starting ──connected──▶ Ready
//!                     ▲  │failed             │ended / probe failed
//!                     │  ▼                   ▼
//!                 BackingOff(until) ◀────────┘     (a start of the cap's window over:
//!                     │                              Failed, until restart)
//!  stop from anywhere ─▶ Stopped ──start──▶ Starting
//! ```
//!
//! Every failed connect and every end of a ready connection counts against the restart cap:
//! more than `max_restarts` within `window` and the server is `Failed` until someone restarts
//! it explicitly. Delays grow (0.5 s doubling to 30 s by default) and go back to the start once
//! a connection has stayed up for a whole window.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use backon::BackoffBuilder;

use crate::error::Error;

/// How a failing server is restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Failures (failed connects, or ends of a ready connection) tolerated within `window`;
    /// one more and the server is left `failed`.
    pub max_restarts: u32,
    /// The window of `max_restarts`.
    pub window: Duration,
    /// The first delay before a restart.
    pub min_delay: Duration,
    /// The longest delay before a restart.
    pub max_delay: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            max_restarts: 5,
            window: Duration::from_secs(60),
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Where a server is, as reported by [`Servers::status`](super::Servers::status).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Status {
    /// Configured, never started (servers start on first use, or with
    /// [`Servers::start_all`](super::Servers::start_all)).
    Idle,
    /// A connect is under way.
    Starting,
    /// Connected.
    Ready,
    /// The last start failed or the connection ended; the next start is at `until`.
    BackingOff {
        /// When the next start begins.
        until: Instant,
        /// Why the last one failed or ended.
        error: Error,
    },
    /// Restarted too often ([`RestartPolicy`]); not started again until
    /// [`Servers::restart`](super::Servers::restart).
    Failed {
        /// How many starts failed or ended within the window.
        restarts: u32,
        /// The window of the restart cap.
        window: Duration,
        /// The last failure.
        last: Error,
    },
    /// Stopped by [`Servers::stop`](super::Servers::stop) or
    /// [`Servers::stop_server`](super::Servers::stop_server).
    Stopped,
    /// `enabled: false` in the configuration: never started.
    Disabled,
}

impl Status {
    /// The status as one word: `idle`, `starting`, `ready`, `backing-off`, `failed`,
    /// `stopped`, `disabled`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Starting => "starting",
            Status::Ready => "ready",
            Status::BackingOff { .. } => "backing-off",
            Status::Failed { .. } => "failed",
            Status::Stopped => "stopped",
            Status::Disabled => "disabled",
        }
    }

    /// The last error, for the statuses that have one.
    pub fn error(&self) -> Option<&Error> {
        match self {
            Status::BackingOff { error, .. } | Status::Failed { last: error, .. } => Some(error),
            _ => None,
        }
    }
}

/// What supervision answers to a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Start again at this instant.
    RestartAt(Instant),
    /// Do nothing: the server is failed, stopped or disabled.
    Nothing,
}

/// One server's supervision.
#[derive(Debug)]
pub(crate) struct Supervision {
    status: Status,
    policy: RestartPolicy,
    /// When each counted failure happened, within the current window.
    failures: VecDeque<Instant>,
    backoff: backon::ExponentialBackoff,
    /// When the connection now ready came up.
    up_since: Option<Instant>,
    /// Starts so far (connects begun).
    starts: u64,
}

impl Supervision {
    pub fn new(policy: RestartPolicy, enabled: bool) -> Self {
        Self {
            status: if enabled {
                Status::Idle
            } else {
                Status::Disabled
            },
            backoff: backoff(&policy),
            policy,
            failures: VecDeque::new(),
            up_since: None,
            starts: 0,
        }
    }

    /// Replaces the policy (the delays start over).
    pub fn set_policy(&mut self, policy: RestartPolicy) {
        self.backoff = backoff(&policy);
        self.policy = policy;
    }

    #[cfg(test)]
    pub fn policy(&self) -> &RestartPolicy {
        &self.policy
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    pub fn starts(&self) -> u64 {
        self.starts
    }

    /// A caller wants the server (first use, a scheduled restart, or an explicit start):
    /// `true` if a connect should begin now. `forced` (an explicit restart) also leaves
    /// `Failed` and `Stopped`, and forgets past failures.
    pub fn start(&mut self, now: Instant, forced: bool) -> bool {
        let begin = match &self.status {
            Status::Idle => true,
            Status::BackingOff { until, .. } => forced || now >= *until,
            Status::Failed { .. } | Status::Stopped => forced,
            Status::Starting | Status::Ready | Status::Disabled => false,
        };
        if begin {
            if forced {
                self.failures.clear();
                self.backoff = backoff(&self.policy);
            }
            self.status = Status::Starting;
            self.starts += 1;
        }
        begin
    }

    /// The connect begun by the last `start` succeeded.
    pub fn connected(&mut self, now: Instant) {
        if matches!(self.status, Status::Starting) {
            self.status = Status::Ready;
            self.up_since = Some(now);
        }
    }

    /// The connect begun by the last `start` failed.
    pub fn connect_failed(&mut self, error: Error, now: Instant) -> Next {
        if !matches!(self.status, Status::Starting) {
            return Next::Nothing;
        }
        self.failure(error, now, false)
    }

    /// The ready connection ended (the server exited, its session ended, a probe failed).
    pub fn ended(&mut self, error: Error, now: Instant) -> Next {
        if !matches!(self.status, Status::Ready) {
            return Next::Nothing;
        }
        // Up for a whole window: a fresh start for the delays.
        if self
            .up_since
            .is_some_and(|up| now.saturating_duration_since(up) >= self.policy.window)
        {
            self.backoff = backoff(&self.policy);
        }
        self.up_since = None;
        self.failure(error, now, true)
    }

    /// Stopped on purpose: no restart until the next `start`.
    pub fn stop(&mut self) {
        if !matches!(self.status, Status::Disabled) {
            self.status = Status::Stopped;
            self.up_since = None;
        }
    }

    fn failure(&mut self, error: Error, now: Instant, ended: bool) -> Next {
        while self
            .failures
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= self.policy.window)
        {
            self.failures.pop_front();
        }
        self.failures.push_back(now);
        let first = self.failures.len() == 1;
        if self.failures.len() > self.policy.max_restarts as usize {
            self.status = Status::Failed {
                restarts: u32::try_from(self.failures.len()).unwrap_or(u32::MAX),
                window: self.policy.window,
                last: error,
            };
            return Next::Nothing;
        }
        // The first end of a connection that was up (no failure within the window) restarts
        // at once; failures in a row wait longer and longer.
        let delay = if first && ended {
            Duration::ZERO
        } else {
            self.backoff.next().unwrap_or(self.policy.max_delay)
        };
        let until = now + delay;
        self.status = Status::BackingOff { until, error };
        Next::RestartAt(until)
    }
}

fn backoff(policy: &RestartPolicy) -> backon::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone() -> Error {
        Error::Protocol("gone".into())
    }

    #[test]
    fn a_failed_start_backs_off_with_growing_delays() {
        let mut s = Supervision::new(RestartPolicy::default(), true);
        let t0 = Instant::now();
        assert!(s.start(t0, false));
        let Next::RestartAt(first) = s.connect_failed(gone(), t0) else {
            panic!("no restart");
        };
        assert_eq!(first - t0, Duration::from_millis(500));
        assert!(
            !s.start(t0 + Duration::from_millis(100), false),
            "too early"
        );
        assert!(s.start(first, false));
        let Next::RestartAt(second) = s.connect_failed(gone(), first) else {
            panic!("no restart");
        };
        assert_eq!(second - first, Duration::from_secs(1));
    }

    #[test]
    fn restarts_stop_at_the_cap_until_forced() {
        let policy = RestartPolicy {
            max_restarts: 2,
            ..RestartPolicy::default()
        };
        let mut s = Supervision::new(policy, true);
        let mut now = Instant::now();
        for _ in 0..2 {
            assert!(s.start(now, false));
            s.connected(now);
            match s.ended(gone(), now) {
                Next::RestartAt(at) => now = at,
                Next::Nothing => panic!("gave up too early"),
            }
        }
        assert!(s.start(now, false));
        assert_eq!(s.connect_failed(gone(), now), Next::Nothing);
        assert!(matches!(s.status(), Status::Failed { restarts: 3, .. }));
        assert!(!s.start(now + Duration::from_secs(3600), false));
        assert!(s.start(now, true), "an explicit restart starts it again");
    }

    #[test]
    fn stopped_and_disabled_servers_do_not_start_by_themselves() {
        let mut s = Supervision::new(RestartPolicy::default(), true);
        let now = Instant::now();
        s.start(now, false);
        s.connected(now);
        s.stop();
        assert_eq!(s.ended(gone(), now), Next::Nothing);
        assert!(!s.start(now, false));
        let mut d = Supervision::new(RestartPolicy::default(), false);
        assert!(!d.start(now, true));
        assert!(matches!(d.status(), Status::Disabled));
    }
}
