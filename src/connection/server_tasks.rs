//! The tasks the server asks of us (2025-11-25): a `sampling/createMessage` or
//! `elicitation/create` that carries `params.task` is answered at once with the task we made of
//! it; the handler runs on; the server follows it with `tasks/get`, `tasks/result` (answered
//! when the handler ends), `tasks/cancel` (the handler's token is cancelled; `cancelled` sticks)
//! and `tasks/list`. A plain table: no actix, no I/O.

use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

use crate::{
    cancellation::Cancellation,
    protocol::{
        jsonrpc::{ErrorObject, WireId},
        tasks::{Task, TaskStatus},
    },
};

/// Tasks kept at most; the oldest ended ones make room. When every kept task still runs, a new
/// one is refused (the server's request gets an error): the server cannot grow the table.
pub(super) const MAX_TASKS: usize = 1024;

/// How often the server should poll our tasks, in ms.
const POLL_INTERVAL_MS: u64 = 250;

/// JSON-RPC invalid params: an unknown task, or one that already ended.
const INVALID_PARAMS: i64 = -32602;

/// JSON-RPC internal error.
const INTERNAL_ERROR: i64 = -32603;

type Answer = Result<Value, ErrorObject>;

#[derive(Default)]
pub(super) struct ServerTasks {
    tasks: HashMap<String, Entry>,
    order: VecDeque<String>,
    made: u64,
}

struct Entry {
    task: Task,
    token: Cancellation,
    outcome: Option<Answer>,
    /// `tasks/result` requests waiting for the end.
    waiting: Vec<WireId>,
}

impl Entry {
    fn ended(&self) -> bool {
        self.task.status.is_terminal()
    }

    fn set_status(&mut self, status: TaskStatus, message: Option<&str>, now: OffsetDateTime) {
        self.task.status = status;
        if let Some(message) = message {
            self.task.status_message = Some(message.to_owned());
        }
        self.task.last_updated_at = Some(rfc3339(now));
    }

    fn result_answer(&self) -> Answer {
        match (&self.outcome, &self.task.status) {
            (_, TaskStatus::Cancelled) => Err(error(INTERNAL_ERROR, "the task was cancelled")),
            (Some(outcome), _) => with_related(outcome.clone(), &self.task.task_id),
            (None, _) => Err(error(INTERNAL_ERROR, "the task has no result")),
        }
    }

    /// The task as `tasks/get` and `tasks/cancel` answer.
    fn described(&self) -> Answer {
        serde_json::to_value(&self.task).map_err(|e| error(INTERNAL_ERROR, &e.to_string()))
    }
}

/// The requests the server follows its tasks with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskRequest {
    /// `tasks/get`: the task as it is.
    Get,
    /// `tasks/result`: its result, once it ends.
    Result,
    /// `tasks/cancel`.
    Cancel,
    /// `tasks/list`.
    List,
}

impl TaskRequest {
    /// The task request `method` names, if it names one.
    pub fn of(method: &str) -> Option<Self> {
        match method {
            "tasks/get" => Some(Self::Get),
            "tasks/result" => Some(Self::Result),
            "tasks/cancel" => Some(Self::Cancel),
            "tasks/list" => Some(Self::List),
            _ => None,
        }
    }
}

/// The params of `tasks/get`, `tasks/result` and `tasks/cancel`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskParams {
    task_id: String,
}

fn error(code: i64, message: &str) -> ErrorObject {
    ErrorObject {
        code,
        message: message.to_owned(),
        data: None,
    }
}

/// A task's result carries the related-task `_meta` (2025-11-25).
fn with_related(answer: Answer, task_id: &str) -> Answer {
    let mut value = answer?;
    if let Some(object) = value.as_object_mut() {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "io.modelcontextprotocol/related-task".into(),
                json!({ "taskId": task_id }),
            );
        }
    }
    Ok(value)
}

/// A task's time: RFC 3339 in UTC, to the millisecond (`2026-12-01T17:45:09.372Z`).
fn rfc3339(at: OffsetDateTime) -> String {
    let at = at.replace_millisecond(at.millisecond()).unwrap_or(at);
    // Fails only past the year 9999.
    at.format(&Rfc3339).unwrap_or_default()
}

impl ServerTasks {
    /// Makes a task of a request the server augmented: the `CreateTaskResult` to answer with,
    /// and the task's id for [`finished`](Self::finished). `None` when [`MAX_TASKS`] tasks still
    /// run.
    pub fn create(
        &mut self,
        ttl: Option<&Value>,
        token: Cancellation,
        now: OffsetDateTime,
    ) -> Option<(Answer, String)> {
        if !self.make_room() {
            return None;
        }
        self.made += 1;
        let id = format!("client-task-{}", self.made);
        let now = rfc3339(now);
        let task = Task {
            task_id: id.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: Some(now.clone()),
            last_updated_at: Some(now),
            // `null` (unlimited) when the server asked for none: the field is required.
            ttl: Some(ttl.cloned().unwrap_or(Value::Null)),
            poll_interval: Some(POLL_INTERVAL_MS),
            ttl_ms: None,
            poll_interval_ms: None,
            result: None,
            error: None,
            input_requests: None,
            extra: Map::new(),
        };
        let entry = Entry {
            task,
            token,
            outcome: None,
            waiting: Vec::new(),
        };
        let created = entry.described().map(|task| json!({ "task": task }));
        self.order.push_back(id.clone());
        self.tasks.insert(id.clone(), entry);
        Some((created, id))
    }

    /// Drops the oldest ended tasks until one more fits; `false` if every kept task still runs.
    fn make_room(&mut self) -> bool {
        while self.tasks.len() >= MAX_TASKS {
            let Some(position) = self
                .order
                .iter()
                .position(|id| self.tasks.get(id).is_none_or(Entry::ended))
            else {
                return false; // every kept task still runs: keep them all
            };
            if let Some(id) = self.order.remove(position) {
                self.tasks.remove(&id);
            }
        }
        true
    }

    /// The handler of task `id` ended: the `tasks/result` requests waiting, with their answer.
    pub fn finished(
        &mut self,
        id: &str,
        outcome: Answer,
        now: OffsetDateTime,
    ) -> Vec<(WireId, Answer)> {
        let Some(entry) = self.tasks.get_mut(id) else {
            return Vec::new();
        };
        if entry.task.status != TaskStatus::Cancelled {
            let status = if outcome.is_ok() {
                TaskStatus::Completed
            } else {
                TaskStatus::Failed
            };
            entry.set_status(status, None, now);
        }
        entry.outcome = Some(outcome);
        let answer = entry.result_answer();
        std::mem::take(&mut entry.waiting)
            .into_iter()
            .map(|waiter| (waiter, answer.clone()))
            .collect()
    }

    /// Answers a task request from request `id`: the answers to send now (a waiting
    /// `tasks/result` is answered later, by `finished`).
    pub fn request(
        &mut self,
        id: WireId,
        request: TaskRequest,
        params: &Value,
        now: OffsetDateTime,
    ) -> Vec<(WireId, Answer)> {
        if request == TaskRequest::List {
            let tasks: Vec<&Task> = self
                .order
                .iter()
                .filter_map(|id| self.tasks.get(id))
                .map(|entry| &entry.task)
                .collect();
            let listed = serde_json::to_value(tasks)
                .map(|tasks| json!({ "tasks": tasks }))
                .map_err(|e| error(INTERNAL_ERROR, &e.to_string()));
            return vec![(id, listed)];
        }
        let task_id = TaskParams::deserialize(params)
            .map(|p| p.task_id)
            .unwrap_or_default();
        let Some(entry) = self.tasks.get_mut(&task_id) else {
            let unknown = error(INVALID_PARAMS, &format!("unknown task {task_id:?}"));
            return vec![(id, Err(unknown))];
        };
        match request {
            TaskRequest::Get => vec![(id, entry.described())],
            TaskRequest::Result if entry.ended() => vec![(id, entry.result_answer())],
            TaskRequest::Result => {
                entry.waiting.push(id);
                Vec::new()
            }
            TaskRequest::Cancel if entry.ended() => {
                let ended = error(INVALID_PARAMS, &format!("task {task_id:?} has ended"));
                vec![(id, Err(ended))]
            }
            TaskRequest::Cancel => {
                // Cancelled before the answer, and for good, whatever the handler does next.
                entry.set_status(TaskStatus::Cancelled, Some("cancelled by the server"), now);
                entry
                    .token
                    .cancel_with_reason("task cancelled by the server");
                let answer = entry.result_answer();
                let mut answers: Vec<(WireId, Answer)> = std::mem::take(&mut entry.waiting)
                    .into_iter()
                    .map(|waiter| (waiter, answer.clone()))
                    .collect();
                answers.push((id, entry.described()));
                answers
            }
            TaskRequest::List => Vec::new(), // answered above
        }
    }

    /// The connection ended: every handler is told.
    pub fn cancel_all(&mut self) {
        for entry in self.tasks.values() {
            entry.token.cancel_with_reason("connection closed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(n: u64) -> WireId {
        WireId::Number(n.into())
    }

    /// 2025-12-01T17:45:09.372Z, and `later_ms` after.
    fn at(later_ms: i64) -> OffsetDateTime {
        let nanos = (1_764_611_109_372 + i128::from(later_ms)) * 1_000_000;
        OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap()
    }

    fn answer(answers: &[(WireId, Answer)], i: usize) -> &Value {
        answers[i].1.as_ref().unwrap()
    }

    #[test]
    fn a_task_is_followed_to_its_result_and_cancel_sticks() {
        let mut tasks = ServerTasks::default();
        let (created, id) = tasks.create(None, Cancellation::new(), at(0)).unwrap();
        assert_eq!(created.unwrap()["task"]["status"], "working");
        let params = json!({ "taskId": id });
        assert!(
            tasks
                .request(wire(1), TaskRequest::Result, &params, at(1))
                .is_empty(),
            "waits"
        );
        let answers = tasks.finished(&id, Ok(json!({"content": "done"})), at(2));
        assert_eq!(answers.len(), 1);
        assert_eq!(
            answer(&answers, 0)["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
            id
        );
        let got = tasks.request(wire(2), TaskRequest::Get, &params, at(3));
        assert_eq!(answer(&got, 0)["status"], "completed");
        let late = tasks.request(wire(3), TaskRequest::Cancel, &params, at(4));
        assert_eq!(
            late[0].1.as_ref().unwrap_err().code,
            INVALID_PARAMS,
            "ended"
        );

        let token = Cancellation::new();
        let (_, second) = tasks.create(None, token.clone(), at(5)).unwrap();
        let params = json!({ "taskId": second });
        assert!(tasks
            .request(wire(4), TaskRequest::Result, &params, at(6))
            .is_empty());
        let answers = tasks.request(wire(5), TaskRequest::Cancel, &params, at(7));
        assert!(token.is_cancelled(), "the handler is told");
        assert_eq!(answers.len(), 2, "the waiting result and the cancel");
        assert!(answers[0].1.is_err());
        assert_eq!(answer(&answers, 1)["status"], "cancelled");
        tasks.finished(&second, Ok(json!({})), at(8));
        let got = tasks.request(wire(6), TaskRequest::Get, &params, at(9));
        assert_eq!(answer(&got, 0)["status"], "cancelled", "sticky");
        let unknown = tasks.request(
            wire(7),
            TaskRequest::Get,
            &json!({"taskId": "nope"}),
            at(10),
        );
        assert_eq!(unknown[0].1.as_ref().unwrap_err().code, INVALID_PARAMS);
        let no_id = tasks.request(wire(8), TaskRequest::Get, &json!({"taskId": 7}), at(11));
        assert_eq!(no_id[0].1.as_ref().unwrap_err().code, INVALID_PARAMS);
    }

    #[test]
    fn a_server_task_reads_back_as_a_task_with_rfc3339_times() {
        let mut tasks = ServerTasks::default();
        let ttl = json!(60_000);
        let (created, id) = tasks
            .create(Some(&ttl), Cancellation::new(), at(0))
            .unwrap();
        let created = created.unwrap();
        assert_eq!(
            created,
            json!({"task": {"taskId": id, "status": "working",
                "createdAt": "2025-12-01T17:45:09.372Z",
                "lastUpdatedAt": "2025-12-01T17:45:09.372Z",
                "ttl": 60_000, "pollInterval": POLL_INTERVAL_MS}})
        );
        let task: Task = serde_json::from_value(created["task"].clone()).unwrap();
        assert_eq!(serde_json::to_value(&task).unwrap(), created["task"]);

        tasks.finished(&id, Err(error(-1, "no")), at(628));
        let got = tasks.request(
            wire(1),
            TaskRequest::Get,
            &json!({ "taskId": id }),
            at(1_001),
        );
        let task: Task = serde_json::from_value(answer(&got, 0).clone()).unwrap();
        assert_eq!(task.status, TaskStatus::Failed);
        assert_eq!(task.created_at.as_deref(), Some("2025-12-01T17:45:09.372Z"));
        assert_eq!(
            task.last_updated_at.as_deref(),
            Some("2025-12-01T17:45:10Z"),
            "a whole second has no fraction"
        );

        let (_, unlimited) = tasks.create(None, Cancellation::new(), at(2)).unwrap();
        let listed = tasks.request(wire(2), TaskRequest::List, &json!({}), at(3));
        let listed = answer(&listed, 0);
        assert_eq!(
            listed["tasks"][1].get("ttl"),
            Some(&Value::Null),
            "no ttl asked: unlimited, and said so"
        );
        let listed: crate::protocol::tasks::ListTasksResult =
            serde_json::from_value(listed.clone()).unwrap();
        assert_eq!(listed.tasks.len(), 2);
        assert_eq!(listed.tasks[1].task_id, unlimited);
    }

    #[test]
    fn a_full_table_of_running_tasks_refuses_a_new_one_and_ended_ones_make_room() {
        let mut tasks = ServerTasks::default();
        let ids: Vec<String> = (0..MAX_TASKS)
            .map(|_| tasks.create(None, Cancellation::new(), at(0)).unwrap().1)
            .collect();
        assert!(
            tasks.create(None, Cancellation::new(), at(1)).is_none(),
            "every kept task runs: no room"
        );
        assert_eq!(tasks.tasks.len(), MAX_TASKS);
        tasks.finished(&ids[7], Ok(json!({})), at(2));
        let (_, newest) = tasks
            .create(None, Cancellation::new(), at(3))
            .expect("an ended task made room");
        assert_eq!(tasks.tasks.len(), MAX_TASKS);
        let gone = tasks.request(
            wire(1),
            TaskRequest::Get,
            &json!({ "taskId": ids[7] }),
            at(4),
        );
        assert_eq!(
            gone[0].1.as_ref().unwrap_err().code,
            INVALID_PARAMS,
            "the ended one went"
        );
        let kept = tasks.request(
            wire(2),
            TaskRequest::Get,
            &json!({ "taskId": newest }),
            at(5),
        );
        assert_eq!(answer(&kept, 0)["status"], "working");
    }
}
