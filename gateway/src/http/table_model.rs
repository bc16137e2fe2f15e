//! The session table against a model: random interleavings of several owners' opens, requests,
//! streams, deletes and idle time, sweeps and a stop, and inside the sessions their calls:
//! begun, cancelled by the client, answered upstream. Each session's calls are the gateway's own
//! plain `InFlight`, ended the way the gateway ends a session that leaves the table. After every
//! step: nothing one owner does reaches or changes another's session; no idle session outlives
//! its limit past a sweep; the caps hold. At the end every session opened has left exactly once,
//! and every call begun was either answered or cancelled upstream, never both, whichever way its
//! session left (a `DELETE`, idle expiry, the gateway's stop). With replicas, sessions opened on
//! another replica come in as copies (`begin_copy`, made by a request of their owner, whose
//! record says so) and may be closed there (`closed_elsewhere`): a copy is made once, counted
//! as its owner's, never found by or made over for another owner, and leaves exactly once too.
//! `SESSION_MODEL_CASES` sets the number of cases (CI: 10,000).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use proptest::{prelude::*, test_runner::TestRunner};

use actix_mcp::Cancellation;
use serde_json::json;

use super::{Full, Limits, Table};
use crate::{in_flight::InFlight, owner::Owner};

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
    /// Owner `by` calls (request id `call`) in the `nth` session.
    Call {
        by: usize,
        nth: usize,
        call: u8,
    },
    /// Owner `by` cancels call `call` of the `nth` session.
    Cancel {
        by: usize,
        nth: usize,
        call: u8,
    },
    /// The upstream server answers call `call` of the `nth` session.
    Answer {
        nth: usize,
        call: u8,
    },
    /// Owner `by` names session `remote`, opened on another replica (whose owner is
    /// `remote % 3`): its copy here, made if need be.
    Copy {
        by: usize,
        remote: usize,
    },
    /// Session `remote` was closed at another replica.
    ClosedElsewhere {
        remote: usize,
    },
}

/// The handle (and model index) of remote session `remote`'s copy.
fn copy_of(remote: usize) -> usize {
    1000 + remote
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
        2 => (by.clone(), nth.clone()).prop_map(|(by, nth)| Step::Close { by, nth }),
        2 => (1..15u64).prop_map(|seconds| Step::Wait { seconds }),
        2 => Just(Step::Sweep),
        4 => (by.clone(), nth.clone(), 0..4u8).prop_map(|(by, nth, call)| Step::Call { by, nth, call }),
        2 => (by, nth.clone(), 0..4u8).prop_map(|(by, nth, call)| Step::Cancel { by, nth, call }),
        3 => (nth, 0..4u8).prop_map(|(nth, call)| Step::Answer { nth, call }),
        3 => (0..3usize, 0..6usize).prop_map(|(by, remote)| Step::Copy { by, remote }),
        1 => (0..6usize).prop_map(|remote| Step::ClosedElsewhere { remote }),
    ]
}

/// A call the gateway began upstream, and what became of it.
struct Begun {
    nth: usize,
    call: u8,
    token: Cancellation,
    answered: bool,
}

/// The sessions' calls, as the gateway keeps them (one `InFlight` a session), and every call
/// ever begun.
#[derive(Default)]
struct Calls {
    of: BTreeMap<usize, InFlight>,
    begun: Vec<Begun>,
    /// A deliberate bug: a session that leaves drops its calls without cancelling them.
    forget_on_leave: bool,
}

impl Calls {
    fn begin(&mut self, nth: usize, call: u8) {
        let token = self.of.entry(nth).or_default().begin(&json!(call));
        if let Some(token) = token {
            let answered = false;
            self.begun.push(Begun {
                nth,
                call,
                token,
                answered,
            });
        }
    }

    fn answer(&mut self, nth: usize, call: u8) {
        let owed = self.of.get_mut(&nth).is_some_and(|c| c.end(&json!(call)));
        let last = self
            .begun
            .iter_mut()
            .rev()
            .find(|b| b.nth == nth && b.call == call);
        if let (true, Some(begun)) = (owed, last) {
            begun.answered = true;
        }
    }

    /// Session `nth` left the table: what it left in flight is cancelled (`Session::end`).
    fn leave(&mut self, nth: usize) {
        if let Some(mut calls) = self.of.remove(&nth).filter(|_| !self.forget_on_leave) {
            calls.cancel_all("the downstream session ended");
        }
    }
}

/// What the model knows of a session still in the table.
#[derive(Clone, Debug, PartialEq)]
struct Known {
    owner: usize,
    last_seen: Instant,
    /// Exchanges begun and not finished.
    busy: u32,
}

/// The deliberate bugs the model must catch.
#[derive(Clone, Copy, Default)]
struct Bugs {
    /// The table serves a session to anyone who names it.
    ignore_owner: bool,
    /// A session that leaves forgets its calls (nothing cancelled upstream).
    forget_calls: bool,
}

/// The table under test, and what the model knows of it.
struct Model {
    now: Instant,
    table: Table<usize>,
    /// The ids of the sessions opened here, by their index (their handle).
    opened: Vec<String>,
    /// The sessions in the table, by handle.
    known: BTreeMap<usize, Known>,
    /// The sessions that left, by handle, in the order they left.
    left: Vec<usize>,
    calls: Calls,
    /// The copies made, by their handle.
    copied: BTreeSet<usize>,
    /// The remote sessions closed (their record gone: no request makes a copy of them again).
    gone: BTreeSet<usize>,
}

/// Runs `steps` on the table (with `bugs`) and the model.
fn run(steps: &[Step], bugs: Bugs) -> Result<(), TestCaseError> {
    let mut table = Table::<usize>::new(LIMITS);
    table.ignore_owner = bugs.ignore_owner;
    let mut model = Model {
        now: Instant::now(),
        table,
        opened: Vec::new(),
        known: BTreeMap::new(),
        left: Vec::new(),
        calls: Calls {
            forget_on_leave: bugs.forget_calls,
            ..Calls::default()
        },
        copied: BTreeSet::new(),
        gone: BTreeSet::new(),
    };
    for step in steps {
        match *step {
            Step::Open { by } => model.open(by)?,
            Step::Begin { by, nth } => model.begin(by, nth)?,
            Step::Call { .. } | Step::Cancel { .. } => model.call(step)?,
            Step::Answer { nth, call } => model.calls.answer(nth, call),
            Step::Finish { nth } => model.finish(nth),
            Step::Close { by, nth } => model.close(by, nth)?,
            Step::Wait { seconds } => model.now += Duration::from_secs(seconds),
            Step::Sweep => model.sweep()?,
            Step::Copy { by, remote } => model.copy(by, remote)?,
            Step::ClosedElsewhere { remote } => model.closed_elsewhere(remote)?,
        }
        prop_assert_eq!(model.table.len(), model.known.len());
    }
    model.stop()
}

impl Model {
    fn open(&mut self, by: usize) -> Result<(), TestCaseError> {
        let nth = self.opened.len();
        let id = format!("session-{nth}");
        let held = self.held_by(by);
        match self.table.open(id.clone(), owner(by), nth, self.now) {
            Ok(()) => {
                self.admitted(nth, by, held, 0)?;
                self.opened.push(id);
            }
            Err(Full::Table(_)) => prop_assert_eq!(self.known.len(), LIMITS.sessions),
            Err(Full::Owner(_)) => prop_assert!(by != 0 && held == LIMITS.per_owner),
            Err(Full::Stopping) => prop_assert!(false, "not stopping"),
        }
        Ok(())
    }

    /// Session `nth` entered the table as owner `by`'s (who held `held` before), with `busy`
    /// exchanges under way: there was room for it.
    fn admitted(
        &mut self,
        nth: usize,
        by: usize,
        held: usize,
        busy: u32,
    ) -> Result<(), TestCaseError> {
        prop_assert!(self.known.len() < LIMITS.sessions);
        prop_assert!(by == 0 || held < LIMITS.per_owner);
        let entry = Known {
            owner: by,
            last_seen: self.now,
            busy,
        };
        self.known.insert(nth, entry);
        Ok(())
    }

    fn held_by(&self, by: usize) -> usize {
        self.known.values().filter(|k| k.owner == by).count()
    }

    fn begin(&mut self, by: usize, nth: usize) -> Result<(), TestCaseError> {
        let Some(id) = self.opened.get(nth) else {
            return Ok(());
        };
        let found = self.table.begin(id, &owner(by), self.now);
        match self.known.get_mut(&nth) {
            Some(k) if k.owner == by => {
                prop_assert_eq!(found, Some(nth));
                k.busy += 1;
                k.last_seen = self.now;
            }
            // Another owner's session, or one that left: nothing found.
            _ => prop_assert_eq!(found, None, "owner {} reached session {}", by, nth),
        }
        Ok(())
    }

    /// A request's POST: the session it reaches (if its owner's) takes it, then the exchange
    /// ends (its answer comes later, on the session's stream).
    fn call(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let (Step::Call { by, nth, call } | Step::Cancel { by, nth, call }) = *step else {
            return Ok(());
        };
        let Some(id) = self.opened.get(nth) else {
            return Ok(());
        };
        let found = self.table.begin(id, &owner(by), self.now);
        match self.known.get_mut(&nth) {
            Some(k) if k.owner == by => {
                prop_assert_eq!(found, Some(nth));
                k.last_seen = self.now;
            }
            _ => prop_assert_eq!(found, None, "owner {} reached session {}", by, nth),
        }
        if let Some(session) = found {
            match step {
                Step::Call { .. } => self.calls.begin(session, call),
                _ => {
                    let cancel = self.calls.of.get_mut(&session);
                    cancel.map(|c| c.cancel(&json!(call), Some("the client cancelled")));
                }
            }
            self.table.finish(id, self.now);
        }
        Ok(())
    }

    fn finish(&mut self, nth: usize) {
        let Some(k) = self.known.get_mut(&nth).filter(|k| k.busy > 0) else {
            return;
        };
        k.busy -= 1;
        k.last_seen = self.now;
        self.table.finish(&self.opened[nth], self.now);
    }

    fn close(&mut self, by: usize, nth: usize) -> Result<(), TestCaseError> {
        let Some(id) = self.opened.get(nth) else {
            return Ok(());
        };
        let closed = self.table.close(id, &owner(by));
        match self.known.get(&nth) {
            Some(k) if k.owner == by => {
                prop_assert_eq!(closed, Some(nth));
                self.known.remove(&nth);
                self.left.push(nth);
                self.calls.leave(nth);
            }
            _ => prop_assert_eq!(closed, None, "owner {} closed session {}", by, nth),
        }
        Ok(())
    }

    fn sweep(&mut self) -> Result<(), TestCaseError> {
        let now = self.now;
        let expired = self.table.expire(now);
        for nth in &expired {
            let k = self.known.remove(nth);
            let k = k.ok_or_else(|| TestCaseError::fail("expired twice"))?;
            prop_assert!(k.busy == 0, "a busy session expired");
            prop_assert!(now - k.last_seen >= LIMITS.idle, "expired early");
            self.calls.leave(*nth);
        }
        self.left.extend(expired);
        // No idle session outlives its limit past a sweep.
        for k in self.known.values() {
            prop_assert!(k.busy > 0 || now - k.last_seen < LIMITS.idle);
        }
        Ok(())
    }

    /// Owner `by` names remote session `remote`. The gateway asks for a copy only for the
    /// record's owner; another owner naming a copy made here must find nothing, and change
    /// nothing.
    fn copy(&mut self, by: usize, remote: usize) -> Result<(), TestCaseError> {
        let (id, nth) = (format!("remote-{remote}"), copy_of(remote));
        if self.gone.contains(&remote) {
            return Ok(());
        }
        if by != remote % 3 {
            if self.known.contains_key(&nth) {
                let found = self.table.begin_copy(&id, &owner(by), usize::MAX, self.now);
                prop_assert_eq!(found, Ok(None), "owner {} reached session {}", by, nth);
            }
            return Ok(());
        }
        let held = self.held_by(by);
        let begun = self.table.begin_copy(&id, &owner(by), nth, self.now);
        match (begun, self.known.get_mut(&nth)) {
            (Ok(Some((found, made))), Some(k)) => {
                prop_assert_eq!((found, made), (nth, false));
                k.busy += 1;
                k.last_seen = self.now;
            }
            (Ok(Some((found, made))), None) => {
                prop_assert_eq!((found, made), (nth, true));
                self.admitted(nth, by, held, 1)?;
                self.copied.insert(nth);
            }
            (Ok(None), _) => prop_assert!(false, "its owner found nothing"),
            (Err(Full::Table(_)), None) => prop_assert_eq!(self.known.len(), LIMITS.sessions),
            (Err(Full::Owner(_)), None) => {
                prop_assert!(by != 0 && held == LIMITS.per_owner);
            }
            (Err(full), _) => prop_assert!(false, "{:?} for a copy", full),
        }
        Ok(())
    }

    fn closed_elsewhere(&mut self, remote: usize) -> Result<(), TestCaseError> {
        let nth = copy_of(remote);
        self.gone.insert(remote);
        let closed = self.table.closed_elsewhere(&format!("remote-{remote}"));
        match self.known.remove(&nth) {
            Some(_) => {
                prop_assert_eq!(closed, Some(nth));
                self.left.push(nth);
                self.calls.leave(nth);
            }
            None => prop_assert_eq!(closed, None),
        }
        Ok(())
    }

    /// The stop: every session left, exactly once, and nothing opens any more; every call
    /// begun was answered or cancelled upstream: never both, never neither.
    fn stop(mut self) -> Result<(), TestCaseError> {
        let stopped = self.table.stop();
        for nth in &stopped {
            self.calls.leave(*nth);
        }
        self.left.extend(stopped);
        let unique: BTreeSet<usize> = self.left.iter().copied().collect();
        prop_assert_eq!(unique.len(), self.left.len(), "a session left twice");
        let mut every: BTreeSet<usize> = (0..self.opened.len()).collect();
        every.extend(&self.copied);
        prop_assert_eq!(unique, every);
        let refused = self
            .table
            .open("late".into(), owner(0), usize::MAX, self.now);
        prop_assert_eq!(refused, Err(Full::Stopping));
        for b in &self.calls.begun {
            let cancelled = b.token.is_cancelled();
            prop_assert!(
                b.answered != cancelled,
                "call {} of session {}: answered {}, cancelled {}",
                b.call,
                b.nth,
                b.answered,
                cancelled
            );
        }
        Ok(())
    }
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
fn owners_stay_apart_sessions_expire_and_every_call_is_answered_or_cancelled() {
    let steps = proptest::collection::vec(step(), 1..80);
    let outcome = runner(cases()).run(&steps, |steps| run(&steps, Bugs::default()));
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// How the model fails against the table and calls with `bugs` (it must).
fn failure_with(bugs: Bugs) -> String {
    let steps = proptest::collection::vec(step(), 1..80);
    let outcome = runner(512).run(&steps, |steps| run(&steps, bugs));
    outcome.expect_err("the bug went unseen").to_string()
}

#[test]
fn the_model_catches_a_table_that_serves_another_owners_session() {
    let why = failure_with(Bugs {
        ignore_owner: true,
        ..Bugs::default()
    });
    assert!(
        why.contains("reached session") || why.contains("closed session"),
        "{why}"
    );
}

#[test]
fn the_model_catches_a_session_that_leaves_without_cancelling_its_calls() {
    let why = failure_with(Bugs {
        forget_calls: true,
        ..Bugs::default()
    });
    assert!(why.contains("cancelled false"), "{why}");
}
