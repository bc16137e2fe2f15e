//! The session table against a model: random interleavings of several owners' opens, requests,
//! streams, deletes and idle time, sweeps and a stop. After every step: nothing one owner does
//! reaches or changes another's session; no idle session outlives its limit past a sweep; the
//! caps hold; and at the end every session opened has left exactly once (so what it left in
//! flight upstream was cancelled). `SESSION_MODEL_CASES` sets the number of cases (CI: 10,000).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use proptest::{prelude::*, test_runner::TestRunner};

use super::{Full, Limits, Table};
use crate::owner::Owner;

const LIMITS: Limits = Limits {
    idle: Duration::from_secs(10),
    sessions: 6,
    per_owner: 3,
};

#[derive(Clone, Debug)]
enum Step {
    Open {
        by: usize,
    },
    /// A request or stream of owner `by` naming the `nth` session ever opened.
    Begin {
        by: usize,
        nth: usize,
    },
    Finish {
        nth: usize,
    },
    Close {
        by: usize,
        nth: usize,
    },
    Wait {
        seconds: u64,
    },
    Sweep,
}

fn owner(by: usize) -> Owner {
    match by {
        0 => Owner::Anonymous,
        n => Owner::user("https://issuer", &format!("user-{n}")),
    }
}

fn step() -> impl Strategy<Value = Step> {
    let by = 0..3usize;
    let nth = 0..12usize;
    prop_oneof![
        3 => by.clone().prop_map(|by| Step::Open { by }),
        4 => (by.clone(), nth.clone()).prop_map(|(by, nth)| Step::Begin { by, nth }),
        3 => nth.clone().prop_map(|nth| Step::Finish { nth }),
        2 => (by, nth).prop_map(|(by, nth)| Step::Close { by, nth }),
        2 => (1..15u64).prop_map(|seconds| Step::Wait { seconds }),
        2 => Just(Step::Sweep),
    ]
}

/// What the model knows of a session still in the table.
#[derive(Clone, Debug, PartialEq)]
struct Known {
    owner: usize,
    last_seen: Instant,
    /// Exchanges begun and not finished.
    busy: u32,
}

/// Runs `steps` on the table (with `ignore_owner`, a deliberate isolation bug) and the model.
fn run(steps: &[Step], ignore_owner: bool) -> Result<(), TestCaseError> {
    let start = Instant::now();
    let mut now = start;
    let mut table = Table::<usize>::new(LIMITS);
    table.ignore_owner = ignore_owner;
    let mut opened: Vec<String> = Vec::new();
    let mut known: BTreeMap<usize, Known> = BTreeMap::new();
    let mut left: Vec<usize> = Vec::new();
    for step in steps {
        match *step {
            Step::Open { by } => {
                let nth = opened.len();
                let id = format!("session-{nth}");
                let held = known.values().filter(|k| k.owner == by).count();
                match table.open(id.clone(), owner(by), nth, now) {
                    Ok(()) => {
                        prop_assert!(known.len() < LIMITS.sessions);
                        prop_assert!(by == 0 || held < LIMITS.per_owner);
                        let entry = Known {
                            owner: by,
                            last_seen: now,
                            busy: 0,
                        };
                        known.insert(nth, entry);
                        opened.push(id);
                    }
                    Err(Full::Table(_)) => prop_assert_eq!(known.len(), LIMITS.sessions),
                    Err(Full::Owner(_)) => prop_assert!(by != 0 && held == LIMITS.per_owner),
                    Err(Full::Stopping) => prop_assert!(false, "not stopping"),
                }
            }
            Step::Begin { by, nth } => {
                let Some(id) = opened.get(nth) else { continue };
                let found = table.begin(id, &owner(by), now);
                match known.get_mut(&nth) {
                    Some(k) if k.owner == by => {
                        prop_assert_eq!(found, Some(nth));
                        k.busy += 1;
                        k.last_seen = now;
                    }
                    // Another owner's session, or one that left: nothing found.
                    _ => prop_assert_eq!(found, None, "owner {} reached session {}", by, nth),
                }
            }
            Step::Finish { nth } => {
                let Some(k) = known.get_mut(&nth).filter(|k| k.busy > 0) else {
                    continue;
                };
                k.busy -= 1;
                k.last_seen = now;
                table.finish(&opened[nth], now);
            }
            Step::Close { by, nth } => {
                let Some(id) = opened.get(nth) else { continue };
                let closed = table.close(id, &owner(by));
                match known.get(&nth) {
                    Some(k) if k.owner == by => {
                        prop_assert_eq!(closed, Some(nth));
                        known.remove(&nth);
                        left.push(nth);
                    }
                    _ => prop_assert_eq!(closed, None, "owner {} closed session {}", by, nth),
                }
            }
            Step::Wait { seconds } => now += Duration::from_secs(seconds),
            Step::Sweep => {
                let expired = table.expire(now);
                for nth in &expired {
                    let k = known.remove(nth);
                    let k = k.ok_or_else(|| TestCaseError::fail("expired twice"))?;
                    prop_assert!(k.busy == 0, "a busy session expired");
                    prop_assert!(now - k.last_seen >= LIMITS.idle, "expired early");
                }
                left.extend(expired);
                // No idle session outlives its limit past a sweep.
                for k in known.values() {
                    prop_assert!(k.busy > 0 || now - k.last_seen < LIMITS.idle);
                }
            }
        }
        prop_assert_eq!(table.len(), known.len());
    }
    // The stop: every session left, exactly once, and nothing opens any more.
    left.extend(table.stop());
    let unique: BTreeSet<usize> = left.iter().copied().collect();
    prop_assert_eq!(unique.len(), left.len(), "a session left twice");
    prop_assert_eq!(unique, (0..opened.len()).collect::<BTreeSet<_>>());
    let refused = table.open("late".into(), owner(0), usize::MAX, now);
    prop_assert_eq!(refused, Err(Full::Stopping));
    Ok(())
}

fn cases() -> u32 {
    let cases = std::env::var("SESSION_MODEL_CASES").ok();
    cases.and_then(|n| n.parse().ok()).unwrap_or(512)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    })
}

#[test]
fn owners_stay_apart_idle_sessions_expire_and_every_session_leaves_once() {
    let steps = proptest::collection::vec(step(), 1..80);
    let outcome = runner(cases()).run(&steps, |steps| run(&steps, false));
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

#[test]
fn the_model_catches_a_table_that_serves_another_owners_session() {
    let steps = proptest::collection::vec(step(), 1..80);
    let outcome = runner(512).run(&steps, |steps| run(&steps, true));
    let failure = outcome.expect_err("the isolation bug went unseen");
    let why = failure.to_string();
    assert!(
        why.contains("reached session") || why.contains("closed session"),
        "{why}"
    );
}
