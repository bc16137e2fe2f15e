//! One sign-in for every process sharing the credential store: the lease protocol (`lease.rs`)
//! with a sign-in as its job, plain (no I/O, time passed in). `sign_in.rs` does what the actions
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

use super::{
    lease::{self, LeaseJob, LeaseProtocol, Step},
    Credentials,
};

/// How long a sign-in lease lasts unrenewed: a holder that dies costs the others at most this.
pub(super) const SIGN_IN_LEASE_TTL: Duration = Duration::from_secs(15);

/// How often the holder renews its lease while the person signs in: a few times per lease, so
/// a late renewal or two does not lose it.
pub(super) const RENEW_EVERY: Duration = Duration::from_secs(5);

/// How much of its lease must be left for a sign-in to begin.
const START_MARGIN: Duration = Duration::from_secs(10);

/// The work done under the lease: the sign-in, renewing the lease every [`RENEW_EVERY`]
/// meanwhile ([`LeaseProtocol::renewal`], [`LeaseProtocol::renewed`]); answer with
/// [`SignInCoordinator::signed_in`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SignIn;

/// What to do next.
pub(super) type Action = lease::Action<SignIn, Outcome>;

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

/// A sign-in, as the lease protocol's job.
pub(super) struct SignInJob {
    /// The access token this process was refused (or held), if any: a token in the store that
    /// is another one means someone signed in.
    refused: Option<String>,
    /// The scopes the sign-in is for: another's token is adopted only if it has them all.
    wanted: Vec<String>,
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

impl LeaseJob for SignInJob {
    type Work = SignIn;
    type Outcome = Outcome;

    fn adopt(&self, stored: Credentials, now_ms: u64) -> Option<Outcome> {
        let refused = self.refused.as_deref();
        signed_in_by_another(&stored, refused, &self.wanted, now_ms / 1000)
            .then(|| Outcome::Adopted(Box::new(stored)))
    }

    fn decide(&mut self, stored: Option<Credentials>, now_ms: u64) -> Step<SignIn, Outcome> {
        match stored.and_then(|stored| self.adopt(stored, now_ms)) {
            Some(adopted) => Step::End(adopted),
            None => Step::Work(SignIn),
        }
    }

    /// A sign-in begins only with this much of its lease left, so that its first renewal comes
    /// well within the lease.
    fn margin(&self) -> Duration {
        START_MARGIN
    }

    fn timed_out(&self) -> Outcome {
        Outcome::TimedOut
    }

    fn out_of_order(&self) -> Outcome {
        Outcome::SignInFailed
    }
}

/// One process's need of a sign-in for one key.
pub(super) type SignInCoordinator = LeaseProtocol<SignInJob>;

impl SignInCoordinator {
    /// Begins at `now_ms` for a process refused `refused` (or holding no token), needing
    /// `wanted`; waiting for another process at most `wait_bound`.
    pub fn start(
        refused: Option<String>,
        wanted: Vec<String>,
        now_ms: u64,
        wait_bound: Duration,
    ) -> (Self, Action) {
        let job = SignInJob { refused, wanted };
        let pauses = (Duration::from_millis(100), Duration::from_secs(1));
        Self::begin(job, now_ms, wait_bound, pauses)
    }

    /// The bound a process waits for another's sign-in: the person's time, and a lease lost to
    /// a holder that died on the way.
    pub fn wait_bound(sign_in_timeout: Duration) -> Duration {
        sign_in_timeout.saturating_add(SIGN_IN_LEASE_TTL.saturating_mul(2))
    }

    /// The answer to [`SignIn`]: whether the sign-in succeeded (and stored its token).
    pub fn signed_in(&mut self, succeeded: bool) -> Action {
        let outcome = match succeeded {
            true => Outcome::SignedIn,
            false => Outcome::SignInFailed,
        };
        self.worked(Step::End(outcome))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::lease::Action as A;
    use crate::auth::store::Lease;

    fn token(access: &str, expires_at: Option<u64>, scopes: &[&str]) -> Credentials {
        Credentials {
            access_token: Some(access.into()),
            expires_at,
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            ..Credentials::default()
        }
    }

    #[test]
    fn only_another_live_token_with_every_scope_wanted_is_someone_elses_sign_in() {
        let wanted = ["files".to_owned()];
        let theirs = token("new", Some(200), &["files", "mail"]);
        assert!(signed_in_by_another(&theirs, Some("old"), &wanted, 100));
        let refused_again = token("old", Some(200), &["files"]);
        assert!(!signed_in_by_another(
            &refused_again,
            Some("old"),
            &wanted,
            100
        ));
        let expired = token("new", Some(100), &["files"]);
        assert!(!signed_in_by_another(&expired, Some("old"), &wanted, 100));
        let narrower = token("new", None, &["mail"]);
        assert!(!signed_in_by_another(&narrower, Some("old"), &wanted, 100));
        let no_token = Credentials::default();
        assert!(!signed_in_by_another(&no_token, None, &[], 100));
    }

    #[test]
    fn the_holder_adopts_a_token_stored_meanwhile_else_signs_in_and_reports_how_it_went() {
        let lease = Lease {
            key: "sign-in k".into(),
            fence: 1,
            deadline_ms: 15_000,
        };
        let (mut adopting, _) =
            SignInCoordinator::start(Some("old".into()), Vec::new(), 0, Duration::from_secs(1));
        adopting.leased(Some(lease.clone()));
        let stored = token("new", None, &[]);
        assert_eq!(
            adopting.read(Some(stored.clone()), 0),
            A::Release(lease.clone())
        );
        assert_eq!(
            adopting.released(),
            A::Done(Outcome::Adopted(Box::new(stored)))
        );

        let (mut signing, _) =
            SignInCoordinator::start(None, Vec::new(), 0, Duration::from_secs(1));
        signing.leased(Some(lease.clone()));
        assert_eq!(signing.read(None, 0), A::Work(SignIn));
        assert_eq!(signing.signed_in(false), A::Release(lease));
        assert_eq!(signing.released(), A::Done(Outcome::SignInFailed));
    }

    #[test]
    fn a_waiter_is_bounded_by_the_person_and_two_leases() {
        let bound = SignInCoordinator::wait_bound(Duration::from_secs(300));
        assert_eq!(bound, Duration::from_secs(300) + SIGN_IN_LEASE_TTL * 2);
        let (mut waiting, _) = SignInCoordinator::start(None, Vec::new(), 0, bound);
        waiting.leased(None);
        assert!(matches!(waiting.read(None, 1_000), A::Sleep(_)));
        waiting.woke();
        waiting.leased(None);
        let past = u64::try_from(bound.as_millis()).unwrap();
        assert_eq!(waiting.read(None, past), A::Done(Outcome::TimedOut));
    }
}
