//! The coordinated refresh of one process: the lease protocol (`lease.rs`) with a refresh as its
//! job, plain (no I/O, time passed in). What is the refresh's own: when the store's entry makes
//! it unnecessary, which refresh token is sent, and what is written after. `refresh.rs` does
//! what the actions say, `refresh_model.rs` runs many of these against one store and a provider
//! that rotates refresh tokens.
//!
//! ```text
//!  start ─► TryLease ─┬─ leased ─► Read ─► decide ─┬─ Adopt / SignIn ─────────► Release ─► Done
//!                     │                            └─ Refresh ─► refreshed ─► Write ─► Release
//!                     └─ held by another ─► Read ─┬─ another's token ─► Done (adopted)
//!                                                 └─ not yet ─► Sleep ─► TryLease …  (bounded)
//! ```

use std::time::Duration;

use super::{
    lease::{self, LeaseJob, LeaseProtocol, Step},
    vocabulary::needs_refresh,
    Credentials,
};

/// How long a refresh lease lasts: a holder that dies costs the others at most this.
pub(super) const LEASE_TTL: Duration = Duration::from_secs(15);

/// The token request's own bound, and how much of the lease must be left to send one.
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

/// The work done under the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Work {
    /// Send a refresh with these credentials' refresh token; answer with
    /// [`Coordinator::refreshed`] or [`Coordinator::refresh_failed`].
    Refresh(Credentials),
    /// Write these credentials under the lease; answer with [`Coordinator::written`].
    Write(Credentials),
}

/// What to do next.
pub(super) type Action = lease::Action<Work, Outcome>;

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

/// A refresh, as the lease protocol's job.
pub(super) struct Refresh {
    /// What this process holds (the token that is expiring).
    held: Credentials,
    /// The credentials whose refresh token was sent.
    sent: Option<Credentials>,
    /// How the refresh ends once its result is written.
    ending: Option<Outcome>,
}

impl LeaseJob for Refresh {
    type Work = Work;
    type Outcome = Outcome;

    fn adopt(&self, stored: Credentials, now_ms: u64) -> Option<Outcome> {
        refreshed_by_another(&self.held, &stored, now_ms / 1000).then_some(Outcome::Adopted(stored))
    }

    fn decide(&mut self, stored: Option<Credentials>, now_ms: u64) -> Step<Work, Outcome> {
        match decide(&self.held, stored.as_ref(), now_ms / 1000) {
            Decision::Adopt(credentials) => Step::End(Outcome::Adopted(credentials)),
            Decision::SignIn => Step::End(Outcome::SignIn { lost: false }),
            Decision::Refresh(base) => {
                self.sent = Some(base.clone());
                Step::Work(Work::Refresh(base))
            }
        }
    }

    /// A refresh is only sent with at least its request's bound left of the lease, so a live
    /// holder has written (or given up) before its lease can be taken over.
    fn margin(&self) -> Duration {
        REFRESH_REQUEST_TIMEOUT
    }

    fn timed_out(&self) -> Outcome {
        Outcome::TimedOut
    }

    fn out_of_order(&self) -> Outcome {
        Outcome::Failed
    }
}

/// One process's refresh of one key.
pub(super) type Coordinator = LeaseProtocol<Refresh>;

impl Coordinator {
    /// Begins at `now_ms`, holding `held`.
    pub fn start(held: Credentials, now_ms: u64) -> (Self, Action) {
        let job = Refresh {
            held,
            sent: None,
            ending: None,
        };
        let pauses = (Duration::from_millis(50), Duration::from_millis(500));
        Self::begin(job, now_ms, WAIT_BOUND, pauses)
    }

    /// The answer to [`Work::Refresh`].
    pub fn refreshed(&mut self, answer: Answer) -> Action {
        let Some(base) = self.job.sent.take() else {
            return self.worked(Step::End(Outcome::Failed));
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
        self.job.ending = Some(outcome);
        self.worked(Step::Work(Work::Write(write)))
    }

    /// [`Work::Refresh`] failed without an answer (the provider unreachable, a timeout).
    pub fn refresh_failed(&mut self) -> Action {
        self.job.sent = None;
        self.worked(Step::End(Outcome::Failed))
    }

    /// The answer to [`Work::Write`] (refused or not: the token is still this process's to
    /// use).
    pub fn written(&mut self) -> Action {
        let outcome = self.job.ending.take().unwrap_or(Outcome::Failed);
        self.worked(Step::End(outcome))
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
