//! What a [`Client`](super::Client) and each of its calls share, in one allocation: a call
//! carries 8 bytes and bumps one reference count.

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, PoisonError,
    },
};

use actix::Addr;
use serde_json::Value;

use super::{list_cache::ListCache, output_schemas, tool_facts::ToolFacts};
use crate::{
    connection::{Connection, Handlers, Link, Outcome, Request},
    protocol::tasks::Task,
    protocol::{
        jsonrpc::{RawResult, RequestId},
        routing::Routing,
    },
};

/// A followed task's progress listener; dropping it removes the listener.
pub(crate) struct ProgressKept {
    shared: std::sync::Weak<Shared>,
    token: RequestId,
}

impl Drop for ProgressKept {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            lock(&shared.task_progress).remove(&self.token);
        }
    }
}

/// The status notifications of one followed task; dropping it stops them. Only the newest
/// unread one is kept: a server's statuses cannot pile up while the follower is busy (waiting
/// for a poll's answer, or for the handlers answering the task's input requests).
pub(crate) struct TaskWatch {
    shared: std::sync::Weak<Shared>,
    id: String,
    receiver: tokio::sync::watch::Receiver<Option<Task>>,
}

impl TaskWatch {
    /// The next status pushed since the last one read (the newest, if several came); pending
    /// for ever once nothing can come.
    pub async fn next(&mut self) -> Task {
        loop {
            if self.receiver.changed().await.is_err() {
                return std::future::pending().await;
            }
            if let Some(task) = self.receiver.borrow_and_update().clone() {
                return task;
            }
        }
    }
}

impl Drop for TaskWatch {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            lock(&shared.task_watchers).remove(&self.id);
        }
    }
}

pub(crate) struct Shared {
    link: Link,
    /// The handlers of the server's requests; in the 2026-07-28 era they fulfil `input_required`
    /// results inside the call.
    pub handlers: Handlers,
    /// Whether the connection speaks the 2026-07-28 era (set once, at connect).
    modern: AtomicBool,
    /// What the server's tool lists taught (routing, output schemas, task support), and where
    /// the refetch of the list stands.
    tools: Mutex<ToolFacts>,
    /// List pages a 2026-07-28 server marked cacheable.
    pub list_cache: Arc<ListCache>,
    /// Whether requests carry the caller's trace context (`ConnectOptions::trace_context`).
    #[cfg_attr(
        not(feature = "otel"),
        allow(dead_code, reason = "read with otel only")
    )]
    pub trace_context: bool,
    /// The instruments, when a meter was given (`ConnectOptions::metrics`).
    #[cfg(feature = "otel")]
    pub metrics: Option<Arc<super::metrics::Metrics>>,
    /// Makes the calls' spans through the OpenTelemetry API (`ConnectOptions::tracer`).
    #[cfg(feature = "otel")]
    pub tracer: Option<Arc<opentelemetry::global::BoxedTracer>>,
    /// What telemetry says of the session (peer, version, session id).
    pub facts: Arc<super::session_facts::SessionFacts>,
    /// When the connection was made: its session's duration ends at the last handle's drop.
    #[cfg(feature = "otel")]
    connected_at: std::time::Instant,
    /// The progress listeners of tasks being followed, by their creating call's token.
    task_progress: Mutex<
        std::collections::HashMap<RequestId, crate::protocol::notifications::ProgressCallback>,
    >,
    /// The tasks being followed, and where their status notifications go.
    task_watchers:
        Mutex<std::collections::HashMap<String, tokio::sync::watch::Sender<Option<Task>>>>,
}

impl Shared {
    pub fn new(
        link: Link,
        handlers: Handlers,
        list_cache: Arc<ListCache>,
        trace_context: bool,
        facts: Arc<super::session_facts::SessionFacts>,
    ) -> Self {
        Self {
            link,
            handlers,
            trace_context,
            facts,
            #[cfg(feature = "otel")]
            metrics: None,
            #[cfg(feature = "otel")]
            tracer: None,
            #[cfg(feature = "otel")]
            connected_at: std::time::Instant::now(),
            modern: AtomicBool::new(false),
            tools: Mutex::default(),
            list_cache,
            task_watchers: Mutex::default(),
            task_progress: Mutex::default(),
        }
    }

    pub fn addr(&self) -> &Addr<Connection> {
        &self.link.addr
    }

    pub fn submit(&self, request: Box<Request>, reply: oneshot::Sender<Outcome>) {
        self.link.submit(request, reply);
    }

    pub fn cancel(&self, id: RequestId, reason: Option<String>) {
        self.link.cancel(id, reason);
    }

    /// Withdraws request `id` if it never reached the server; else it runs on.
    pub fn withdraw(&self, id: RequestId) {
        self.link.withdraw(id);
    }

    /// Whether every call would fail: the connection ended.
    pub fn has_ended(&self) -> bool {
        self.link.inbox.has_ended() || !self.link.addr.connected()
    }

    /// The connection's inbox (it does not keep the connection open).
    pub fn inbox(&self) -> Arc<crate::connection::Inbox> {
        self.link.inbox.clone()
    }

    /// Why the connection ended, if it has.
    pub fn end_reason(&self) -> Option<crate::error::Error> {
        self.link.inbox.end_reason().cloned()
    }

    pub fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Relaxed)
    }

    pub fn set_modern(&self) {
        self.modern.store(true, Ordering::Relaxed);
    }

    /// The routing values of a `tools/call` (2026-07-28 only): the tool's name and its annotated
    /// arguments.
    pub fn tool_call_routing(&self, tool: &str, arguments: &Value) -> Option<Routing> {
        if !self.is_modern() {
            return None;
        }
        let params = lock(&self.tools).routing_params(tool, arguments);
        Some(Routing {
            name: Some(tool.to_owned()),
            params,
        })
    }

    /// The routing value of a call that names its target (2026-07-28 only).
    pub fn named_routing(&self, name: &str) -> Option<Routing> {
        self.is_modern().then(|| Routing {
            name: Some(name.to_owned()),
            params: Vec::new(),
        })
    }

    /// The routing values of a `tools/call` given as a JSON tree (a raw request), if any.
    pub fn raw_tool_call_routing(&self, method: &str, params: Option<&Value>) -> Option<Routing> {
        if method != "tools/call" || !self.is_modern() {
            return None;
        }
        let params = params?;
        let tool = params.get("name")?.as_str()?;
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        self.tool_call_routing(tool, arguments)
    }

    /// A `tools/list` result: in the 2026-07-28 era, learns the tools' `x-mcp-header`
    /// annotations and drops the tools whose annotations are invalid; in both, compiles the
    /// tools' output schemas.
    pub fn learn_tools(&self, result: &mut RawResult) -> Result<(), crate::error::Error> {
        let modern = self.is_modern();
        lock(&self.tools).learned_page(result, modern)
    }

    /// Hands the progress under `token` (a task's creating call) to `listener` until the returned
    /// guard is dropped.
    pub fn keep_progress(
        self: &Arc<Self>,
        token: RequestId,
        listener: crate::protocol::notifications::ProgressCallback,
    ) -> ProgressKept {
        lock(&self.task_progress).insert(token, listener);
        ProgressKept {
            shared: Arc::downgrade(self),
            token,
        }
    }

    /// Progress no request listens to: a followed task's, if any. Runs on the connection's
    /// thread.
    pub fn task_progress(
        &self,
        token: RequestId,
        progress: &crate::protocol::notifications::Progress,
    ) -> bool {
        let mut listeners = lock(&self.task_progress);
        match listeners.get_mut(&token) {
            Some(listener) => {
                listener(progress.clone());
                true
            }
            None => false,
        }
    }

    /// Follows task `id`'s status notifications until the returned watch is dropped.
    pub fn watch_task(self: &Arc<Self>, id: &str) -> TaskWatch {
        let (sender, receiver) = tokio::sync::watch::channel(None);
        lock(&self.task_watchers).insert(id.to_owned(), sender);
        TaskWatch {
            shared: Arc::downgrade(self),
            id: id.to_owned(),
            receiver,
        }
    }

    /// A `notifications/tasks/status` (2025-11-25) or `notifications/tasks` (2026-07-28): to
    /// whoever follows that task. Runs on the connection's thread.
    pub fn task_status(&self, params: Option<&Value>) {
        let Some(task) = params.and_then(|p| serde_json::from_value::<Task>(p.clone()).ok()) else {
            return;
        };
        let watchers = lock(&self.task_watchers);
        if let Some(sender) = watchers.get(&task.task_id) {
            // Replaces a status not read yet.
            sender.send_replace(Some(task));
        }
    }

    /// Whether `tool` must run as a task.
    pub fn task_required(&self, tool: &str) -> bool {
        lock(&self.tools).task_required(tool)
    }

    /// The server's tools changed (`notifications/tools/list_changed`): if this client ever
    /// listed them, fetch the list again in the background, so the output schemas and the
    /// `x-mcp-header` annotations calls rely on follow the change (and the cache holds the new
    /// list). Changes that come during a refetch cause one more, never several at once.
    /// Runs on the connection's thread.
    pub fn refetch_tools(self: Arc<Self>) {
        let ended = self.has_ended();
        if !lock(&self.tools).list_changed(ended) {
            return;
        }
        actix_rt::spawn(async move {
            loop {
                if let Err(e) = self.fetch_all_tools().await {
                    tracing::debug!(error = %e, "refetching the tool list after a change failed");
                }
                let ended = self.has_ended();
                if !lock(&self.tools).refetch_ended(ended) {
                    break;
                }
            }
        });
    }

    /// Every page of `tools/list`, for what fetching it teaches (the pages are not kept here).
    async fn fetch_all_tools(self: &Arc<Self>) -> Result<(), crate::error::Error> {
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..super::DEFAULT_MAX_PAGES {
            let params = cursor.as_ref().map(|c| serde_json::json!({ "cursor": c }));
            let page: crate::protocol::tools::ListToolsResult =
                super::Call::new(self.clone(), Request::new("tools/list", params))
                    .cached("tools/list", cursor.as_deref())
                    .refetch()
                    .timeout(super::DEFAULT_REQUEST_TIMEOUT)
                    .await?;
            match page.page.next_cursor {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => return Ok(()),
            }
        }
        Ok(())
    }

    /// The compiled `outputSchema` of `tool`, if it has one.
    pub fn output_schema(&self, tool: &str) -> Option<output_schemas::Schema> {
        lock(&self.tools).output_schema(tool)
    }
}

/// Nothing panics while holding these locks: a poisoned one is still consistent.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(feature = "otel")]
impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(metrics) = &self.metrics {
            let error = self.link.inbox.end_reason().map(|reason| match reason {
                crate::error::Error::Closed {
                    reason:
                        crate::error::CloseReason::ClosedByClient
                        | crate::error::CloseReason::ActorStopped,
                } => None,
                other => Some(other.error_type()),
            });
            metrics.session_ended(self.connected_at.elapsed().as_secs_f64(), error.flatten());
        }
    }
}
