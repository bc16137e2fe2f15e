//! The tools: `tools/call`, the work of those that run in a task of their own, argument
//! helpers. Which tools there are, how they are listed and what each does: `table.rs` and
//! `handlers.rs`.

mod handlers;
mod table;

use std::{rc::Rc, time::Duration};

use serde_json::{json, Map, Value};
use tokio::{sync::oneshot, time::Instant};

pub(crate) use self::table::{find_tool, is_tool, tool_list};
use crate::{
    jsonrpc::*,
    server::{LogLevel, Reply, Server, Step},
    tasks::{declares_tasks_extension, parse_task_param, TaskAsk, TaskSupport},
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

/// What a handler gets of a `tools/call`, besides the server.
pub(crate) struct ToolCall<'a> {
    pub(crate) args: &'a Map<String, Value>,
    /// `params._meta`.
    pub(crate) meta: Option<&'a Value>,
    pub(crate) progress_token: Option<Value>,
    /// Run as a task, if asked for one (and allowed).
    pub(crate) task: Option<TaskAsk>,
    /// The request's key (its id as JSON text), for the task the call may create.
    pub(crate) request_key: &'a str,
}

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
        let Some(tool) = find_tool(&name) else {
            return Step::Reply(Err((INVALID_PARAMS, format!("unknown tool: {name}"))));
        };
        let task = if tool.checks_tasks {
            match check_task(&name, tool.tasks, task, meta) {
                Ok(task) => task,
                Err(err) => return Step::Reply(Err(err)),
            }
        } else {
            task
        };
        let call = ToolCall {
            args: &args,
            meta,
            progress_token,
            task,
            request_key,
        };
        match (tool.run)(self, call) {
            Ok(step) => step,
            // Bad arguments are a tool-level failure, reported to the model, not a protocol error.
            Err(problem) => Step::Reply(Ok(tool_error(&problem))),
        }
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

/// Whether the call runs as a task: refuses a task the tool forbids, or the lack of one it
/// requires.
fn check_task(
    name: &str,
    support: TaskSupport,
    task: Option<TaskAsk>,
    meta: Option<&Value>,
) -> Result<Option<TaskAsk>, (i64, String)> {
    // 2026-07-28: the server alone turns a call into a task, if the request opts in.
    let task = task.or_else(|| {
        (support != TaskSupport::Forbidden && declares_tasks_extension(meta))
            .then_some(TaskAsk::Modern)
    });
    match (task, support) {
        (Some(_), TaskSupport::Forbidden) => Err((
            METHOD_NOT_FOUND,
            format!("tool {name} does not support task augmentation (taskSupport forbidden)"),
        )),
        (None, TaskSupport::Required) => Err((
            METHOD_NOT_FOUND,
            format!("tool {name} requires task augmentation (params.task)"),
        )),
        _ => Ok(task),
    }
}
