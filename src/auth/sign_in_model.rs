//! Model test of the coordinated sign-in: processes run [`SignInCoordinator`]s against one store
//! (the rules of [`Table`], shared by the memory and file stores) and one person who finishes
//! the sign-ins opened, in any interleaving, with time passing (the holders' renewal timers and
//! sign-in timeouts firing as it does), processes killed and sign-ins failing at any point.
//!
//! What must hold, whatever happens:
//! - no process opens a sign-in window while another live process has one open;
//! - windows opened never outnumber one plus the holders killed with a window open and the
//!   sign-ins that failed: with neither, one window at most;
//! - a token adopted is one a sign-in stored, never the refused one;
//! - every process that is not killed ends.

use proptest::prelude::*;

use super::{
    sign_in_states::{Action, Outcome, SignIn, SignInCoordinator, RENEW_EVERY, SIGN_IN_LEASE_TTL},
    store::{millis, table::Table, Lease},
    Credentials,
};

const KEY: &str = "issuer resource";
const LEASE_KEY: &str = "sign-in issuer resource";
/// The sign-in timeout of the model's processes.
const SIGN_IN_TIMEOUT_MS: u64 = 60_000;

#[derive(Debug, Clone)]
enum Op {
    Step(usize),
    Kill(usize),
    Advance(u64),
    /// The person finishes the window process `i` opened.
    Finish(usize),
    /// Process `i`'s sign-in fails (the code exchange is refused, the window is closed).
    Fail(usize),
}

fn op(processes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..processes).prop_map(Op::Step),
        1 => (0..processes).prop_map(Op::Kill),
        3 => (0u64..8_000).prop_map(Op::Advance),
        2 => (0..processes).prop_map(Op::Finish),
        1 => (0..processes).prop_map(Op::Fail),
    ]
}

/// Where a process is.
#[derive(Debug)]
enum Stage {
    /// The coordinator asked for this.
    Asked(Action),
    Asleep(u64),
    /// Its window is open; its lease is renewed every [`RENEW_EVERY`] from `next_renewal_ms`.
    SigningIn {
        opened_ms: u64,
        next_renewal_ms: u64,
    },
    /// The person finished (or the sign-in failed): the glue answers `signed_in` next, the
    /// token stored first when it succeeded.
    Finished {
        succeeded: bool,
        next_renewal_ms: u64,
    },
    Ended(Outcome),
    Killed,
}

struct Process {
    coordinator: SignInCoordinator,
    stage: Stage,
    lease: Option<Lease>,
}

impl Process {
    fn has_window(&self) -> bool {
        matches!(self.stage, Stage::SigningIn { .. } | Stage::Finished { .. })
    }
}

struct World {
    now_ms: u64,
    table: Table,
    processes: Vec<Process>,
    /// Windows opened, and tokens stored by sign-ins.
    windows: u32,
    signed_in: u32,
    /// Holders killed with a window open; sign-ins failed or timed out.
    killed_in_sign_in: u32,
    failed: u32,
    /// Windows opened while another live process had one open.
    overlaps: u32,
}

/// The token the store holds, refused by the server (revoked): nobody may adopt it.
fn refused() -> Credentials {
    Credentials {
        access_token: Some("a0".into()),
        expires_at: Some(3_600),
        issued_at: Some(0),
        ..Credentials::default()
    }
}

impl World {
    fn new(processes: usize) -> Self {
        let mut table = Table::default();
        let _ = table.write(KEY, &refused(), None);
        let wait_bound =
            SignInCoordinator::wait_bound(std::time::Duration::from_millis(SIGN_IN_TIMEOUT_MS));
        let processes = (0..processes)
            .map(|_| {
                let (coordinator, action) =
                    SignInCoordinator::start(Some("a0".into()), Vec::new(), 0, wait_bound);
                Process {
                    coordinator,
                    stage: Stage::Asked(action),
                    lease: None,
                }
            })
            .collect();
        Self {
            now_ms: 0,
            table,
            processes,
            windows: 0,
            signed_in: 0,
            killed_in_sign_in: 0,
            failed: 0,
            overlaps: 0,
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Step(i) => self.step(i),
            Op::Kill(i) => self.kill(i),
            Op::Advance(ms) => self.advance_to(self.now_ms + ms),
            Op::Finish(i) => self.finish(i, true),
            Op::Fail(i) => self.finish(i, false),
        }
    }

    fn kill(&mut self, i: usize) {
        let process = &mut self.processes[i];
        if process.has_window() {
            self.killed_in_sign_in += 1;
        }
        if !matches!(process.stage, Stage::Ended(_)) {
            process.stage = Stage::Killed;
        }
    }

    fn finish(&mut self, i: usize, succeeded: bool) {
        let process = &mut self.processes[i];
        if let Stage::SigningIn {
            next_renewal_ms, ..
        } = process.stage
        {
            if !succeeded {
                self.failed += 1;
            }
            process.stage = Stage::Finished {
                succeeded,
                next_renewal_ms,
            };
        }
    }

    /// Moves the clock to `target`, firing on the way the renewal timers and sign-in timeouts
    /// of the live processes that have a window open, in time order.
    fn advance_to(&mut self, target: u64) {
        while let Some((at, i)) = self.next_timer(target) {
            self.now_ms = self.now_ms.max(at);
            self.fire(i);
        }
        self.now_ms = self.now_ms.max(target);
    }

    fn next_timer(&self, until: u64) -> Option<(u64, usize)> {
        let timers = self.processes.iter().enumerate().filter_map(|(i, p)| {
            let at = match p.stage {
                Stage::SigningIn {
                    opened_ms,
                    next_renewal_ms,
                } => next_renewal_ms.min(opened_ms + SIGN_IN_TIMEOUT_MS),
                Stage::Finished {
                    next_renewal_ms, ..
                } => next_renewal_ms,
                _ => return None,
            };
            Some((at, i))
        });
        timers.filter(|(at, _)| *at <= until).min()
    }

    fn fire(&mut self, i: usize) {
        let now = self.now_ms;
        let process = &mut self.processes[i];
        let next_renewal_ms = match &mut process.stage {
            Stage::SigningIn {
                opened_ms,
                next_renewal_ms,
            } if now >= *opened_ms + SIGN_IN_TIMEOUT_MS => {
                // The glue's sign-in timeout.
                self.failed += 1;
                let next_renewal_ms = *next_renewal_ms;
                process.stage = Stage::Finished {
                    succeeded: false,
                    next_renewal_ms,
                };
                return;
            }
            Stage::SigningIn {
                next_renewal_ms, ..
            }
            | Stage::Finished {
                next_renewal_ms, ..
            } => next_renewal_ms,
            _ => return,
        };
        *next_renewal_ms = now + millis(RENEW_EVERY);
        if let Some(lease) = process.coordinator.renewal() {
            let renewed = self.table.renew(&lease, now, millis(SIGN_IN_LEASE_TTL));
            process.lease.clone_from(&renewed);
            process.coordinator.renewed(renewed);
        }
    }

    /// One step of process `i`: the action it asked for, done against the world.
    fn step(&mut self, i: usize) {
        let now = self.now_ms;
        let next = match std::mem::replace(&mut self.processes[i].stage, Stage::Killed) {
            stage @ (Stage::Killed | Stage::Ended(_) | Stage::SigningIn { .. }) => {
                self.processes[i].stage = stage;
                return;
            }
            Stage::Asleep(until) => {
                self.processes[i].stage = Stage::Asleep(until);
                // Time passes while it sleeps.
                self.advance_to(until);
                let process = &mut self.processes[i];
                if !matches!(process.stage, Stage::Asleep(_)) {
                    return;
                }
                process.coordinator.woke()
            }
            Stage::Finished { succeeded, .. } => {
                if succeeded {
                    self.signed_in += 1;
                    let token = signed_in_token(self.signed_in, now);
                    let _ = self.table.write(KEY, &token, None);
                }
                self.processes[i].coordinator.signed_in(succeeded)
            }
            Stage::Asked(action) => match self.act(i, action) {
                Some(next) => next,
                None => return,
            },
        };
        self.processes[i].stage = Stage::Asked(next);
    }

    /// Does `action` for process `i`: the coordinator's next action, or `None` if the process
    /// is now waiting (asleep, its window open) or ended.
    fn act(&mut self, i: usize, action: Action) -> Option<Action> {
        let now = self.now_ms;
        let process = &mut self.processes[i];
        match action {
            Action::TryLease => {
                process.lease = self
                    .table
                    .try_lease(LEASE_KEY, now, millis(SIGN_IN_LEASE_TTL));
                Some(process.coordinator.leased(process.lease.clone()))
            }
            Action::Read => {
                let stored = self.table.read(KEY).map(|s| s.credentials);
                match process.coordinator.read(stored, now) {
                    // The glue opens the window as soon as it is told to.
                    Action::Work(SignIn) => {
                        self.open_window(i);
                        None
                    }
                    next => Some(next),
                }
            }
            Action::Sleep(pause) => {
                process.stage = Stage::Asleep(now + millis(pause));
                None
            }
            Action::Work(SignIn) => unreachable!("opened when read"),
            Action::Release(lease) => {
                self.table.release(&lease);
                process.lease = None;
                Some(process.coordinator.released())
            }
            Action::Done(outcome) => {
                process.stage = Stage::Ended(outcome);
                None
            }
        }
    }

    fn open_window(&mut self, i: usize) {
        let others_open = self
            .processes
            .iter()
            .enumerate()
            .any(|(j, p)| j != i && p.has_window());
        if others_open {
            self.overlaps += 1;
        }
        self.windows += 1;
        self.processes[i].stage = Stage::SigningIn {
            opened_ms: self.now_ms,
            next_renewal_ms: self.now_ms + millis(RENEW_EVERY),
        };
    }

    fn running(&self) -> bool {
        self.processes
            .iter()
            .any(|p| !matches!(p.stage, Stage::Ended(_) | Stage::Killed))
    }

    /// Runs every live process to its end, round-robin; the person finishes every window.
    fn drain(&mut self) {
        for _ in 0..100_000 {
            if !self.running() {
                return;
            }
            for i in 0..self.processes.len() {
                self.finish(i, true);
                self.step(i);
            }
        }
        panic!("processes still running after 100,000 rounds");
    }

    fn outcomes(&self) -> Vec<&Outcome> {
        self.processes
            .iter()
            .filter_map(|p| match &p.stage {
                Stage::Ended(outcome) => Some(outcome),
                _ => None,
            })
            .collect()
    }
}

fn signed_in_token(n: u32, now_ms: u64) -> Credentials {
    let now = now_ms / 1000;
    Credentials {
        access_token: Some(format!("s{n}")),
        expires_at: Some(now + 3_600),
        issued_at: Some(now),
        ..Credentials::default()
    }
}

fn check(world: &World) -> Result<(), TestCaseError> {
    prop_assert_eq!(world.overlaps, 0, "two windows open at once");
    let excused = world.killed_in_sign_in + world.failed;
    prop_assert!(
        world.windows <= 1 + excused,
        "{} windows, {} holders killed, {} sign-ins failed",
        world.windows,
        world.killed_in_sign_in,
        world.failed
    );
    for outcome in world.outcomes() {
        if let Outcome::Adopted(credentials) = outcome {
            let token = credentials.access_token.as_deref().unwrap_or_default();
            prop_assert!(token.starts_with('s'), "adopted {token:?}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(3_000)
    ))]

    #[test]
    fn one_window_at_a_time_and_one_sign_in_for_everyone(
        processes in 1usize..5,
        ops in proptest::collection::vec(op(4), 0..80),
    ) {
        let mut world = World::new(processes);
        for op in ops.iter().filter(|op| match op {
            Op::Step(i) | Op::Kill(i) | Op::Finish(i) | Op::Fail(i) => *i < processes,
            Op::Advance(_) => true,
        }) {
            world.apply(op);
        }
        world.drain();
        check(&world)?;
    }
}

/// No kill, no failure: one window, and every process ends with its token.
#[test]
fn without_failures_one_window_serves_every_process() {
    let mut world = World::new(4);
    world.drain();
    assert_eq!(world.windows, 1);
    assert_eq!(world.signed_in, 1);
    let outcomes = world.outcomes();
    assert_eq!(outcomes.len(), 4);
    for outcome in outcomes {
        match outcome {
            Outcome::SignedIn => {}
            Outcome::Adopted(c) => assert_eq!(c.access_token.as_deref(), Some("s1")),
            other => panic!("{other:?}"),
        }
    }
}

/// The person takes minutes: the holder's renewals keep its lease, and the others wait
/// instead of opening windows of their own.
#[test]
fn a_slow_person_keeps_the_lease_renewed() {
    let mut world = World::new(3);
    world.step(0); // takes the lease
    world.step(0); // reads: opens the window
    assert_eq!(world.windows, 1);
    for _ in 0..50 {
        world.step(1);
        world.step(2);
        world.advance_to(world.now_ms + 1_000);
    }
    assert!(
        world.now_ms > 3 * millis(SIGN_IN_LEASE_TTL),
        "past several leases"
    );
    assert_eq!(world.windows, 1, "the others still wait");
    world.drain();
    assert_eq!(world.windows, 1);
    assert!(world
        .outcomes()
        .iter()
        .all(|o| matches!(o, Outcome::SignedIn | Outcome::Adopted(_))));
}

/// The holder dies with its window open: its lease ends by itself, one other process opens one
/// window, and everyone left ends with its token.
#[test]
fn a_holder_killed_during_its_sign_in_costs_one_lease_and_one_window() {
    let mut world = World::new(3);
    world.step(0);
    world.step(0);
    world.kill(0);
    let killed_ms = world.now_ms;
    world.drain();
    assert_eq!(world.windows, 2);
    assert!(
        world.now_ms >= killed_ms + millis(SIGN_IN_LEASE_TTL),
        "waited for the lease"
    );
    let outcomes = world.outcomes();
    assert_eq!(outcomes.len(), 2);
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, Outcome::SignedIn | Outcome::Adopted(_))));
}

/// A sign-in that fails hands the turn to the next process: one more window, not one each.
#[test]
fn a_failed_sign_in_lets_one_other_process_try() {
    let mut world = World::new(3);
    world.step(0);
    world.step(0);
    world.finish(0, false);
    world.step(0); // signed_in(false): release
    world.step(0); // released: done
    world.step(0);
    assert_eq!(world.outcomes(), vec![&Outcome::SignInFailed]);
    world.drain();
    assert_eq!(world.windows, 2);
    assert_eq!(world.signed_in, 1);
}
