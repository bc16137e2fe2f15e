//! Tasks (MCP 2025-11-25, experimental): the task-capable tools `task_sleep` (taskSupport
//! `optional`), `task_required` and `task_input` (`required`), and the methods `tasks/get`,
//! `tasks/result`, `tasks/cancel`, `tasks/list` and (2026-07-28) `tasks/update`.
//!
//! A `tools/call` carrying `params.task: {ttl?}` is answered at once with
//! `CreateTaskResult {task}`; the work then runs in a local task of its own, stepping its
//! `statusMessage` through `step i/N`. Status changes are pushed as
//! `notifications/tasks/status` only with `--task-status-notifications`, and (2026-07-28) as
//! `notifications/tasks` to each `subscriptions/listen` naming the task (see `listen`).
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
//!
//! `task_input {ms?}` (default 200) works `ms / 2`, then needs input: status `input_required`,
//! statusMessage `waiting for input`. The question is the `elicitation/create` form
//! `{mode: "form", message: "Continue the task?", requestedSchema: {type: "object",
//! properties: {answer: {type: "string"}}, required: ["answer"]}}`:
//! - 2025-11-25: sent to the client as a request (`srv-N`, with the related-task `_meta`) while
//!   a `tasks/result` of the task waits (at once if one already waits when the input is due),
//!   over HTTP on that `tasks/result`'s stream. One question at a time; asked again (new id)
//!   only if the `tasks/result` that carried it went away; the first answer wins;
//! - 2026-07-28: `tasks/get` carries `inputRequests: {answer: {method: "elicitation/create",
//!   params}}`; the client answers with `tasks/update {taskId, inputResponses: {answer:
//!   ElicitResult}}`, acked `{}`. `-32602` for an unknown task, a task not waiting for input
//!   (or created without the extension) and a missing or invalid `inputResponses.answer`
//!   (which leaves the task waiting).
//!
//! `accept` with a string `content.answer` X: `working` again (`input received`), and after the
//! other `ms / 2` `completed` with `answered: X`; `decline`/`cancel`: `completed` with
//! `declined`; a JSON-RPC error (or an invalid result) to the 2025-11-25 question: `failed`,
//! the result a tool error (`isError: true`) naming it. `tasks/cancel` while waiting works as
//! for any task; a later answer is ignored (the elicitation is not cancelled at the client).

use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

use futures::future::FutureExt as _;
use serde_json::{json, Map, Value};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};
use tokio::{
    sync::oneshot,
    task::{spawn_local, AbortHandle},
    time::Instant,
};

use crate::{
    jsonrpc::*,
    server::{Reply, Server, Step},
    tools::{
        deadline, send_client_request_via, text_result, tool_error, u64_arg, MAX_PROGRESS_STEPS,
    },
};

/// `pollInterval` (ms) suggested in every Task.
pub(crate) const POLL_INTERVAL_MS: u64 = 100;
/// `steps` of the task tools when not given.
pub(crate) const DEFAULT_STEPS: u64 = 5;
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The 2026-07-28 extension id, as declared in `clientCapabilities.extensions`.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub(crate) const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
/// `ms` of `task_input` when not given.
pub(crate) const DEFAULT_INPUT_MS: u64 = 200;
/// The key of `task_input`'s question in `inputRequests` / `inputResponses`.
pub(crate) const INPUT_KEY: &str = "answer";
/// The question `task_input` asks.
pub(crate) const INPUT_MESSAGE: &str = "Continue the task?";
/// `statusMessage` of a task in `input_required`.
pub(crate) const WAITING_FOR_INPUT: &str = "waiting for input";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Working,
    /// `task_input` waits for the client's answer.
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        !matches!(self, Self::Working | Self::InputRequired)
    }
}

/// `execution.taskSupport` of a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    Forbidden,
    Optional,
    Required,
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
    /// `tasks/result` requests waiting for a terminal status: the request's key (its id as JSON
    /// text) and what wakes it.
    pub(crate) waiters: Vec<(String, oneshot::Sender<()>)>,
    /// `task_input` in `input_required`: where the answer goes.
    pub(crate) input: Option<InputWait>,
}

/// A `task_input` task waiting for the client's answer.
pub(crate) struct InputWait {
    /// Hands an accepted answer to the waiting work (declines and failures finish the task
    /// directly; dropping this ends the work).
    answer: oneshot::Sender<String>,
    /// 2025-11-25: the `tasks/result` request (key) whose wait carried the last
    /// `elicitation/create` for this task.
    asked_via: Option<String>,
}

/// The client's answer to `task_input`'s question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InputAnswer {
    /// `{"action": "accept", "content": {"answer": X}}`.
    Accept(String),
    /// `decline` or `cancel`.
    Decline,
    /// 2025-11-25 only: the client answered the `elicitation/create` with an error (or an
    /// invalid result); the task fails with this text.
    Failed(String),
}

/// The `elicitation/create` params `task_input` asks with (2025-11-25 adds the related-task
/// `_meta`; 2026-07-28 serves them in `inputRequests.answer.params`).
pub(crate) fn input_request_params() -> Value {
    json!({
        "mode": "form",
        "message": INPUT_MESSAGE,
        "requestedSchema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    })
}

/// An `ElicitResult` (`{action, content?}`) as `task_input` reads it: `accept` needs a string
/// `content.answer`.
pub(crate) fn parse_elicit_result(result: Option<&Value>) -> Result<InputAnswer, String> {
    let Some(result) = result.and_then(Value::as_object) else {
        return Err("an elicitation result object `{action, content?}` is required".to_owned());
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => result
            .get("content")
            .and_then(|content| content.get("answer"))
            .and_then(Value::as_str)
            .map(|answer| InputAnswer::Accept(answer.to_owned()))
            .ok_or_else(|| "an accepted answer needs a string `content.answer`".to_owned()),
        Some("decline" | "cancel") => Ok(InputAnswer::Decline),
        _ => Err(format!(
            "`action` must be accept, decline or cancel, got {}",
            result.get("action").unwrap_or(&Value::Null)
        )),
    }
}

/// What a client response to the 2025-11-25 `elicitation/create` means for the task.
fn elicitation_outcome(response: &Value) -> InputAnswer {
    if let Some(error) = response.get("error") {
        return InputAnswer::Failed(format!("elicitation/create failed: {error}"));
    }
    parse_elicit_result(response.get("result")).unwrap_or_else(|problem| {
        InputAnswer::Failed(format!("invalid elicitation/create result: {problem}"))
    })
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
        if let (true, Some(_), Value::Object(task)) = (with_result, &self.input, &mut task) {
            task.insert(
                "inputRequests".to_owned(),
                json!({INPUT_KEY: {"method": "elicitation/create", "params": input_request_params()}}),
            );
        }
        task
    }

    /// Moves to a terminal status and wakes the `tasks/result` waiters. A wait for input ends
    /// (a later answer is refused or ignored).
    fn finish(&mut self, status: TaskStatus) {
        self.status = status;
        self.last_updated_at = now_iso8601();
        self.work = None;
        self.input = None;
        for (_, waiter) in self.waiters.drain(..) {
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
    /// Tasks in `status`.
    pub(crate) fn count(&self, status: TaskStatus) -> usize {
        self.entries
            .values()
            .filter(|task| task.status == status)
            .count()
    }
}

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskWork {
    /// `task_sleep` / `task_required`.
    Sleep(SleepPlan),
    /// `task_input`: `ms / 2`, the question, then the rest of `ms` once accepted.
    Input { ms: u64 },
}

impl TaskWork {
    /// `task_input`'s arguments.
    pub(crate) fn parse_input(args: &Map<String, Value>) -> Result<Self, String> {
        Ok(Self::Input {
            ms: u64_arg(args, "ms", Some(DEFAULT_INPUT_MS))?,
        })
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

/// The work of a `task_input` task: `ms / 2`, then `input_required` until the client answers;
/// an accepted answer resumes the work for the rest of `ms`, then it completes. Declines,
/// failures and cancels finish the task elsewhere, which ends this future (or aborts it).
async fn input_work(server: Rc<Server>, task_id: String, ms: u64) {
    let first = ms / 2;
    tokio::time::sleep_until(deadline(Instant::now(), first)).await;
    let (answer_tx, answer) = oneshot::channel();
    server.wait_for_input(&task_id, answer_tx);
    // An error: the wait ended without an accepted answer, and the task is already terminal.
    let Ok(answer) = answer.await else {
        return;
    };
    tokio::time::sleep_until(deadline(Instant::now(), ms - first)).await;
    server.finish_task(
        &task_id,
        TaskStatus::Completed,
        text_result(&format!("answered: {answer}")),
        "answered".to_owned(),
    );
}

impl Server {
    /// `tools/call` of a task tool with a task: creates it and answers at once.
    pub(crate) fn create_task(
        self: &Rc<Self>,
        request_key: &str,
        ask: TaskAsk,
        work: Result<TaskWork, String>,
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
            input: None,
        };
        match work {
            Ok(TaskWork::Sleep(plan)) => {
                entry.status_message = format!("step 0/{}", plan.steps);
                let work = task_work(Rc::clone(self), id.clone(), plan, progress_token);
                // Polled only once the reader yields, so after the insert below.
                entry.work = Some(spawn_local(work.boxed_local()).abort_handle());
            }
            Ok(TaskWork::Input { ms }) => {
                entry.status_message = "working".to_owned();
                let work = input_work(Rc::clone(self), id.clone(), ms);
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

    /// A step of a working task: new `statusMessage` and `lastUpdatedAt`.
    fn update_task(&self, task_id: &str, message: String) {
        {
            let mut state = self.state.borrow_mut();
            let Some(task) = state.tasks.entries.get_mut(task_id) else {
                return;
            };
            if task.status.is_terminal() {
                return;
            }
            task.status_message = message;
            task.last_updated_at = now_iso8601();
        }
        self.task_changed(task_id);
    }

    /// The work ended: `status` with `result`, unless the task was cancelled (which sticks).
    fn finish_task(&self, task_id: &str, status: TaskStatus, result: Value, message: String) {
        {
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
                TaskStatus::Working | TaskStatus::InputRequired => {}
            }
        }
        self.task_changed(task_id);
    }

    /// `task_input` reached its question: `input_required` until an answer comes. 2025-11-25:
    /// asked at once if a `tasks/result` is waiting, else when one comes.
    fn wait_for_input(self: &Rc<Self>, task_id: &str, answer: oneshot::Sender<String>) {
        {
            let mut state = self.state.borrow_mut();
            let Some(task) = state.tasks.entries.get_mut(task_id) else {
                return;
            };
            if task.status.is_terminal() {
                return;
            }
            task.status = TaskStatus::InputRequired;
            task.status_message = WAITING_FOR_INPUT.to_owned();
            task.last_updated_at = now_iso8601();
            task.input = Some(InputWait {
                answer,
                asked_via: None,
            });
        }
        self.task_changed(task_id);
        self.ask_for_input(task_id);
    }

    /// 2025-11-25: sends `elicitation/create` (with the related-task `_meta`) for a task waiting
    /// for input, on a `tasks/result` of it that is still waiting, unless one such request
    /// already carried it. Asked again (under a new id) only if the request that carried the
    /// last one went away (cancelled, or its HTTP stream closed); the first answer wins.
    fn ask_for_input(self: &Rc<Self>, task_id: &str) {
        let via = {
            let mut state = self.state.borrow_mut();
            let Some(task) = state.tasks.entries.get_mut(task_id) else {
                return;
            };
            if task.modern || task.status != TaskStatus::InputRequired {
                return;
            }
            let live = |key: &str| {
                task.waiters
                    .iter()
                    .any(|(waiting, waiter)| waiting == key && !waiter.is_closed())
            };
            let Some(input) = &task.input else {
                return;
            };
            if input.asked_via.as_deref().is_some_and(live) {
                return;
            }
            let Some((via, _)) = task.waiters.iter().find(|(_, waiter)| !waiter.is_closed()) else {
                return;
            };
            let via = via.clone();
            if let Some(input) = &mut task.input {
                input.asked_via = Some(via.clone());
            }
            via
        };
        let mut params = input_request_params();
        params["_meta"] = json!({RELATED_TASK: {"taskId": task_id}});
        let (_srv_id, response) = send_client_request_via(
            self,
            Some(&via),
            "elicitation/create".to_owned(),
            Some(params),
        );
        let server = Rc::clone(self);
        let task_id = task_id.to_owned();
        spawn_local(async move {
            // An error: the waiter was dropped, no response will be routed here.
            let Ok(response) = response.await else {
                return;
            };
            // An error: the task no longer waits (cancelled, or answered through another
            // elicitation): the answer is ignored.
            let _ = server.apply_input(&task_id, elicitation_outcome(&response));
        });
    }

    /// An answer for a task waiting for input (either era): `accept` resumes the work
    /// (`working`), `decline`/`cancel` completes the task with `declined`, a failure fails it.
    fn apply_input(&self, task_id: &str, answer: InputAnswer) -> Result<(), (i64, String)> {
        let resumed = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let task = state
                .tasks
                .entries
                .get_mut(task_id)
                .ok_or_else(|| Self::unknown_task(task_id))?;
            let input = match (task.status, task.input.take()) {
                (TaskStatus::InputRequired, Some(input)) => input,
                (status, input) => {
                    task.input = input;
                    return Err((
                        INVALID_PARAMS,
                        format!(
                            "task {task_id:?} is not waiting for input (it is {})",
                            status.name()
                        ),
                    ));
                }
            };
            if !matches!(answer, InputAnswer::Failed(_)) {
                state.counters.task_inputs_answered += 1;
            }
            match &answer {
                InputAnswer::Accept(text) => {
                    task.status = TaskStatus::Working;
                    task.status_message = "input received".to_owned();
                    task.last_updated_at = now_iso8601();
                    // A send error would mean the work is gone, which only a cancel does.
                    let _ = input.answer.send(text.clone());
                    true
                }
                // Dropping `input` ends the work; the task is finished below.
                InputAnswer::Decline | InputAnswer::Failed(_) => false,
            }
        };
        match (resumed, answer) {
            (true, _) => self.task_changed(task_id),
            (false, InputAnswer::Failed(problem)) => {
                self.finish_task(task_id, TaskStatus::Failed, tool_error(&problem), problem)
            }
            (false, _) => self.finish_task(
                task_id,
                TaskStatus::Completed,
                text_result("declined"),
                "declined".to_owned(),
            ),
        }
        Ok(())
    }

    /// `tasks/update` (2026-07-28 extension): `inputResponses.answer` for a `task_input` task
    /// waiting for input; an empty ack.
    pub(crate) fn tasks_update(&self, params: &Value) -> Reply {
        self.state.borrow_mut().counters.task_updates += 1;
        let task_id = Self::task_id_param(params)?;
        {
            let state = self.state.borrow();
            let task = state
                .tasks
                .entries
                .get(task_id)
                .ok_or_else(|| Self::unknown_task(task_id))?;
            if !task.modern {
                return Err((
                    INVALID_PARAMS,
                    format!(
                        "task {task_id:?} was created without the tasks extension: its input is \
                         asked with elicitation/create during tasks/result"
                    ),
                ));
            }
            if task.status != TaskStatus::InputRequired || task.input.is_none() {
                return Err((
                    INVALID_PARAMS,
                    format!(
                        "task {task_id:?} is not waiting for input (it is {})",
                        task.status.name()
                    ),
                ));
            }
        }
        let response = params
            .get("inputResponses")
            .and_then(|responses| responses.get(INPUT_KEY));
        let answer = parse_elicit_result(response).map_err(|problem| {
            (
                INVALID_PARAMS,
                format!("invalid `inputResponses.{INPUT_KEY}`: {problem}"),
            )
        })?;
        self.apply_input(task_id, answer)?;
        Ok(json!({}))
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
        let (answer, task_id) = reply?;
        self.task_changed(&task_id);
        Ok(answer)
    }

    /// The answer, and the id of the task cancelled.
    fn cancel_task(&self, params: &Value) -> Result<(Value, String), (i64, String)> {
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
        Ok((answer, task_id.to_owned()))
    }

    /// `tasks/result`: the underlying result once the task is terminal. Waits in a local task
    /// of its own (cancellable with `notifications/cancelled`), so reading goes on meanwhile.
    ///
    /// 2025-11-25: while it waits on a task in `input_required`, the task's question goes to the
    /// client as `elicitation/create` (on this request's stream in HTTP mode).
    pub(crate) fn tasks_result(self: &Rc<Self>, request_key: &str, params: &Value) -> Step {
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
                    task.waiters.push((request_key.to_owned(), waiter));
                    Some(done)
                }
            }
        };
        let Some(done) = waiting else {
            return Step::Reply(self.task_outcome(&task_id));
        };
        self.ask_for_input(&task_id);
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

/// Now as an RFC 3339 UTC timestamp, to the millisecond (`2026-12-01T17:45:09.372Z`).
pub(crate) fn now_iso8601() -> String {
    rfc3339(OffsetDateTime::now_utc())
}

fn rfc3339(at: OffsetDateTime) -> String {
    let at = at.replace_millisecond(at.millisecond()).unwrap_or(at);
    // Fails only past the year 9999.
    at.format(&Rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::{cell::RefCell, future::Future, time::Duration};

    use clap::Parser as _;
    use tokio::sync::mpsc;

    use super::*;
    use crate::{
        args::Cli,
        journal::Journal,
        stdio::Outgoing,
        tools::{find_tool, tool_list},
    };

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
                modern_tools: crate::results::Modern::cacheable(&tool_list(0), 0),
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

        /// The first server-to-client request `method` written, waiting up to 2 s for it.
        async fn server_request(&mut self, method: &str) -> Value {
            for _ in 0..200 {
                self.drain().await;
                if let Some(at) = self
                    .seen
                    .iter()
                    .position(|m| m["method"] == method && m.get("id").is_some())
                {
                    return self.seen.remove(at);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("no {method} request; seen {:?}", self.seen);
        }

        /// The first notification `method` written, waiting up to 2 s for it.
        async fn notification(&mut self, method: &str) -> Value {
            for _ in 0..200 {
                self.drain().await;
                if let Some(at) = self
                    .seen
                    .iter()
                    .position(|m| m["method"] == method && m.get("id").is_none())
                {
                    return self.seen.remove(at);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("no {method} notification; seen {:?}", self.seen);
        }

        /// Whether a server-to-client request `method` was written so far.
        async fn saw_request(&mut self, method: &str) -> bool {
            self.drain().await;
            self.seen
                .iter()
                .any(|m| m["method"] == method && m.get("id").is_some())
        }

        /// `tasks/get` (ids after `*next_id`, with `params`) until the task is in `status`,
        /// up to 2 s; the Task.
        async fn wait_status(&mut self, next_id: &mut u64, params: &Value, status: &str) -> Value {
            for _ in 0..200 {
                *next_id += 1;
                self.request(*next_id, "tasks/get", params.clone());
                let got = self.response(*next_id).await["result"].clone();
                if got["status"] == status {
                    return got;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the task never reached {status}");
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
                json!({"created": 1, "working": 0, "input_required": 0, "completed": 1, "failed": 0, "cancelled": 0})
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
            // The extension: a cancel's result is the standard (`complete`) shape.
            assert_eq!(
                h.response(4).await["result"],
                json!({"resultType": "complete"})
            );
            h.request(5, "tasks/result", json!({"taskId": task_id}));
            assert_eq!(h.response(5).await["error"]["code"], METHOD_NOT_FOUND);
        });
    }

    fn modern_meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            CLIENT_CAPABILITIES_META: {"extensions": {TASKS_EXTENSION: {}}},
        })
    }

    fn expected_elicitation(task_id: Option<&Value>) -> Value {
        let mut params = json!({
            "mode": "form",
            "message": "Continue the task?",
            "requestedSchema": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
        });
        if let Some(task_id) = task_id {
            params["_meta"] = json!({RELATED_TASK: {"taskId": task_id}});
        }
        params
    }

    #[test]
    fn task_input_is_listed_as_required_and_refused_without_a_task() {
        run(async {
            let mut h = Harness::new(&[]);
            let tool = tool_list(0)["tools"]
                .as_array()
                .and_then(|tools| tools.iter().find(|t| t["name"] == "task_input").cloned())
                .unwrap_or_default();
            assert_eq!(tool["execution"], json!({"taskSupport": "required"}));
            assert_eq!(tool["inputSchema"]["required"], json!([]));
            h.request(1, "tools/call", call("task_input", json!({}), None));
            assert_eq!(h.response(1).await["error"]["code"], METHOD_NOT_FOUND);
            // Bad arguments: a task failed at once.
            h.request(
                2,
                "tools/call",
                call("task_input", json!({"ms": -1}), Some(json!({}))),
            );
            assert_eq!(h.response(2).await["result"]["task"]["status"], "failed");
        });
    }

    #[test]
    fn legacy_task_input_asks_through_tasks_result_and_completes_with_the_answer() {
        run(async {
            let mut h = Harness::new(&["--task-status-notifications"]);
            h.request(
                1,
                "tools/call",
                call(
                    "task_input",
                    json!({"ms": 100}),
                    Some(json!({"ttl": 60000})),
                ),
            );
            let task = h.response(1).await["result"]["task"].clone();
            assert_eq!(task["status"], "working");
            let task_id = task["taskId"].clone();
            let mut next = 100;
            let get = json!({"taskId": task_id});
            let waiting = h.wait_status(&mut next, &get, "input_required").await;
            assert_eq!(waiting["statusMessage"], "waiting for input");
            assert!(waiting.get("inputRequests").is_none());
            // Nobody waits on tasks/result yet: nothing asked.
            assert!(!h.saw_request("elicitation/create").await);
            // The 2026 way is refused for a 2025-11-25 task.
            h.request(
                2,
                "tasks/update",
                json!({"taskId": task_id, "inputResponses": {"answer": {"action": "decline"}}}),
            );
            assert_eq!(h.response(2).await["error"]["code"], INVALID_PARAMS);

            h.request(3, "tasks/result", json!({"taskId": task_id}));
            let ask = h.server_request("elicitation/create").await;
            assert_eq!(ask["params"], expected_elicitation(Some(&task_id)));
            // A second tasks/result waits along without a second question.
            h.request(4, "tasks/result", json!({"taskId": task_id}));
            h.request(5, "ping", json!({}));
            h.response(5).await;
            assert!(!h.saw_request("elicitation/create").await);

            h.send(json!({"jsonrpc": "2.0", "id": ask["id"],
                "result": {"action": "accept", "content": {"answer": "yes"}}}));
            let resumed = h.wait_status(&mut next, &get, "working").await;
            assert_eq!(resumed["statusMessage"], "input received");
            let result = h.response(3).await["result"].clone();
            assert_eq!(
                result["content"],
                json!([{"type": "text", "text": "answered: yes"}])
            );
            assert_eq!(result["_meta"][RELATED_TASK]["taskId"], task_id);
            assert_eq!(h.response(4).await["result"]["content"], result["content"]);
            let statuses: Vec<_> = h
                .seen
                .iter()
                .filter(|m| m["method"] == "notifications/tasks/status")
                .map(|m| m["params"]["status"].clone())
                .collect();
            assert_eq!(
                statuses,
                [
                    json!("input_required"),
                    json!("working"),
                    json!("completed")
                ]
            );
            let stats = h.stats(6).await;
            assert_eq!(stats["task_inputs_answered"], 1);
            assert_eq!(stats["task_updates"], 1);
            assert_eq!(stats["tasks"]["completed"], 1);
            assert_eq!(stats["tasks"]["input_required"], 0);
        });
    }

    #[test]
    fn legacy_task_input_declined_failed_or_cancelled() {
        run(async {
            let mut h = Harness::new(&[]);
            let mut next = 100;
            let mut tasks = Vec::new();
            for id in 1..=3 {
                h.request(
                    id,
                    "tools/call",
                    call("task_input", json!({"ms": 40}), Some(json!({}))),
                );
                let task_id = h.response(id).await["result"]["task"]["taskId"].clone();
                // Asked at once when a tasks/result already waits.
                h.request(10 + id, "tasks/result", json!({"taskId": task_id}));
                let ask = h.server_request("elicitation/create").await;
                assert_eq!(ask["params"], expected_elicitation(Some(&task_id)));
                tasks.push((task_id, ask["id"].clone()));
            }

            let (declined, ask) = &tasks[0];
            h.send(json!({"jsonrpc": "2.0", "id": ask, "result": {"action": "cancel"}}));
            assert_eq!(
                h.response(11).await["result"]["content"][0]["text"],
                "declined"
            );
            let got = h
                .wait_status(&mut next, &json!({"taskId": declined}), "completed")
                .await;
            assert_eq!(got["statusMessage"], "declined");

            let (failed, ask) = &tasks[1];
            h.send(json!({"jsonrpc": "2.0", "id": ask,
                "error": {"code": -32601, "message": "no elicitation"}}));
            let result = h.response(12).await["result"].clone();
            assert_eq!(result["isError"], true);
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            assert!(text.contains("no elicitation"), "{text}");
            h.wait_status(&mut next, &json!({"taskId": failed}), "failed")
                .await;

            let (cancelled, ask) = &tasks[2];
            h.request(4, "tasks/cancel", json!({"taskId": cancelled}));
            assert_eq!(h.response(4).await["result"]["status"], "cancelled");
            assert_eq!(h.response(13).await["error"]["code"], INTERNAL_ERROR);
            // The pending question's late answer is ignored: cancelled sticks.
            h.send(json!({"jsonrpc": "2.0", "id": ask,
                "result": {"action": "accept", "content": {"answer": "late"}}}));
            tokio::time::sleep(Duration::from_millis(60)).await;
            h.request(5, "tasks/get", json!({"taskId": cancelled}));
            assert_eq!(h.response(5).await["result"]["status"], "cancelled");

            let stats = h.stats(6).await;
            assert_eq!(stats["task_inputs_answered"], 1, "only the decline");
            assert_eq!(
                stats["tasks"],
                json!({"created": 3, "working": 0, "input_required": 0, "completed": 1,
                    "failed": 1, "cancelled": 1})
            );
        });
    }

    #[test]
    fn modern_task_input_serves_input_requests_and_takes_tasks_update() {
        run(async {
            let mut h = Harness::new(&["--era", "modern"]);
            let meta = modern_meta();
            let mut params = call("task_input", json!({"ms": 100}), None);
            params["_meta"] = meta.clone();
            h.request(1, "tools/call", params);
            let created = h.response(1).await["result"].clone();
            assert_eq!(created["resultType"], "task");
            assert_eq!(created["status"], "working");
            let task_id = created["taskId"].clone();
            let update = |responses: Value| json!({"taskId": task_id, "inputResponses": responses, "_meta": meta});
            let accept = json!({"answer": {"action": "accept", "content": {"answer": "go"}}});

            // Not waiting yet, or unknown.
            h.request(2, "tasks/update", update(accept.clone()));
            assert_eq!(h.response(2).await["error"]["code"], INVALID_PARAMS);
            h.request(
                3,
                "tasks/update",
                json!({"taskId": "nope", "inputResponses": accept, "_meta": meta}),
            );
            assert_eq!(h.response(3).await["error"]["code"], INVALID_PARAMS);

            let mut next = 100;
            let get = json!({"taskId": task_id, "_meta": meta});
            let waiting = h.wait_status(&mut next, &get, "input_required").await;
            assert_eq!(waiting["statusMessage"], "waiting for input");
            assert_eq!(
                waiting["inputRequests"],
                json!({"answer": {"method": "elicitation/create",
                    "params": expected_elicitation(None)}})
            );
            assert!(waiting.get("result").is_none());

            // Missing or invalid answers leave the task waiting.
            for (id, bad) in [
                (4, Value::Null),
                (5, json!({})),
                (6, json!({"answer": {"action": "accept"}})),
                (
                    7,
                    json!({"answer": {"action": "accept", "content": {"answer": 1}}}),
                ),
                (8, json!({"answer": {"action": "maybe"}})),
            ] {
                h.request(id, "tasks/update", update(bad));
                assert_eq!(h.response(id).await["error"]["code"], INVALID_PARAMS);
            }
            h.wait_status(&mut next, &get, "input_required").await;

            h.request(9, "tasks/update", update(accept.clone()));
            assert_eq!(
                h.response(9).await["result"],
                json!({"resultType": "complete"})
            );
            let resumed = h.wait_status(&mut next, &get, "working").await;
            assert!(resumed.get("inputRequests").is_none());
            // Answered already: a second answer is refused.
            h.request(10, "tasks/update", update(accept));
            assert_eq!(h.response(10).await["error"]["code"], INVALID_PARAMS);
            let done = h.wait_status(&mut next, &get, "completed").await;
            assert_eq!(
                done["result"],
                json!({"content": [{"type": "text", "text": "answered: go"}]})
            );
            assert!(!h.saw_request("elicitation/create").await);

            // Declined; then a cancel while waiting.
            for (id, answer, end) in [
                (
                    11,
                    Some(json!({"answer": {"action": "decline"}})),
                    "completed",
                ),
                (12, None, "cancelled"),
            ] {
                let mut params = call("task_input", json!({"ms": 20}), None);
                params["_meta"] = meta.clone();
                h.request(id, "tools/call", params);
                let task_id = h.response(id).await["result"]["taskId"].clone();
                let get = json!({"taskId": task_id, "_meta": meta});
                h.wait_status(&mut next, &get, "input_required").await;
                next += 1;
                match answer {
                    Some(answer) => h.request(
                        next,
                        "tasks/update",
                        json!({"taskId": task_id, "inputResponses": answer}),
                    ),
                    None => h.request(next, "tasks/cancel", json!({"taskId": task_id})),
                }
                assert_eq!(h.response(next).await["result"], json!({}));
                let got = h.wait_status(&mut next, &get, end).await;
                assert!(got.get("inputRequests").is_none());
                if end == "completed" {
                    assert_eq!(got["result"]["content"][0]["text"], "declined");
                }
                next += 1;
                h.request(
                    next,
                    "tasks/update",
                    json!({"taskId": task_id, "inputResponses": {"answer": {"action": "decline"}}}),
                );
                assert_eq!(h.response(next).await["error"]["code"], INVALID_PARAMS);
            }

            let stats = h.stats(20).await;
            assert_eq!(stats["task_updates"], 12);
            assert_eq!(stats["task_inputs_answered"], 2);
            assert_eq!(stats["tasks"]["cancelled"], 1);
            assert_eq!(stats["tasks"]["completed"], 2);
        });
    }

    #[test]
    fn elicit_results_are_read_as_task_input_answers() {
        let accept = json!({"action": "accept", "content": {"answer": "x"}});
        assert_eq!(
            parse_elicit_result(Some(&accept)),
            Ok(InputAnswer::Accept("x".to_owned()))
        );
        for declined in ["decline", "cancel"] {
            assert_eq!(
                parse_elicit_result(Some(&json!({"action": declined}))),
                Ok(InputAnswer::Decline)
            );
        }
        assert!(parse_elicit_result(None).is_err());
        assert!(parse_elicit_result(Some(&json!("accept"))).is_err());
        let error = json!({"jsonrpc": "2.0", "id": "srv-1", "error": {"code": -1, "message": "m"}});
        assert!(matches!(
            elicitation_outcome(&error),
            InputAnswer::Failed(_)
        ));
        let bad = json!({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept"}});
        assert!(matches!(elicitation_outcome(&bad), InputAnswer::Failed(_)));
    }

    #[test]
    fn task_times_are_utc_to_the_millisecond() {
        let at = |nanos: i128| OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap();
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(at(1_709_210_096_789_999_999)),
            "2024-02-29T12:34:56.789Z",
            "truncated, not rounded"
        );
        assert_eq!(
            rfc3339(at(1_767_225_599_999_000_000)),
            "2025-12-31T23:59:59.999Z"
        );
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
        // Declared in the tool table; unknown tools count as forbidden.
        let task_support = |tool| find_tool(tool).map_or(TaskSupport::Forbidden, |tool| tool.tasks);
        assert_eq!(task_support("task_sleep"), TaskSupport::Optional);
        assert_eq!(task_support("task_required"), TaskSupport::Required);
        assert_eq!(task_support("task_input"), TaskSupport::Required);
        assert_eq!(task_support("echo"), TaskSupport::Forbidden);
    }

    #[test]
    fn subscriptions_listen_carries_notifications_tasks_until_cancelled() {
        use crate::listen::SUBSCRIPTION_ID;
        for era in ["modern", "dual"] {
            run(async {
                let mut h = Harness::new(&["--era", era]);
                let meta = modern_meta();
                let mut params = call("task_sleep", json!({"ms": 200, "steps": 2}), None);
                params["_meta"] = meta.clone();
                h.request(1, "tools/call", params);
                let task_id = h.response(1).await["result"]["taskId"].clone();

                // Without the extension: refused, naming it.
                h.request(
                    2,
                    "subscriptions/listen",
                    json!({"notifications": {"taskIds": [task_id]}}),
                );
                let refused = h.response(2).await["error"].clone();
                assert_eq!(refused["code"], MISSING_REQUIRED_CLIENT_CAPABILITY);
                assert_eq!(
                    refused["data"],
                    json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
                );

                h.request(
                    3,
                    "subscriptions/listen",
                    json!({"notifications": {"taskIds": [task_id, "unknown"]}, "_meta": meta}),
                );
                let ack = h
                    .notification("notifications/subscriptions/acknowledged")
                    .await;
                assert_eq!(
                    ack["params"],
                    json!({"notifications": {"taskIds": [task_id]},
                        "_meta": {SUBSCRIPTION_ID: 3}})
                );
                let step = h.notification("notifications/tasks").await["params"].clone();
                assert_eq!(step["taskId"], task_id);
                assert_eq!(step["status"], "working");
                assert_eq!(step["statusMessage"], "step 1/2");
                assert_eq!(step["pollIntervalMs"], POLL_INTERVAL_MS);
                assert_eq!(step["_meta"], json!({SUBSCRIPTION_ID: 3}));
                assert!(step.get("result").is_none());
                let mut done = h.notification("notifications/tasks").await["params"].clone();
                assert_eq!(done["status"], "completed");
                assert_eq!(
                    done["result"],
                    json!({"content": [{"type": "text", "text": "slept 200 ms in 2 steps"}]})
                );
                // The same Task tasks/get answers, plus the subscription's tag.
                h.request(4, "tasks/get", json!({"taskId": task_id, "_meta": meta}));
                let mut got = h.response(4).await["result"].clone();
                if let Value::Object(done) = &mut done {
                    done.remove("_meta");
                }
                // A notification is no result: it has no `resultType`.
                assert_eq!(got["resultType"], "complete");
                if let Value::Object(got) = &mut got {
                    got.remove("resultType");
                }
                assert_eq!(done, got);

                // A second task and listen, cancelled at once: nothing more on it.
                let mut params = call("task_sleep", json!({"ms": 60, "steps": 2}), None);
                params["_meta"] = meta.clone();
                h.request(5, "tools/call", params);
                let second = h.response(5).await["result"]["taskId"].clone();
                h.request(
                    6,
                    "subscriptions/listen",
                    json!({"notifications": {"taskIds": [second], "toolsListChanged": true},
                        "_meta": meta}),
                );
                let ack = h
                    .notification("notifications/subscriptions/acknowledged")
                    .await;
                assert_eq!(ack["params"]["notifications"]["taskIds"], json!([second]));
                for listen in [3, 6] {
                    h.send(
                        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": listen}}),
                    );
                }
                let mut next = 100;
                let get = json!({"taskId": second, "_meta": meta});
                h.wait_status(&mut next, &get, "completed").await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                h.drain().await;
                assert!(
                    !h.seen.iter().any(|m| m["method"] == "notifications/tasks"
                        || m["id"] == 3
                        || m["id"] == 6),
                    "nothing after the cancel, and no response to a listen: {:?}",
                    h.seen
                );

                let stats = h.stats(7).await;
                assert_eq!(stats["listens"], 3);
                assert_eq!(stats["listens_open"], 0);
                assert_eq!(stats["task_notifications"], 2);
                assert_eq!(stats["pending"], 0);
            });
        }

        // The legacy era does not know the method.
        run(async {
            let mut h = Harness::new(&[]);
            h.request(
                1,
                "subscriptions/listen",
                json!({"notifications": {"taskIds": []}, "_meta": modern_meta()}),
            );
            assert_eq!(h.response(1).await["error"]["code"], METHOD_NOT_FOUND);
        });
    }
}
