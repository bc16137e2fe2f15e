//! The coordinated refresh of one process, as a plain state machine: each method is the answer
//! to the action it asked for, and returns the next one. No I/O and no clock (time is passed
//! in, in milliseconds): `refresh.rs` does what the actions say, `refresh_model.rs` runs many
//! of these against one store and a provider that rotates refresh tokens.
//!
//! ```text
//!  start ─► TryLease ─┬─ leased ─► Read ─► decide ─┬─ Adopt / SignIn ─────────► Release ─► Done
//!                     │                            └─ Refresh ─► refreshed ─► Write ─► Release
//!                     └─ held by another ─► Read ─┬─ another's token ─► Done (adopted)
//!                                                 └─ not yet ─► Sleep ─► TryLease …  (bounded)
//! ```

use std::time::Duration;

use backon::BackoffBuilder;

use super::{
    store::{millis, Lease},
    vocabulary::needs_refresh,
    Credentials,
};

/// How long a refresh lease lasts: a holder that dies costs the others at most this.
pub(super) const LEASE_TTL: Duration = Duration::from_secs(15);

/// The token request's own bound. A refresh is only sent with at least this much of the lease
/// left, so a live holder has written (or given up) before its lease can be taken over.
pub(super) const REFRESH_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a process waits for another's refresh: a lease, and a margin.
pub(super) const WAIT_BOUND: Duration = Duration::from_secs(25);

/// What the store's entry, read under the lease, calls for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Another process refreshed meanwhile: its token is used, nothing is sent.
    Adopt(Credentials),
    /// Refresh these credentials with their refresh token (the one just read).
    Refresh(Credentials),
    /// Nothing to refresh with: a sign-in follows.
    SignIn,
}

/// Whether `stored` holds another token than `held`, one that needs no refresh at `now`.
pub(super) fn refreshed_by_another(held: &Credentials, stored: &Credentials, now: u64) -> bool {
    let other = stored.access_token.is_some() && stored.access_token != held.access_token;
    let live = stored.expires_at.is_none_or(|at| at > now);
    other && live && !needs_refresh(stored, now)
}

/// The decision under the lease, from what the store holds now (`None`: nothing stored).
pub(super) fn decide(held: &Credentials, stored: Option<&Credentials>, now: u64) -> Decision {
    let latest = match stored {
        Some(stored) if refreshed_by_another(held, stored, now) => {
            return Decision::Adopt(stored.clone())
        }
        // The store's refresh token is the latest written: the one to send.
        Some(stored) => stored,
        // Nothing stored (a store that lost it): what is held is all there is.
        None => held,
    };
    match latest.refresh_token {
        Some(_) => Decision::Refresh(latest.clone()),
        None => Decision::SignIn,
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// Try to take the key's lease for [`LEASE_TTL`]; answer with [`Coordinator::leased`].
    TryLease,
    /// Read the key's entry; answer with [`Coordinator::read`].
    Read,
    /// Wait this long, then answer with [`Coordinator::woke`].
    Sleep(Duration),
    /// Send a refresh with these credentials' refresh token; answer with
    /// [`Coordinator::refreshed`] or [`Coordinator::refresh_failed`].
    Refresh(Credentials),
    /// Write these credentials under the lease; answer with [`Coordinator::written`].
    Write(Credentials),
    /// Release the lease; answer with [`Coordinator::released`].
    Release(Lease),
    /// Finished.
    Done(Outcome),
}

/// How a coordinated refresh ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Another process's token (it refreshed meanwhile), or one already fresh in the store.
    Adopted(Credentials),
    /// Refreshed here.
    Refreshed(Credentials),
    /// Nothing to refresh with; a sign-in follows. `lost`: the refresh token was refused
    /// (spent by a process that ended before storing its successor), now removed from the store.
    SignIn { lost: bool },
    /// Another process held the lease and no new token appeared within [`WAIT_BOUND`].
    TimedOut,
    /// The refresh request failed (the provider unreachable): the lease is released, the
    /// stored token untouched.
    Failed,
}

/// How the provider answered a refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    Granted(Box<Credentials>),
    /// The refresh token was refused (`invalid_grant`).
    Refused,
}

#[derive(Debug)]
enum Phase {
    Leasing,
    Waiting,
    Deciding(Lease),
    Refreshing(Lease, Credentials),
    Writing(Lease, Outcome),
    Releasing(Outcome),
    Done,
}

/// One process's refresh of one key.
pub(super) struct Coordinator {
    /// What this process holds (the token that is expiring).
    held: Credentials,
    started_ms: u64,
    phase: Phase,
    pauses: backon::ExponentialBackoff,
}

impl Coordinator {
    /// Begins at `now_ms`, holding `held`.
    pub fn start(held: Credentials, now_ms: u64) -> (Self, Action) {
        let pauses = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_millis(500))
            .without_max_times()
            .build();
        let coordinator = Self {
            held,
            started_ms: now_ms,
            phase: Phase::Leasing,
            pauses,
        };
        (coordinator, Action::TryLease)
    }

    /// The answer to [`Action::TryLease`].
    pub fn leased(&mut self, lease: Option<Lease>) -> Action {
        self.phase = match lease {
            Some(lease) => Phase::Deciding(lease),
            None => Phase::Waiting,
        };
        Action::Read
    }

    /// The answer to [`Action::Read`]: what the store holds now.
    pub fn read(&mut self, stored: Option<Credentials>, now_ms: u64) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Waiting => self.wait(stored, now_ms),
            Phase::Deciding(lease) => self.decide(lease, stored, now_ms),
            other => self.unexpected(other),
        }
    }

    fn wait(&mut self, stored: Option<Credentials>, now_ms: u64) -> Action {
        if let Some(stored) = stored.filter(|s| refreshed_by_another(&self.held, s, now_ms / 1000))
        {
            return self.done(Outcome::Adopted(stored));
        }
        if now_ms.saturating_sub(self.started_ms) >= millis(WAIT_BOUND) {
            return self.done(Outcome::TimedOut);
        }
        self.phase = Phase::Waiting;
        let pause = self.pauses.next().unwrap_or(Duration::from_millis(500));
        Action::Sleep(pause)
    }

    fn decide(&mut self, lease: Lease, stored: Option<Credentials>, now_ms: u64) -> Action {
        match decide(&self.held, stored.as_ref(), now_ms / 1000) {
            Decision::Adopt(credentials) => self.release(lease, Outcome::Adopted(credentials)),
            Decision::SignIn => self.release(lease, Outcome::SignIn { lost: false }),
            // Too little of the lease left for a request to end inside it: give it back and
            // take a new one.
            Decision::Refresh(_)
                if lease.deadline_ms.saturating_sub(now_ms) < millis(REFRESH_REQUEST_TIMEOUT) =>
            {
                self.phase = Phase::Leasing;
                Action::Release(lease)
            }
            Decision::Refresh(base) => {
                self.phase = Phase::Refreshing(lease, base.clone());
                Action::Refresh(base)
            }
        }
    }

    /// The answer to [`Action::Sleep`].
    pub fn woke(&mut self) -> Action {
        self.phase = Phase::Leasing;
        Action::TryLease
    }

    /// The answer to [`Action::Refresh`].
    pub fn refreshed(&mut self, answer: Answer) -> Action {
        let Phase::Refreshing(lease, base) = std::mem::replace(&mut self.phase, Phase::Done) else {
            return self.done(Outcome::Failed);
        };
        let (write, outcome) = match answer {
            Answer::Granted(updated) => (*updated.clone(), Outcome::Refreshed(*updated)),
            // Spent: removed from the store, so that no process sends it again.
            Answer::Refused => {
                let spent = Credentials {
                    access_token: None,
                    refresh_token: None,
                    expires_at: None,
                    ..base
                };
                (spent, Outcome::SignIn { lost: true })
            }
        };
        self.phase = Phase::Writing(lease, outcome);
        Action::Write(write)
    }

    /// [`Action::Refresh`] failed without an answer (the provider unreachable, a timeout).
    pub fn refresh_failed(&mut self) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Refreshing(lease, _) => self.release(lease, Outcome::Failed),
            other => self.unexpected(other),
        }
    }

    /// The answer to [`Action::Write`] (`fenced`: refused, the lease was taken over; the token
    /// is still this process's to use).
    pub fn written(&mut self) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Writing(lease, outcome) => self.release(lease, outcome),
            other => self.unexpected(other),
        }
    }

    /// The answer to [`Action::Release`].
    pub fn released(&mut self) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Releasing(outcome) => self.done(outcome),
            // A lease given back to take a longer one.
            Phase::Leasing => {
                self.phase = Phase::Leasing;
                Action::TryLease
            }
            other => self.unexpected(other),
        }
    }

    fn release(&mut self, lease: Lease, outcome: Outcome) -> Action {
        self.phase = Phase::Releasing(outcome);
        Action::Release(lease)
    }

    fn done(&mut self, outcome: Outcome) -> Action {
        self.phase = Phase::Done;
        Action::Done(outcome)
    }

    /// An answer to an action that was not asked: the glue has a bug; end without sending.
    fn unexpected(&mut self, phase: Phase) -> Action {
        tracing::error!(?phase, "refresh coordination out of order");
        self.done(Outcome::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(access: &str, refresh: Option<&str>, expires_at: u64) -> Credentials {
        Credentials {
            access_token: Some(access.into()),
            refresh_token: refresh.map(Into::into),
            expires_at: Some(expires_at),
            issued_at: Some(expires_at.saturating_sub(3_600)),
            ..Credentials::default()
        }
    }

    #[test]
    fn a_token_another_process_wrote_is_adopted() {
        let held = credentials("a1", Some("r1"), 100);
        let stored = credentials("a2", Some("r2"), 10_000);
        assert_eq!(decide(&held, Some(&stored), 100), Decision::Adopt(stored));
    }

    #[test]
    fn the_refresh_token_sent_is_the_one_just_read() {
        let held = credentials("a1", Some("r1"), 100);
        // Another process refreshed long ago; its token is expiring too: refresh with its
        // refresh token, never the one held from before.
        let stored = credentials("a2", Some("r2"), 110);
        assert_eq!(
            decide(&held, Some(&stored), 100),
            Decision::Refresh(stored.clone())
        );
        assert_eq!(
            decide(&held, Some(&held.clone()), 100),
            Decision::Refresh(held.clone())
        );
    }

    #[test]
    fn a_spent_entry_means_a_sign_in_not_a_replay() {
        let held = credentials("a1", Some("r1"), 100);
        let spent = Credentials {
            access_token: None,
            refresh_token: None,
            ..held.clone()
        };
        assert_eq!(decide(&held, Some(&spent), 100), Decision::SignIn);
    }

    #[test]
    fn with_nothing_stored_the_held_token_is_refreshed() {
        let held = credentials("a1", Some("r1"), 100);
        assert_eq!(decide(&held, None, 100), Decision::Refresh(held.clone()));
    }
}
