//! A session's tasks (2025-11-25): each task an upstream server made for one of the session's
//! `tools/call`s, known downstream by an id of the gateway's (task ids are each server's own, and
//! two servers may give the same one) and reached again with `tasks/get`, `tasks/result`,
//! `tasks/cancel` and `tasks/list`. Only the session that made a task can reach it. A plain
//! table; the session does the I/O.

use std::collections::BTreeMap;

use actix_mcp::{protocol::tasks::Task, TaskHandle};
use serde_json::Value;

#[derive(Default)]
pub struct Tasks {
    made: u64,
    by_id: BTreeMap<String, TaskHandle>,
}

impl Tasks {
    /// Keeps `handle`: the id the downstream client knows its task by.
    pub fn adopt(&mut self, server: &str, handle: TaskHandle) -> String {
        self.made += 1;
        let id = format!("{server}.{}", self.made);
        self.by_id.insert(id.clone(), handle);
        id
    }

    /// The upstream task the downstream `id` names, if this session made it.
    pub fn get(&self, id: &str) -> Option<TaskHandle> {
        self.by_id.get(id).cloned()
    }

    /// Every task of the session, by downstream id, in the order they were made.
    pub fn all(&self) -> Vec<(String, TaskHandle)> {
        let mut all: Vec<_> = self
            .by_id
            .iter()
            .map(|(id, handle)| (id.clone(), handle.clone()))
            .collect();
        all.sort_by_key(|(id, _)| made_at(id));
        all
    }
}

/// The number a downstream id was made with.
fn made_at(id: &str) -> u64 {
    id.rsplit('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `task` as the downstream client sees it: under the gateway's id.
pub fn shown(task: &Task, id: &str) -> Value {
    let mut shown = serde_json::to_value(task).unwrap_or_default();
    shown["taskId"] = Value::String(id.to_owned());
    shown
}
