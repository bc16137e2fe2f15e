//! What following a task decides: the synchronous core under the follow in [`tasks`](super).
//! No I/O, no waiting, no clock: the follow hands each status it reads (the first, a poll's, a
//! pushed one, the one after input was handed over) to a [`Following`], performs the [`Step`]
//! it is given, and ends the way [`ending`] says of the last status. [`GuardState`] says what
//! a follow given up leaves to cancel.

use std::{collections::HashSet, time::Duration};

use super::super::mrtr::InputRequests;
use crate::{
    error::Error,
    protocol::{
        jsonrpc::{ErrorObject, RawResult},
        tasks::{Task, TaskStatus},
    },
};

/// What the follow does next.
pub(crate) enum Step {
    /// 2026-07-28: have the handlers answer these input requests, hand the answers over with
    /// `tasks/update`, then read the task again (`tasks/get`).
    Answer(InputRequests),
    /// Wait this long for the next status: poll (`tasks/get`) after it, unless the server
    /// pushes one sooner.
    Wait(Duration),
    /// The follow is over: end as [`ending`] says of the task.
    Finish,
}

impl std::fmt::Debug for Step {
    /// The keys of the input requests only: their handlers' parameters say nothing more here.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Answer(requests) => f.debug_tuple("Answer").field(&requests.keys()).finish(),
            Step::Wait(interval) => f.debug_tuple("Wait").field(interval).finish(),
            Step::Finish => f.write_str("Finish"),
        }
    }
}

/// A task being followed: its latest status, and the input requests answered so far.
pub(crate) struct Following {
    task: Task,
    /// Whether the connection speaks the 2026-07-28 era.
    modern: bool,
    /// The keys of the input requests answered: each is unique over the task's life, and the
    /// server lists it until it took the answer in, so each is answered once.
    answered: HashSet<String>,
}

impl Following {
    pub fn new(task: Task, modern: bool) -> Self {
        Self {
            task,
            modern,
            answered: HashSet::new(),
        }
    }

    /// The task as last read.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// A new status of the task: polled, pushed, or read after input was handed over.
    pub fn on_status(&mut self, task: Task) {
        self.task = task;
    }

    /// The handlers answered the input requests under `keys`.
    pub fn on_answered(&mut self, keys: impl IntoIterator<Item = String>) {
        self.answered.extend(keys);
    }

    /// What to do about the task as last read. Fails if the input requests it names are
    /// malformed. Asked again without a new status (the status subscription ended), it waits.
    pub fn next_step(&mut self) -> Result<Step, Error> {
        if self.task.status.is_terminal() {
            return Ok(Step::Finish);
        }
        if self.task.status == TaskStatus::InputRequired {
            // 2025-11-25: a task that needs input gets it through `tasks/result`, which waits
            // for the end while the server's requests (elicitation, sampling) reach the
            // handlers.
            if !self.modern {
                return Ok(Step::Finish);
            }
            // 2026-07-28: the task names what it needs; the input not answered yet is.
            let mut requests = self.take_input_requests()?;
            requests.retain(|key, _| !self.answered.contains(key));
            if !requests.is_empty() {
                return Ok(Step::Answer(requests));
            }
        }
        Ok(Step::Wait(self.task.poll_interval()))
    }

    /// The input requests of the task (2026-07-28), taken out of it.
    fn take_input_requests(&mut self) -> Result<InputRequests, Error> {
        match self.task.input_requests.take() {
            None => Ok(InputRequests::new()),
            Some(requests) => serde_json::from_value(requests)
                .map_err(|e| Error::Protocol(format!("malformed inputRequests of a task: {e}"))),
        }
    }
}

/// How the follow of a finished task ends.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The result the task carries (2026-07-28).
    Result(RawResult),
    /// The task's error, or why it has no result.
    Failed(Error),
    /// `tasks/result` has the result (2025-11-25).
    Fetch,
}

/// The end of task `task` as last read: its inlined result or error, else (2025-11-25) the
/// result `tasks/result` holds.
pub(crate) fn ending(task: &Task, modern: bool) -> Ending {
    if let Some(result) = &task.result {
        return match serde_json::value::to_raw_value(result) {
            Ok(raw) => Ending::Result(raw),
            Err(e) => Ending::Failed(Error::Protocol(format!("task result: {e}"))),
        };
    }
    if let Some(error) = &task.error {
        return Ending::Failed(match serde_json::from_value::<ErrorObject>(error.clone()) {
            Ok(error) => Error::Server {
                code: error.code,
                message: error.message,
                data: error.data,
            },
            Err(e) => Error::Protocol(format!("task error: {e}")),
        });
    }
    if modern {
        return Ending::Failed(Error::Protocol(format!(
            "task {} ended {} without a result",
            task.task_id,
            task.status.as_str()
        )));
    }
    Ending::Fetch
}

/// Where the work of a task call stands, for what giving it up (dropping it) leaves to do.
#[derive(Debug, PartialEq)]
pub(crate) enum GuardState {
    /// The creating call is not answered yet: it cancels what it creates itself.
    Creating,
    /// Task `0` is being followed.
    Running(String),
    /// The follow ended: the task is left as it is.
    Done,
}

impl GuardState {
    /// The task to cancel (`tasks/cancel`) when the work is given up in this state.
    pub fn task_to_cancel(self) -> Option<String> {
        match self {
            GuardState::Running(task_id) => Some(task_id),
            GuardState::Creating | GuardState::Done => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn task(value: Value) -> Task {
        serde_json::from_value(value).unwrap()
    }

    fn working(poll_ms: u64) -> Task {
        task(json!({"taskId": "t1", "status": "working", "pollInterval": poll_ms}))
    }

    fn needing(keys: &[&str]) -> Task {
        let requests: serde_json::Map<String, Value> = keys
            .iter()
            .map(|key| {
                let request = json!({"method": "elicitation/create", "params": {"message": key}});
                ((*key).to_owned(), request)
            })
            .collect();
        task(
            json!({"taskId": "t1", "status": "input_required", "pollInterval": 100,
            "inputRequests": requests}),
        )
    }

    fn keys(step: Result<Step, Error>) -> Vec<String> {
        match step {
            Ok(Step::Answer(requests)) => requests.into_keys().collect(),
            other => panic!("not answered: {other:?}"),
        }
    }

    #[test]
    fn a_running_task_is_waited_for_at_its_poll_interval() {
        let mut following = Following::new(working(250), true);
        assert!(
            matches!(following.next_step(), Ok(Step::Wait(d)) if d == Duration::from_millis(250))
        );
        following.on_status(task(json!({"taskId": "t1", "status": "later"})));
        assert!(
            matches!(following.next_step(), Ok(Step::Wait(d)) if d == Duration::from_secs(1)),
            "a status this crate does not know is waited out, at the default interval"
        );
    }

    #[test]
    fn a_terminal_task_finishes_the_follow_in_both_eras() {
        for status in ["completed", "failed", "cancelled"] {
            for modern in [false, true] {
                let ended = task(json!({"taskId": "t1", "status": status}));
                let mut following = Following::new(ended, modern);
                assert!(matches!(following.next_step(), Ok(Step::Finish)));
            }
        }
    }

    #[test]
    fn a_legacy_task_needing_input_finishes_for_tasks_result_to_wait() {
        let mut following = Following::new(needing(&["who"]), false);
        assert!(matches!(following.next_step(), Ok(Step::Finish)));
    }

    #[test]
    fn a_modern_task_needing_input_has_each_request_answered_once() {
        let mut following = Following::new(needing(&["a", "b"]), true);
        assert_eq!(keys(following.next_step()), ["a", "b"]);
        following.on_answered(["a".to_owned(), "b".to_owned()]);
        following.on_status(needing(&["a", "b", "c"]));
        assert_eq!(keys(following.next_step()), ["c"], "only what is new");
        following.on_answered(["c".to_owned()]);
        following.on_status(needing(&["c"]));
        assert!(
            matches!(following.next_step(), Ok(Step::Wait(d)) if d == Duration::from_millis(100)),
            "the server has not taken the answer in yet: wait"
        );
        assert!(
            matches!(following.next_step(), Ok(Step::Wait(_))),
            "asked again without a new status (the subscription ended): wait again"
        );
        let bare = task(json!({"taskId": "t1", "status": "input_required"}));
        following.on_status(bare);
        assert!(
            matches!(following.next_step(), Ok(Step::Wait(_))),
            "needing input that it does not name"
        );
    }

    #[test]
    fn malformed_input_requests_fail_the_follow() {
        let malformed = task(json!({"taskId": "t1", "status": "input_required",
            "inputRequests": {"k": {"params": {}}}}));
        let mut following = Following::new(malformed, true);
        match following.next_step() {
            Err(Error::Protocol(why)) => assert!(why.contains("malformed inputRequests"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_inlined_result_or_error_ends_the_follow_in_either_era() {
        for modern in [false, true] {
            let done = task(json!({"taskId": "t1", "status": "completed",
                "result": {"content": []}}));
            match ending(&done, modern) {
                Ending::Result(raw) => assert_eq!(raw.get(), r#"{"content":[]}"#),
                other => panic!("{other:?}"),
            }
            let failed = task(json!({"taskId": "t1", "status": "failed",
                "error": {"code": -32000, "message": "broke", "data": 1}}));
            match ending(&failed, modern) {
                Ending::Failed(Error::Server {
                    code,
                    message,
                    data,
                }) => {
                    assert_eq!(
                        (code, message.as_str(), data),
                        (-32000, "broke", Some(json!(1)))
                    );
                }
                other => panic!("{other:?}"),
            }
            let malformed = task(json!({"taskId": "t1", "status": "failed", "error": "broke"}));
            assert!(matches!(
                ending(&malformed, modern),
                Ending::Failed(Error::Protocol(why)) if why.starts_with("task error")
            ));
        }
    }

    #[test]
    fn without_an_inlined_result_a_legacy_task_fetches_it_and_a_modern_one_fails() {
        let cancelled = task(json!({"taskId": "t1", "status": "cancelled"}));
        assert!(matches!(ending(&cancelled, false), Ending::Fetch));
        assert!(matches!(
            ending(&cancelled, true),
            Ending::Failed(Error::Protocol(why)) if why == "task t1 ended cancelled without a result"
        ));
    }

    #[test]
    fn only_a_task_being_followed_is_cancelled_when_its_work_is_given_up() {
        assert_eq!(GuardState::Creating.task_to_cancel(), None);
        assert_eq!(
            GuardState::Running("t1".into()).task_to_cancel(),
            Some("t1".into())
        );
        assert_eq!(GuardState::Done.task_to_cancel(), None);
    }

    /// The statuses a server may give a followed task, for the model below.
    #[derive(Debug, Clone)]
    enum Status {
        Working(u64),
        /// Needing the input under these keys (of a few, so that they repeat).
        Needing(Vec<&'static str>),
        MalformedInput,
        Terminal(&'static str),
    }

    fn status() -> impl proptest::strategy::Strategy<Value = Status> {
        use proptest::{
            prelude::any,
            sample::{select, subsequence},
            strategy::{Just, Strategy},
        };
        proptest::prop_oneof![
            4 => any::<u64>().prop_map(Status::Working),
            6 => subsequence(vec!["a", "b", "c", "d"], 0..=4).prop_map(Status::Needing),
            1 => Just(Status::MalformedInput),
            1 => select(vec!["completed", "failed", "cancelled"]).prop_map(Status::Terminal),
        ]
    }

    fn task_of(status: &Status) -> Task {
        match status {
            Status::Working(ms) => working(*ms),
            Status::Needing(keys) => needing(keys),
            Status::MalformedInput => task(json!({"taskId": "t1", "status": "input_required",
                "inputRequests": [1]})),
            Status::Terminal(status) => task(json!({"taskId": "t1", "status": status})),
        }
    }

    /// What the model expects of a status.
    #[derive(Debug, PartialEq)]
    enum Expected {
        Answer(Vec<String>),
        Wait(Duration),
        Finish,
        Fail,
    }

    fn model(status: &Status, modern: bool, answered: &HashSet<String>) -> Expected {
        match status {
            Status::Terminal(_) => Expected::Finish,
            Status::Working(ms) => Expected::Wait(Duration::from_millis((*ms).clamp(50, 60_000))),
            Status::Needing(_) | Status::MalformedInput if !modern => Expected::Finish,
            Status::MalformedInput => Expected::Fail,
            Status::Needing(keys) => {
                let new: Vec<String> = keys
                    .iter()
                    .filter(|key| !answered.contains(**key))
                    .map(|key| (*key).to_owned())
                    .collect();
                if new.is_empty() {
                    Expected::Wait(Duration::from_millis(100))
                } else {
                    Expected::Answer(new)
                }
            }
        }
    }

    proptest::proptest! {
        /// However a server's statuses follow each other, each step is what the model says,
        /// and no input request is ever answered twice.
        #[test]
        fn each_status_leads_to_the_step_the_model_says(
            statuses in proptest::collection::vec(status(), 1..40),
            modern: bool,
        ) {
            let mut following = Following::new(task_of(&statuses[0]), modern);
            let mut answered = HashSet::new();
            for (n, status) in statuses.iter().enumerate() {
                if n > 0 {
                    following.on_status(task_of(status));
                }
                let expected = model(status, modern, &answered);
                let got = match following.next_step() {
                    Ok(Step::Answer(requests)) => {
                        let keys: Vec<String> = requests.into_keys().collect();
                        for key in &keys {
                            proptest::prop_assert!(answered.insert(key.clone()), "{} twice", key);
                        }
                        following.on_answered(keys.clone());
                        Expected::Answer(keys)
                    }
                    Ok(Step::Wait(interval)) => Expected::Wait(interval),
                    Ok(Step::Finish) => Expected::Finish,
                    Err(_) => Expected::Fail,
                };
                proptest::prop_assert_eq!(&got, &expected, "{:?}", status);
                if matches!(got, Expected::Finish | Expected::Fail) {
                    break; // the follow is over
                }
            }
        }
    }
}
