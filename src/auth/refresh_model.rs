//! Model test of the coordinated refresh: processes run [`Coordinator`]s against one store
//! (the rules of [`Table`], shared by the memory and file stores) and a provider that rotates
//! refresh tokens and revokes the grant when a spent one comes back (as `oidc-provider` does),
//! in any interleaving, with time passing and processes killed at any point.
//!
//! What must hold, whatever happens:
//! - a refresh is only ever sent with the refresh token the store holds at that moment;
//! - with no token lost (a process killed after the provider rotated and before it stored the
//!   answer), the provider sees exactly one refresh, no replay and no refusal, and no process
//!   needs a sign-in;
//! - each lost token costs at most one replay, and refusals never outnumber the tokens lost
//!   (plus the spent markers lost the same way): never a loop of replays. A spent marker is lost
//!   when its writer stalled past its lease (its write fenced): the next holder reads the spent
//!   token still stored and sends it once more, to a grant the first replay already revoked, so
//!   replays are bounded by the tokens and the markers lost together;
//! - every process that is not killed ends.

use std::collections::HashSet;

use proptest::prelude::*;

use super::{
    refresh_states::{
        Action, Answer, Coordinator, Outcome, Work, LEASE_TTL, REFRESH_REQUEST_TIMEOUT,
    },
    store::{millis, table::Table, Lease},
    Credentials,
};

const KEY: &str = "issuer resource";

/// The authorization server: one valid refresh token at a time; a spent one revokes the grant.
#[derive(Default)]
struct Provider {
    current: String,
    spent: HashSet<String>,
    revoked: bool,
    issued: u32,
    refreshes: u32,
    replays: u32,
    refused: u32,
}

impl Provider {
    fn refresh(&mut self, token: &str, now_ms: u64) -> Answer {
        if !self.revoked && token == self.current {
            self.refreshes += 1;
            self.spent.insert(token.to_owned());
            self.issued += 1;
            self.current = format!("r{}", self.issued);
            let now = now_ms / 1000;
            return Answer::Granted(Box::new(Credentials {
                access_token: Some(format!("a{}", self.issued)),
                refresh_token: Some(self.current.clone()),
                expires_at: Some(now + 3_600),
                issued_at: Some(now),
                ..Credentials::default()
            }));
        }
        if self.spent.contains(token) {
            self.replays += 1;
            self.revoked = true;
        }
        self.refused += 1;
        Answer::Refused
    }
}

#[derive(Debug, Clone)]
enum Op {
    Step(usize),
    Kill(usize),
    Advance(u64),
}

fn op(processes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..processes).prop_map(Op::Step),
        1 => (0..processes).prop_map(Op::Kill),
        2 => (0u64..3_000).prop_map(Op::Advance),
    ]
}

/// Where a process is.
enum Stage {
    /// The coordinator asked for this.
    Asked(Action),
    /// Sleeping until then.
    Asleep(u64),
    /// Its refresh reached the provider, which answered this; the process has not read it.
    Answered(Answer),
    Ended(Outcome),
    Killed,
}

struct Process {
    coordinator: Coordinator,
    stage: Stage,
    lease: Option<Lease>,
    /// When it decided to refresh (its request times out `REFRESH_REQUEST_TIMEOUT` later).
    decided_ms: u64,
}

struct World {
    now_ms: u64,
    table: Table,
    provider: Provider,
    processes: Vec<Process>,
    /// Tokens the provider granted that never reached the store.
    lost: u32,
    /// Spent markers never written (their writer killed, or fenced).
    spent_lost: u32,
}

fn expired() -> Credentials {
    Credentials {
        access_token: Some("a0".into()),
        refresh_token: Some("r0".into()),
        expires_at: Some(0),
        issued_at: Some(0),
        ..Credentials::default()
    }
}

impl World {
    fn new(processes: usize) -> Self {
        let mut table = Table::default();
        let _ = table.write(KEY, &expired(), None);
        let provider = Provider {
            current: "r0".into(),
            ..Provider::default()
        };
        let processes = (0..processes)
            .map(|_| {
                let (coordinator, action) = Coordinator::start(expired(), 0);
                Process {
                    coordinator,
                    stage: Stage::Asked(action),
                    lease: None,
                    decided_ms: 0,
                }
            })
            .collect();
        Self {
            now_ms: 0,
            table,
            provider,
            processes,
            lost: 0,
            spent_lost: 0,
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Step(i) => self.step(i),
            Op::Kill(i) => self.kill(i),
            Op::Advance(ms) => self.now_ms += ms,
        }
    }

    fn kill(&mut self, i: usize) {
        let process = &mut self.processes[i];
        match std::mem::replace(&mut process.stage, Stage::Killed) {
            Stage::Answered(Answer::Granted(_)) => self.lost += 1,
            Stage::Answered(Answer::Refused) => self.spent_lost += 1,
            Stage::Asked(Action::Work(Work::Write(written))) => {
                if written.access_token.is_some() {
                    self.lost += 1;
                } else {
                    self.spent_lost += 1;
                }
            }
            Stage::Ended(outcome) => process.stage = Stage::Ended(outcome),
            _ => {}
        }
    }

    /// One step of process `i`: the action it asked for, done against the world.
    fn step(&mut self, i: usize) {
        let now = self.now_ms;
        let process = &mut self.processes[i];
        let next = match std::mem::replace(&mut process.stage, Stage::Killed) {
            Stage::Killed => return,
            Stage::Ended(outcome) => {
                process.stage = Stage::Ended(outcome);
                return;
            }
            Stage::Asleep(until) => {
                // Time passes while it sleeps.
                self.now_ms = self.now_ms.max(until);
                process.coordinator.woke()
            }
            Stage::Answered(answer) => process.coordinator.refreshed(answer),
            Stage::Asked(action) => match action {
                Action::TryLease => {
                    process.lease = self.table.try_lease(KEY, now, millis(LEASE_TTL));
                    process.coordinator.leased(process.lease.clone())
                }
                Action::Read => {
                    let stored = self.table.read(KEY).map(|s| s.credentials);
                    let next = process.coordinator.read(stored, now);
                    if matches!(next, Action::Work(Work::Refresh(_))) {
                        process.decided_ms = now;
                    }
                    next
                }
                Action::Sleep(pause) => {
                    process.stage = Stage::Asleep(now + millis(pause));
                    return;
                }
                Action::Work(Work::Refresh(base)) => {
                    if now > process.decided_ms + millis(REFRESH_REQUEST_TIMEOUT) {
                        // The request's timeout fired before it went out.
                        process.coordinator.refresh_failed()
                    } else {
                        let token = base.refresh_token.clone().unwrap_or_default();
                        let stored = self
                            .table
                            .read(KEY)
                            .and_then(|s| s.credentials.refresh_token);
                        assert_eq!(
                            stored.as_deref(),
                            Some(token.as_str()),
                            "a refresh sent with a token the store no longer holds"
                        );
                        let answer = self.provider.refresh(&token, now);
                        process.stage = Stage::Answered(answer);
                        return;
                    }
                }
                Action::Work(Work::Write(credentials)) => {
                    let written = self.table.write(KEY, &credentials, process.lease.as_ref());
                    if written.is_err() {
                        if credentials.access_token.is_some() {
                            self.lost += 1;
                        } else {
                            self.spent_lost += 1;
                        }
                    }
                    process.coordinator.written()
                }
                Action::Release(lease) => {
                    self.table.release(&lease);
                    process.lease = None;
                    process.coordinator.released()
                }
                Action::Done(outcome) => {
                    process.stage = Stage::Ended(outcome);
                    return;
                }
            },
        };
        self.processes[i].stage = Stage::Asked(next);
    }

    fn running(&self) -> bool {
        self.processes
            .iter()
            .any(|p| !matches!(p.stage, Stage::Ended(_) | Stage::Killed))
    }

    /// Runs every live process to its end, round-robin.
    fn drain(&mut self) {
        for _ in 0..100_000 {
            if !self.running() {
                return;
            }
            for i in 0..self.processes.len() {
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

fn check(world: &World) -> Result<(), TestCaseError> {
    let provider = &world.provider;
    let lost = world.lost;
    prop_assert!(
        provider.replays <= lost + world.spent_lost,
        "replays {} > lost {lost} + spent markers lost {}",
        provider.replays,
        world.spent_lost
    );
    prop_assert!(
        provider.refused <= lost + world.spent_lost,
        "refused {} > lost {lost} + spent markers lost {}",
        provider.refused,
        world.spent_lost
    );
    if lost == 0 {
        prop_assert_eq!(provider.refused, 0);
        let alive = world.outcomes();
        if !alive.is_empty() {
            prop_assert!(provider.refreshes <= 1, "refreshes {}", provider.refreshes);
        }
        for outcome in alive {
            prop_assert!(
                !matches!(outcome, Outcome::SignIn { .. }),
                "a sign-in with no token lost: {outcome:?}"
            );
            if let Outcome::Adopted(c) | Outcome::Refreshed(c) = outcome {
                let newest = format!("a{}", provider.issued);
                prop_assert_eq!(c.access_token.as_deref(), Some(newest.as_str()));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(3_000)
    ))]

    #[test]
    fn one_refresh_per_expiry_and_never_a_loop_of_replays(
        processes in 1usize..5,
        ops in proptest::collection::vec(op(4), 0..80),
    ) {
        let mut world = World::new(processes);
        for op in ops.iter().filter(|op| match op {
            Op::Step(i) | Op::Kill(i) => *i < processes,
            Op::Advance(_) => true,
        }) {
            world.apply(op);
        }
        world.drain();
        check(&world)?;
    }
}

/// No kill, no stall: every process ends with the one new token, after one refresh.
#[test]
fn without_failures_every_process_ends_with_the_one_new_token() {
    let mut world = World::new(4);
    world.drain();
    assert_eq!(world.provider.refreshes, 1);
    for outcome in world.outcomes() {
        match outcome {
            Outcome::Adopted(c) | Outcome::Refreshed(c) => {
                assert_eq!(c.access_token.as_deref(), Some("a1"));
            }
            other => panic!("{other:?}"),
        }
    }
}

/// The lease holder dies before its refresh reaches the provider: the others wait out its
/// lease and one of them refreshes; nobody signs in.
#[test]
fn a_holder_killed_before_its_refresh_costs_one_lease_and_no_sign_in() {
    let mut world = World::new(3);
    world.step(0); // takes the lease
    world.step(0); // reads: decides to refresh
    world.kill(0);
    world.drain();
    assert_eq!(world.provider.refreshes, 1);
    assert_eq!(world.provider.refused, 0);
    assert!(world.now_ms >= millis(LEASE_TTL), "waited for the lease");
    assert!(world
        .outcomes()
        .iter()
        .all(|o| matches!(o, Outcome::Adopted(_) | Outcome::Refreshed(_))));
}

/// The holder dies after the provider rotated, before it stored the answer: the next holder's
/// refresh is refused once, the spent token is removed, and everyone signs in: no replay loop.
#[test]
fn a_holder_killed_after_the_rotation_costs_one_refusal_and_one_sign_in() {
    let mut world = World::new(3);
    world.step(0); // lease
    world.step(0); // read, decide
    world.step(0); // the refresh reaches the provider
    world.kill(0);
    world.drain();
    assert_eq!(world.lost, 1);
    assert_eq!(world.provider.refused, 1, "one refusal");
    assert_eq!(world.provider.replays, 1);
    assert!(world
        .outcomes()
        .iter()
        .all(|o| matches!(o, Outcome::SignIn { .. })));
    assert_eq!(
        world
            .outcomes()
            .iter()
            .filter(|o| matches!(o, Outcome::SignIn { lost: true }))
            .count(),
        1,
        "the loss is reported once"
    );
}
