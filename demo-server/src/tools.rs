//! The tools: `tools/call`, the tools answered at once, those that run in a task of their own,
//! argument helpers and the tool list.

use std::{
    io::{self, Write as _},
    rc::Rc,
    time::Duration,
};

use futures::future::FutureExt as _;
use serde_json::{json, Map, Value};
use tokio::{sync::oneshot, time::Instant};

use crate::{
    jsonrpc::*,
    server::{LogLevel, Reply, Server, Step, LOG_LEVELS},
    tasks::{
        declares_tasks_extension, parse_task_param, plain_sleep, task_support, SleepPlan, TaskAsk,
        TaskSupport, TaskWork, CLIENT_CAPABILITIES_META,
    },
};

pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// Upper bound for `big` / `flood` output, so a typo cannot make the server abort on OOM.
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;
/// How long `ask_client_then_cancel` still waits for a response after its cancel.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_millis(500);
/// Upper bound for the `progress` tool's `steps`.
pub(crate) const MAX_PROGRESS_STEPS: u64 = 1_000_000;
/// Lines written by the `garbage` tool: not JSON, not objects, not JSON-RPC, a response
/// nobody asked for, and finally a valid notification to prove the stream is still in sync.
pub(crate) const GARBAGE: &str = concat!(
    "this is not json\n",
    "[1,2,3]\n",
    "{\"jsonrpc\":\"2.0\"}\n",
    "{\"hello\":\"world\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":987654321,\"result\":{}}\n",
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",",
    "\"params\":{\"level\":\"info\",\"data\":\"between\"}}\n",
);

impl Server {
    pub(crate) fn call_tool(self: &Rc<Self>, request_key: &str, params: Value) -> Step {
        let Value::Object(mut params) = params else {
            return Step::Reply(Err((
                INVALID_PARAMS,
                "tools/call params must be an object".to_owned(),
            )));
        };
        let Some(Value::String(name)) = params.remove("name") else {
            return Step::Reply(Err((
                INVALID_PARAMS,
                "tools/call needs a string `name`".to_owned(),
            )));
        };
        let args = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args,
            Some(_) if !is_tool(&name) => Map::new(),
            Some(_) => return Step::Reply(Ok(tool_error("`arguments` must be an object"))),
        };
        let task = match parse_task_param(params.remove("task")) {
            Ok(task) => task,
            Err(err) => return Step::Reply(Err(err)),
        };
        let progress_token = params
            .get("_meta")
            .and_then(|meta| meta.get("progressToken"))
            .filter(|token| !token.is_null())
            .cloned();
        let meta = params.get("_meta");
        let modern = meta
            .and_then(|meta| meta.get("io.modelcontextprotocol/protocolVersion"))
            .is_some();
        let request_level = meta
            .and_then(|meta| meta.get("io.modelcontextprotocol/logLevel"))
            .and_then(Value::as_str)
            .and_then(LogLevel::parse);
        self.state.borrow_mut().request_log_level = modern.then_some(request_level);
        if name == "client_extensions" {
            // 2026-07-28: declared on each request; before: once, in `initialize`.
            let declared = match meta.and_then(|meta| meta.get(CLIENT_CAPABILITIES_META)) {
                Some(capabilities) => capabilities.get("extensions").cloned(),
                None => self.state.borrow().client_extensions.clone(),
            };
            let text = declared.unwrap_or(Value::Null).to_string();
            return Step::Reply(Ok(text_result(&text)));
        }
        let support = task_support(&name);
        // 2026-07-28: the server alone turns a call into a task, if the request opts in.
        let task = task.or_else(|| {
            (support != TaskSupport::Forbidden && declares_tasks_extension(meta))
                .then_some(TaskAsk::Modern)
        });
        match (task, support) {
            (Some(_), TaskSupport::Forbidden) if is_tool(&name) => {
                return Step::Reply(Err((
                    METHOD_NOT_FOUND,
                    format!(
                        "tool {name} does not support task augmentation (taskSupport forbidden)"
                    ),
                )))
            }
            (None, TaskSupport::Required) => {
                return Step::Reply(Err((
                    METHOD_NOT_FOUND,
                    format!("tool {name} requires task augmentation (params.task)"),
                )))
            }
            _ => {}
        }
        match self.run_tool(&name, &args, progress_token, task, request_key) {
            Ok(step) => step,
            // Bad arguments are a tool-level failure, reported to the model, not a protocol error.
            Err(problem) => Step::Reply(Ok(tool_error(&problem))),
        }
    }

    pub(crate) fn run_tool(
        self: &Rc<Self>,
        name: &str,
        args: &Map<String, Value>,
        progress_token: Option<Value>,
        task: Option<TaskAsk>,
        request_key: &str,
    ) -> Result<Step, String> {
        let step = match name {
            "task_sleep" | "task_required" => {
                let plan = SleepPlan::parse(args);
                match task {
                    Some(ask) => Step::Reply(self.create_task(
                        request_key,
                        ask,
                        plan.map(TaskWork::Sleep),
                        progress_token,
                    )),
                    None => Step::Spawn {
                        task: plain_sleep(Rc::clone(self), plan?, progress_token).boxed_local(),
                        cancellable: true,
                    },
                }
            }
            "task_input" => match task {
                Some(ask) => Step::Reply(self.create_task(
                    request_key,
                    ask,
                    TaskWork::parse_input(args),
                    progress_token,
                )),
                // `call_tool` refuses it first (taskSupport required).
                None => return Err("task_input runs only as a task".to_owned()),
            },
            "echo" => Step::Reply(Ok(text_result(str_arg(args, "text")?))),
            "add" => {
                let sum = num_arg(args, "a")? + num_arg(args, "b")?;
                Step::Reply(Ok(structured_result(sum.to_string(), json!({"sum": sum}))))
            }
            // Declares the same outputSchema as `add`, and breaks it: the sum as a string.
            "add-wrong" => {
                let sum = num_arg(args, "a")? + num_arg(args, "b")?;
                Step::Reply(Ok(structured_result(
                    sum.to_string(),
                    json!({"sum": sum.to_string()}),
                )))
            }
            "sleep" => {
                let ms = u64_arg(args, "ms", None)?;
                Step::Spawn {
                    task: sleep_tool(Rc::clone(self), ms, progress_token).boxed_local(),
                    cancellable: true,
                }
            }
            "late" => {
                let ms = u64_arg(args, "ms", None)?;
                Step::Spawn {
                    task: async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok(text_result(&format!("late {ms}")))
                    }
                    .boxed_local(),
                    // Deliberately answers after a cancel, to exercise the client's filtering.
                    cancellable: false,
                }
            }
            "stats" => {
                let stats = self.stats();
                Step::Reply(Ok(structured_result(stats.to_string(), stats)))
            }
            "pid" => {
                let pid = std::process::id();
                Step::Reply(Ok(structured_result(pid.to_string(), json!({"pid": pid}))))
            }
            "crash" => {
                let code = match args.get("code") {
                    None | Some(Value::Null) => 1,
                    Some(code) => code
                        .as_i64()
                        .and_then(|code| i32::try_from(code).ok())
                        .ok_or_else(|| format!("argument `code` must be an i32, got {code}"))?,
                };
                Step::Crash(code)
            }
            "flood" => {
                let count = u64_arg(args, "count", None)?;
                let size = size_arg(args, "size", Some(0))?;
                self.flood(count, size)?;
                Step::Reply(Ok(text_result(&format!("flooded {count}"))))
            }
            "big" => {
                let bytes = size_arg(args, "bytes", None)?;
                Step::Reply(Ok(text_result(&"x".repeat(bytes))))
            }
            "garbage" => {
                self.send(GARBAGE.as_bytes().to_vec());
                Step::Reply(Ok(text_result("garbage sent")))
            }
            "stderr" => {
                let text = str_arg(args, "text")?;
                let lines = u64_arg(args, "lines", Some(1))?;
                let mut stderr = io::stderr().lock();
                for _ in 0..lines {
                    let _ = writeln!(stderr, "{text}");
                }
                let _ = stderr.flush();
                Step::Reply(Ok(text_result(&format!("wrote {lines}"))))
            }
            "ping_client" => Step::Spawn {
                task: ask_client(Rc::clone(self), "ping".to_owned(), None).boxed_local(),
                cancellable: true,
            },
            "ask_client" => {
                let method = str_arg(args, "method")?.to_owned();
                let params = args.get("params").filter(|p| !p.is_null()).cloned();
                Step::Spawn {
                    task: ask_client(Rc::clone(self), method, params).boxed_local(),
                    cancellable: true,
                }
            }
            "cancel_foreign" => {
                let request_id = match args.get("request_id") {
                    Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
                    _ => return Err("argument `request_id` must be a number or a string".into()),
                };
                self.send(notification(
                    "notifications/cancelled",
                    json!({"requestId": request_id, "reason": "foreign"}),
                ));
                Step::Reply(Ok(text_result("sent")))
            }
            "pause_reading" => {
                let ms = u64_arg(args, "ms", None)?;
                Step::PauseReading(Ok(text_result("paused")), Duration::from_millis(ms))
            }
            "env" => {
                let name = str_arg(args, "name")?;
                // std may panic on such names; they can never be set anyway.
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(format!("invalid environment variable name: {name:?}"));
                }
                let value = std::env::var_os(name)
                    .map(|value| value.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Step::Reply(Ok(text_result(&value)))
            }
            "cwd" => {
                let cwd = std::env::current_dir()
                    .map_err(|err| format!("cannot read current directory: {err}"))?;
                Step::Reply(Ok(text_result(&cwd.display().to_string())))
            }
            "log" => {
                let level = str_arg(args, "level")?;
                let message = str_arg(args, "message")?;
                let parsed = LogLevel::parse(level).ok_or_else(|| {
                    format!(
                        "unknown log level {level:?}, expected one of {}",
                        LOG_LEVELS.join(", ")
                    )
                })?;
                let threshold = {
                    let state = self.state.borrow();
                    state.request_log_level.unwrap_or(Some(state.log_level))
                };
                // 2026-07-28: without a `logLevel` in the request, the server MUST NOT log.
                let outcome = if threshold.is_some_and(|threshold| parsed.0 >= threshold.0) {
                    self.send(notification(
                        "notifications/message",
                        json!({"level": level, "logger": "demo", "data": message}),
                    ));
                    "logged"
                } else {
                    "filtered"
                };
                Step::Reply(Ok(text_result(outcome)))
            }
            "notify" => {
                let outcome = match str_arg(args, "kind")? {
                    kind @ ("tools" | "prompts" | "resources") => {
                        self.send(bare_notification(&format!(
                            "notifications/{kind}/list_changed"
                        )));
                        "sent"
                    }
                    "updated" => {
                        let uri = str_arg(args, "uri")?;
                        if self.state.borrow().subscriptions.contains(uri) {
                            self.send(notification(
                                "notifications/resources/updated",
                                json!({"uri": uri}),
                            ));
                            "sent"
                        } else {
                            "not subscribed"
                        }
                    }
                    kind => {
                        return Err(format!(
                            "unknown kind {kind:?}, expected tools, prompts, resources or updated"
                        ))
                    }
                };
                Step::Reply(Ok(text_result(outcome)))
            }
            "progress" => {
                let steps = u64_arg(args, "steps", None)?;
                if steps > MAX_PROGRESS_STEPS {
                    return Err(format!(
                        "argument `steps` must be at most {MAX_PROGRESS_STEPS}, got {steps}"
                    ));
                }
                let interval_ms = u64_arg(args, "interval_ms", None)?;
                let with_total = match args.get("total") {
                    None | Some(Value::Null) => true,
                    Some(Value::Bool(with_total)) => *with_total,
                    Some(other) => {
                        return Err(format!("argument `total` must be a boolean, got {other}"))
                    }
                };
                let task = progress_tool(
                    Rc::clone(self),
                    steps,
                    interval_ms,
                    with_total,
                    progress_token,
                );
                Step::Spawn {
                    task: task.boxed_local(),
                    cancellable: true,
                }
            }
            "ask_client_then_cancel" => {
                let method = str_arg(args, "method")?.to_owned();
                let params = args.get("params").filter(|p| !p.is_null()).cloned();
                let after_ms = u64_arg(args, "after_ms", None)?;
                let task = ask_client_then_cancel(Rc::clone(self), method, params, after_ms);
                Step::Spawn {
                    task: task.boxed_local(),
                    cancellable: true,
                }
            }
            "sample" => {
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    "maxTokens": 10,
                });
                let task = ask_client(
                    Rc::clone(self),
                    "sampling/createMessage".to_owned(),
                    Some(params),
                );
                Step::Spawn {
                    task: task.boxed_local(),
                    cancellable: true,
                }
            }
            _ => Step::Reply(Err((INVALID_PARAMS, format!("unknown tool: {name}")))),
        };
        Ok(step)
    }

    /// Queues `count` log notifications ahead of the `flood` response.
    pub(crate) fn flood(&self, count: u64, size: usize) -> Result<(), String> {
        let line = notification(
            "notifications/message",
            json!({"level": "info", "logger": "flood", "data": "x".repeat(size)}),
        );
        let count = usize::try_from(count).map_err(|_| "`count` is too large".to_owned())?;
        let total = line
            .len()
            .checked_mul(count)
            .filter(|total| *total <= MAX_PAYLOAD)
            .ok_or_else(|| {
                format!("flood of {count} x {size} bytes exceeds {MAX_PAYLOAD} bytes")
            })?;
        // Chunked so the writer can start on the first part while the rest is built.
        const CHUNK: usize = 256 * 1024;
        let mut chunk = Vec::with_capacity(total.min(CHUNK + line.len()));
        for _ in 0..count {
            chunk.extend_from_slice(&line);
            if chunk.len() >= CHUNK {
                self.send(std::mem::take(&mut chunk));
            }
        }
        self.send(chunk);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Tools that run in their own task
// ---------------------------------------------------------------------------------------

pub(crate) async fn sleep_tool(
    server: Rc<Server>,
    ms: u64,
    progress_token: Option<Value>,
) -> Reply {
    let start = Instant::now();
    let end = deadline(start, ms);
    if let Some(token) = progress_token {
        let mut last = 0;
        let mut next = start + PROGRESS_INTERVAL;
        while next < end {
            tokio::time::sleep_until(next).await;
            let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            if elapsed >= ms {
                // Late wake-up: the final answer is due now, not another progress.
                break;
            }
            // Strictly increasing even if the clock reading were to repeat.
            let progress = elapsed.max(last + 1);
            last = progress;
            server.send(notification(
                "notifications/progress",
                json!({
                    "progressToken": &token,
                    "progress": progress,
                    "total": ms,
                    "message": format!("slept {progress} ms"),
                }),
            ));
            next += PROGRESS_INTERVAL;
        }
    }
    tokio::time::sleep_until(end).await;
    Ok(text_result(&format!("slept {ms} ms")))
}

/// `steps` progress notifications (when the call carries a progress token), one every
/// `interval_ms`, then the answer.
pub(crate) async fn progress_tool(
    server: Rc<Server>,
    steps: u64,
    interval_ms: u64,
    with_total: bool,
    progress_token: Option<Value>,
) -> Reply {
    let start = Instant::now();
    for step in 1..=steps {
        tokio::time::sleep_until(deadline(start, interval_ms.saturating_mul(step))).await;
        let Some(token) = &progress_token else {
            continue;
        };
        let mut params = Map::new();
        params.insert("progressToken".to_owned(), token.clone());
        params.insert("progress".to_owned(), json!(step));
        if with_total {
            params.insert("total".to_owned(), json!(steps));
        }
        params.insert("message".to_owned(), json!(format!("step {step}")));
        server.send(notification(
            "notifications/progress",
            Value::Object(params),
        ));
    }
    Ok(text_result(&format!("done {steps}")))
}

/// Sends a server-to-client request (`srv-N`) and returns its id and the receiver of
/// the client's response.
pub(crate) fn send_client_request(
    server: &Server,
    method: String,
    params: Option<Value>,
) -> (String, oneshot::Receiver<Value>) {
    send_client_request_via(server, None, method, params)
}

/// `send_client_request`, sent along with the client request whose key (id as JSON text) is
/// `via`: in HTTP mode on that request's open POST stream (nothing else carries server requests
/// there); on stdio the same as without.
pub(crate) fn send_client_request_via(
    server: &Server,
    via: Option<&str>,
    method: String,
    params: Option<Value>,
) -> (String, oneshot::Receiver<Value>) {
    let (waiter, response) = oneshot::channel();
    let srv_id = {
        let mut state = server.state.borrow_mut();
        state.next_srv_id += 1;
        let srv_id = format!("srv-{}", state.next_srv_id);
        state.waiters.insert(srv_id.clone(), waiter);
        srv_id
    };
    let mut request = json!({"jsonrpc": "2.0", "id": srv_id, "method": method});
    if let (Some(params), Value::Object(request)) = (params, &mut request) {
        request.insert("params".to_owned(), params);
    }
    match via {
        Some(via) => server.send_via(via, encode(&request)),
        None => server.send(encode(&request)),
    }
    (srv_id, response)
}

/// Sends a server-to-client request, cancels it after `after_ms` unless answered by
/// then, and answers with the client's response, or `null` if none came within
/// `CANCEL_GRACE` of the cancel.
pub(crate) async fn ask_client_then_cancel(
    server: Rc<Server>,
    method: String,
    params: Option<Value>,
    after_ms: u64,
) -> Reply {
    let (srv_id, mut response) = send_client_request(&server, method, params);
    let give_up = deadline(Instant::now(), after_ms);
    let response = match tokio::time::timeout_at(give_up, &mut response).await {
        // Answered in time: nothing to cancel.
        Ok(response) => response.ok(),
        Err(_elapsed) => {
            server
                .state
                .borrow_mut()
                .srv_cancelled
                .insert(srv_id.clone());
            server.send(notification(
                "notifications/cancelled",
                json!({"requestId": &srv_id, "reason": "server gave up"}),
            ));
            match tokio::time::timeout(CANCEL_GRACE, &mut response).await {
                Ok(response) => response.ok(),
                Err(_elapsed) => {
                    // A later response is only counted, never routed.
                    server.state.borrow_mut().waiters.remove(&srv_id);
                    None
                }
            }
        }
    };
    let response = response.unwrap_or(Value::Null);
    Ok(structured_result(
        response.to_string(),
        json!({"response": response}),
    ))
}

/// Sends a server-to-client request and answers with the client's whole response.
pub(crate) async fn ask_client(server: Rc<Server>, method: String, params: Option<Value>) -> Reply {
    let (_srv_id, response) = send_client_request(&server, method, params);
    match response.await {
        Ok(response) => Ok(structured_result(
            response.to_string(),
            json!({"response": response}),
        )),
        Err(_) => Ok(tool_error("no response from the client")),
    }
}

/// `start + ms`, saturating far in the future instead of overflowing `Instant`.
pub(crate) fn deadline(start: Instant, ms: u64) -> Instant {
    start
        .checked_add(Duration::from_millis(ms))
        .unwrap_or_else(|| start + Duration::from_secs(30 * 365 * 86_400))
}

// ---------------------------------------------------------------------------------------
// Helpers: tool results, arguments, tool list
// ---------------------------------------------------------------------------------------

pub(crate) fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

pub(crate) fn structured_result(text: String, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured})
}

pub(crate) fn tool_error(problem: &str) -> Value {
    json!({"content": [{"type": "text", "text": problem}], "isError": true})
}

pub(crate) fn str_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(value)) => Ok(value),
        None | Some(Value::Null) => Err(format!("missing string argument `{name}`")),
        Some(other) => Err(format!("argument `{name}` must be a string, got {other}")),
    }
}

pub(crate) fn num_arg(args: &Map<String, Value>, name: &str) -> Result<f64, String> {
    match args.get(name) {
        Some(Value::Number(value)) => value
            .as_f64()
            .ok_or_else(|| format!("argument `{name}` is not a finite number")),
        None | Some(Value::Null) => Err(format!("missing number argument `{name}`")),
        Some(other) => Err(format!("argument `{name}` must be a number, got {other}")),
    }
}

/// A non-negative integer argument; `default` makes it optional.
pub(crate) fn u64_arg(
    args: &Map<String, Value>,
    name: &str,
    default: Option<u64>,
) -> Result<u64, String> {
    match args.get(name) {
        None | Some(Value::Null) => {
            default.ok_or_else(|| format!("missing integer argument `{name}`"))
        }
        Some(value) => value.as_u64().ok_or_else(|| {
            format!("argument `{name}` must be a non-negative integer, got {value}")
        }),
    }
}

/// A byte count, bounded by `MAX_PAYLOAD`.
pub(crate) fn size_arg(
    args: &Map<String, Value>,
    name: &str,
    default: Option<u64>,
) -> Result<usize, String> {
    let value = u64_arg(args, name, default)?;
    usize::try_from(value)
        .ok()
        .filter(|size| *size <= MAX_PAYLOAD)
        .ok_or_else(|| format!("argument `{name}` must be at most {MAX_PAYLOAD}, got {value}"))
}

pub(crate) const TOOL_NAMES: &[&str] = &[
    "echo",
    "add",
    "add-wrong",
    "sleep",
    "late",
    "stats",
    "pid",
    "crash",
    "flood",
    "big",
    "client_extensions",
    "garbage",
    "stderr",
    "ping_client",
    "ask_client",
    "cancel_foreign",
    "pause_reading",
    "env",
    "cwd",
    "log",
    "notify",
    "progress",
    "ask_client_then_cancel",
    "sample",
    "task_sleep",
    "task_required",
    "task_input",
];

pub(crate) fn is_tool(name: &str) -> bool {
    TOOL_NAMES.contains(&name)
}

/// The whole `tools/list` result, with the cache hints of `--list-ttl-ms` (0: none).
pub(crate) fn tool_list(ttl_ms: u64) -> Value {
    fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required},
        })
    }
    let integer =
        |description: &str| json!({"type": "integer", "minimum": 0, "description": description});
    let string = |description: &str| json!({"type": "string", "description": description});
    let tools = vec![
        tool(
            "echo",
            "Return the given text unchanged.",
            json!({"text": string("Text to echo back.")}),
            &["text"],
        ),
        tool(
            "add",
            "Add two numbers; the sum is also returned as structured content.",
            json!({
                "a": {"type": "number", "description": "First addend."},
                "b": {"type": "number", "description": "Second addend."},
            }),
            &["a", "b"],
        ),
        tool(
            "add-wrong",
            "Like add, but its structured content breaks its outputSchema (the sum as a string).",
            json!({
                "a": {"type": "number", "description": "First addend."},
                "b": {"type": "number", "description": "Second addend."},
            }),
            &["a", "b"],
        ),
        tool(
            "sleep",
            "Sleep for `ms` milliseconds, reporting progress every 100 ms when a progress token is given. Cancellable.",
            json!({"ms": integer("How long to sleep, in milliseconds.")}),
            &["ms"],
        ),
        tool(
            "late",
            "Sleep for `ms` milliseconds and answer even if the request was cancelled.",
            json!({"ms": integer("How long to sleep, in milliseconds.")}),
            &["ms"],
        ),
        tool(
            "stats",
            "Return the server's request, response and cancellation counters.",
            json!({}),
            &[],
        ),
        tool("pid", "Return the server's process id.", json!({}), &[]),
        tool(
            "crash",
            "Flush pending output and exit immediately with the given code, without answering.",
            json!({"code": {"type": "integer", "description": "Exit code (default 1)."}}),
            &[],
        ),
        tool(
            "flood",
            "Send `count` log notifications of `size` bytes each, then answer.",
            json!({
                "count": integer("Number of notifications."),
                "size": integer("Payload size of each notification, in bytes (default 0)."),
            }),
            &["count"],
        ),
        tool(
            "big",
            "Answer with a text of exactly `bytes` 'x' characters.",
            json!({"bytes": integer("Length of the text.")}),
            &["bytes"],
        ),
        tool(
            "client_extensions",
            "Answer with the extensions the client declared in its capabilities, as JSON.",
            json!({}),
            &[],
        ),
        tool(
            "garbage",
            "Write invalid and unsolicited lines to stdout, then answer.",
            json!({}),
            &[],
        ),
        tool(
            "stderr",
            "Write `text` to stderr `lines` times.",
            json!({
                "text": string("Line to write."),
                "lines": integer("How many times (default 1)."),
            }),
            &["text"],
        ),
        tool(
            "ping_client",
            "Send a ping request to the client and return its response.",
            json!({}),
            &[],
        ),
        tool(
            "ask_client",
            "Send an arbitrary request to the client and return its response.",
            json!({
                "method": string("Method of the request."),
                "params": {"type": "object", "description": "Params of the request."},
            }),
            &["method"],
        ),
        tool(
            "cancel_foreign",
            "Send the client a notifications/cancelled naming `request_id`.",
            json!({"request_id": {"type": ["integer", "string"], "description": "Request id to name."}}),
            &["request_id"],
        ),
        tool(
            "pause_reading",
            "Answer at once, then stop reading stdin for `ms` milliseconds.",
            json!({"ms": integer("Pause length, in milliseconds.")}),
            &["ms"],
        ),
        tool(
            "env",
            "Return the value of an environment variable (empty if unset).",
            json!({"name": string("Variable name.")}),
            &["name"],
        ),
        tool("cwd", "Return the server's current directory.", json!({}), &[]),
        tool(
            "log",
            "Send a notifications/message at `level` unless logging/setLevel filters it out; answers `logged` or `filtered`.",
            json!({
                "level": {"type": "string", "enum": LOG_LEVELS, "description": "RFC 5424 severity."},
                "message": string("Message (the notification's `data`)."),
            }),
            &["level", "message"],
        ),
        tool(
            "notify",
            "Send notifications/<kind>/list_changed (kind tools, prompts or resources), or notifications/resources/updated for a subscribed `uri` (kind updated), then answer.",
            json!({
                "kind": {
                    "type": "string",
                    "enum": ["tools", "prompts", "resources", "updated"],
                    "description": "Which notification to send.",
                },
                "uri": string("Resource uri, for kind `updated`."),
            }),
            &["kind"],
        ),
        tool(
            "progress",
            "Send `steps` progress notifications, one every `interval_ms` milliseconds, when a progress token is given, then answer. Cancellable.",
            json!({
                "steps": integer("Number of progress notifications."),
                "interval_ms": integer("Delay before each notification, in milliseconds."),
                "total": {"type": "boolean", "description": "Include `total` in the notifications (default true)."},
            }),
            &["steps", "interval_ms"],
        ),
        tool(
            "ask_client_then_cancel",
            "Send a request to the client, cancel it after `after_ms` milliseconds unless answered, wait 500 ms more, and return the response (or null).",
            json!({
                "method": string("Method of the request."),
                "params": {"type": "object", "description": "Params of the request."},
                "after_ms": integer("Delay before the cancel, in milliseconds."),
            }),
            &["method", "after_ms"],
        ),
        tool(
            "sample",
            "Send the client a sampling/createMessage request and return its response.",
            json!({}),
            &[],
        ),
        tool(
            "task_sleep",
            "Sleep for `ms` milliseconds in `steps` steps; with `params.task` it runs as a task (taskSupport optional) whose statusMessage goes `step i/N`. Answers `slept {ms} ms in {steps} steps`.",
            json!({
                "ms": integer("Total duration, in milliseconds."),
                "steps": integer("Number of steps, 1 or more (default 5)."),
            }),
            &["ms"],
        ),
        tool(
            "task_required",
            "Like task_sleep, but only as a task (taskSupport required): a call without `params.task` fails with -32601.",
            json!({
                "ms": integer("Total duration, in milliseconds."),
                "steps": integer("Number of steps, 1 or more (default 5)."),
            }),
            &["ms"],
        ),
        tool(
            "task_input",
            "Only as a task (taskSupport required; 2025-11-25 `params.task`, or a 2026-07-28 request declaring the io.modelcontextprotocol/tasks extension): works `ms / 2` milliseconds, then needs input (status input_required, statusMessage `waiting for input`). 2025-11-25: the question comes as an elicitation/create request (form, `answer` string, related-task _meta) while a tasks/result of the task waits. 2026-07-28: tasks/get carries inputRequests.answer (that elicitation/create), answered with tasks/update inputResponses.answer. Accepted: working again for the other `ms / 2`, then completes with `answered: {answer}`; declined or cancelled: completes with `declined`; a client error response: fails.",
            json!({"ms": integer("Total work time, in milliseconds (default 200).")}),
            &[],
        ),
    ];
    debug_assert_eq!(tools.len(), TOOL_NAMES.len());
    // `add` and `add-wrong` declare what their structured content holds.
    let sum_schema = json!({"type": "object", "properties": {"sum": {"type": "number"}},
        "required": ["sum"]});
    let tools: Vec<Value> = tools
        .into_iter()
        .map(|mut tool| {
            if matches!(tool["name"].as_str(), Some("add" | "add-wrong")) {
                tool["outputSchema"] = sum_schema.clone();
            }
            let support = match tool["name"].as_str().map(task_support) {
                Some(TaskSupport::Optional) => Some("optional"),
                Some(TaskSupport::Required) => Some("required"),
                _ => None,
            };
            if let Some(support) = support {
                tool["execution"] = json!({"taskSupport": support});
            }
            tool
        })
        .collect();
    if ttl_ms > 0 {
        return json!({"tools": tools, "ttlMs": ttl_ms, "cacheScope": "private"});
    }
    json!({"tools": tools})
}
