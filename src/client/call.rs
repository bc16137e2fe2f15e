//! [`Call`]: a request builder that is awaited, and the future that runs it.
//!
//! What dropping it means: before the first poll, nothing was sent and nothing happens. After
//! that, dropping the future cancels the request exactly like a cancelled token does (without a
//! reason): a request not yet written is never written, a written one gets
//! `notifications/cancelled` once its write completed.

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

use super::{
    list_cache::{Lookup, PageKey},
    mrtr::{classify, forward_progress, Fulfilling, Retry, SharedProgress, Verdict, RETRYABLE},
    progress::{ProgressCallback, ProgressClock, ProgressStream},
    shared::Shared,
    tasks::{TaskOptions, TaskRun},
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
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    reset_on_progress: bool,
    max_total: Option<Duration>,
    meta: Option<Map<String, Value>>,
    progress: Option<ProgressCallback>,
    /// A `tools/call` of a tool with an `outputSchema`: its name and the compiled schema.
    output_check: Option<Box<(String, Arc<jsonschema::Validator>)>>,
    /// A list page that may be answered from the cache, and whether a kept page may be used.
    page: Option<(Box<PageKey>, bool)>,
    /// Given up in flight: withdrawn (never cancelled on the wire), its answer handed here.
    withdraw_then: Option<WithdrawThen>,
    /// Run as a task (`params.task`), polled to its end.
    task: Option<Box<TaskOptions>>,
    /// How to follow a task the server makes of this call (2026-07-28), if not the defaults.
    follow: Option<Box<TaskOptions>>,
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
        self.task.get_or_insert_with(Box::default);
        self
    }

    /// Asks the server to keep the task for `ttl` after its creation (implies
    /// [`as_task`](Self::as_task)).
    pub fn task_ttl(mut self, ttl: Duration) -> Self {
        self.task.get_or_insert_with(Box::default).ttl = Some(ttl);
        self
    }

    /// Calls `callback` with the task each time it is read (created, then each poll): its
    /// status and status message, e.g. for a progress display (implies
    /// [`as_task`](Self::as_task)).
    pub fn on_task_status(
        mut self,
        callback: impl Fn(&crate::protocol::tasks::Task) + Send + Sync + 'static,
    ) -> Self {
        self.task.get_or_insert_with(Box::default).on_status = Some(Arc::new(callback));
        self
    }

    /// The task's states as a stream (implies [`as_task`](Self::as_task)); see
    /// [`TaskStatusStream`](super::TaskStatusStream).
    pub fn task_status_stream(mut self) -> (Self, super::TaskStatusStream) {
        let (callback, stream) = super::TaskStatusStream::new();
        self.task.get_or_insert_with(Box::default).on_status = Some(callback);
        (self, stream)
    }

    /// Creates the task and hands back its handle at once, **detached**: the task runs on
    /// whatever happens to the handle; wait for it, read it or cancel it later, from here or
    /// (by its id, [`Client::task`](super::Client::task)) from another process. Cancelling the
    /// creation in flight still cancels the task it creates.
    pub async fn start_task(mut self) -> Result<super::TaskHandle, Error> {
        let ttl = self.task.take().and_then(|t| t.ttl);
        if let Some(token) = &self.cancellation {
            if token.is_cancelled() {
                return Err(Error::cancelled(token.reason_owned()));
            }
        }
        let start = super::tasks::start(self.link.clone(), Box::new(self.request), ttl);
        super::tasks::bounded(start, self.cancellation.as_ref(), self.timeout).await
    }
}

/// What takes the answer of a call given up in flight that must not be cancelled on the wire.
pub(crate) type WithdrawThen = Box<dyn FnOnce(oneshot::Receiver<Outcome>) + Send>;

impl<T> Call<T> {
    pub(crate) fn new(link: Arc<Shared>, request: Request) -> Self {
        Self {
            link,
            request,
            cancellation: None,
            timeout: None,
            reset_on_progress: false,
            max_total: None,
            meta: None,
            progress: None,
            output_check: None,
            page: None,
            withdraw_then: None,
            task: None,
            follow: None,
            _result: PhantomData,
        }
    }

    /// Given up in flight, the request is withdrawn if not yet written and otherwise left to
    /// run (no cancel on the wire); `then` gets its answer.
    pub(crate) fn withdraw_on_cancel(mut self, then: WithdrawThen) -> Self {
        self.withdraw_then = Some(then);
        self
    }

    /// How to follow a task the server makes of this call (2026-07-28 `resultType: "task"`).
    pub(crate) fn following(mut self, options: TaskOptions) -> Self {
        self.follow = Some(Box::new(options));
        self
    }

    /// A page of a list method: answered from the cache while a page kept for its `ttlMs` is
    /// fresh, and kept when the server says it may be.
    pub(crate) fn cached(mut self, method: &'static str, cursor: Option<&str>) -> Self {
        let key = PageKey {
            method,
            cursor: cursor.map(str::to_owned),
        };
        self.page = Some((Box::new(key), true));
        self
    }

    /// Asks the server even if a page it marked cacheable (2026-07-28 `ttlMs`) is still fresh;
    /// the answer replaces the kept page. No effect on other requests.
    pub fn refetch(mut self) -> Self {
        if let Some((_, reuse)) = &mut self.page {
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
    pub(crate) fn check_output(
        mut self,
        tool: &str,
        schema: Option<Arc<jsonschema::Validator>>,
    ) -> Self {
        self.output_check = schema.map(|schema| Box::new((tool.to_owned(), schema)));
        self
    }

    /// Whether to check a structured tool result against the tool's `outputSchema` (on by
    /// default, see [`ConnectOptions::validate_output`](super::ConnectOptions::validate_output));
    /// `false` hands over whatever the server sent.
    pub fn validate_output(mut self, validate: bool) -> Self {
        if !validate {
            self.output_check = None;
        }
        self
    }

    /// Cancels the request when `token` is cancelled; fails at once if it already is.
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    pub(crate) fn cancellation_opt(mut self, token: Option<&Cancellation>) -> Self {
        self.cancellation = token.cloned();
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
        self.reset_on_progress = true;
        self
    }

    /// A bound on the whole request that no progress extends, armed from the start.
    pub fn max_total_timeout(mut self, max: Duration) -> Self {
        self.max_total = Some(max);
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
    fn prepare(&mut self) -> Option<Arc<ProgressClock>> {
        let clock = self.reset_on_progress.then(ProgressClock::new);
        let listens = self.progress.is_some() || clock.is_some();
        if self.meta.is_none() && !listens {
            return None;
        }
        let mut meta = self.meta.take().unwrap_or_default();
        if listens {
            meta.insert(
                "progressToken".into(),
                Value::from(self.request.id().as_u64()),
            );
            let mut user = self.progress.take();
            let clock = clock.clone();
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
        clock
    }
}

impl<T: DeserializeOwned> IntoFuture for Call<T> {
    type Output = Result<T, Error>;
    type IntoFuture = CallFuture<T>;

    fn into_future(mut self) -> CallFuture<T> {
        let clock = self.prepare();
        // A plain timeout is kept by the actor (no timer per call); one that restarts on progress
        // or has a total cap runs here, where the progress clock is.
        let task = self.task.take();
        let follow = self.follow.take();
        let withdraw_then = self.withdraw_then.take();
        // A task's timeout is the whole task's, and it cancels with `tasks/cancel`: kept here.
        let local = self.reset_on_progress || self.max_total.is_some() || task.is_some();
        if !local {
            self.request.options.timeout = self.timeout.map(Timeout::new);
        }
        let timers = local.then(|| Timers {
            timeout: self.timeout,
            deadline: None,
            max_total: self.max_total,
            total_deadline: None,
            clock,
        });
        // 2026-07-28: a result may ask for input; the call then retries itself (`mrtr.rs`).
        let retryable = self.link.is_modern() && RETRYABLE.contains(&self.request.method());
        let retry = retryable.then(|| {
            // The progress listener is shared by every round's request.
            let progress = self.request.options.take_progress().map(|listener| {
                let shared: SharedProgress = Arc::new(std::sync::Mutex::new(listener));
                self.request
                    .options
                    .set_progress(Some(forward_progress(&shared)));
                shared
            });
            Box::new(Retry {
                method: self.request.method.clone(),
                params: self.request.params.as_ref().ok().cloned().flatten(),
                timeout: self.request.options.timeout,
                routing: self.request.options.routing().cloned(),
                rounds: 0,
                progress,
            })
        });
        // A tool list teaches the client the tools' output schemas (and, 2026-07-28, their
        // `x-mcp-header` annotations: tools with invalid ones are dropped from the list).
        let screen_tools = self.request.method() == "tools/list";
        let output_check = self.output_check.take();
        let page = self.page.take();
        // Only when debug logging is on for it: the request's span, entered at each poll.
        let span = tracing::debug_span!(
            "mcp.request",
            method = %self.request.method(),
            id = self.request.id().as_u64()
        );
        let span = (!span.is_disabled()).then_some(span);
        let needs_extras = span.is_some()
            || task.is_some()
            || follow.is_some()
            || withdraw_then.is_some()
            || self.cancellation.is_some()
            || timers.is_some()
            || retry.is_some()
            || screen_tools
            || output_check.is_some()
            || page.is_some();
        let extras = needs_extras.then(|| {
            Box::pin(Extras {
                token: self.cancellation,
                cancelled: None,
                timers,
                retry,
                screen_tools,
                output_check,
                page,
                lookup: None,
                span,
                withdraw_then,
                task,
                follow,
            })
        });
        CallFuture {
            link: self.link,
            id: self.request.id(),
            stage: Stage::Start(Some(Box::new(self.request))),
            extras,
            _result: PhantomData,
        }
    }
}

enum Stage {
    /// Not yet polled: nothing sent. Boxed so the future stays small while it waits.
    Start(Option<Box<Request>>),
    /// Handed to the actor; the answer comes on this channel.
    Waiting(oneshot::Receiver<Outcome>),
    /// Run as a task: created, polled, its result fetched. Dropping it cancels the task. Boxed
    /// so that every other call's future stays small.
    Task(Box<TaskRun>),
    /// The server asked for input (2026-07-28): the handlers are answering; nothing in flight.
    Fulfilling(Box<Fulfilling>),
    Done,
}

pin_project_lite::pin_project! {
    /// What only some calls need, in one allocation those calls pay for: most calls have no
    /// token and a plain timeout (kept by the actor), and their future stays at 40 bytes.
    struct Extras {
        token: Option<Cancellation>,
        #[pin]
        cancelled: Option<crate::cancellation::WhenCancelled>,
        #[pin]
        timers: Option<Timers>,
        retry: Option<Box<Retry>>,
        screen_tools: bool,
        output_check: Option<Box<(String, Arc<jsonschema::Validator>)>>,
        page: Option<(Box<PageKey>, bool)>,
        // Where the answer goes in the list cache, once it comes.
        lookup: Option<Lookup>,
        span: Option<tracing::Span>,
        withdraw_then: Option<WithdrawThen>,
        task: Option<Box<TaskOptions>>,
        follow: Option<Box<TaskOptions>>,
    }
}

pin_project_lite::pin_project! {
    /// A timeout that restarts on progress, and a total cap: these run here, beside the progress
    /// clock, not in the actor.
    struct Timers {
        timeout: Option<Duration>,
        #[pin]
        deadline: Option<Sleep>,
        max_total: Option<Duration>,
        #[pin]
        total_deadline: Option<Sleep>,
        clock: Option<Arc<ProgressClock>>,
    }
}

impl Extras {
    /// A fresh kept page answers a list call without a request; otherwise notes where the
    /// answer is to be kept.
    fn from_cache(self: Pin<&mut Self>, link: &Shared) -> Option<RawResult> {
        let this = self.project();
        let (key, reuse) = this.page.take()?;
        match link.list_cache.get(*key, std::time::Instant::now(), reuse) {
            Ok(page) => Some(page),
            Err(lookup) => {
                *this.lookup = Some(lookup);
                None
            }
        }
    }

    fn take_lookup(self: Pin<&mut Self>) -> Option<Lookup> {
        self.project().lookup.take()
    }

    fn retry(self: Pin<&mut Self>) -> Option<&mut Retry> {
        self.project().retry.as_deref_mut()
    }

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
        if let Some(timers) = this.timers.as_pin_mut() {
            timers.arm();
        }
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
        let after = Timeout::new(this.timers.as_pin_mut()?.poll_expired(cx)?);
        Some((Some(after.reason()), after.error()))
    }
}

impl Timers {
    fn arm(self: Pin<&mut Self>) {
        let mut this = self.project();
        if let Some(d) = *this.timeout {
            this.deadline.set(Some(tokio::time::sleep(d)));
        }
        if let Some(d) = *this.max_total {
            this.total_deadline.set(Some(tokio::time::sleep(d)));
        }
    }

    /// `Some(after)` once a timeout fired.
    fn poll_expired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration> {
        let this = self.project();
        if let (Some(max), Some(total)) = (*this.max_total, this.total_deadline.as_pin_mut()) {
            if total.poll(cx).is_ready() {
                return Some(max);
            }
        }
        let (Some(timeout), Some(mut deadline)) = (*this.timeout, this.deadline.as_pin_mut())
        else {
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
}

impl<T: DeserializeOwned> Future for CallFuture<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let span = this.extras.as_ref().and_then(|e| e.span.clone());
        let _in = span.as_ref().map(tracing::Span::enter);
        if let Stage::Start(request) = &mut this.stage {
            let Some(request) = request.take() else {
                return Poll::Ready(Err(Error::Protocol(
                    "CallFuture polled after a panic".into(),
                )));
            };
            if let Some(extras) = &mut this.extras {
                if let Err(reason) = extras.as_mut().start() {
                    // Cancelled before sending: nothing reaches the actor or the wire.
                    return this.abandon(None, Error::cancelled(reason));
                }
                if let Some(page) = extras.as_mut().from_cache(&this.link) {
                    this.stage = Stage::Done;
                    return Poll::Ready(decode(&page));
                }
            }
            let task = this
                .extras
                .as_mut()
                .and_then(|e| e.as_mut().project().task.take());
            match task {
                Some(options) => {
                    let run = super::tasks::run(this.link.clone(), request, *options);
                    this.stage = Stage::Task(Box::new(run));
                }
                None => {
                    let (reply, rx) = oneshot::channel();
                    this.link.submit(request, reply);
                    this.stage = Stage::Waiting(rx);
                }
            }
        }

        loop {
            // The caller's cancel and the timeout are answered here, at once, without waiting
            // for the actor or any I/O.
            if let Some((reason, error)) =
                this.extras.as_mut().and_then(|e| e.as_mut().poll_end(cx))
            {
                if span.is_some() {
                    tracing::debug!(%error, "given up by the caller");
                }
                return this.abandon(reason, error);
            }
            match &mut this.stage {
                Stage::Waiting(rx) => {
                    let outcome = match Pin::new(rx).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(outcome)) => outcome.map_err(|e| *e),
                        Poll::Ready(Err(_)) => Err(Error::Closed {
                            reason: CloseReason::ActorStopped,
                        }),
                    };
                    this.stage = Stage::Done;
                    if span.is_some() {
                        match &outcome {
                            Ok(_) => tracing::debug!("answered"),
                            Err(error) => tracing::debug!(%error, "failed"),
                        }
                    }
                    let mut raw = match outcome {
                        Ok(raw) => raw,
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    if this.extras.as_ref().is_some_and(|e| e.screen_tools) {
                        if let Err(e) = this.link.learn_tools(&mut raw) {
                            return Poll::Ready(Err(e));
                        }
                    }
                    if let Some(lookup) =
                        this.extras.as_mut().and_then(|e| e.as_mut().take_lookup())
                    {
                        let now = std::time::Instant::now();
                        this.link.list_cache.store(lookup, &raw, now);
                    }
                    let check = this.extras.as_ref().and_then(|e| e.output_check.as_deref());
                    if let Some((tool, schema)) = check {
                        // After an `input_required` round the result is checked once complete.
                        let complete = !matches!(classify(&raw), Verdict::InputRequired(_));
                        if complete {
                            if let Err(e) = super::output_schemas::check(tool, schema, &raw) {
                                return Poll::Ready(Err(e));
                            }
                        }
                    }
                    if let Some(retry) = this.extras.as_mut().and_then(|e| e.as_mut().retry()) {
                        match classify(&raw) {
                            Verdict::Complete => {}
                            // Only `tools/call` may become a task (the extension's supported
                            // methods); anything else answered so is invalid.
                            Verdict::Task(_) if retry.method != "tools/call" => {
                                return Poll::Ready(Err(Error::Protocol(format!(
                                    "a task answered {}, which cannot become one",
                                    retry.method
                                ))));
                            }
                            Verdict::Task(task) => {
                                let options = this
                                    .extras
                                    .as_mut()
                                    .and_then(|e| e.as_mut().project().follow.take())
                                    .map(|o| *o)
                                    .unwrap_or_default();
                                // A detached start wants the task, not its end.
                                if options.detach {
                                    return Poll::Ready(decode(&raw));
                                }
                                let run = super::tasks::follow(this.link.clone(), *task, options);
                                this.stage = Stage::Task(Box::new(run));
                                continue;
                            }
                            Verdict::Invalid(why) => return Poll::Ready(Err(Error::Protocol(why))),
                            Verdict::InputRequired(input) => {
                                match Fulfilling::start(input, retry, &this.link.handlers) {
                                    Ok(fulfilling) => {
                                        this.stage = Stage::Fulfilling(Box::new(fulfilling));
                                        continue;
                                    }
                                    Err(e) => return Poll::Ready(Err(e)),
                                }
                            }
                        }
                    }
                    return Poll::Ready(decode(&raw));
                }
                Stage::Fulfilling(fulfilling) => {
                    let Some(retry) = this.extras.as_mut().and_then(|e| e.as_mut().retry()) else {
                        return Poll::Ready(Err(Error::Protocol("input without a retry".into())));
                    };
                    // The same request again, under a new id.
                    let id = fulfilling.retry_id();
                    let params = match fulfilling.poll(cx, retry) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(params)) => params,
                        Poll::Ready(Err(e)) => {
                            this.stage = Stage::Done;
                            return Poll::Ready(Err(e));
                        }
                    };
                    let progress = retry.progress.as_ref().map(forward_progress);
                    let request = Request::retry(
                        id,
                        retry.method.clone(),
                        params,
                        retry.timeout,
                        progress,
                        retry.routing.clone(),
                    );
                    this.id = id;
                    let (reply, rx) = oneshot::channel();
                    this.link.submit(Box::new(request), reply);
                    this.stage = Stage::Waiting(rx);
                }
                Stage::Task(run) => {
                    let raw = match Pin::as_mut(run).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(outcome) => outcome,
                    };
                    this.stage = Stage::Done;
                    let raw = match raw {
                        Ok(raw) => raw,
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    let check = this.extras.as_ref().and_then(|e| e.output_check.as_deref());
                    if let Some((tool, schema)) = check {
                        if let Err(e) = super::output_schemas::check(tool, schema, &raw) {
                            return Poll::Ready(Err(e));
                        }
                    }
                    return Poll::Ready(decode(&raw));
                }
                Stage::Start(_) | Stage::Done => {
                    return Poll::Ready(Err(Error::Protocol(
                        "CallFuture polled after completion".into(),
                    )))
                }
            }
        }
    }
}

impl<T> Drop for CallFuture<T> {
    fn drop(&mut self) {
        if !matches!(self.stage, Stage::Done) {
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
