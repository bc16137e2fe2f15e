//! `subscriptions/listen` (2026-07-28) for the tasks extension's `notifications/tasks`.
//!
//! `{notifications: {taskIds: [...]}, _meta}` (the request declaring the
//! `io.modelcontextprotocol/tasks` extension, else `-32021` with
//! `data.requiredCapabilities.extensions["io.modelcontextprotocol/tasks"] = {}`) is never
//! answered: it is acknowledged at once with `notifications/subscriptions/acknowledged`
//! `{notifications: {taskIds: [the listed tasks that exist]}, _meta: {subscriptionId}}`, then
//! every status or `statusMessage` change of a listed task goes out as `notifications/tasks`, its
//! params the 2026-07-28 Task as `tasks/get` of a 2026 task would answer it at that moment
//! (`result` inlined once completed or failed, `inputRequests` while waiting for input), with
//! `_meta: {"io.modelcontextprotocol/subscriptionId": <the listen's id>}`. In HTTP mode all of
//! it goes on the listen's own POST stream.
//!
//! It ends with a `notifications/cancelled` naming it, or (HTTP) when its POST goes away.
//! Other notification kinds (`toolsListChanged`, `resourceSubscriptions`, ...) are accepted and
//! ignored: not acknowledged, never sent on the subscription. Legacy era: method not found.

use futures::future::FutureExt as _;
use serde_json::{json, Value};

use crate::{
    jsonrpc::*,
    server::{Server, Step},
    tasks::{declares_tasks_extension, TASKS_EXTENSION},
};

/// The `_meta` key tagging what a subscription sends with the listen request's id.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// An open `subscriptions/listen`.
pub(crate) struct Listen {
    /// The listen request's JSON-RPC id (the subscription id).
    pub(crate) id: Value,
    /// The tasks whose `notifications/tasks` it gets.
    pub(crate) task_ids: Vec<String>,
}

/// A refusal with optional `data`.
pub(crate) type ListenError = (i64, String, Option<Value>);

impl Server {
    /// `subscriptions/listen`: acknowledges and registers the subscription, then holds the
    /// request open (a future that never ends; cancelling it ends the subscription).
    pub(crate) fn listen(
        &self,
        id: &Value,
        key: &str,
        params: &Value,
    ) -> Result<Step, ListenError> {
        self.state.borrow_mut().counters.listens += 1;
        let invalid = |message: &str| (INVALID_PARAMS, message.to_owned(), None);
        let Some(notifications) = params.get("notifications").and_then(Value::as_object) else {
            return Err(invalid("a `notifications` object is required"));
        };
        let requested = notifications
            .get("taskIds")
            .filter(|task_ids| !task_ids.is_null());
        let task_ids = match requested {
            None => None,
            Some(_) if !declares_tasks_extension(params.get("_meta")) => {
                return Err((
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    format!("`taskIds` needs the {TASKS_EXTENSION} extension"),
                    Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})),
                ));
            }
            Some(Value::Array(task_ids)) => Some(
                task_ids
                    .iter()
                    .map(|task_id| task_id.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid("`taskIds` must be an array of strings"))?,
            ),
            Some(_) => return Err(invalid("`taskIds` must be an array of strings")),
        };
        let agreed: Vec<String> = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let mut agreed: Vec<String> = Vec::new();
            for task_id in task_ids.iter().flatten() {
                if state.tasks.entries.contains_key(task_id) && !agreed.contains(task_id) {
                    agreed.push(task_id.clone());
                }
            }
            state.listens.insert(
                key.to_owned(),
                Listen {
                    id: id.clone(),
                    task_ids: agreed.clone(),
                },
            );
            agreed
        };
        let acknowledged = match task_ids {
            Some(_) => json!({"taskIds": agreed}),
            None => json!({}),
        };
        self.send_via(
            key,
            notification(
                "notifications/subscriptions/acknowledged",
                json!({"notifications": acknowledged, "_meta": {SUBSCRIPTION_ID: id}}),
            ),
        );
        Ok(Step::Spawn {
            task: std::future::pending().boxed_local(),
            cancellable: true,
        })
    }

    /// A task's status or `statusMessage` changed: `notifications/tasks/status` (with
    /// `--task-status-notifications`) and `notifications/tasks` to each listen naming it.
    pub(crate) fn task_changed(&self, task_id: &str) {
        let (status, listeners, task) = {
            let state = self.state.borrow();
            let Some(task) = state.tasks.entries.get(task_id) else {
                return;
            };
            let listeners: Vec<(String, Value)> = state
                .listens
                .iter()
                .filter(|(_, listen)| listen.task_ids.iter().any(|listed| listed == task_id))
                .map(|(key, listen)| (key.clone(), listen.id.clone()))
                .collect();
            (
                self.cli.task_status_notifications.then(|| task.to_json()),
                listeners,
                task.to_modern_json(true),
            )
        };
        if let Some(status) = status {
            self.send(notification("notifications/tasks/status", status));
        }
        for (key, id) in listeners {
            let mut params = task.clone();
            if let Value::Object(params) = &mut params {
                params.insert("_meta".to_owned(), json!({SUBSCRIPTION_ID: id}));
            }
            self.state.borrow_mut().counters.task_notifications += 1;
            self.send_via(&key, notification("notifications/tasks", params));
        }
    }
}
