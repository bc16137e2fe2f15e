//! [`Call`]: a request builder that is awaited, and the future that runs it.
//!
//! What dropping it means: before the first poll, nothing was sent and nothing happens. After
//! that, dropping the future cancels the request exactly like a cancelled token does (without a
//! reason): a request not yet written is never written, a written one gets
//! `notifications/cancelled` once its write completed.
//!
//! The future is plumbing: what each answer means (a result, a task to follow, input requests
//! to fulfil) is decided by the synchronous [`answer`] core; the future only moves between its
//! stages (started, waiting for the actor, fulfilling input requests, following a task) and
//! watches how the caller may give up.

mod answer;
mod span;
#[cfg(feature = "otel")]
mod trace_context;
#[cfg(feature = "otel")]
pub(super) use span::otel_event;

use std::{
    future::{Future, IntoFuture},
    marker::PhantomData,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::time::Sleep;

use self::{
    answer::{Next, Reading},
    span::CallSpan,
};
use super::{
    list_cache::{Lookup, PageKey},
    mrtr::{forward_progress, Fulfilling, Retry, SharedProgress, RETRYABLE},
    output_schemas::{OutputCheck, Schema},
    progress::{ProgressCallback, ProgressClock, ProgressStream},
    shared::Shared,
    tasks::TaskOptions,
};
use crate::{
    cancellation::Cancellation,
    connection::{Outcome, Request},
    error::{CloseReason, Error},
    protocol::{
        discover::META_LOG_LEVEL,
        jsonrpc::{RawResult, RequestId},
        logging::LoggingLevel,
        notifications::Progress,
    },
    timeout::Timeout,
};

/// A request ready to be sent: set options, then `.await` it.
#[must_use = "a Call does nothing until it is awaited"]
pub struct Call<T> {
    link: Arc<Shared>,
    request: Request,
    /// Kept by the actor, unless the call keeps its own time (see [`Extras::keeps_time`]).
    timeout: Option<Duration>,
    meta: Option<Map<String, Value>>,
    progress: Option<ProgressCallback>,
    /// What only some calls need, made by the first option that needs it.
    extras: Option<Box<Extras>>,
    _result: PhantomData<fn() -> T>,
}

impl Call<crate::protocol::tools::CallToolResult> {
    /// Runs this `tools/call` as a task (`params.task`; for tools whose
    /// `execution.taskSupport` is `optional`; `required` ones are run as tasks without asking):
    /// created, polled at the server's interval, its result fetched. The token and the timeout
    /// cover the whole task, and cancel it with `tasks/cancel` (see the `tasks` notes on
    /// [`TaskHandle`](super::TaskHandle)). A server that answers with a plain result is answered
    /// so.
    pub fn as_task(mut self) -> Self {
        self.extras().task.get_or_insert_with(TaskOptions::default);
        self
    }

    /// Asks the server to keep the task for `ttl` after its creation (implies
    /// [`as_task`](Self::as_task)).
    pub fn task_ttl(mut self, ttl: Duration) -> Self {
        self.extras()
            .task
            .get_or_insert_with(TaskOptions::default)
            .ttl = Some(ttl);
        self
    }

    /// Calls `callback` with the task each time it is read (created, then each poll): its
    /// status and status message, e.g. for a progress display (implies
    /// [`as_task`](Self::as_task)).
    pub fn on_task_status(
        mut self,
        callback: impl Fn(&crate::protocol::tasks::Task) + Send + Sync + 'static,
    ) -> Self {
        self.extras()
            .task
            .get_or_insert_with(TaskOptions::default)
            .on_status = Some(Arc::new(callback));
        self
    }

    /// The task's states as a stream (implies [`as_task`](Self::as_task)); see
    /// [`TaskStatusStream`](super::TaskStatusStream).
    pub fn task_status_stream(mut self) -> (Self, super::TaskStatusStream) {
        let (callback, stream) = super::TaskStatusStream::new();
        self.extras()
            .task
            .get_or_insert_with(TaskOptions::default)
            .on_status = Some(callback);
        (self, stream)
    }

    /// Creates the task and hands back its handle at once, **detached**: the task runs on
    /// whatever happens to the handle; wait for it, read it or cancel it later, from here or
    /// (by its id, [`Client::task`](super::Client::task)) from another process. Cancelling the
    /// creation in flight still cancels the task it creates.
    pub async fn start_task(mut self) -> Result<super::TaskHandle, Error> {
        let extras = self.extras.take().map(|e| *e).unwrap_or_default();
        let token = extras.give_up.token;
        if let Some(token) = &token {
            if token.is_cancelled() {
                return Err(Error::cancelled(token.reason_owned()));
            }
        }
        let ttl = extras.task.and_then(|t| t.ttl);
        let start = super::tasks::start(self.link.clone(), Box::new(self.request), ttl);
        super::tasks::bounded(start, token.as_ref(), self.timeout).await
    }
}

/// What takes the answer of a call given up in flight that must not be cancelled on the wire.
pub(crate) type WithdrawThen = Box<dyn FnOnce(oneshot::Receiver<Outcome>) + Send>;

impl<T> Call<T> {
    pub(crate) fn new(link: Arc<Shared>, request: Request) -> Self {
        Self {
            link,
            request,
            timeout: None,
            meta: None,
            progress: None,
            extras: None,
            _result: PhantomData,
        }
    }

    /// The result as the server sent it, its JSON text unread: for passing it on unchanged
    /// (a gateway's answer), with its key order and numbers as they were. What the call checks
    /// of a result (a tool's output schema, a page's tools) is still checked.
    pub fn raw(self) -> Call<RawResult> {
        self.answering()
    }

    /// The same call, its result read as `U`.
    pub(crate) fn answering<U>(self) -> Call<U> {
        Call {
            link: self.link,
            request: self.request,
            timeout: self.timeout,
            meta: self.meta,
            progress: self.progress,
            extras: self.extras,
            _result: PhantomData,
        }
    }

    /// The extras, made on first need.
    fn extras(&mut self) -> &mut Extras {
        self.extras.get_or_insert_with(Box::default)
    }

    /// Given up in flight, the request is withdrawn if not yet written and otherwise left to
    /// run (no cancel on the wire); `then` gets its answer.
    pub(crate) fn withdraw_on_cancel(mut self, then: WithdrawThen) -> Self {
        self.extras().withdraw_then = Some(then);
        self
    }

    /// How to follow a task the server makes of this call (2026-07-28 `resultType: "task"`).
    pub(crate) fn following(mut self, options: TaskOptions) -> Self {
        self.extras().reading.follow = Some(options);
        self
    }

    /// A page of a list method: answered from the cache while a page kept for its `ttlMs` is
    /// fresh, and kept when the server says it may be.
    pub(crate) fn cached(mut self, method: &'static str, cursor: Option<&str>) -> Self {
        let key = PageKey {
            method,
            cursor: cursor.map(str::to_owned),
        };
        self.extras().page = Some(CachedPage::Ask { key, reuse: true });
        self
    }

    /// Asks the server even if a page it marked cacheable (2026-07-28 `ttlMs`) is still fresh;
    /// the answer replaces the kept page. No effect on other requests.
    pub fn refetch(mut self) -> Self {
        if let Some(CachedPage::Ask { reuse, .. }) =
            self.extras.as_mut().and_then(|e| e.page.as_mut())
        {
            *reuse = false;
        }
        self
    }

    /// Asks the server to send `notifications/message` at `level` and above while it handles
    /// this request (the 2026-07-28 `_meta` `io.modelcontextprotocol/logLevel`; without it, a
    /// server of that revision sends none). Servers of older revisions ignore it: use
    /// [`Client::set_logging_level`](super::Client::set_logging_level) there.
    pub fn log_level(mut self, level: LoggingLevel) -> Self {
        self.meta
            .get_or_insert_with(Map::new)
            .insert(META_LOG_LEVEL.into(), Value::from(level.as_str()));
        self
    }

    /// Checks the result against `tool`'s compiled `outputSchema`.
    pub(crate) fn check_output(mut self, tool: &str, schema: Option<Schema>) -> Self {
        match OutputCheck::for_tool(tool, schema) {
            Some(check) => self.extras().reading.output_check = Some(check),
            None => self.validate_output_off(),
        }
        self
    }

    fn validate_output_off(&mut self) {
        if let Some(extras) = &mut self.extras {
            extras.reading.output_check = None;
        }
    }

    /// Whether to check a structured tool result against the tool's `outputSchema` (on by
    /// default, see [`ConnectOptions::validate_output`](super::ConnectOptions::validate_output));
    /// `false` hands over whatever the server sent. Only with the `output-schema` feature (on
    /// by default): without it, results are never checked and this has no effect.
    pub fn validate_output(mut self, validate: bool) -> Self {
        if !validate {
            self.validate_output_off();
        }
        self
    }

    /// Cancels the request when `token` is cancelled; fails at once if it already is.
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.extras().give_up.token = Some(token.clone());
        self
    }

    pub(crate) fn cancellation_opt(mut self, token: Option<&Cancellation>) -> Self {
        match token {
            Some(token) => self.extras().give_up.token = Some(token.clone()),
            None => {
                if let Some(extras) = &mut self.extras {
                    extras.give_up.token = None;
                }
            }
        }
        self
    }

    /// Fails with [`Error::Timeout`] after `after`, cancelling the request on the wire.
    /// Replaces the connection's default timeout.
    pub fn timeout(mut self, after: Duration) -> Self {
        self.timeout = Some(after);
        self
    }

    /// Waits as long as it takes (no timeout, not even the connection's default).
    pub fn no_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }

    pub(crate) fn timeout_opt(mut self, after: Option<Duration>) -> Self {
        self.timeout = after;
        self
    }

    /// Restarts the timeout whenever progress for this request arrives (asks for progress).
    pub fn reset_timeout_on_progress(mut self) -> Self {
        self.extras()
            .give_up
            .timers
            .clock
            .get_or_insert_with(ProgressClock::new);
        self
    }

    /// A bound on the whole request that no progress extends, armed from the start.
    pub fn max_total_timeout(mut self, max: Duration) -> Self {
        self.extras().give_up.timers.max_total = Some(max);
        self
    }

    /// Adds `_meta` entries to the request's params.
    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta.get_or_insert_with(Map::new).extend(meta);
        self
    }

    /// Calls `callback` for each progress update of this request (on the connection's thread).
    /// Asks the server for progress by attaching a progress token.
    pub fn on_progress(mut self, callback: impl FnMut(Progress) + Send + 'static) -> Self {
        self.progress = Some(Box::new(callback));
        self
    }

    /// This request's progress as a stream (bounded; see [`ProgressStream`]).
    pub fn progress_stream(mut self) -> (Self, ProgressStream) {
        let (callback, stream) = ProgressStream::new();
        self.progress = Some(callback);
        (self, stream)
    }

    /// The id the request will carry (known before anything is sent; a 2026-07-28 retry after
    /// `input_required` gets a new one, see [`CallFuture::id`]).
    pub fn id(&self) -> RequestId {
        self.request.id()
    }

    /// Attaches `_meta` and the progress token (the request id) to the serialized params.
    fn prepare(&mut self) {
        let clock = self
            .extras
            .as_ref()
            .and_then(|e| e.give_up.timers.clock.clone());
        let listens = self.progress.is_some() || clock.is_some();
        if self.meta.is_none() && !listens {
            return;
        }
        let mut meta = self.meta.take().unwrap_or_default();
        if listens {
            meta.insert(
                "progressToken".into(),
                Value::from(self.request.id().as_u64()),
            );
            let mut user = self.progress.take();
            self.request.options.set_progress(Some(Box::new(move |p| {
                if let Some(clock) = &clock {
                    clock.tick();
                }
                if let Some(user) = user.as_mut() {
                    user(p);
                }
            })));
        }
        self.request.merge_meta(meta);
    }

    /// 2026-07-28: a result may ask for input; the call then makes its request again (`mrtr.rs`).
    fn retry(&mut self) -> Retry {
        // The progress listener is shared by every round's request.
        let progress = self.request.options.take_progress().map(|listener| {
            let shared: SharedProgress = Arc::new(std::sync::Mutex::new(listener));
            self.request
                .options
                .set_progress(Some(forward_progress(&shared)));
            shared
        });
        Retry {
            method: self.request.method.clone(),
            params: self.request.params.as_ref().ok().cloned().flatten(),
            timeout: self.request.options.timeout,
            routing: self.request.options.routing().cloned(),
            rounds: 0,
            progress,
        }
    }
}

impl<T: DeserializeOwned> IntoFuture for Call<T> {
    type Output = Result<T, Error>;
    type IntoFuture = CallFuture<T>;

    fn into_future(mut self) -> CallFuture<T> {
        // The call's span and trace context wait for the first poll: the caller's span is the
        // one current there (`call.into_future().instrument(span)` names its parent).
        #[cfg(feature = "otel")]
        if let Some(metrics) = self.link.metrics.clone() {
            let tool = span::tool_name(&self.request);
            let metered = super::metrics::Metered::start(
                metrics,
                &self.request,
                tool.as_deref(),
                &self.link.facts,
            );
            self.extras().metered = Some(metered);
        }
        if self.extras.as_ref().is_some_and(|e| e.observed()) {
            let tool_call = self.request.method() == "tools/call";
            self.extras().tool_call = tool_call;
        }
        self.prepare();
        // A plain timeout is kept by the actor (no timer per call); one that restarts on
        // progress, has a total cap or bounds a whole task runs here.
        match self.extras.as_deref_mut().filter(|e| e.keeps_time()) {
            Some(extras) => extras.give_up.timers.timeout = self.timeout,
            None => self.request.options.timeout = self.timeout.map(Timeout::new),
        }
        if self.link.is_modern() && RETRYABLE.contains(&self.request.method()) {
            let retry = self.retry();
            self.extras().reading.retry = Some(retry);
        }
        // A tool list teaches the client the tools' output schemas (and, 2026-07-28, their
        // `x-mcp-header` annotations: tools with invalid ones are dropped from the list).
        if self.request.method() == "tools/list" {
            self.extras().learns_tools = true;
        }
        CallFuture {
            link: self.link,
            id: self.request.id(),
            stage: Stage::Start(Box::new(self.request)),
            extras: self.extras.map(Box::into_pin),
            _result: PhantomData,
        }
    }
}

enum Stage {
    /// Not yet polled: nothing sent. Boxed so the future stays small while it waits.
    Start(Box<Request>),
    /// Handed to the actor; the answer comes on this channel.
    Waiting(oneshot::Receiver<Outcome>),
    /// Run as a task: created, polled, its result fetched. Dropping it cancels the task. Boxed
    /// so that every other call's future stays small.
    Task(Box<super::tasks::TaskRun>),
    /// The server asked for input (a 2026-07-28 multi round-trip request, `mrtr.rs`): the
    /// handlers are answering; nothing in flight.
    Fulfilling(Box<Fulfilling>),
    Done,
}

/// A list page that may be answered from the cache.
enum CachedPage {
    /// Before the first poll: the page, and whether a kept one may be used.
    Ask { key: PageKey, reuse: bool },
    /// Asked of the server: where its answer is kept, once it comes.
    Keep(Lookup),
}

/// The call's metrics, when a meter was given (feature `otel`; nothing without it).
#[cfg(feature = "otel")]
type MeteredSlot = Option<super::metrics::Metered>;
#[cfg(not(feature = "otel"))]
type MeteredSlot = ();

pin_project_lite::pin_project! {
    /// What only some calls need, in one allocation those calls pay for: most calls have no
    /// token and a plain timeout (kept by the actor), and their future stays at 40 bytes.
    #[derive(Default)]
    struct Extras {
        #[pin]
        give_up: GiveUp,
        reading: Reading,
        page: Option<CachedPage>,
        learns_tools: bool,
        // Run as a task (`params.task`), polled to its end.
        task: Option<TaskOptions>,
        // Given up in flight: withdrawn (never cancelled on the wire), its answer handed here.
        withdraw_then: Option<WithdrawThen>,
        span: Option<CallSpan>,
        // A `tools/call` observed by a span or metrics: its result's `isError` is looked at.
        tool_call: bool,
        tool_error: bool,
        metered: MeteredSlot,
    }
}

pin_project_lite::pin_project! {
    /// How the caller gives up, watched here so that it is answered at once: a token, and the
    /// timers the actor does not keep.
    #[derive(Default)]
    struct GiveUp {
        token: Option<Cancellation>,
        #[pin]
        cancelled: Option<crate::cancellation::WhenCancelled>,
        #[pin]
        timers: Timers,
    }
}

pin_project_lite::pin_project! {
    /// A timeout that restarts on progress, and a total cap: these run here, beside the progress
    /// clock, not in the actor. The timers are boxed when armed: few calls have them, and the
    /// extras of every call with a token stay small.
    #[derive(Default)]
    struct Timers {
        timeout: Option<Duration>,
        deadline: Option<Pin<Box<Sleep>>>,
        max_total: Option<Duration>,
        total_deadline: Option<Pin<Box<Sleep>>>,
        clock: Option<Arc<ProgressClock>>,
    }
}

/// How a call begins, at its first poll.
enum Opening {
    /// Cancelled already: nothing is sent.
    Cancelled(Option<String>),
    /// A fresh kept page: the answer, without a request.
    Cached(RawResult),
    /// Run as a task.
    Task(TaskOptions),
    Send,
}

impl Extras {
    /// Whether a span or the metrics observe the call.
    fn observed(&self) -> bool {
        #[cfg(feature = "otel")]
        if self.metered.is_some() {
            return true;
        }
        self.span.is_some()
    }

    /// The call ended (`error`: how, if badly): its span and its metrics are told, once.
    fn ended(self: Pin<&mut Self>, error: Option<&Error>) {
        let this = self.project();
        if let Some(span) = this.span.as_ref() {
            if let Some(error) = error {
                span.ended_with(error);
            }
            span.end();
        }
        #[cfg(feature = "otel")]
        if let Some(metered) = this.metered.take() {
            metered.end(match error {
                Some(error) => super::metrics::Ending::Failed(error),
                None => super::metrics::Ending::Answered {
                    tool_error: *this.tool_error,
                },
            });
        }
    }

    /// The caller dropped the call before its end.
    fn dropped(self: Pin<&mut Self>) {
        let this = self.project();
        if let Some(span) = this.span.as_ref() {
            span.dropped();
        }
        #[cfg(feature = "otel")]
        if let Some(metered) = this.metered.take() {
            metered.end(super::metrics::Ending::Dropped);
        }
    }

    /// Whether the call's timeout runs here rather than in the actor.
    fn keeps_time(&self) -> bool {
        let timers = &self.give_up.timers;
        timers.clock.is_some() || timers.max_total.is_some() || self.task.is_some()
    }

    /// Arms the token and the timers, and looks for a kept page.
    fn open(self: Pin<&mut Self>, link: &Shared) -> Opening {
        let this = self.project();
        if let Err(reason) = this.give_up.start() {
            return Opening::Cancelled(reason);
        }
        if let Some(CachedPage::Ask { key, reuse }) = this.page.take() {
            match link.list_cache.get(key, Instant::now(), reuse) {
                Ok(page) => return Opening::Cached(page),
                Err(lookup) => *this.page = Some(CachedPage::Keep(lookup)),
            }
        }
        match this.task.take() {
            Some(options) => Opening::Task(options),
            None => Opening::Send,
        }
    }

    /// What the client keeps of a result: the tools of a tool list, a cacheable page.
    fn keep(self: Pin<&mut Self>, link: &Shared, raw: &mut RawResult) -> Result<(), Error> {
        let this = self.project();
        if *this.learns_tools {
            link.learn_tools(raw)?;
        }
        if let Some(CachedPage::Keep(lookup)) = this.page.take() {
            link.list_cache.store(lookup, raw, Instant::now());
        }
        Ok(())
    }
}

impl GiveUp {
    /// Arms the token and the timers at the first poll; `Err` with the token's reason if it was
    /// cancelled already.
    fn start(self: Pin<&mut Self>) -> Result<(), Option<String>> {
        let mut this = self.project();
        if let Some(token) = this.token.as_ref() {
            if token.is_cancelled() {
                return Err(token.reason_owned());
            }
            this.cancelled.set(Some(token.when_cancelled()));
        }
        this.timers.arm();
        Ok(())
    }

    /// `Some((reason on the wire, error for the caller))` once the token fired or a timer expired.
    fn poll_end(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<(Option<String>, Error)> {
        let this = self.project();
        if let Some(cancelled) = this.cancelled.as_pin_mut() {
            if cancelled.poll(cx).is_ready() {
                let reason = this.token.as_ref().and_then(Cancellation::reason_owned);
                return Some((reason.clone(), Error::cancelled(reason)));
            }
        }
        let after = Timeout::new(this.timers.poll_expired(cx)?);
        Some((Some(after.reason()), after.error()))
    }
}

impl Timers {
    fn arm(self: Pin<&mut Self>) {
        let this = self.project();
        if let Some(d) = *this.timeout {
            *this.deadline = Some(Box::pin(tokio::time::sleep(d)));
        }
        if let Some(d) = *this.max_total {
            *this.total_deadline = Some(Box::pin(tokio::time::sleep(d)));
        }
    }

    /// `Some(after)` once a timeout fired.
    fn poll_expired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration> {
        let this = self.project();
        if let (Some(max), Some(total)) = (*this.max_total, this.total_deadline.as_mut()) {
            if total.as_mut().poll(cx).is_ready() {
                return Some(max);
            }
        }
        let (Some(timeout), Some(deadline)) = (*this.timeout, this.deadline.as_mut()) else {
            return None;
        };
        loop {
            if deadline.as_mut().poll(cx).is_pending() {
                return None;
            }
            // Progress since the timer started pushes the deadline out.
            let next = this
                .clock
                .as_ref()
                .and_then(|c| c.last())
                .map(|last| last + timeout)
                .filter(|next| *next > Instant::now());
            match next {
                Some(next) => deadline.as_mut().reset(next.into()),
                None => return Some(timeout),
            }
        }
    }
}

/// The future of a [`Call`]. See the module docs for what dropping it means.
#[must_use = "futures do nothing unless polled"]
pub struct CallFuture<T> {
    link: Arc<Shared>,
    id: RequestId,
    stage: Stage,
    extras: Option<Pin<Box<Extras>>>,
    _result: PhantomData<fn() -> T>,
}

impl<T> CallFuture<T> {
    /// The id of the request now in flight. It changes when a 2026-07-28 server asks for input:
    /// each retry is a new request with a new id.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// Dropped before its end: cancels the request (if it was sent), without a reason.
    fn abandon_quietly(&mut self) {
        let _ = self.abandon(None, Error::cancelled(None));
    }

    /// Cancels the request (if it was sent) and ends this future with `error`.
    fn abandon(&mut self, reason: Option<String>, error: Error) -> Poll<Result<T, Error>> {
        let withdraw_then = self
            .extras
            .as_mut()
            .and_then(|e| e.as_mut().project().withdraw_then.take());
        // A task being followed is cancelled as its work is dropped (`tasks/cancel`).
        if let Stage::Waiting(answer) = std::mem::replace(&mut self.stage, Stage::Done) {
            match withdraw_then {
                Some(then) => {
                    // Never cancelled on the wire: withdrawn if unsent, else its answer is
                    // awaited by `then`.
                    self.link.withdraw(self.id);
                    then(answer);
                }
                // Behind its request on the connection's inbox: the cancel always meets it.
                None => self.link.cancel(self.id, reason),
            }
        }
        Poll::Ready(Err(error))
    }

    /// Hands `request` to the actor; its answer is awaited next.
    fn send(&mut self, request: Box<Request>) {
        let (reply, rx) = oneshot::channel();
        self.link.submit(request, reply);
        self.stage = Stage::Waiting(rx);
    }

    /// `Some((reason on the wire, error for the caller))` once the caller gave up.
    fn poll_given_up(&mut self, cx: &mut Context<'_>) -> Option<(Option<String>, Error)> {
        let extras = self.extras.as_mut()?.as_mut();
        extras.project().give_up.poll_end(cx)
    }
}

impl<T: DeserializeOwned> CallFuture<T> {
    /// The first poll: arms the caller's bounds, then answers from the list cache, starts the
    /// task, or sends the request. `Some` when the call ended there.
    fn start(&mut self, request: Box<Request>) -> Option<Result<T, Error>> {
        let opening = match self.extras.as_mut() {
            Some(extras) => extras.as_mut().open(&self.link),
            None => Opening::Send,
        };
        match opening {
            // Cancelled before sending: nothing reaches the actor or the wire.
            Opening::Cancelled(reason) => return Some(Err(Error::cancelled(reason))),
            Opening::Cached(page) => return Some(decode(&page)),
            Opening::Task(options) => {
                let run = super::tasks::run(self.link.clone(), request, options);
                self.stage = Stage::Task(Box::new(run));
            }
            Opening::Send => self.send(request),
        }
        None
    }

    /// What the actor's answer means; the client first keeps what it learns of it.
    fn on_answer(&mut self, answer: Result<Outcome, oneshot::RecvError>) -> Next<T> {
        let outcome = match answer {
            Ok(outcome) => outcome.map_err(|e| *e),
            Err(_) => Err(Error::Closed {
                reason: CloseReason::ActorStopped,
            }),
        };
        let Some(extras) = self.extras.as_mut() else {
            return outcome.and_then(|raw| decode(&raw)).into();
        };
        if extras.tool_call {
            if let Ok(raw) = &outcome {
                let tool_error = span::is_tool_error(raw.get());
                *extras.as_mut().project().tool_error = tool_error;
            }
        }
        if let Some(span) = &extras.span {
            match &outcome {
                Ok(_) => {
                    tracing::debug!("answered");
                    span.answered(extras.tool_error);
                }
                Err(error) => tracing::debug!(%error, "failed"),
            }
        }
        let kept = outcome.and_then(|mut raw| {
            extras.as_mut().keep(&self.link, &mut raw)?;
            Ok(raw)
        });
        let reading = extras.as_mut().project().reading;
        match kept {
            Ok(raw) => reading.on_answer(Ok(&raw)),
            Err(error) => reading.on_answer(Err(error)),
        }
    }

    /// The final result of the call's task.
    fn on_task_result(&mut self, outcome: Result<RawResult, Error>) -> Next<T> {
        let result = outcome.and_then(|raw| match &self.extras {
            Some(extras) => extras.reading.on_task_result(&raw),
            None => decode(&raw),
        });
        result.into()
    }

    /// An input request round ended: the request goes again, under a new id.
    fn resend(&mut self, request: Request) {
        if let Stage::Fulfilling(round) = std::mem::replace(&mut self.stage, Stage::Done) {
            if let Some(extras) = self.extras.as_mut() {
                extras.as_mut().project().reading.retry = Some(round.into_retry());
            }
        }
        self.id = request.id();
        self.send(Box::new(request));
    }

    /// Moves to the stage `next` names; `Some` when the call ended.
    fn go(&mut self, next: Next<T>) -> Option<Result<T, Error>> {
        match next {
            Next::Done(value) => {
                self.stage = Stage::Done;
                Some(Ok(value))
            }
            Next::Failed(error) => {
                self.stage = Stage::Done;
                Some(Err(error))
            }
            Next::Follow(task, options) => {
                let run = super::tasks::follow(self.link.clone(), *task, options);
                self.stage = Stage::Task(Box::new(run));
                None
            }
            Next::Fulfil(input, retry) => {
                match Fulfilling::start(input, retry, &self.link.handlers) {
                    Ok(round) => {
                        self.stage = Stage::Fulfilling(Box::new(round));
                        None
                    }
                    Err(error) => self.go(Next::Failed(error)),
                }
            }
        }
    }
}

/// At the first poll, in the caller's context: the call's span, if anyone wants one, and the
/// trace context its request carries (the span's, else the current one's).
fn open_span(link: &Shared, extras: &mut Option<Pin<Box<Extras>>>, request: &mut Request) {
    let span = CallSpan::open(
        request,
        &link.facts,
        #[cfg(feature = "otel")]
        link.tracer.as_deref(),
    );
    #[cfg(feature = "otel")]
    if link.trace_context {
        let mut meta = None;
        trace_context::inject(span.as_ref(), || meta.get_or_insert_with(Map::new));
        if let Some(meta) = meta {
            request.merge_meta(meta);
            // A 2026-07-28 retry makes its request again from these params.
            let retry = extras
                .as_mut()
                .and_then(|e| e.as_mut().project().reading.retry.as_mut());
            if let Some(retry) = retry {
                retry.params = request.params.as_ref().ok().cloned().flatten();
            }
        }
    }
    if let Some(span) = span {
        let tool_call = request.method() == "tools/call";
        let extras = extras.get_or_insert_with(|| Box::pin(Extras::default()));
        let extras = extras.as_mut().project();
        *extras.span = Some(span);
        *extras.tool_call |= tool_call;
    }
}

impl<T: DeserializeOwned> Future for CallFuture<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Stage::Start(request) = &mut this.stage {
            open_span(&this.link, &mut this.extras, request);
        }
        if !this.extras.as_ref().is_some_and(|e| e.observed()) {
            return this.poll_call(cx, false);
        }
        let span = this.extras.as_ref().and_then(|e| e.span.clone());
        let polled = match &span {
            Some(span) => span.within(|| this.poll_call(cx, true)),
            None => this.poll_call(cx, false),
        };
        if let (Poll::Ready(outcome), Some(extras)) = (&polled, this.extras.as_mut()) {
            extras.as_mut().ended(outcome.as_ref().err());
        }
        polled
    }
}

impl<T: DeserializeOwned> CallFuture<T> {
    /// [`poll`](Future::poll), within the call's span if it has one (`traced`).
    fn poll_call(&mut self, cx: &mut Context<'_>, traced: bool) -> Poll<Result<T, Error>> {
        let this = self;
        if matches!(this.stage, Stage::Start(_)) {
            if let Stage::Start(request) = std::mem::replace(&mut this.stage, Stage::Done) {
                if let Some(end) = this.start(request) {
                    return Poll::Ready(end);
                }
            }
        }
        loop {
            // The caller's cancel and the timeout are answered here, at once, without waiting
            // for the actor or any I/O.
            if let Some((reason, error)) = this.poll_given_up(cx) {
                if traced {
                    tracing::debug!(%error, "given up by the caller");
                }
                return this.abandon(reason, error);
            }
            let next = match &mut this.stage {
                Stage::Waiting(rx) => match Pin::new(rx).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(answer) => this.on_answer(answer),
                },
                Stage::Fulfilling(round) => match round.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(request)) => {
                        this.resend(request);
                        continue;
                    }
                    Poll::Ready(Err(error)) => Next::Failed(error),
                },
                Stage::Task(run) => match Pin::as_mut(run).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(outcome) => this.on_task_result(outcome),
                },
                Stage::Start(_) | Stage::Done => return Poll::Ready(Err(polled_after_its_end())),
            };
            if let Some(end) = this.go(next) {
                return Poll::Ready(end);
            }
        }
    }
}

/// A call's future polled again after it ended: the caller's mistake, not the peer's.
fn polled_after_its_end() -> Error {
    Error::Misuse("a call's future was polled after it ended".into())
}

impl<T> Drop for CallFuture<T> {
    fn drop(&mut self) {
        if !matches!(self.stage, Stage::Done) {
            if let Some(extras) = self.extras.as_mut() {
                extras.as_mut().dropped();
            }
            self.abandon_quietly();
        }
    }
}

/// A result read as the caller's type.
pub(super) fn decode<T: DeserializeOwned>(raw: &serde_json::value::RawValue) -> Result<T, Error> {
    serde_json::from_str(raw.get()).map_err(|e| Error::Protocol(format!("unexpected result: {e}")))
}

// A call in flight costs its future: keep it at five words (what only some calls need lives
// in the boxed extras; a task's work is boxed too).
const _: () = assert!(std::mem::size_of::<CallFuture<()>>() <= 40);
