//! Tasks (MCP 2025-11-25, experimental): the task-capable tools `task_sleep` (taskSupport
//! `optional`) and `task_required` (`required`), and the methods `tasks/get`, `tasks/result`,
//! `tasks/cancel` and `tasks/list`.
//!
//! A `tools/call` carrying `params.task: {ttl?}` is answered at once with
//! `CreateTaskResult {task}`; the work then runs in a local task of its own, stepping its
//! `statusMessage` through `step i/N`. Status changes are pushed as
//! `notifications/tasks/status` only with `--task-status-notifications`.
//!
//! Choices where the spec leaves room:
//! - `tasks/result` of a cancelled task answers `-32603` "task was cancelled" (data
//!   `{taskId, status}`): a cancelled request has no result of its own;
//! - bad arguments on a task-augmented call still create a task, which is `failed` at once and
//!   whose result is the tool error (`isError: true`), as a tool failure moves a task to `failed`;
//! - the requested `ttl` is echoed unchanged (`null` if none) and tasks are never deleted;
//! - `tasks/list` answers everything in one page; any `cursor` is invalid (`-32602`).
//!
//! With the 2026-07-28 extension `io.modelcontextprotocol/tasks` (declared in the request's
//! `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`), the same tools answer
//! `{resultType: "task", taskId, status, ..., ttlMs, pollIntervalMs}`, `tasks/get` inlines
//! `result` once completed or failed, and `tasks/cancel` answers `{}`.

use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
    time::{SystemTime, UNIX_EPOCH},
};

use futures::future::FutureExt as _;
use serde_json::{json, Map, Value};
use tokio::{
    sync::oneshot,
    task::{spawn_local, AbortHandle},
    time::Instant,
};

use crate::{
    jsonrpc::*,
    server::{Reply, Server, Step},
    tools::{deadline, text_result, tool_error, u64_arg, MAX_PROGRESS_STEPS},
};

/// `pollInterval` (ms) suggested in every Task.
pub(crate) const POLL_INTERVAL_MS: u64 = 100;
/// `steps` of the task tools when not given.
pub(crate) const DEFAULT_STEPS: u64 = 5;
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The 2026-07-28 extension id, as declared in `clientCapabilities.extensions`.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub(crate) const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        self != Self::Working
    }
}

/// `execution.taskSupport` of a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

pub(crate) fn task_support(tool: &str) -> TaskSupport {
    match tool {
        "task_sleep" => TaskSupport::Optional,
        "task_required" => TaskSupport::Required,
        _ => TaskSupport::Forbidden,
    }
}

/// How a `tools/call` asked for a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskAsk {
    /// 2025-11-25: `params.task: {ttl?}`.
    Legacy { ttl: Option<u64> },
    /// 2026-07-28: the request declares the `io.modelcontextprotocol/tasks` extension.
    Modern,
}

/// `params.task` of a `tools/call`: `None` if absent or null.
pub(crate) fn parse_task_param(task: Option<Value>) -> Result<Option<TaskAsk>, (i64, String)> {
    let task = match task {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(task)) => task,
        Some(other) => {
            return Err((
                INVALID_PARAMS,
                format!("`task` must be an object, got {other}"),
            ))
        }
    };
    let ttl = match task.get("ttl") {
        None | Some(Value::Null) => None,
        Some(ttl) => Some(ttl.as_u64().ok_or_else(|| {
            (
                INVALID_PARAMS,
                format!("`task.ttl` must be a non-negative integer, got {ttl}"),
            )
        })?),
    };
    Ok(Some(TaskAsk::Legacy { ttl }))
}

/// Whether a request's `_meta` declares the 2026-07-28 tasks extension.
pub(crate) fn declares_tasks_extension(meta: Option<&Value>) -> bool {
    meta.and_then(|meta| meta.get(CLIENT_CAPABILITIES_META))
        .and_then(|caps| caps.get("extensions"))
        .and_then(|extensions| extensions.get(TASKS_EXTENSION))
        .is_some_and(|extension| !extension.is_null())
}

pub(crate) struct TaskEntry {
    pub(crate) id: String,
    pub(crate) status: TaskStatus,
    pub(crate) status_message: String,
    pub(crate) created_at: String,
    pub(crate) last_updated_at: String,
    pub(crate) ttl: Option<u64>,
    /// Created through the 2026-07-28 extension (shapes `tasks/get` and `tasks/cancel`).
    pub(crate) modern: bool,
    /// The underlying `CallToolResult`, once completed or failed.
    pub(crate) result: Option<Value>,
    /// The running work, until it ends.
    pub(crate) work: Option<AbortHandle>,
    /// `tasks/result` requests waiting for a terminal status.
    pub(crate) waiters: Vec<oneshot::Sender<()>>,
}

impl TaskEntry {
    /// The 2025-11-25 `Task`.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "taskId": self.id,
            "status": self.status.name(),
            "statusMessage": self.status_message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttl": self.ttl,
            "pollInterval": POLL_INTERVAL_MS,
        })
    }

    /// The 2026-07-28 extension's Task (`ttlMs`, `pollIntervalMs`), with `result` inlined once
    /// completed or failed when `with_result`.
    pub(crate) fn to_modern_json(&self, with_result: bool) -> Value {
        let mut task = json!({
            "taskId": self.id,
            "status": self.status.name(),
            "statusMessage": self.status_message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl,
            "pollIntervalMs": POLL_INTERVAL_MS,
        });
        if let (true, Some(result), Value::Object(task)) = (with_result, &self.result, &mut task) {
            task.insert("result".to_owned(), result.clone());
        }
        task
    }

    /// Moves to a terminal status and wakes the `tasks/result` waiters.
    fn finish(&mut self, status: TaskStatus) {
        self.status = status;
        self.last_updated_at = now_iso8601();
        self.work = None;
        for waiter in self.waiters.drain(..) {
            // A send error only means that `tasks/result` was cancelled meanwhile.
            let _ = waiter.send(());
        }
    }
}

#[derive(Default)]
pub(crate) struct Tasks {
    pub(crate) entries: HashMap<String, TaskEntry>,
    /// Task ids in creation order (for `tasks/list`).
    pub(crate) order: Vec<String>,
    pub(crate) next: u64,
    /// Request ids (as JSON text) of the `tools/call`s that created a task, to count the
    /// `notifications/cancelled` the spec forbids for them.
    pub(crate) creating_requests: HashSet<String>,
}

impl Tasks {
    pub(crate) fn working(&self) -> usize {
        self.entries
            .values()
            .filter(|task| task.status == TaskStatus::Working)
            .count()
    }
}

/// What the task tools do: `steps` equal steps over `ms` milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SleepPlan {
    pub(crate) ms: u64,
    pub(crate) steps: u64,
}

impl SleepPlan {
    pub(crate) fn parse(args: &Map<String, Value>) -> Result<Self, String> {
        let ms = u64_arg(args, "ms", None)?;
        let steps = u64_arg(args, "steps", Some(DEFAULT_STEPS))?;
        if steps == 0 || steps > MAX_PROGRESS_STEPS {
            return Err(format!(
                "argument `steps` must be between 1 and {MAX_PROGRESS_STEPS}, got {steps}"
            ));
        }
        Ok(Self { ms, steps })
    }

    /// When step `step` (1-based) ends.
    fn step_end(self, start: Instant, step: u64) -> Instant {
        let offset = u128::from(self.ms) * u128::from(step) / u128::from(self.steps);
        deadline(start, u64::try_from(offset).unwrap_or(u64::MAX))
    }

    pub(crate) fn result(self) -> Value {
        text_result(&format!("slept {} ms in {} steps", self.ms, self.steps))
    }
}

/// `task_sleep` called without a task: the same steps, with progress for a token, then the
/// result.
pub(crate) async fn plain_sleep(
    server: Rc<Server>,
    plan: SleepPlan,
    progress_token: Option<Value>,
) -> Reply {
    let start = Instant::now();
    for step in 1..=plan.steps {
        tokio::time::sleep_until(plan.step_end(start, step)).await;
        if let (Some(token), true) = (&progress_token, step < plan.steps) {
            server.send(notification(
                "notifications/progress",
                json!({
                    "progressToken": token,
                    "progress": step,
                    "total": plan.steps,
                    "message": format!("step {step}/{}", plan.steps),
                }),
            ));
        }
    }
    Ok(plan.result())
}

/// The work of a task: each step updates the task, then it completes (unless cancelled meanwhile:
/// `tasks/cancel` aborts this future).
async fn task_work(
    server: Rc<Server>,
    task_id: String,
    plan: SleepPlan,
    progress_token: Option<Value>,
) {
    let start = Instant::now();
    for step in 1..=plan.steps {
        tokio::time::sleep_until(plan.step_end(start, step)).await;
        let message = format!("step {step}/{}", plan.steps);
        if step == plan.steps {
            server.finish_task(&task_id, TaskStatus::Completed, plan.result(), message);
            return;
        }
        server.update_task(&task_id, message.clone());
        if let Some(token) = &progress_token {
            server.send(notification(
                "notifications/progress",
                json!({
                    "progressToken": token,
                    "progress": step,
                    "total": plan.steps,
                    "message": message,
                    "_meta": {RELATED_TASK: {"taskId": task_id}},
                }),
            ));
        }
    }
}

impl Server {
    /// `tools/call` of `task_sleep` / `task_required` with a task: creates it and answers at once.
    pub(crate) fn create_task(
        self: &Rc<Self>,
        request_key: &str,
        ask: TaskAsk,
        plan: Result<SleepPlan, String>,
        progress_token: Option<Value>,
    ) -> Reply {
        let now = now_iso8601();
        let (ttl, modern) = match ask {
            TaskAsk::Legacy { ttl } => (ttl, false),
            TaskAsk::Modern => (None, true),
        };
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.tasks.next += 1;
        state.counters.tasks_created += 1;
        let id = format!("task-{}-{}", std::process::id(), state.tasks.next);
        let mut entry = TaskEntry {
            id: id.clone(),
            status: TaskStatus::Working,
            status_message: String::new(),
            created_at: now.clone(),
            last_updated_at: now,
            ttl,
            modern,
            result: None,
            work: None,
            waiters: Vec::new(),
        };
        match plan {
            Ok(plan) => {
                entry.status_message = format!("step 0/{}", plan.steps);
                let work = task_work(Rc::clone(self), id.clone(), plan, progress_token);
                // Polled only once the reader yields, so after the insert below.
                entry.work = Some(spawn_local(work.boxed_local()).abort_handle());
            }
            Err(problem) => {
                // Bad arguments: the task fails at once, its result is the tool error.
                entry.status = TaskStatus::Failed;
                entry.status_message = problem.clone();
                entry.result = Some(tool_error(&problem));
                state.counters.tasks_failed += 1;
            }
        }
        state.tasks.creating_requests.insert(request_key.to_owned());
        state.tasks.order.push(id.clone());
        let json = if modern {
            let mut task = entry.to_modern_json(false);
            if let Value::Object(task) = &mut task {
                task.insert("resultType".to_owned(), json!("task"));
            }
            task
        } else {
            json!({"task": entry.to_json()})
        };
        state.tasks.entries.insert(id, entry);
        Ok(json)
    }

    fn send_task_status(&self, task: Value) {
        if self.cli.task_status_notifications {
            self.send(notification("notifications/tasks/status", task));
        }
    }

    /// A step of a working task: new `statusMessage` and `lastUpdatedAt`.
    fn update_task(&self, task_id: &str, message: String) {
        let status = {
            let mut state = self.state.borrow_mut();
            let Some(task) = state.tasks.entries.get_mut(task_id) else {
                return;
            };
            if task.status.is_terminal() {
                return;
            }
            task.status_message = message;
            task.last_updated_at = now_iso8601();
            task.to_json()
        };
        self.send_task_status(status);
    }

    /// The work ended: `status` with `result`, unless the task was cancelled (which sticks).
    fn finish_task(&self, task_id: &str, status: TaskStatus, result: Value, message: String) {
        let json = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let Some(task) = state.tasks.entries.get_mut(task_id) else {
                return;
            };
            if task.status.is_terminal() {
                return;
            }
            task.status_message = message;
            task.result = Some(result);
            task.finish(status);
            match status {
                TaskStatus::Completed => state.counters.tasks_completed += 1,
                TaskStatus::Failed => state.counters.tasks_failed += 1,
                TaskStatus::Cancelled => state.counters.tasks_cancelled += 1,
                TaskStatus::Working => {}
            }
            task.to_json()
        };
        self.send_task_status(json);
    }

    /// The `taskId` of a `tasks/*` request's params.
    fn task_id_param(params: &Value) -> Result<&str, (i64, String)> {
        params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| (INVALID_PARAMS, "a string `taskId` is required".to_owned()))
    }

    fn unknown_task(task_id: &str) -> (i64, String) {
        (
            INVALID_PARAMS,
            format!("Failed to retrieve task: task not found: {task_id:?}"),
        )
    }

    /// `tasks/get`: the Task's fields at the top level (2026: with `result` once finished).
    pub(crate) fn tasks_get(&self, params: &Value) -> Reply {
        let mut state = self.state.borrow_mut();
        state.counters.task_gets += 1;
        let task_id = Self::task_id_param(params)?;
        let task = state
            .tasks
            .entries
            .get(task_id)
            .ok_or_else(|| Self::unknown_task(task_id))?;
        Ok(if task.modern {
            task.to_modern_json(true)
        } else {
            task.to_json()
        })
    }

    /// `tasks/list`: every task, in one page.
    pub(crate) fn tasks_list(&self, params: &Value) -> Reply {
        let mut state = self.state.borrow_mut();
        state.counters.task_lists += 1;
        if let Some(cursor) = params.get("cursor").filter(|cursor| !cursor.is_null()) {
            return Err((INVALID_PARAMS, format!("invalid cursor: {cursor}")));
        }
        let tasks: Vec<Value> = state
            .tasks
            .order
            .iter()
            .filter_map(|id| state.tasks.entries.get(id))
            .map(TaskEntry::to_json)
            .collect();
        Ok(json!({"tasks": tasks}))
    }

    /// `tasks/cancel`: `cancelled` is set (and the work stopped) before the answer.
    pub(crate) fn tasks_cancel(&self, params: &Value) -> Reply {
        let reply = self.cancel_task(params);
        if reply.is_err() {
            self.state
                .borrow_mut()
                .counters
                .task_cancels_unknown_or_terminal += 1;
        }
        let (answer, status) = reply?;
        self.send_task_status(status);
        Ok(answer)
    }

    fn cancel_task(&self, params: &Value) -> Result<(Value, Value), (i64, String)> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.counters.task_cancels += 1;
        let task_id = Self::task_id_param(params)?;
        let task = state
            .tasks
            .entries
            .get_mut(task_id)
            .ok_or_else(|| Self::unknown_task(task_id))?;
        if task.status.is_terminal() {
            return Err((
                INVALID_PARAMS,
                format!(
                    "cannot cancel task {task_id:?}: it is already {}",
                    task.status.name()
                ),
            ));
        }
        if let Some(work) = task.work.take() {
            work.abort();
        }
        task.status_message = "cancelled by the client".to_owned();
        task.finish(TaskStatus::Cancelled);
        state.counters.tasks_cancelled += 1;
        let answer = if task.modern {
            json!({})
        } else {
            task.to_json()
        };
        Ok((answer, task.to_json()))
    }

    /// `tasks/result`: the underlying result once the task is terminal. Waits in a local task
    /// of its own (cancellable with `notifications/cancelled`), so reading goes on meanwhile.
    pub(crate) fn tasks_result(self: &Rc<Self>, params: &Value) -> Step {
        let task_id = match Self::task_id_param(params) {
            Ok(task_id) => task_id.to_owned(),
            Err(err) => return Step::Reply(Err(err)),
        };
        let waiting = {
            let mut state = self.state.borrow_mut();
            state.counters.task_results += 1;
            match state.tasks.entries.get_mut(&task_id) {
                None => return Step::Reply(Err(Self::unknown_task(&task_id))),
                Some(task) if task.status.is_terminal() => None,
                Some(task) => {
                    let (waiter, done) = oneshot::channel();
                    task.waiters.push(waiter);
                    Some(done)
                }
            }
        };
        let Some(done) = waiting else {
            return Step::Reply(self.task_outcome(&task_id));
        };
        let server = Rc::clone(self);
        Step::Spawn {
            task: async move {
                // An error means the task entry dropped its waiters without finishing: answer
                // with whatever state it is in.
                let _ = done.await;
                server.task_outcome(&task_id)
            }
            .boxed_local(),
            cancellable: true,
        }
    }

    /// What `tasks/result` answers for a terminal task.
    fn task_outcome(&self, task_id: &str) -> Reply {
        let state = self.state.borrow();
        let task = state
            .tasks
            .entries
            .get(task_id)
            .ok_or_else(|| Self::unknown_task(task_id))?;
        match (task.status, &task.result) {
            (TaskStatus::Completed | TaskStatus::Failed, Some(result)) => {
                let mut result = result.clone();
                if let Value::Object(result) = &mut result {
                    result.insert(
                        "_meta".to_owned(),
                        json!({RELATED_TASK: {"taskId": task_id}}),
                    );
                }
                Ok(result)
            }
            (TaskStatus::Cancelled, _) => Err((INTERNAL_ERROR, "task was cancelled".to_owned())),
            (status, _) => Err((
                INTERNAL_ERROR,
                format!("task {task_id:?} has no result ({})", status.name()),
            )),
        }
    }
}

/// Now as an RFC 3339 / ISO 8601 UTC timestamp with milliseconds.
pub(crate) fn now_iso8601() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    iso8601(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
}

/// `millis` since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn iso8601(millis: u64) -> String {
    let secs = millis / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Days to civil date (H. Hinnant's algorithm), for dates from 1970 on.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        millis % 1000
    )
}

#[cfg(test)]
mod tests {
    use std::{cell::RefCell, future::Future, time::Duration};

    use clap::Parser as _;
    use tokio::sync::mpsc;

    use super::*;
    use crate::{args::Cli, journal::Journal, stdio::Outgoing, tools::tool_list};

    /// A server fed line by line in-process, its output read from the writer's channel.
    struct Harness {
        server: Rc<Server>,
        out: mpsc::UnboundedReceiver<Outgoing>,
        /// Messages read but not asked for yet.
        seen: Vec<Value>,
    }

    impl Harness {
        fn new(args: &[&str]) -> Self {
            let cli =
                Cli::try_parse_from(std::iter::once("mcp-demo-server").chain(args.iter().copied()))
                    .expect("test arguments parse");
            let (out_tx, out) = mpsc::unbounded_channel();
            let server = Rc::new(Server {
                http: None,
                journal: Rc::new(Journal::create(None).expect("no journal file")),
                out: out_tx,
                state: RefCell::default(),
                tools: tool_list(0),
                cli,
            });
            Self {
                server,
                out,
                seen: Vec::new(),
            }
        }

        fn send(&self, message: Value) {
            let _ = self.server.handle_line(message.to_string().as_bytes());
        }

        fn request(&self, id: u64, method: &str, params: Value) {
            self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        }

        /// Everything written so far (after letting spawned work run).
        async fn drain(&mut self) {
            tokio::task::yield_now().await;
            while let Ok(item) = self.out.try_recv() {
                if let Outgoing::Line(lines) = item {
                    for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                        self.seen
                            .push(serde_json::from_slice(line).expect("the server writes JSON"));
                    }
                }
            }
        }

        /// The response to `id`, waiting up to 2 s for it.
        async fn response(&mut self, id: u64) -> Value {
            for _ in 0..200 {
                self.drain().await;
                if let Some(at) = self
                    .seen
                    .iter()
                    .position(|m| m["id"] == id && m.get("method").is_none())
                {
                    return self.seen.remove(at);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("no response to {id}; seen {:?}", self.seen);
        }

        async fn stats(&mut self, id: u64) -> Value {
            self.request(id, "tools/call", json!({"name": "stats"}));
            self.response(id).await["result"]["structuredContent"].clone()
        }
    }

    fn run(test: impl Future<Output = ()>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        tokio::task::LocalSet::new().block_on(&runtime, test);
    }

    fn call(name: &str, args: Value, task: Option<Value>) -> Value {
        let mut params = json!({"name": name, "arguments": args});
        if let (Some(task), Value::Object(params)) = (task, &mut params) {
            params.insert("task".to_owned(), task);
        }
        params
    }

    #[test]
    fn a_task_runs_its_steps_and_tasks_result_waits_without_blocking_the_reader() {
        run(async {
            let mut h = Harness::new(&["--task-status-notifications"]);
            h.request(
                1,
                "tools/call",
                call(
                    "task_sleep",
                    json!({"ms": 200, "steps": 2}),
                    Some(json!({"ttl": 5000})),
                ),
            );
            let created = h.response(1).await;
            let task = &created["result"]["task"];
            assert_eq!(task["status"], "working");
            assert_eq!(task["statusMessage"], "step 0/2");
            assert_eq!(task["ttl"], 5000);
            assert_eq!(task["pollInterval"], POLL_INTERVAL_MS);
            let task_id = task["taskId"].as_str().unwrap_or_default().to_owned();

            h.request(2, "tasks/result", json!({"taskId": task_id}));
            h.request(3, "ping", json!({}));
            assert_eq!(h.response(3).await["result"], json!({}));
            let stats = h.stats(4).await;
            assert_eq!(
                stats["pending"], 1,
                "only the waiting tasks/result is pending"
            );
            assert_eq!(stats["tasks"]["working"], 1);

            let result = h.response(2).await;
            assert_eq!(
                result["result"]["content"][0]["text"],
                "slept 200 ms in 2 steps"
            );
            assert_eq!(
                result["result"]["_meta"][RELATED_TASK]["taskId"],
                task_id.as_str()
            );
            h.request(5, "tasks/get", json!({"taskId": task_id}));
            let got = h.response(5).await["result"].clone();
            assert_eq!(got["status"], "completed");
            assert_eq!(got["statusMessage"], "step 2/2");

            let statuses: Vec<_> = h
                .seen
                .iter()
                .filter(|m| m["method"] == "notifications/tasks/status")
                .map(|m| m["params"]["statusMessage"].clone())
                .collect();
            assert_eq!(statuses, [json!("step 1/2"), json!("step 2/2")]);
            let stats = h.stats(6).await;
            assert_eq!(
                stats["tasks"],
                json!({"created": 1, "working": 0, "completed": 1, "failed": 0, "cancelled": 0})
            );
            assert_eq!(stats["task_gets"], 1);
            assert_eq!(stats["pending"], 0);
        });
    }

    #[test]
    fn a_cancelled_task_stays_cancelled_and_its_result_is_an_error() {
        run(async {
            let mut h = Harness::new(&[]);
            h.request(
                1,
                "tools/call",
                call(
                    "task_required",
                    json!({"ms": 100, "steps": 1}),
                    Some(json!({})),
                ),
            );
            let task_id = h.response(1).await["result"]["task"]["taskId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            h.request(2, "tasks/result", json!({"taskId": task_id}));
            h.request(3, "tasks/cancel", json!({"taskId": task_id}));
            let cancelled = h.response(3).await;
            assert_eq!(cancelled["result"]["status"], "cancelled");
            assert_eq!(h.response(2).await["error"]["code"], INTERNAL_ERROR);
            // Past the work's end: still cancelled, and a second cancel is refused.
            tokio::time::sleep(Duration::from_millis(150)).await;
            h.request(4, "tasks/get", json!({"taskId": task_id}));
            assert_eq!(h.response(4).await["result"]["status"], "cancelled");
            h.request(5, "tasks/cancel", json!({"taskId": task_id}));
            assert_eq!(h.response(5).await["error"]["code"], INVALID_PARAMS);
            h.request(6, "tasks/cancel", json!({"taskId": "unknown"}));
            assert_eq!(h.response(6).await["error"]["code"], INVALID_PARAMS);
            // The notification the spec forbids for a task-creating request is only counted.
            h.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}));
            let stats = h.stats(7).await;
            assert_eq!(stats["tasks"]["cancelled"], 1);
            assert_eq!(stats["tasks"]["completed"], 0);
            assert_eq!(stats["task_cancels"], 3);
            assert_eq!(stats["task_cancels_unknown_or_terminal"], 2);
            assert_eq!(stats["cancels_for_tasks"], 1);
        });
    }

    #[test]
    fn task_support_is_enforced() {
        run(async {
            let mut h = Harness::new(&[]);
            h.request(
                1,
                "tools/call",
                call("task_required", json!({"ms": 1}), None),
            );
            assert_eq!(h.response(1).await["error"]["code"], METHOD_NOT_FOUND);
            h.request(
                2,
                "tools/call",
                call("echo", json!({"text": "x"}), Some(json!({}))),
            );
            assert_eq!(h.response(2).await["error"]["code"], METHOD_NOT_FOUND);
            h.request(
                3,
                "tools/call",
                call("task_sleep", json!({"ms": 1, "steps": 1}), None),
            );
            assert_eq!(
                h.response(3).await["result"]["content"][0]["text"],
                "slept 1 ms in 1 steps"
            );
            h.request(
                4,
                "tools/call",
                call("task_sleep", json!({"ms": "x"}), Some(json!({}))),
            );
            let task = h.response(4).await["result"]["task"].clone();
            assert_eq!(task["status"], "failed");
            h.request(5, "tasks/result", json!({"taskId": task["taskId"]}));
            assert_eq!(h.response(5).await["result"]["isError"], true);
            h.request(6, "tasks/list", json!({}));
            assert_eq!(
                h.response(6).await["result"]["tasks"]
                    .as_array()
                    .map(Vec::len),
                Some(1)
            );
        });
    }

    #[test]
    fn the_2026_extension_answers_a_task_result_and_an_empty_cancel_ack() {
        run(async {
            let mut h = Harness::new(&["--era", "modern"]);
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                CLIENT_CAPABILITIES_META: {"extensions": {TASKS_EXTENSION: {}}},
            });
            let mut params = call("task_required", json!({"ms": 50, "steps": 1}), None);
            params["_meta"] = meta.clone();
            h.request(1, "tools/call", params);
            let created = h.response(1).await["result"].clone();
            assert_eq!(created["resultType"], "task");
            assert_eq!(created["pollIntervalMs"], POLL_INTERVAL_MS);
            let task_id = created["taskId"].clone();
            tokio::time::sleep(Duration::from_millis(100)).await;
            h.request(2, "tasks/get", json!({"taskId": task_id, "_meta": meta}));
            let got = h.response(2).await["result"].clone();
            assert_eq!(got["status"], "completed");
            assert_eq!(
                got["result"]["content"][0]["text"],
                "slept 50 ms in 1 steps"
            );

            let mut params = call("task_sleep", json!({"ms": 5000}), None);
            params["_meta"] = meta.clone();
            h.request(3, "tools/call", params);
            let task_id = h.response(3).await["result"]["taskId"].clone();
            h.request(4, "tasks/cancel", json!({"taskId": task_id, "_meta": meta}));
            assert_eq!(h.response(4).await["result"], json!({}));
            h.request(5, "tasks/result", json!({"taskId": task_id}));
            assert_eq!(h.response(5).await["error"]["code"], METHOD_NOT_FOUND);
        });
    }

    #[test]
    fn iso8601_formats_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
        assert_eq!(iso8601(1_767_225_599_999), "2025-12-31T23:59:59.999Z");
        assert!(now_iso8601().ends_with('Z'));
    }

    #[test]
    fn the_task_param_is_an_optional_object_with_an_optional_ttl() {
        assert_eq!(parse_task_param(None), Ok(None));
        assert_eq!(parse_task_param(Some(Value::Null)), Ok(None));
        assert_eq!(
            parse_task_param(Some(json!({}))),
            Ok(Some(TaskAsk::Legacy { ttl: None }))
        );
        assert_eq!(
            parse_task_param(Some(json!({"ttl": 60000}))),
            Ok(Some(TaskAsk::Legacy { ttl: Some(60000) }))
        );
        for bad in [json!(true), json!({"ttl": -1}), json!({"ttl": "1"})] {
            assert_eq!(
                parse_task_param(Some(bad)).map_err(|(code, _)| code),
                Err(INVALID_PARAMS)
            );
        }
    }

    #[test]
    fn sleep_plans_default_to_five_steps_and_split_the_time_evenly() {
        let args = |value: Value| value.as_object().cloned().unwrap_or_default();
        let plan = SleepPlan::parse(&args(json!({"ms": 1000})));
        assert_eq!(plan, Ok(SleepPlan { ms: 1000, steps: 5 }));
        assert!(SleepPlan::parse(&args(json!({"ms": 10, "steps": 0}))).is_err());
        assert!(SleepPlan::parse(&args(json!({"steps": 2}))).is_err());
        let plan = SleepPlan { ms: 1000, steps: 4 };
        let start = Instant::now();
        assert_eq!(
            plan.step_end(start, 1) - start,
            std::time::Duration::from_millis(250)
        );
        assert_eq!(
            plan.step_end(start, 4) - start,
            std::time::Duration::from_millis(1000)
        );
        assert_eq!(
            plan.result()["content"][0]["text"],
            "slept 1000 ms in 4 steps"
        );
    }

    #[test]
    fn the_extension_is_declared_in_the_client_capabilities_meta() {
        let meta = json!({CLIENT_CAPABILITIES_META: {"extensions": {TASKS_EXTENSION: {}}}});
        assert!(declares_tasks_extension(Some(&meta)));
        assert!(!declares_tasks_extension(Some(
            &json!({CLIENT_CAPABILITIES_META: {}})
        )));
        assert!(!declares_tasks_extension(None));
        assert_eq!(task_support("task_sleep"), TaskSupport::Optional);
        assert_eq!(task_support("task_required"), TaskSupport::Required);
        assert_eq!(task_support("echo"), TaskSupport::Forbidden);
    }
}
