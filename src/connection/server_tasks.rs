//! The tasks the server asks of us (2025-11-25): a `sampling/createMessage` or
//! `elicitation/create` that carries `params.task` is answered at once with the task we made of
//! it; the handler runs on; the server follows it with `tasks/get`, `tasks/result` (answered
//! when the handler ends), `tasks/cancel` (the handler's token is cancelled; `cancelled` sticks)
//! and `tasks/list`. A plain table: no actix, no I/O.

use std::{
    collections::{HashMap, VecDeque},
    time::SystemTime,
};

use serde_json::{json, Value};

use crate::{
    cancellation::Cancellation,
    protocol::jsonrpc::{ErrorObject, WireId},
};

/// Tasks kept at most; the oldest ended ones make room. When every kept task still runs, a new
/// one is refused (the server's request gets an error): the server cannot grow the table.
pub(super) const MAX_TASKS: usize = 1024;

/// How often the server should poll our tasks, in ms.
const POLL_INTERVAL_MS: u64 = 250;

/// JSON-RPC invalid params: an unknown task, or one that already ended.
const INVALID_PARAMS: i64 = -32602;

type Answer = Result<Value, ErrorObject>;

#[derive(Default)]
pub(super) struct ServerTasks {
    tasks: HashMap<String, Entry>,
    order: VecDeque<String>,
    made: u64,
}

struct Entry {
    task: serde_json::Map<String, Value>,
    token: Cancellation,
    outcome: Option<Answer>,
    /// `tasks/result` requests waiting for the end.
    waiting: Vec<WireId>,
}

impl Entry {
    fn status(&self) -> &str {
        self.task
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("working")
    }

    fn ended(&self) -> bool {
        matches!(self.status(), "completed" | "failed" | "cancelled")
    }

    fn set_status(&mut self, status: &str, message: Option<&str>) {
        self.task.insert("status".into(), Value::from(status));
        if let Some(message) = message {
            self.task
                .insert("statusMessage".into(), Value::from(message));
        }
        self.task
            .insert("lastUpdatedAt".into(), Value::from(now_iso8601()));
    }

    fn result_answer(&self) -> Answer {
        match (&self.outcome, self.status()) {
            (_, "cancelled") => Err(error(-32603, "the task was cancelled")),
            (Some(outcome), _) => with_related(outcome.clone(), &self.task),
            (None, _) => Err(error(-32603, "the task has no result")),
        }
    }
}

fn error(code: i64, message: &str) -> ErrorObject {
    ErrorObject {
        code,
        message: message.to_owned(),
        data: None,
    }
}

/// A task's result carries the related-task `_meta` (2025-11-25).
fn with_related(answer: Answer, task: &serde_json::Map<String, Value>) -> Answer {
    let mut value = answer?;
    if let (Some(object), Some(id)) = (value.as_object_mut(), task.get("taskId")) {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "io.modelcontextprotocol/related-task".into(),
                json!({ "taskId": id }),
            );
        }
    }
    Ok(value)
}

impl ServerTasks {
    /// Makes a task of a request the server augmented: the `CreateTaskResult` to answer with,
    /// and the task's id for [`finished`](Self::finished). `None` when [`MAX_TASKS`] tasks still
    /// run.
    pub fn create(&mut self, ttl: Option<&Value>, token: Cancellation) -> Option<(Value, String)> {
        if !self.make_room() {
            return None;
        }
        self.made += 1;
        let id = format!("client-task-{}", self.made);
        let now = now_iso8601();
        let mut task = serde_json::Map::new();
        task.insert("taskId".into(), Value::from(id.clone()));
        task.insert("status".into(), Value::from("working"));
        task.insert("createdAt".into(), Value::from(now.clone()));
        task.insert("lastUpdatedAt".into(), Value::from(now));
        task.insert("ttl".into(), ttl.cloned().unwrap_or(Value::Null));
        task.insert("pollInterval".into(), Value::from(POLL_INTERVAL_MS));
        self.order.push_back(id.clone());
        self.tasks.insert(
            id.clone(),
            Entry {
                task: task.clone(),
                token,
                outcome: None,
                waiting: Vec::new(),
            },
        );
        Some((json!({ "task": task }), id))
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
    pub fn finished(&mut self, id: &str, outcome: Answer) -> Vec<(WireId, Answer)> {
        let Some(entry) = self.tasks.get_mut(id) else {
            return Vec::new();
        };
        if entry.status() != "cancelled" {
            let status = if outcome.is_ok() {
                "completed"
            } else {
                "failed"
            };
            entry.set_status(status, None);
        }
        entry.outcome = Some(outcome);
        let answer = entry.result_answer();
        std::mem::take(&mut entry.waiting)
            .into_iter()
            .map(|waiter| (waiter, answer.clone()))
            .collect()
    }

    /// Answers `tasks/get`, `tasks/result`, `tasks/cancel` or `tasks/list` from request `id`:
    /// the answers to send now (a waiting `tasks/result` is answered later, by `finished`).
    pub fn request(&mut self, id: WireId, method: &str, params: &Value) -> Vec<(WireId, Answer)> {
        if method == "tasks/list" {
            let tasks: Vec<Value> = self
                .order
                .iter()
                .filter_map(|id| self.tasks.get(id))
                .map(|entry| Value::Object(entry.task.clone()))
                .collect();
            return vec![(id, Ok(json!({ "tasks": tasks })))];
        }
        let task_id = params.get("taskId").and_then(Value::as_str).unwrap_or("");
        let Some(entry) = self.tasks.get_mut(task_id) else {
            let unknown = error(INVALID_PARAMS, &format!("unknown task {task_id:?}"));
            return vec![(id, Err(unknown))];
        };
        match method {
            "tasks/get" => vec![(id, Ok(Value::Object(entry.task.clone())))],
            "tasks/result" if entry.ended() => vec![(id, entry.result_answer())],
            "tasks/result" => {
                entry.waiting.push(id);
                Vec::new()
            }
            "tasks/cancel" if entry.ended() => {
                let ended = error(INVALID_PARAMS, &format!("task {task_id:?} has ended"));
                vec![(id, Err(ended))]
            }
            "tasks/cancel" => {
                // Cancelled before the answer, and for good, whatever the handler does next.
                entry.set_status("cancelled", Some("cancelled by the server"));
                entry
                    .token
                    .cancel_with_reason("task cancelled by the server");
                let answer = entry.result_answer();
                let mut answers: Vec<(WireId, Answer)> = std::mem::take(&mut entry.waiting)
                    .into_iter()
                    .map(|waiter| (waiter, answer.clone()))
                    .collect();
                answers.push((id, Ok(Value::Object(entry.task.clone()))));
                answers
            }
            other => vec![(
                id,
                Err(error(-32601, &format!("method not found: {other}"))),
            )],
        }
    }

    /// The connection ended: every handler is told.
    pub fn cancel_all(&mut self) {
        for entry in self.tasks.values() {
            entry.token.cancel_with_reason("connection closed");
        }
    }
}

/// Now, as ISO 8601 in UTC with milliseconds (`2026-12-01T17:45:09.372Z`).
fn now_iso8601() -> String {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(n: u64) -> WireId {
        WireId::Number(n.into())
    }

    #[test]
    fn a_task_is_followed_to_its_result_and_cancel_sticks() {
        let mut tasks = ServerTasks::default();
        let (created, id) = tasks.create(None, Cancellation::new()).unwrap();
        assert_eq!(created["task"]["status"], "working");
        let params = json!({ "taskId": id });
        assert!(
            tasks.request(wire(1), "tasks/result", &params).is_empty(),
            "waits"
        );
        let answers = tasks.finished(&id, Ok(json!({"content": "done"})));
        assert_eq!(answers.len(), 1);
        let result = answers[0].1.clone().unwrap();
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
            id
        );
        let got = tasks.request(wire(2), "tasks/get", &params);
        assert_eq!(got[0].1.as_ref().unwrap()["status"], "completed");
        let late = tasks.request(wire(3), "tasks/cancel", &params);
        assert_eq!(
            late[0].1.as_ref().unwrap_err().code,
            INVALID_PARAMS,
            "ended"
        );

        let token = Cancellation::new();
        let (_, second) = tasks.create(None, token.clone()).unwrap();
        let params = json!({ "taskId": second });
        assert!(tasks.request(wire(4), "tasks/result", &params).is_empty());
        let answers = tasks.request(wire(5), "tasks/cancel", &params);
        assert!(token.is_cancelled(), "the handler is told");
        assert_eq!(answers.len(), 2, "the waiting result and the cancel");
        assert!(answers[0].1.is_err());
        assert_eq!(answers[1].1.as_ref().unwrap()["status"], "cancelled");
        tasks.finished(&second, Ok(json!({})));
        let got = tasks.request(wire(6), "tasks/get", &params);
        assert_eq!(got[0].1.as_ref().unwrap()["status"], "cancelled", "sticky");
        let unknown = tasks.request(wire(7), "tasks/get", &json!({"taskId": "nope"}));
        assert_eq!(unknown[0].1.as_ref().unwrap_err().code, INVALID_PARAMS);
        assert!(now_iso8601().ends_with('Z') && now_iso8601().len() == 24);
    }

    #[test]
    fn a_full_table_of_running_tasks_refuses_a_new_one_and_ended_ones_make_room() {
        let mut tasks = ServerTasks::default();
        let ids: Vec<String> = (0..MAX_TASKS)
            .map(|_| tasks.create(None, Cancellation::new()).unwrap().1)
            .collect();
        assert!(
            tasks.create(None, Cancellation::new()).is_none(),
            "every kept task runs: no room"
        );
        assert_eq!(tasks.tasks.len(), MAX_TASKS);
        tasks.finished(&ids[7], Ok(json!({})));
        let (_, newest) = tasks
            .create(None, Cancellation::new())
            .expect("an ended task made room");
        assert_eq!(tasks.tasks.len(), MAX_TASKS);
        let gone = tasks.request(wire(1), "tasks/get", &json!({ "taskId": ids[7] }));
        assert_eq!(
            gone[0].1.as_ref().unwrap_err().code,
            INVALID_PARAMS,
            "the ended one went"
        );
        let kept = tasks.request(wire(2), "tasks/get", &json!({ "taskId": newest }));
        assert_eq!(kept[0].1.as_ref().unwrap()["status"], "working");
    }
}
