//! One sign-in for every process sharing the credential store, as a plain state machine: each
//! method is the answer to the action it asked for (or an event), and returns the next action.
//! No I/O and no clock (time is passed in, in milliseconds): `sign_in.rs` does what the actions
//! say, `sign_in_model.rs` runs many of these against one store and one person.
//!
//! A sign-in needs a person at a browser, so processes that need one at once (three commands
//! started together after the grant was lost, replicas of a service) must not each open a
//! window: one takes the key's sign-in lease and signs in, renewing the lease while the person
//! takes their time; the others wait and adopt the token it stores. A holder that dies stops
//! renewing, so its lease ends by itself and one waiter takes over.
//!
//! ```text
//!  start ─► TryLease ─┬─ leased ─► Read ─┬─ another's token ─► Release ─► Done(Adopted)
//!                     │                  ├─ little lease left ─► Release ─► TryLease …
//!                     │                  └─ none ─► SignIn (renewing) ─► Release ─► Done
//!                     └─ held by another ─► Read ─┬─ another's token ─► Done(Adopted)
//!                                                 ├─ waited past the bound ─► Done(TimedOut)
//!                                                 └─ Sleep ─► TryLease …
//! ```

use std::time::Duration;

use backon::BackoffBuilder;

use super::{
    store::{millis, Lease},
    Credentials,
};

/// How long a sign-in lease lasts unrenewed: a holder that dies costs the others at most this.
pub(super) const SIGN_IN_LEASE_TTL: Duration = Duration::from_secs(15);

/// How often the holder renews its lease while the person signs in: a few times per lease, so
/// a late renewal or two does not lose it.
pub(super) const RENEW_EVERY: Duration = Duration::from_secs(5);

/// A sign-in begins only with this much of its lease left, so that its first renewal comes
/// well within the lease.
const START_MARGIN: Duration = Duration::from_secs(10);

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// Try to take the sign-in lease for [`SIGN_IN_LEASE_TTL`]; answer with
    /// [`SignInCoordinator::leased`].
    TryLease,
    /// Read the key's entry; answer with [`SignInCoordinator::read`].
    Read,
    /// Wait this long (another process is signing in), then answer with
    /// [`SignInCoordinator::woke`].
    Sleep(Duration),
    /// Run the sign-in, renewing the lease every [`RENEW_EVERY`] meanwhile
    /// ([`SignInCoordinator::renewal`], [`SignInCoordinator::renewed`]); answer with
    /// [`SignInCoordinator::signed_in`].
    SignIn,
    /// Release the lease; answer with [`SignInCoordinator::released`].
    Release(Lease),
    /// Finished.
    Done(Outcome),
}

/// How a coordinated sign-in ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Another process signed in (meanwhile, or just before this one took the lease): its
    /// token is used, no window is opened here.
    Adopted(Box<Credentials>),
    /// This process signed in.
    SignedIn,
    /// This process's sign-in failed (the glue has its error).
    SignInFailed,
    /// Another process held the lease and no token appeared within the wait bound.
    TimedOut,
}

#[derive(Debug)]
enum Phase {
    Leasing,
    Waiting,
    Deciding(Lease),
    SigningIn(Lease),
    Releasing(Outcome),
    Done,
}

/// One process's need of a sign-in for one key.
pub(super) struct SignInCoordinator {
    /// The access token this process was refused (or held), if any: a token in the store that
    /// is another one means someone signed in.
    refused: Option<String>,
    /// The scopes the sign-in is for: another's token is adopted only if it has them all.
    wanted: Vec<String>,
    started_ms: u64,
    wait_bound: Duration,
    phase: Phase,
    pauses: backon::ExponentialBackoff,
    /// Whether a renewal found the lease taken over (reported once).
    lost_lease: bool,
}

/// Whether `stored` holds a token someone got after `refused`: another access token, unexpired
/// at `now` (Unix seconds), with every scope `wanted`.
pub(super) fn signed_in_by_another(
    stored: &Credentials,
    refused: Option<&str>,
    wanted: &[String],
    now: u64,
) -> bool {
    let other = stored.access_token.is_some() && stored.access_token.as_deref() != refused;
    let live = stored.expires_at.is_none_or(|at| at > now);
    let scoped = wanted.iter().all(|scope| stored.scopes.contains(scope));
    other && live && scoped
}

impl SignInCoordinator {
    /// Begins at `now_ms` for a process refused `refused` (or holding no token), needing
    /// `wanted`; waiting for another process at most `wait_bound`.
    pub fn start(
        refused: Option<String>,
        wanted: Vec<String>,
        now_ms: u64,
        wait_bound: Duration,
    ) -> (Self, Action) {
        let pauses = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(1))
            .without_max_times()
            .build();
        let coordinator = Self {
            refused,
            wanted,
            started_ms: now_ms,
            wait_bound,
            phase: Phase::Leasing,
            pauses,
            lost_lease: false,
        };
        (coordinator, Action::TryLease)
    }

    /// The bound a process waits for another's sign-in: the person's time, and a lease lost to
    /// a holder that died on the way.
    pub fn wait_bound(sign_in_timeout: Duration) -> Duration {
        sign_in_timeout.saturating_add(SIGN_IN_LEASE_TTL.saturating_mul(2))
    }

    /// The answer to [`Action::TryLease`].
    pub fn leased(&mut self, lease: Option<Lease>) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Leasing => {
                self.phase = match lease {
                    Some(lease) => Phase::Deciding(lease),
                    None => Phase::Waiting,
                };
                Action::Read
            }
            other => self.unexpected(other),
        }
    }

    /// The answer to [`Action::Read`]: what the store holds now.
    pub fn read(&mut self, stored: Option<Credentials>, now_ms: u64) -> Action {
        let another = stored.filter(|stored| {
            let refused = self.refused.as_deref();
            signed_in_by_another(stored, refused, &self.wanted, now_ms / 1000)
        });
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Waiting => match another {
                Some(credentials) => self.done(Outcome::Adopted(Box::new(credentials))),
                None => self.wait(now_ms),
            },
            Phase::Deciding(lease) => match another {
                Some(credentials) => self.release(lease, Outcome::Adopted(Box::new(credentials))),
                // Too little of the lease left to renew it in time: give it back, take anew.
                None if lease.deadline_ms.saturating_sub(now_ms) < millis(START_MARGIN) => {
                    self.phase = Phase::Leasing;
                    Action::Release(lease)
                }
                None => {
                    self.phase = Phase::SigningIn(lease);
                    Action::SignIn
                }
            },
            other => self.unexpected(other),
        }
    }

    fn wait(&mut self, now_ms: u64) -> Action {
        if now_ms.saturating_sub(self.started_ms) >= millis(self.wait_bound) {
            return self.done(Outcome::TimedOut);
        }
        self.phase = Phase::Waiting;
        let pause = self.pauses.next().unwrap_or(Duration::from_secs(1));
        Action::Sleep(pause)
    }

    /// The answer to [`Action::Sleep`].
    pub fn woke(&mut self) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Waiting => {
                self.phase = Phase::Leasing;
                Action::TryLease
            }
            other => self.unexpected(other),
        }
    }

    /// [`RENEW_EVERY`] passed during [`Action::SignIn`]: the lease to renew, if one is held.
    pub fn renewal(&self) -> Option<Lease> {
        match &self.phase {
            Phase::SigningIn(lease) if !self.lost_lease => Some(lease.clone()),
            _ => None,
        }
    }

    /// The answer to a renewal: the renewed lease, or `None` if it was taken over (this process
    /// stalled past its deadline). The sign-in carries on (the person is at it); `true` the
    /// first time the lease is found lost, to report it.
    pub fn renewed(&mut self, renewed: Option<Lease>) -> bool {
        let Phase::SigningIn(lease) = &mut self.phase else {
            return false;
        };
        match renewed {
            Some(renewed) => {
                *lease = renewed;
                false
            }
            None => !std::mem::replace(&mut self.lost_lease, true),
        }
    }

    /// The answer to [`Action::SignIn`]: whether the sign-in succeeded (and stored its token).
    pub fn signed_in(&mut self, succeeded: bool) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::SigningIn(lease) => {
                let outcome = if succeeded {
                    Outcome::SignedIn
                } else {
                    Outcome::SignInFailed
                };
                self.release(lease, outcome)
            }
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

    /// An answer to an action that was not asked: the glue has a bug; end without a sign-in.
    fn unexpected(&mut self, phase: Phase) -> Action {
        tracing::error!(?phase, "sign-in coordination out of order");
        self.done(Outcome::SignInFailed)
    }
}
