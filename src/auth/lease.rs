//! The lease protocol a refresh and a sign-in both follow, as a plain state machine: one process
//! at a time does the work for a key of the credential store (a refresh, a sign-in), holding the
//! key's lease; the others wait and adopt what it stores. Each method is the answer to the action
//! it asked for and returns the next one; no I/O and no clock (time is passed in, in
//! milliseconds). What the work is, when the store's entry makes it unnecessary and what the
//! outcomes are is the job's ([`LeaseJob`]: `refresh_states.rs`, `sign_in_states.rs`).
//!
//! ```text
//!  start ─► TryLease ─┬─ leased ─► Read ─► decide ─┬─ End ─────────────────────► Release ─► Done
//!                     │                            ├─ Work, little lease left ─► Release ─► TryLease …
//!                     │                            └─ Work (renewed meanwhile) ─► … ─► Release ─► Done
//!                     └─ held by another ─► Read ─┬─ adopted ─► Done
//!                                                 ├─ waited past the bound ─► Done(timed out)
//!                                                 └─ Sleep ─► TryLease …
//! ```

use std::time::Duration;

use backon::BackoffBuilder;

use super::{
    store::{millis, Lease},
    Credentials,
};

/// What one job done under a lease is: the protocol asks it what the store's entry calls for.
pub(super) trait LeaseJob {
    /// What the holder does under the lease; the glue does it and answers the job.
    type Work;
    /// How the job ended.
    type Outcome;

    /// While another process holds the lease: the outcome the store's entry ends the wait with
    /// (another's result, adopted), if it does.
    fn adopt(&self, stored: Credentials, now_ms: u64) -> Option<Self::Outcome>;

    /// Under the lease: the work the store's entry calls for, or the end.
    fn decide(
        &mut self,
        stored: Option<Credentials>,
        now_ms: u64,
    ) -> Step<Self::Work, Self::Outcome>;

    /// How much of the lease must be left to begin the work, so that it ends (or is renewed)
    /// inside the lease.
    fn margin(&self) -> Duration;

    /// The outcome of a wait for another process past its bound.
    fn timed_out(&self) -> Self::Outcome;

    /// The outcome when the glue answers an action that was not asked (a bug): nothing more is
    /// done.
    fn out_of_order(&self) -> Self::Outcome;
}

/// What comes next under the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step<W, O> {
    /// This work.
    Work(W),
    /// The end: the lease is released, then the protocol is done with this outcome.
    End(O),
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action<W, O> {
    /// Try to take the key's lease; answer with [`LeaseProtocol::leased`].
    TryLease,
    /// Read the key's entry; answer with [`LeaseProtocol::read`].
    Read,
    /// Wait this long (another process holds the lease), then answer with
    /// [`LeaseProtocol::woke`].
    Sleep(Duration),
    /// Do this work under the lease; the job says how it is answered.
    Work(W),
    /// Release the lease; answer with [`LeaseProtocol::released`].
    Release(Lease),
    /// Finished.
    Done(O),
}

#[derive(Debug)]
enum Phase<O> {
    Leasing,
    /// Giving back a lease too short for the work, to take a new one.
    GivingBack,
    Waiting,
    Deciding(Lease),
    Working(Lease),
    Releasing(O),
    Done,
}

/// One process's job for one key of the store.
pub(super) struct LeaseProtocol<J: LeaseJob> {
    pub(super) job: J,
    started_ms: u64,
    wait_bound: Duration,
    phase: Phase<J::Outcome>,
    pauses: backon::ExponentialBackoff,
    /// Whether a renewal found the lease taken over (reported once).
    lost_lease: bool,
}

impl<J: LeaseJob> LeaseProtocol<J>
where
    J::Outcome: std::fmt::Debug,
{
    /// Begins `job` at `now_ms`, waiting for another process at most `wait_bound`, with pauses
    /// between `pauses.0` and `pauses.1` while it waits.
    pub fn begin(
        job: J,
        now_ms: u64,
        wait_bound: Duration,
        pauses: (Duration, Duration),
    ) -> (Self, Action<J::Work, J::Outcome>) {
        let pauses = backon::ExponentialBuilder::default()
            .with_min_delay(pauses.0)
            .with_max_delay(pauses.1)
            .without_max_times()
            .build();
        let protocol = Self {
            job,
            started_ms: now_ms,
            wait_bound,
            phase: Phase::Leasing,
            pauses,
            lost_lease: false,
        };
        (protocol, Action::TryLease)
    }

    /// The answer to [`Action::TryLease`].
    pub fn leased(&mut self, lease: Option<Lease>) -> Action<J::Work, J::Outcome> {
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
    pub fn read(
        &mut self,
        stored: Option<Credentials>,
        now_ms: u64,
    ) -> Action<J::Work, J::Outcome> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Waiting => match stored.and_then(|stored| self.job.adopt(stored, now_ms)) {
                Some(adopted) => self.done(adopted),
                None => self.wait(now_ms),
            },
            Phase::Deciding(lease) => match self.job.decide(stored, now_ms) {
                Step::End(outcome) => self.release(lease, outcome),
                // Too little of the lease left for the work to end (or be renewed) inside it:
                // give it back and take a new one.
                Step::Work(_)
                    if lease.deadline_ms.saturating_sub(now_ms) < millis(self.job.margin()) =>
                {
                    self.phase = Phase::GivingBack;
                    Action::Release(lease)
                }
                Step::Work(work) => {
                    self.phase = Phase::Working(lease);
                    Action::Work(work)
                }
            },
            other => self.unexpected(other),
        }
    }

    fn wait(&mut self, now_ms: u64) -> Action<J::Work, J::Outcome> {
        if now_ms.saturating_sub(self.started_ms) >= millis(self.wait_bound) {
            let timed_out = self.job.timed_out();
            return self.done(timed_out);
        }
        self.phase = Phase::Waiting;
        let pause = self.pauses.next().unwrap_or(Duration::from_secs(1));
        Action::Sleep(pause)
    }

    /// The answer to [`Action::Sleep`].
    pub fn woke(&mut self) -> Action<J::Work, J::Outcome> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Waiting => {
                self.phase = Phase::Leasing;
                Action::TryLease
            }
            other => self.unexpected(other),
        }
    }

    /// The job's answer to its [`Action::Work`]: more work under the lease, or the end.
    pub fn worked(&mut self, step: Step<J::Work, J::Outcome>) -> Action<J::Work, J::Outcome> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Working(lease) => match step {
                Step::Work(work) => {
                    self.phase = Phase::Working(lease);
                    Action::Work(work)
                }
                Step::End(outcome) => self.release(lease, outcome),
            },
            other => self.unexpected(other),
        }
    }

    /// While the work runs: the lease to renew, if one is held.
    pub fn renewal(&self) -> Option<Lease> {
        match &self.phase {
            Phase::Working(lease) if !self.lost_lease => Some(lease.clone()),
            _ => None,
        }
    }

    /// The answer to a renewal: the renewed lease, or `None` if it was taken over (this process
    /// stalled past its deadline). The work carries on; `true` the first time the lease is found
    /// lost, to report it.
    pub fn renewed(&mut self, renewed: Option<Lease>) -> bool {
        let Phase::Working(lease) = &mut self.phase else {
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

    /// The answer to [`Action::Release`].
    pub fn released(&mut self) -> Action<J::Work, J::Outcome> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Releasing(outcome) => self.done(outcome),
            Phase::GivingBack => {
                self.phase = Phase::Leasing;
                Action::TryLease
            }
            other => self.unexpected(other),
        }
    }

    fn release(&mut self, lease: Lease, outcome: J::Outcome) -> Action<J::Work, J::Outcome> {
        self.phase = Phase::Releasing(outcome);
        Action::Release(lease)
    }

    fn done(&mut self, outcome: J::Outcome) -> Action<J::Work, J::Outcome> {
        self.phase = Phase::Done;
        Action::Done(outcome)
    }

    /// An answer to an action that was not asked: the glue has a bug; end doing nothing more.
    fn unexpected(&mut self, phase: Phase<J::Outcome>) -> Action<J::Work, J::Outcome> {
        tracing::error!(?phase, "lease protocol answered out of order");
        let outcome = self.job.out_of_order();
        self.done(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job that adopts a stored token named "theirs", and otherwise works once.
    struct Toy;

    impl LeaseJob for Toy {
        type Work = &'static str;
        type Outcome = &'static str;

        fn adopt(&self, stored: Credentials, _now_ms: u64) -> Option<&'static str> {
            (stored.access_token.as_deref() == Some("theirs")).then_some("adopted")
        }

        fn decide(
            &mut self,
            stored: Option<Credentials>,
            now_ms: u64,
        ) -> Step<&'static str, &'static str> {
            match stored.and_then(|stored| self.adopt(stored, now_ms)) {
                Some(adopted) => Step::End(adopted),
                None => Step::Work("work"),
            }
        }

        fn margin(&self) -> Duration {
            Duration::from_secs(10)
        }

        fn timed_out(&self) -> &'static str {
            "timed out"
        }

        fn out_of_order(&self) -> &'static str {
            "out of order"
        }
    }

    fn lease(deadline_ms: u64) -> Lease {
        Lease {
            key: "k".into(),
            fence: 1,
            deadline_ms,
        }
    }

    fn theirs() -> Credentials {
        Credentials {
            access_token: Some("theirs".into()),
            ..Credentials::default()
        }
    }

    fn start() -> LeaseProtocol<Toy> {
        let (protocol, first) = LeaseProtocol::begin(
            Toy,
            0,
            Duration::from_secs(5),
            (Duration::ZERO, Duration::ZERO),
        );
        assert_eq!(first, Action::TryLease);
        protocol
    }

    #[test]
    fn the_holder_works_under_its_lease_then_releases_it() {
        let mut protocol = start();
        assert_eq!(protocol.leased(Some(lease(15_000))), Action::Read);
        assert_eq!(protocol.read(None, 0), Action::Work("work"));
        assert_eq!(protocol.renewal(), Some(lease(15_000)));
        assert!(!protocol.renewed(Some(lease(20_000))));
        assert_eq!(protocol.worked(Step::Work("more")), Action::Work("more"));
        assert_eq!(
            protocol.worked(Step::End("done")),
            Action::Release(lease(20_000))
        );
        assert_eq!(protocol.released(), Action::Done("done"));
    }

    #[test]
    fn another_result_is_adopted_by_the_holder_and_by_a_waiter() {
        let mut holder = start();
        holder.leased(Some(lease(15_000)));
        assert_eq!(
            holder.read(Some(theirs()), 0),
            Action::Release(lease(15_000))
        );
        assert_eq!(holder.released(), Action::Done("adopted"));
        let mut waiter = start();
        assert_eq!(waiter.leased(None), Action::Read);
        assert_eq!(waiter.read(Some(theirs()), 0), Action::Done("adopted"));
    }

    #[test]
    fn a_waiter_sleeps_and_tries_again_until_its_bound() {
        let mut waiter = start();
        waiter.leased(None);
        assert!(matches!(waiter.read(None, 1_000), Action::Sleep(_)));
        assert_eq!(waiter.woke(), Action::TryLease);
        waiter.leased(None);
        assert_eq!(waiter.read(None, 5_000), Action::Done("timed out"));
    }

    #[test]
    fn a_lease_too_short_for_the_work_is_given_back_and_taken_anew() {
        let mut protocol = start();
        protocol.leased(Some(lease(9_000)));
        assert_eq!(protocol.read(None, 0), Action::Release(lease(9_000)));
        assert_eq!(protocol.released(), Action::TryLease);
        protocol.leased(Some(lease(15_000)));
        assert_eq!(protocol.read(None, 0), Action::Work("work"));
    }

    #[test]
    fn a_lease_lost_while_working_is_reported_once_and_not_renewed_again() {
        let mut protocol = start();
        protocol.leased(Some(lease(15_000)));
        protocol.read(None, 0);
        assert!(protocol.renewed(None), "reported the first time");
        assert!(!protocol.renewed(None));
        assert_eq!(protocol.renewal(), None);
    }

    #[test]
    fn an_answer_out_of_order_ends_it_doing_nothing_more() {
        let mut protocol = start();
        assert_eq!(protocol.released(), Action::Done("out of order"));
        let mut protocol = start();
        assert_eq!(
            protocol.worked(Step::End("x")),
            Action::Done("out of order")
        );
    }
}
