//! The server's state and the MCP method handling: dispatch of each line, cancellation,
//! responses, and the methods other than the tools.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    process::ExitCode,
    rc::Rc,
    time::Duration,
};

use base64::Engine as _;
use futures::future::{FutureExt as _, LocalBoxFuture};
use serde_json::{json, Map, Value};
use tokio::{
    sync::{mpsc, oneshot},
    task::{spawn_local, AbortHandle},
};

use crate::{
    args::{Cli, CursorMode, Era},
    catalog::{complete, get_prompt, prompt_list, resource_list, resource_template_list},
    http,
    journal::Journal,
    jsonrpc::*,
    listen::Listen,
    results::Modern,
    stats::Counters,
    stdio::{Outgoing, StdinChunk, StdinLines},
    tasks::Tasks,
    INSTRUCTIONS, LATEST_VERSION, MODERN_VERSION, SERVER_NAME, SERVER_VERSION, SUPPORTED_VERSIONS,
};

/// How much of a bad input line is echoed to stderr.
pub(crate) const LOG_SNIPPET: usize = 200;
/// RFC 5424 severities, least severe first (the order `logging/setLevel` compares in).
pub(crate) const LOG_LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];
/// Index in `LOG_LEVELS` of the level in force before any `logging/setLevel`.
pub(crate) const DEFAULT_LOG_LEVEL: usize = 1;
/// The cursor every page carries in `--cursor-mode repeat`.
pub(crate) const REPEAT_CURSOR: &str = "same-cursor";

/// A JSON-RPC outcome: a result, or an error code and message.
pub(crate) type Reply = Result<Value, (i64, String)>;

/// What handling a request asks the reader to do.
pub(crate) enum Step {
    /// Answer now (instant handlers).
    Reply(Reply),
    /// Answer from a local task once `task` completes.
    Spawn {
        task: LocalBoxFuture<'static, Reply>,
        cancellable: bool,
    },
    /// Answer now, then stop reading stdin for a while.
    PauseReading(Reply, Duration),
    /// Flush stdout and exit with this code, without answering.
    Crash(i32),
}

/// What the reader does after a line.
pub(crate) enum Control {
    Continue,
    Pause(Duration),
    Halt,
}

/// A request being answered by a spawned task.
pub(crate) struct Running {
    /// `None` for tasks that deliberately ignore cancellation (`late`).
    pub(crate) abort: Option<AbortHandle>,
    /// A cancel named this request (only visible on tasks that keep running).
    pub(crate) cancelled: bool,
}

/// The MCP Apps extension, offered by this server: it serves `ui://`-like app pages.
pub(crate) const MCP_APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";
pub(crate) const MCP_APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

#[derive(Default)]
pub(crate) struct State {
    /// What the client declared in `capabilities.extensions` at `initialize` (2025-11-25).
    pub(crate) client_extensions: Option<Value>,
    pub(crate) counters: Counters,
    /// Keyed by the canonical JSON text of the request id, so `1` and `"1"` differ.
    pub(crate) running: HashMap<String, Running>,
    /// Every request id ever received, to tell "cancel too late" from "cancel too early".
    pub(crate) seen: HashSet<String>,
    /// Ids named by a cancel before any request used them, with the number of such cancels.
    pub(crate) cancelled_unseen: HashMap<String, u64>,
    /// Server-to-client requests (`srv-N`) waiting for the client's response.
    pub(crate) waiters: HashMap<String, oneshot::Sender<Value>>,
    pub(crate) next_srv_id: u64,
    pub(crate) initialized: bool,
    pub(crate) protocol_version: Option<String>,
    /// Server requests given up by `ask_client_then_cancel` (cancel already sent).
    pub(crate) srv_cancelled: HashSet<String>,
    /// Uris named by `resources/subscribe` and not unsubscribed since.
    pub(crate) subscriptions: BTreeSet<String>,
    /// Number of `demo://counter` reads so far.
    pub(crate) counter_reads: u64,
    pub(crate) log_level: LogLevel,
    /// The log level of the `tools/call` being run: `None` in the legacy era (the session's
    /// level applies), `Some(None)` for a 2026-07-28 request without `logLevel` (no logging).
    pub(crate) request_log_level: Option<Option<LogLevel>>,
    /// Tasks (2025-11-25) created by task-augmented `tools/call`s.
    pub(crate) tasks: Tasks,
    /// Open `subscriptions/listen` requests, by request key (id as JSON text).
    pub(crate) listens: BTreeMap<String, Listen>,
}

/// Index in `LOG_LEVELS` of the minimum level `log` lets through.
#[derive(Clone, Copy)]
pub(crate) struct LogLevel(pub(crate) usize);

impl Default for LogLevel {
    fn default() -> Self {
        Self(DEFAULT_LOG_LEVEL)
    }
}

impl LogLevel {
    pub(crate) fn parse(level: &str) -> Option<Self> {
        LOG_LEVELS
            .iter()
            .position(|known| *known == level)
            .map(Self)
    }

    pub(crate) fn name(self) -> &'static str {
        LOG_LEVELS.get(self.0).copied().unwrap_or("info")
    }
}

pub(crate) struct Server {
    pub(crate) cli: Cli,
    pub(crate) journal: Rc<Journal>,
    pub(crate) out: mpsc::UnboundedSender<Outgoing>,
    /// In HTTP mode: where each open request POST takes its messages (instead of stdout).
    pub(crate) http: Option<RefCell<http::Routes>>,
    pub(crate) state: RefCell<State>,
    /// The `tools/list` result, built once.
    pub(crate) tools: Value,
    /// The same for a 2026-07-28 request (with its `resultType`, `ttlMs`, `cacheScope`).
    pub(crate) modern_tools: Value,
}

impl Server {
    pub(crate) async fn read_loop(self: &Rc<Self>, stdin: mpsc::Receiver<StdinChunk>) -> ExitCode {
        let mut lines = StdinLines::new(stdin);
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("{SERVER_NAME}: stdin read failed: {err}");
                    return ExitCode::FAILURE;
                }
            };
            // Journal first: the record must exist even if handling the line kills us.
            self.journal.record(line);
            match self.handle_line(line) {
                Control::Continue => {}
                Control::Pause(duration) => tokio::time::sleep(duration).await,
                // The writer is about to exit the process; read nothing more.
                Control::Halt => std::future::pending::<()>().await,
            }
        }
    }

    pub(crate) fn handle_line(self: &Rc<Self>, line: &[u8]) -> Control {
        let message = match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(message)) => message,
            Ok(_) => {
                log_skipped("not a JSON object", line);
                return Control::Continue;
            }
            Err(err) => {
                log_skipped(&format!("invalid JSON ({err})"), line);
                return Control::Continue;
            }
        };
        let mut message = message;
        let id = message.remove("id").filter(|id| !id.is_null());
        match (message.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) => {
                let params = message.remove("params").unwrap_or(Value::Null);
                self.handle_request(id, &method, params)
            }
            (Some(Value::String(method)), None) => {
                self.handle_notification(&method, message.get("params"));
                Control::Continue
            }
            (None, Some(id)) if message.contains_key("result") || message.contains_key("error") => {
                message.insert("id".to_owned(), id);
                self.route_client_response(message);
                Control::Continue
            }
            _ => {
                log_skipped("not a JSON-RPC request, notification or response", line);
                Control::Continue
            }
        }
    }

    pub(crate) fn handle_request(
        self: &Rc<Self>,
        id: Value,
        method: &str,
        params: Value,
    ) -> Control {
        let key = id.to_string();
        if self.is_duplicate(&key, method) {
            let message = format!("request id {key} is already in use by a running request");
            self.respond(&id, &Err((INVALID_REQUEST, message)));
            return Control::Continue;
        }
        let modern = Modern::of(method, &params, self.cli.list_ttl_ms);
        if method == "tools/list" && self.unpaged(&params) {
            // Serialized straight from the cache: no clone of the list per call.
            let tools = if modern.is_some() {
                &self.modern_tools
            } else {
                &self.tools
            };
            self.respond_result(&id, tools);
            return Control::Continue;
        }
        let step = match self.step(&id, &key, method, params) {
            Ok(step) => step,
            Err((code, message, data)) => {
                self.respond_error(&id, code, &message, data.as_ref());
                return Control::Continue;
            }
        };
        let step = match modern {
            Some(modern) => modern.complete_step(step),
            None => step,
        };
        self.run_step(id, key, step)
    }

    /// Counts a request; whether its id is one of a request still running (it is then not
    /// served).
    fn is_duplicate(&self, key: &str, method: &str) -> bool {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.counters.requests += 1;
        if method.ends_with("/list") {
            *state.counters.lists.entry(method.to_owned()).or_default() += 1;
        }
        if state.running.contains_key(key) {
            return true;
        }
        if let Some(cancels) = state.cancelled_unseen.remove(key) {
            // A cancel overtook this request; count it, then serve it normally.
            state.counters.cancels_ahead += 1;
            state.counters.cancels_unknown -= cancels;
        }
        state.seen.insert(key.to_owned());
        false
    }

    /// What serving `method` takes, or the error (with its `data`) it is answered with at once.
    fn step(
        self: &Rc<Self>,
        id: &Value,
        key: &str,
        method: &str,
        params: Value,
    ) -> Result<Step, (i64, String, Option<Value>)> {
        let era = self.cli.era;
        Ok(match method {
            "initialize" if era == Era::Modern => Step::Reply(Err((
                METHOD_NOT_FOUND,
                "method not found: initialize (this server speaks 2026-07-28)".to_owned(),
            ))),
            "initialize" => self.initialize(&params),
            "server/discover" if era != Era::Legacy => Step::Reply(Ok(self.discover())),
            "ping" => Step::Reply(Ok(json!({}))),
            "tools/list" => {
                let tools = self.tools.get("tools").and_then(Value::as_array);
                Step::Reply(self.paginate("tools", tools.map_or(&[], Vec::as_slice), &params))
            }
            "tools/call" => self.call_tool(key, params),
            "tasks/get" => Step::Reply(self.tasks_get(&params)),
            "tasks/result" if era != Era::Modern => self.tasks_result(key, &params),
            "tasks/list" if era != Era::Modern => Step::Reply(self.tasks_list(&params)),
            "tasks/cancel" => Step::Reply(self.tasks_cancel(&params)),
            // Served in every era, like tasks/get: a 2026-07-28 task can exist in any (the
            // extension is declared per request).
            "tasks/update" => Step::Reply(self.tasks_update(&params)),
            "subscriptions/listen" if era != Era::Legacy => self.listen(id, key, &params)?,
            "resources/list" => Step::Reply(self.paginate("resources", &resource_list(), &params)),
            "resources/templates/list" => {
                Step::Reply(self.paginate("resourceTemplates", &resource_template_list(), &params))
            }
            "skills/list" => Step::Reply(Ok(crate::skills::list())),
            "resources/read" => Step::Reply(Ok(self.read_resource(&params)?)),
            "resources/subscribe" => Step::Reply(self.subscribe(&params, true)),
            "resources/unsubscribe" => Step::Reply(self.subscribe(&params, false)),
            "prompts/list" => Step::Reply(self.paginate("prompts", &prompt_list(), &params)),
            "prompts/get" => Step::Reply(get_prompt(&params)),
            "completion/complete" => Step::Reply(complete(&params)),
            "logging/setLevel" => Step::Reply(self.set_log_level(&params)),
            _ => Step::Reply(Err((
                METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            ))),
        })
    }

    /// Answers now or later, as `step` says.
    fn run_step(self: &Rc<Self>, id: Value, key: String, step: Step) -> Control {
        match step {
            Step::Reply(reply) => {
                self.respond(&id, &reply);
                Control::Continue
            }
            Step::Spawn { task, cancellable } => {
                self.spawn_request(id, key, task, cancellable);
                Control::Continue
            }
            Step::PauseReading(reply, duration) => {
                self.respond(&id, &reply);
                Control::Pause(duration)
            }
            Step::Crash(code) => {
                eprintln!("{SERVER_NAME}: crash requested, exiting with code {code}");
                if self.out.send(Outgoing::Exit(code)).is_err() {
                    std::process::exit(code);
                }
                Control::Halt
            }
        }
    }

    pub(crate) fn handle_notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/initialized" => self.state.borrow_mut().initialized = true,
            "notifications/cancelled" => self.cancel(params),
            // JSON-RPC: unknown notifications are ignored, never answered.
            _ => {}
        }
    }

    pub(crate) fn cancel(&self, params: Option<&Value>) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.counters.cancels += 1;
        let Some(request_id) = params.and_then(|params| params.get("requestId")) else {
            eprintln!("{SERVER_NAME}: notifications/cancelled without requestId");
            return;
        };
        let key = request_id.to_string();
        // A listen's subscription ends with its request.
        state.listens.remove(&key);
        if state.tasks.creating_requests.contains(&key) {
            // Forbidden by the spec (tasks/cancel is the way); counted and otherwise ignored.
            state.counters.cancels_for_tasks += 1;
        }
        match state.running.get_mut(&key) {
            Some(task) => {
                state.counters.cancels_matched += 1;
                task.cancelled = true;
                if let Some(abort) = &task.abort {
                    // Dropping the task means no response and no further progress.
                    abort.abort();
                    state.running.remove(&key);
                }
            }
            None if !state.seen.contains(&key) => {
                *state.cancelled_unseen.entry(key).or_insert(0) += 1;
                state.counters.cancels_unknown += 1;
            }
            // Already answered: the cancel lost the race, which is normal.
            None => {}
        }
    }

    /// Hands a client response to the `ping_client` / `ask_client` task waiting for it.
    pub(crate) fn route_client_response(&self, message: Map<String, Value>) {
        let mut after_cancel = false;
        let waiter = match message.get("id") {
            Some(Value::String(id)) if id.starts_with("srv-") => {
                let mut state = self.state.borrow_mut();
                if state.srv_cancelled.contains(id) {
                    state.counters.client_responses_after_cancel += 1;
                    after_cancel = true;
                }
                state.waiters.remove(id)
            }
            _ => None,
        };
        match waiter {
            // A send error only means the waiting task was cancelled meanwhile.
            Some(waiter) => drop(waiter.send(Value::Object(message))),
            None if after_cancel => eprintln!(
                "{SERVER_NAME}: ignoring response to cancelled request {}",
                message.get("id").unwrap_or(&Value::Null)
            ),
            None => eprintln!(
                "{SERVER_NAME}: ignoring response to unknown request {}",
                message.get("id").unwrap_or(&Value::Null)
            ),
        }
    }

    pub(crate) fn spawn_request(
        self: &Rc<Self>,
        id: Value,
        key: String,
        task: LocalBoxFuture<'static, Reply>,
        cancellable: bool,
    ) {
        let server = Rc::clone(self);
        let task_key = key.clone();
        let handle = spawn_local(async move {
            let reply = task.await;
            let finished = server.state.borrow_mut().running.remove(&task_key);
            if finished.is_some_and(|task| task.cancelled) {
                server.state.borrow_mut().counters.late_responses += 1;
            }
            server.respond(&id, &reply);
        });
        // The task cannot run before this insert: it is only polled once the reader yields.
        self.state.borrow_mut().running.insert(
            key,
            Running {
                abort: cancellable.then(|| handle.abort_handle()),
                cancelled: false,
            },
        );
    }

    /// Queues a response (or error) for a client request.
    pub(crate) fn respond(&self, id: &Value, reply: &Reply) {
        match reply {
            Ok(result) => self.respond_result(id, result),
            Err((code, message)) => self.respond_error(id, *code, message, None),
        }
    }

    pub(crate) fn respond_error(&self, id: &Value, code: i64, message: &str, data: Option<&Value>) {
        self.state.borrow_mut().counters.responses += 1;
        self.send(encode(&ErrorMsg {
            jsonrpc: "2.0",
            id,
            error: ErrorBody {
                code,
                message,
                data,
            },
        }));
    }

    pub(crate) fn respond_result(&self, id: &Value, result: &Value) {
        self.state.borrow_mut().counters.responses += 1;
        self.send(encode(&ResultMsg {
            jsonrpc: "2.0",
            id,
            result,
        }));
    }

    /// Queues raw lines for stdout (in HTTP mode: for the POSTs they answer).
    pub(crate) fn send(&self, lines: Vec<u8>) {
        if let Some(routes) = &self.http {
            routes.borrow_mut().route(&lines);
            return;
        }
        // A send error means the writer is gone (stdout closed): nobody can read it anyway.
        if !lines.is_empty() {
            let _ = self.out.send(Outgoing::Line(lines));
        }
    }

    /// Queues raw lines that go along with the client request whose key (id as JSON text) is
    /// `via`: in HTTP mode on that request's POST stream while it is open (dropped otherwise);
    /// on stdio as `send`.
    pub(crate) fn send_via(&self, via: &str, lines: Vec<u8>) {
        match &self.http {
            Some(routes) => routes.borrow_mut().route_to(via, &lines),
            None => self.send(lines),
        }
    }

    pub(crate) async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.out.send(Outgoing::Flush(ack)).is_ok() {
            let _ = done.await;
        }
    }

    // -----------------------------------------------------------------------------------
    // Methods
    // -----------------------------------------------------------------------------------

    pub(crate) fn initialize(self: &Rc<Self>, params: &Value) -> Step {
        let extensions = params.pointer("/capabilities/extensions").cloned();
        self.state.borrow_mut().client_extensions = extensions;
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = match (&self.cli.protocol_version, requested) {
            (Some(forced), _) => forced.clone(),
            (None, Some(asked)) if SUPPORTED_VERSIONS.contains(&asked) => asked.to_owned(),
            _ => LATEST_VERSION.to_owned(),
        };
        let delay = self.cli.initialize_delay_ms;
        if delay == 0 {
            return Step::Reply(self.finish_initialize(version));
        }
        let server = Rc::clone(self);
        Step::Spawn {
            task: async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                server.finish_initialize(version)
            }
            .boxed_local(),
            cancellable: true,
        }
    }

    pub(crate) fn finish_initialize(&self, version: String) -> Reply {
        if self.cli.fail_initialize {
            return Err((INTERNAL_ERROR, "initialize refused".to_owned()));
        }
        self.state.borrow_mut().protocol_version = Some(version.clone());
        Ok(json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "prompts": {"listChanged": true},
                "logging": {},
                "completions": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                "extensions": {
                    MCP_APPS_EXTENSION: {"mimeTypes": [MCP_APP_MIME_TYPE]},
                    crate::skills::EXTENSION: {},
                },
            },
            "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
            "instructions": INSTRUCTIONS,
        }))
    }

    /// `server/discover` (2026-07-28): what `initialize` says, without a session.
    pub(crate) fn discover(&self) -> Value {
        let mut versions = vec![MODERN_VERSION];
        if self.cli.era == Era::Dual {
            versions.extend_from_slice(SUPPORTED_VERSIONS);
        }
        json!({
            "resultType": "complete",
            "supportedVersions": versions,
            "capabilities": {
                "tools": {},
                "resources": {},
                "prompts": {},
                "completions": {},
                "extensions": {
                    MCP_APPS_EXTENSION: {"mimeTypes": [MCP_APP_MIME_TYPE]},
                    crate::skills::EXTENSION: {},
                },
            },
            "instructions": INSTRUCTIONS,
            "ttlMs": 60_000,
            "cacheScope": "public",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
            },
        })
    }

    /// Whether a `tools/list` can be served whole from the cache: no paging, no cursor.
    pub(crate) fn unpaged(&self, params: &Value) -> bool {
        self.cli.page_size == 0
            && self.cli.cursor_mode == CursorMode::Normal
            && params.get("cursor").is_none_or(Value::is_null)
    }

    /// One page of a `*/list` result, `{<key>: [...], nextCursor?}`, as selected by
    /// `params.cursor` under `--page-size` and `--cursor-mode`.
    pub(crate) fn paginate(&self, key: &str, items: &[Value], params: &Value) -> Reply {
        let len = items.len();
        let size = match self.cli.page_size {
            0 => len.max(1),
            size => size,
        };
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(other) => {
                return Err((
                    INVALID_PARAMS,
                    format!("`cursor` must be a string, got {other}"),
                ))
            }
        };
        let invalid = |cursor: &str| (INVALID_PARAMS, format!("invalid cursor: {cursor:?}"));
        let (offset, next) = match (self.cli.cursor_mode, cursor) {
            (CursorMode::Normal, None) => (0, None),
            (CursorMode::Normal, Some(cursor)) => {
                // Only offsets this server could have handed out.
                let offset = cursor
                    .strip_prefix("page:")
                    .and_then(|offset| offset.parse::<usize>().ok())
                    .filter(|offset| *offset > 0 && *offset < len && *offset % size == 0)
                    .ok_or_else(|| invalid(cursor))?;
                (offset, None)
            }
            (CursorMode::Repeat, None) => (0, Some(REPEAT_CURSOR.to_owned())),
            (CursorMode::Repeat, Some(REPEAT_CURSOR)) => {
                (size.min(len), Some(REPEAT_CURSOR.to_owned()))
            }
            (CursorMode::Repeat, Some(cursor)) => return Err(invalid(cursor)),
            (CursorMode::Endless, None) => (0, Some("endless:1".to_owned())),
            (CursorMode::Endless, Some(cursor)) => {
                let next = cursor
                    .strip_prefix("endless:")
                    .and_then(|k| k.parse::<u64>().ok())
                    .filter(|k| *k > 0)
                    .and_then(|k| k.checked_add(1))
                    .ok_or_else(|| invalid(cursor))?;
                (0, Some(format!("endless:{next}")))
            }
        };
        let end = offset.saturating_add(size).min(len);
        let next = match self.cli.cursor_mode {
            CursorMode::Normal => (end < len).then(|| format!("page:{end}")),
            CursorMode::Repeat | CursorMode::Endless => next,
        };
        let mut page = Map::new();
        page.insert(key.to_owned(), Value::Array(items[offset..end].to_vec()));
        if let Some(next) = next {
            page.insert("nextCursor".to_owned(), Value::String(next));
        }
        if self.cli.list_ttl_ms > 0 {
            page.insert("ttlMs".to_owned(), Value::from(self.cli.list_ttl_ms));
            page.insert("cacheScope".to_owned(), Value::from("private"));
        }
        Ok(Value::Object(page))
    }

    /// `resources/read`; the error carries `data` (the uri) for an unknown resource.
    pub(crate) fn read_resource(
        &self,
        params: &Value,
    ) -> Result<Value, (i64, String, Option<Value>)> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err((
                INVALID_PARAMS,
                "resources/read needs a string `uri`".to_owned(),
                None,
            ));
        };
        if let Some(skill_file) = crate::skills::read(uri, self.cli.tamper_skill) {
            return Ok(json!({"contents": [skill_file]}));
        }
        let content = if let Some(id) = uri.strip_prefix("demo://text/").filter(|id| !id.is_empty())
        {
            json!({"uri": uri, "mimeType": "text/plain", "text": format!("text {id}")})
        } else if uri == "demo://blob/1" {
            let bytes: Vec<u8> = (0..=255).collect();
            json!({"uri": uri, "mimeType": "application/octet-stream", "blob": base64::engine::general_purpose::STANDARD.encode(&bytes)})
        } else if let Some(bytes) = uri.strip_prefix("demo://big/") {
            // An MCP App's page: these are megabytes (the official PDF viewer's is 4.3 MB).
            let bytes: usize = bytes.parse().ok().filter(|n| *n <= 64 << 20).ok_or((
                INVALID_PARAMS,
                "demo://big/N takes a size of at most 64 MiB".to_owned(),
                None,
            ))?;
            let page = format!(
                "<!doctype html><!--{}-->",
                "x".repeat(bytes.saturating_sub(22))
            );
            json!({"uri": uri, "mimeType": MCP_APP_MIME_TYPE, "text": page})
        } else if uri == "demo://counter" {
            let mut state = self.state.borrow_mut();
            state.counter_reads += 1;
            let text = state.counter_reads.to_string();
            json!({"uri": uri, "mimeType": "text/plain", "text": text})
        } else {
            return Err((
                RESOURCE_NOT_FOUND,
                "resource not found".to_owned(),
                Some(json!({"uri": uri})),
            ));
        };
        Ok(json!({"contents": [content]}))
    }

    /// `resources/subscribe` (`subscribe`) or `resources/unsubscribe`. Any uri is accepted.
    pub(crate) fn subscribe(&self, params: &Value, subscribe: bool) -> Reply {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err((INVALID_PARAMS, "a string `uri` is required".to_owned()));
        };
        let mut state = self.state.borrow_mut();
        if subscribe {
            state.subscriptions.insert(uri.to_owned());
        } else {
            state.subscriptions.remove(uri);
        }
        Ok(json!({}))
    }

    pub(crate) fn set_log_level(&self, params: &Value) -> Reply {
        let level = params.get("level");
        let Some(parsed) = level.and_then(Value::as_str).and_then(LogLevel::parse) else {
            return Err((
                INVALID_PARAMS,
                format!(
                    "unknown log level {}, expected one of {}",
                    level.unwrap_or(&Value::Null),
                    LOG_LEVELS.join(", ")
                ),
            ));
        };
        self.state.borrow_mut().log_level = parsed;
        Ok(json!({}))
    }
}

pub(crate) fn log_skipped(why: &str, line: &[u8]) {
    let snippet = &line[..line.len().min(LOG_SNIPPET)];
    eprintln!(
        "{SERVER_NAME}: skipping input line, {why}: {}",
        String::from_utf8_lossy(snippet)
    );
}
