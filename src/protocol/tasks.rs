//! Tasks: long-running requests the server runs on its own and the client polls (2025-11-25,
//! experimental; the 2026-07-28 extension `io.modelcontextprotocol/tasks`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The extension id of tasks in the 2026-07-28 era.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for input from the client.
    InputRequired,
    /// Done; its result is ready.
    Completed,
    /// Ended in failure.
    Failed,
    /// Cancelled (sticky: it stays so even if its work later finishes).
    Cancelled,
    /// A status this crate does not know, as sent.
    #[serde(untagged)]
    Other(String),
}

impl TaskStatus {
    /// Whether the task has ended (completed, failed or cancelled).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The status as sent on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Other(other) => other,
        }
    }
}

/// A task, as `tasks/get`, `tasks/cancel` and the creating call describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's id: what `tasks/get`, `tasks/result` and `tasks/cancel` take.
    pub task_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// What it is doing, for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was created (ISO 8601), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it last changed (ISO 8601), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_at: Option<String>,
    /// 2025-11-25: how long the server keeps it after creation, in ms (`null`: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Value>,
    /// 2025-11-25: how often to poll, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<u64>,
    /// 2026-07-28: how long the server keeps it, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// 2026-07-28: how often to poll, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
    /// 2026-07-28: the result, inlined once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// 2026-07-28: the error, inlined once failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// 2026-07-28: what the task needs from the client (status `input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<Value>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Task {
    /// How long to wait before asking again: the server's interval (at least 50 ms), else 1 s.
    pub fn poll_interval(&self) -> std::time::Duration {
        let ms = self
            .poll_interval
            .or(self.poll_interval_ms)
            .unwrap_or(1000)
            .clamp(50, 60_000);
        std::time::Duration::from_millis(ms)
    }
}

/// A page of `tasks/list` (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    /// This page of tasks.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The cursor of the next page; `None` on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a task-creating call answered: a task (2025-11-25 `{"task": {...}}`, 2026-07-28
/// `resultType: "task"` with the task's fields), or a plain result (the server chose not to
/// make a task).
pub(crate) fn created_task(result: &Value) -> Option<Task> {
    if let Some(task) = result.get("task") {
        return serde_json::from_value(task.clone()).ok();
    }
    if result.get("resultType").and_then(Value::as_str) == Some("task") {
        return serde_json::from_value(result.clone()).ok();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_eras_creating_answers_name_their_task() {
        let legacy = json!({"task": {"taskId": "t1", "status": "working", "pollInterval": 100}});
        let task = created_task(&legacy).unwrap();
        assert_eq!(task.task_id, "t1");
        assert_eq!(task.poll_interval(), std::time::Duration::from_millis(100));
        let modern = json!({"resultType": "task", "taskId": "t2", "status": "working",
            "pollIntervalMs": 20});
        let task = created_task(&modern).unwrap();
        assert_eq!(task.task_id, "t2");
        assert_eq!(
            task.poll_interval(),
            std::time::Duration::from_millis(50),
            "floored"
        );
        assert!(created_task(&json!({"content": []})).is_none());
        assert!(TaskStatus::Cancelled.is_terminal() && !TaskStatus::Working.is_terminal());
    }
}
