//! Tasks, caller side: a `tools/call` the server runs as a task is created, polled (at the
//! server's `pollInterval`, by the caller's future: never a timer on the actor, never a busy
//! loop) and its result fetched; to the caller it is awaited like any call.
//!
//! **Cancellation, at every moment:**
//! - before the creating call is written: it is withdrawn, nothing reaches the wire;
//! - while the creating call is in flight: the caller is woken at once; the call is never
//!   cancelled on the wire (2025-11-25 forbids `notifications/cancelled` for a task-augmented
//!   request): its answer is awaited in the background and the task it names gets `tasks/cancel`;
//! - while the task runs: `tasks/cancel {taskId}`, never `notifications/cancelled`, the caller
//!   woken at once;
//! - a task that ends while the cancel is on its way, or a `tasks/cancel` answered `-32602`
//!   (already terminal): nothing reaches a caller who left; [`TaskHandle::cancel`] reports the
//!   final state to one who waits.
//!
//! A task started with [`TaskCall::start`](super::Call::start_task) is **detached**: it runs on
//! whatever happens to the handle, and [`Client::task`](super::Client::task) resumes it by id,
//! from this process or another.

mod follow;

use std::{
    future::{Future, IntoFuture},
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use serde_json::{json, Map, Value};

use self::follow::{ending, Ending, Following, GuardState, Step};
use super::{
    call::WithdrawThen,
    mrtr::Answering,
    shared::{Shared, TaskWatch},
    Call,
};
use crate::{
    cancellation::Cancellation,
    connection::{Outcome, Request, RequestOptions},
    error::Error,
    protocol::{
        jsonrpc::RawResult,
        tasks::{created_task, Task},
        tools::CallToolResult,
    },
};

/// Called with the task each time it is read (created, then each poll), on the caller's task.
pub type TaskStatusCallback = Arc<dyn Fn(&Task) + Send + Sync>;

/// How a call runs as a task.
#[derive(Clone, Default)]
pub(crate) struct TaskOptions {
    /// `params.task.ttl`: how long the server keeps the task after creation.
    pub ttl: Option<Duration>,
    pub on_status: Option<TaskStatusCallback>,
    /// Hand back the creating answer instead of following the task (a detached start).
    pub detach: bool,
}

/// The work of a task call, to its final result.
pub(crate) type TaskRun = Pin<Box<dyn Future<Output = Result<RawResult, Error>> + Send>>;

/// How long a background `tasks/cancel` may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `request` (a `tools/call`) as a task: created with `params.task`, followed to its end.
/// A server that answers with a plain result (it chose not to make a task) is answered so.
pub(crate) fn run(shared: Arc<Shared>, mut request: Box<Request>, options: TaskOptions) -> TaskRun {
    Box::pin(async move {
        // The caller's progress listener hears the task's progress for as long as it is
        // followed: the server reports it under the token the creating call carries.
        let _progress = request
            .options
            .take_progress()
            .map(|listener| shared.keep_progress(request.id(), listener));
        let guard = Guard::new(shared.clone());
        // 2026-07-28: the server answers `resultType: "task"`, and this call follows the task
        // itself (with these options) to its final result.
        let created: Box<serde_json::value::RawValue> =
            creating_call(&shared, &request, options.clone())?.await?;
        let value: Value = serde_json::from_str(created.get())
            .map_err(|e| Error::Protocol(format!("unexpected task-creating result: {e}")))?;
        let Some(task) = created_task(&value) else {
            return Ok(created); // not made a task: this is the result
        };
        follow_guarded(shared, task, options, guard).await
    })
}

/// Follows a task the server made of a call (2026-07-28 `resultType: "task"`) to its end.
pub(crate) fn follow(shared: Arc<Shared>, task: Task, options: TaskOptions) -> TaskRun {
    Box::pin(async move {
        let guard = Guard::new(shared.clone());
        follow_guarded(shared, task, options, guard).await
    })
}

/// Follows `task` to its end, doing what [`Following`] decides: answering its input
/// requests, waiting for a poll or a pushed status, fetching the final result.
async fn follow_guarded(
    shared: Arc<Shared>,
    task: Task,
    options: TaskOptions,
    guard: Guard,
) -> Result<RawResult, Error> {
    guard.running(&task.task_id);
    report(&task, options.on_status.as_ref());
    // Status notifications, when the server sends them, come in between polls; in the
    // 2026-07-28 era they are asked for with `subscriptions/listen` (ended with the follow).
    let mut watch = shared.watch_task(&task.task_id);
    let mut listen = listen_to_status(&shared, &task.task_id);
    let mut following = Following::new(task, shared.is_modern());
    loop {
        let task = match following.next_step()? {
            Step::Finish => break,
            Step::Answer(requests) => {
                let task_id = following.task().task_id.clone();
                let responses = Answering::start(requests, &shared.handlers)?.await?;
                following.on_answered(responses.keys().cloned());
                update(&shared, &task_id, responses).await?;
                get(&shared, &task_id).await?
            }
            Step::Wait(interval) => {
                let task_id = &following.task().task_id;
                match next_status(&shared, task_id, interval, &mut watch, &mut listen).await? {
                    Some(task) => task,
                    None => continue, // the subscription ended: polling goes on
                }
            }
        };
        report(&task, options.on_status.as_ref());
        following.on_status(task);
    }
    drop(listen);
    drop(watch);

    let outcome = final_result(&shared, following.task()).await;
    guard.done();
    outcome
}

/// Tells of a status read: an event on the call's span (which the follow runs in: the task's
/// life in its trace), and the caller's callback, if any.
fn report(task: &Task, on_status: Option<&TaskStatusCallback>) {
    tracing::info!(
        target: "actix_mcp::call",
        task_id = %task.task_id,
        task_status = task.status.as_str(),
        "task status"
    );
    #[cfg(feature = "otel")]
    super::call::otel_event("task status", || {
        vec![
            ("task_id", task.task_id.to_string()),
            ("task_status", task.status.as_str().to_owned()),
        ]
    });
    if let Some(on_status) = on_status {
        on_status(task);
    }
}

/// A `subscriptions/listen` for a task's status notifications, running until it is dropped.
type Listen = Pin<Box<super::CallFuture<Value>>>;

/// 2026-07-28: asks for task `task_id`'s status notifications; `None` in the 2025-11-25 era,
/// whose server sends them unasked, if at all.
fn listen_to_status(shared: &Arc<Shared>, task_id: &str) -> Option<Listen> {
    shared.is_modern().then(|| {
        let filter = crate::protocol::notifications::ListenFilter::tasks([task_id.to_owned()]);
        let request = Request::new(
            "subscriptions/listen",
            Some(json!({ "notifications": filter })),
        );
        Box::pin(
            Call::<Value>::new(shared.clone(), request)
                .no_timeout()
                .into_future(),
        )
    })
}

/// Waits `interval` for task `task_id`'s next status: a poll (`tasks/get`) after it, unless the
/// server pushes one sooner. `None` if the status subscription ended first (the server ended
/// or refused it): it is dropped, and the wait begins again.
async fn next_status(
    shared: &Arc<Shared>,
    task_id: &str,
    interval: Duration,
    watch: &mut TaskWatch,
    listen: &mut Option<Listen>,
) -> Result<Option<Task>, Error> {
    let listening = async {
        match listen.as_mut() {
            Some(call) => call.await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = tokio::time::sleep(interval) => get(shared, task_id).await.map(Some),
        pushed = watch.next() => Ok(Some(pushed)),
        ended = listening => {
            tracing::debug!(outcome = ?ended.map(drop), "task status subscription ended");
            *listen = None;
            Ok(None)
        }
    }
}

/// The final result of a terminal task: inlined (2026-07-28), else `tasks/result`.
async fn final_result(shared: &Arc<Shared>, task: &Task) -> Result<RawResult, Error> {
    match ending(task, shared.is_modern()) {
        Ending::Result(raw) => Ok(raw),
        Ending::Failed(error) => Err(error),
        Ending::Fetch => {
            Call::new(
                shared.clone(),
                Request::new("tasks/result", Some(json!({ "taskId": task.task_id }))),
            )
            .no_timeout()
            .await
        }
    }
}

/// `tasks/update {taskId, inputResponses}` (2026-07-28; an empty acknowledgement).
async fn update(
    shared: &Arc<Shared>,
    task_id: &str,
    responses: Map<String, Value>,
) -> Result<(), Error> {
    let params = json!({ "inputResponses": responses });
    let _: Value = Call::new(
        shared.clone(),
        task_request(shared, "tasks/update", task_id, params),
    )
    .timeout(super::DEFAULT_REQUEST_TIMEOUT)
    .await?;
    Ok(())
}

async fn get(shared: &Arc<Shared>, task_id: &str) -> Result<Task, Error> {
    Call::new(
        shared.clone(),
        task_request(shared, "tasks/get", task_id, json!({})),
    )
    .timeout(super::DEFAULT_REQUEST_TIMEOUT)
    .await
}

/// The call that creates a task: never cancelled on the wire (given up in flight, the task it
/// makes is cancelled once its answer comes), following per `options` a task a 2026-07-28
/// server makes of it.
fn creating_call<T>(
    shared: &Arc<Shared>,
    request: &Request,
    options: TaskOptions,
) -> Result<Call<T>, Error> {
    let create = augmented(shared, request, options.ttl)?;
    Ok(Call::new(shared.clone(), create)
        .no_timeout()
        .withdraw_on_cancel(cancel_what_it_creates(shared.clone()))
        .following(options))
}

/// A request about task `task_id` (`tasks/get`, `tasks/update`, `tasks/cancel`): over HTTP its
/// `Mcp-Name` is the task id.
fn task_request(
    shared: &Shared,
    method: &'static str,
    task_id: &str,
    mut params: Value,
) -> Request {
    if let Some(params) = params.as_object_mut() {
        params.insert("taskId".into(), Value::from(task_id));
    }
    Request::new(method, Some(params)).with_routing(shared.named_routing(task_id))
}

/// The `tools/call` request with `params.task` added (2025-11-25). In the 2026-07-28 era the
/// request goes as it is: the client declared the tasks extension, and the server decides.
fn augmented(shared: &Shared, request: &Request, ttl: Option<Duration>) -> Result<Request, Error> {
    let mut params: Map<String, Value> = match &request.params {
        Ok(Some(raw)) => serde_json::from_str(raw.get())
            .map_err(|_| Error::Misuse("tools/call params must be an object".into()))?,
        Ok(None) => Map::new(),
        Err(e) => return Err(Error::Misuse(e.clone())),
    };
    let mut task = Map::new();
    if let Some(ttl) = ttl {
        task.insert(
            "ttl".into(),
            Value::from(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
        );
    }
    if !shared.is_modern() {
        params.insert("task".into(), Value::Object(task));
    }
    Ok(Request::with_params("tools/call", Some(&params))
        .with_routing(request.options.routing().cloned()))
}

/// A creating call given up while in flight: its answer is awaited here, and the task it names,
/// if any, cancelled.
fn cancel_what_it_creates(shared: Arc<Shared>) -> WithdrawThen {
    Box::new(move |answer: oneshot::Receiver<Outcome>| {
        spawn(async move {
            let Ok(Ok(raw)) = answer.await else {
                return; // withdrawn before it was written, or failed: no task
            };
            let created = serde_json::from_str::<Value>(raw.get())
                .ok()
                .and_then(|v| created_task(&v));
            if let Some(task) = created {
                send_cancel(&shared, task.task_id);
            }
        });
    })
}

/// Queues `tasks/cancel {taskId}` on the connection now (so it is ahead of anything the caller
/// does next, a close included) and reads its answer in the background.
fn send_cancel(shared: &Shared, task_id: String) {
    let request =
        task_request(shared, "tasks/cancel", &task_id, json!({})).with_options(RequestOptions {
            timeout: Some(CANCEL_TIMEOUT),
            ..RequestOptions::default()
        });
    let (reply, answer) = oneshot::channel();
    shared.submit(Box::new(request), reply);
    spawn(async move {
        if let Ok(Err(error)) = answer.await {
            // -32602: it had ended already; nobody is waiting for this answer.
            tracing::debug!(task = %task_id, %error, "tasks/cancel not applied");
        }
    });
}

/// Runs `task` (it only waits for an answer) on the tokio runtime of the caller, which every
/// context that makes calls has (an actix System runs one).
fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    if tokio::runtime::Handle::try_current().is_ok() {
        tokio::spawn(task);
    } else {
        tracing::warn!("no runtime to send tasks/cancel on: the task is left to its ttl");
    }
}

/// Cancels the running task when the work following it is dropped before its end.
struct Guard {
    shared: Arc<Shared>,
    state: Mutex<GuardState>,
}

impl Guard {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            state: Mutex::new(GuardState::Creating),
        }
    }

    fn running(&self, task_id: &str) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) =
            GuardState::Running(task_id.to_owned());
    }

    fn done(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = GuardState::Done;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let state = std::mem::replace(
            &mut *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            GuardState::Done,
        );
        if let Some(task_id) = state.task_to_cancel() {
            send_cancel(&self.shared, task_id);
        }
    }
}

/// A task on the server, known by its id: read it, wait for it, cancel it. Dropping a handle
/// does nothing to the task.
#[derive(Clone)]
pub struct TaskHandle {
    shared: Arc<Shared>,
    task_id: String,
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle")
            .field("task_id", &self.task_id)
            .finish()
    }
}

impl TaskHandle {
    pub(crate) fn new(shared: Arc<Shared>, task_id: String) -> Self {
        Self { shared, task_id }
    }

    /// The task's id (to store, and resume with [`Client::task`](super::Client::task)).
    pub fn id(&self) -> &str {
        &self.task_id
    }

    /// `tasks/get`: where the task is now.
    pub async fn get(&self) -> Result<Task, Error> {
        get(&self.shared, &self.task_id).await
    }

    /// `tasks/result` (2025-11-25: waits until the task ends); in the 2026-07-28 era the
    /// result inlined in `tasks/get` once the task ended.
    pub async fn result(&self) -> Result<CallToolResult, Error> {
        let task = self.get().await?;
        if self.shared.is_modern() && !task.status.is_terminal() {
            return Err(Error::Protocol(format!(
                "task {} is still {}",
                self.task_id,
                task.status.as_str()
            )));
        }
        super::call::decode(&final_result(&self.shared, &task).await?)
    }

    /// `tasks/cancel`, and the task's state after it: `cancelled`, or, when it had already
    /// ended (`-32602`), the state it ended in. The 2026-07-28 cancel is cooperative and only
    /// acknowledged: the state is then read with `tasks/get`.
    pub async fn cancel(&self) -> Result<Task, Error> {
        let cancelled: Result<Value, Error> = Call::new(
            self.shared.clone(),
            task_request(&self.shared, "tasks/cancel", &self.task_id, json!({})),
        )
        .timeout(CANCEL_TIMEOUT)
        .await;
        match cancelled {
            Ok(answer) => match serde_json::from_value::<Task>(answer) {
                Ok(task) => Ok(task),
                Err(_) => self.get().await, // an empty acknowledgement (2026-07-28)
            },
            Err(Error::Server { code: -32602, .. }) => self.get().await,
            Err(e) => Err(e),
        }
    }

    /// Waits for the task's end and its result; cancelling or dropping the wait cancels the
    /// task (`tasks/cancel`).
    pub fn wait(&self) -> TaskWait {
        TaskWait {
            handle: self.clone(),
            cancellation: None,
            timeout: None,
            on_status: None,
        }
    }
}

/// Waiting for a task's result ([`TaskHandle::wait`]).
#[must_use = "a TaskWait does nothing until it is awaited"]
pub struct TaskWait {
    handle: TaskHandle,
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    on_status: Option<TaskStatusCallback>,
}

impl TaskWait {
    /// Cancels the task (`tasks/cancel`) when `token` is cancelled.
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    /// Gives up (cancelling the task) after `after`.
    pub fn timeout(mut self, after: Duration) -> Self {
        self.timeout = Some(after);
        self
    }

    /// Called with the task at each poll.
    pub fn on_status(mut self, callback: impl Fn(&Task) + Send + Sync + 'static) -> Self {
        self.on_status = Some(Arc::new(callback));
        self
    }
}

impl IntoFuture for TaskWait {
    type Output = Result<CallToolResult, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let shared = self.handle.shared.clone();
            let options = TaskOptions {
                on_status: self.on_status,
                ..TaskOptions::default()
            };
            let work = async {
                let task = self.handle.get().await?;
                super::call::decode(&follow(shared, task, options).await?)
            };
            bounded(work, self.cancellation.as_ref(), self.timeout).await
        })
    }
}

/// `work`, given up (dropped) when `token` fires or `timeout` passes.
pub(crate) async fn bounded<T>(
    work: impl Future<Output = Result<T, Error>>,
    token: Option<&Cancellation>,
    timeout: Option<Duration>,
) -> Result<T, Error> {
    let cancelled = async {
        match token {
            Some(token) => {
                token.cancelled().await;
                Error::cancelled(token.reason_owned())
            }
            None => std::future::pending().await,
        }
    };
    let expired = async {
        match timeout {
            Some(after) => {
                tokio::time::sleep(after).await;
                Error::Timeout { after }
            }
            None => std::future::pending().await,
        }
    };
    if let Some(token) = token {
        if token.is_cancelled() {
            return Err(Error::cancelled(token.reason_owned()));
        }
    }
    tokio::select! {
        outcome = work => outcome,
        error = cancelled => Err(error),
        error = expired => Err(error),
    }
}

/// The creating call of a detached task: the task's handle once the server made it.
pub(crate) async fn start(
    shared: Arc<Shared>,
    request: Box<Request>,
    ttl: Option<Duration>,
) -> Result<TaskHandle, Error> {
    let options = TaskOptions {
        ttl,
        detach: true,
        ..TaskOptions::default()
    };
    let created: Value = creating_call(&shared, &request, options)?.await?;
    let task = created_task(&created).ok_or_else(|| {
        Error::Protocol("the server answered the call instead of making a task".into())
    })?;
    Ok(TaskHandle::new(shared, task.task_id))
}

/// A task's states as it is followed (created, each poll or pushed status), as a stream that
/// ends when the task call ends. Holds at most [`PROGRESS_BUFFER`](super::PROGRESS_BUFFER)
/// states; newer ones are dropped (and counted) while it is full.
pub struct TaskStatusStream {
    rx: tokio::sync::mpsc::Receiver<Task>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl TaskStatusStream {
    pub(crate) fn new() -> (TaskStatusCallback, Self) {
        let (tx, rx) = tokio::sync::mpsc::channel(super::PROGRESS_BUFFER);
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = dropped.clone();
        let callback: TaskStatusCallback = Arc::new(move |task: &Task| {
            if tx.try_send(task.clone()).is_err() {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        (callback, Self { rx, dropped })
    }

    /// The next state; `None` once the task call ended.
    pub async fn next(&mut self) -> Option<Task> {
        self.rx.recv().await
    }

    /// States dropped because the stream was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl futures::Stream for TaskStatusStream {
    type Item = Task;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Task>> {
        self.rx.poll_recv(cx)
    }
}
