//! The server's counters, and the `stats` tool's answer.

use serde_json::{json, Value};

use crate::{server::Server, tasks::TaskStatus};

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) requests: u64,
    pub(crate) responses: u64,
    pub(crate) cancels: u64,
    pub(crate) cancels_matched: u64,
    pub(crate) cancels_ahead: u64,
    pub(crate) cancels_unknown: u64,
    pub(crate) late_responses: u64,
    /// Client responses to a server request the server had already cancelled.
    pub(crate) client_responses_after_cancel: u64,
    /// Requests of each list method (`tools/list`, ...), to tell a cached list from a fetched one.
    pub(crate) lists: std::collections::BTreeMap<String, u64>,
    pub(crate) tasks_created: u64,
    pub(crate) tasks_completed: u64,
    pub(crate) tasks_failed: u64,
    pub(crate) tasks_cancelled: u64,
    /// `tasks/cancel` requests, and those answered `-32602` (unknown or terminal task).
    pub(crate) task_cancels: u64,
    pub(crate) task_cancels_unknown_or_terminal: u64,
    /// `notifications/cancelled` naming a task-creating `tools/call` (the spec forbids them).
    pub(crate) cancels_for_tasks: u64,
    pub(crate) task_gets: u64,
    pub(crate) task_results: u64,
    pub(crate) task_lists: u64,
    /// `tasks/update` requests (2026-07-28 extension), whatever their outcome.
    pub(crate) task_updates: u64,
    /// `task_input` answers applied to a task waiting for input (accept, decline or cancel; by
    /// `tasks/update` or the response to `elicitation/create`).
    pub(crate) task_inputs_answered: u64,
    /// `subscriptions/listen` requests received, whatever their outcome.
    pub(crate) listens: u64,
    /// `notifications/tasks` sent (one per subscription naming the task, per change).
    pub(crate) task_notifications: u64,
    /// Connections accepted (HTTP mode): how many a client opened.
    pub(crate) connections: u64,
    /// Connections open now, and the most ever open at once.
    pub(crate) connections_open: u64,
    pub(crate) connections_peak: u64,
}

impl Server {
    pub(crate) fn stats(&self) -> Value {
        let state = self.state.borrow();
        let counters = &state.counters;
        let pending = state
            .running
            .values()
            .filter(|task| !task.cancelled)
            .count();
        json!({
            "requests": counters.requests,
            "responses": counters.responses,
            "cancels": counters.cancels,
            "cancels_matched": counters.cancels_matched,
            "cancels_ahead": counters.cancels_ahead,
            "cancels_unknown": counters.cancels_unknown,
            "pending": pending,
            "late_responses": counters.late_responses,
            "client_responses_after_cancel": counters.client_responses_after_cancel,
            "initialized": state.initialized,
            "protocol_version": state.protocol_version,
            "log_level": state.log_level.name(),
            "subscriptions": state.subscriptions,
            "lists": counters.lists,
            "tasks": {
                "created": counters.tasks_created,
                "working": state.tasks.count(TaskStatus::Working),
                "input_required": state.tasks.count(TaskStatus::InputRequired),
                "completed": counters.tasks_completed,
                "failed": counters.tasks_failed,
                "cancelled": counters.tasks_cancelled,
            },
            "task_cancels": counters.task_cancels,
            "task_cancels_unknown_or_terminal": counters.task_cancels_unknown_or_terminal,
            "cancels_for_tasks": counters.cancels_for_tasks,
            "task_gets": counters.task_gets,
            "task_results": counters.task_results,
            "task_lists": counters.task_lists,
            "task_updates": counters.task_updates,
            "task_inputs_answered": counters.task_inputs_answered,
            "listens": counters.listens,
            "listens_open": state.listens.len(),
            "task_notifications": counters.task_notifications,
            "connections": counters.connections,
            "connections_peak": counters.connections_peak,
        })
    }
}
