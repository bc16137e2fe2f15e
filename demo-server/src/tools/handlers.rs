//! One handler per tool (the task tools share one): each reads its arguments, then answers at
//! once or hands `call_tool` the work to spawn. A bad argument is an `Err`, which `call_tool`
//! reports as a tool error, to the model, rather than a protocol error.

use std::{
    future::Future,
    io::{self, Write as _},
    rc::Rc,
    time::Duration,
};

use futures::future::FutureExt as _;
use serde_json::{json, Map, Value};

use super::{
    num_arg, progress_tool, size_arg, sleep_tool, str_arg, structured_result, text_result, u64_arg,
    ToolCall, GARBAGE, MAX_PROGRESS_STEPS,
};
use crate::{
    jsonrpc::*,
    server::{LogLevel, Reply, Server, Step, LOG_LEVELS},
    tasks::{plain_sleep, SleepPlan, TaskWork, CLIENT_CAPABILITIES_META},
};

type Outcome = Result<Step, String>;

fn reply(result: Value) -> Outcome {
    Ok(Step::Reply(Ok(result)))
}

/// Answers once `task` completes; a cancel aborts it.
fn spawn(task: impl Future<Output = Reply> + 'static) -> Outcome {
    Ok(Step::Spawn {
        task: task.boxed_local(),
        cancellable: true,
    })
}

pub(super) fn echo(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    reply(text_result(str_arg(call.args, "text")?))
}

fn sum(args: &Map<String, Value>) -> Result<f64, String> {
    Ok(num_arg(args, "a")? + num_arg(args, "b")?)
}

pub(super) fn add(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let sum = sum(call.args)?;
    reply(structured_result(sum.to_string(), json!({"sum": sum})))
}

/// Declares the same outputSchema as `add`, and breaks it: the sum as a string.
pub(super) fn add_wrong(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let sum = sum(call.args)?;
    reply(structured_result(
        sum.to_string(),
        json!({"sum": sum.to_string()}),
    ))
}

pub(super) fn sleep(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let ms = u64_arg(call.args, "ms", None)?;
    spawn(sleep_tool(Rc::clone(server), ms, call.progress_token))
}

pub(super) fn late(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let ms = u64_arg(call.args, "ms", None)?;
    Ok(Step::Spawn {
        task: async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(text_result(&format!("late {ms}")))
        }
        .boxed_local(),
        // Deliberately answers after a cancel, to exercise the client's filtering.
        cancellable: false,
    })
}

pub(super) fn stats(server: &Rc<Server>, _: ToolCall<'_>) -> Outcome {
    let stats = server.stats();
    reply(structured_result(stats.to_string(), stats))
}

pub(super) fn pid(_: &Rc<Server>, _: ToolCall<'_>) -> Outcome {
    let pid = std::process::id();
    reply(structured_result(pid.to_string(), json!({"pid": pid})))
}

pub(super) fn crash(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let code = match call.args.get("code") {
        None | Some(Value::Null) => 1,
        Some(code) => code
            .as_i64()
            .and_then(|code| i32::try_from(code).ok())
            .ok_or_else(|| format!("argument `code` must be an i32, got {code}"))?,
    };
    Ok(Step::Crash(code))
}

pub(super) fn flood(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let count = u64_arg(call.args, "count", None)?;
    let size = size_arg(call.args, "size", Some(0))?;
    server.flood(count, size)?;
    reply(text_result(&format!("flooded {count}")))
}

pub(super) fn big(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let bytes = size_arg(call.args, "bytes", None)?;
    reply(text_result(&"x".repeat(bytes)))
}

pub(super) fn client_extensions(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    // 2026-07-28: declared on each request; before: once, in `initialize`.
    let declared = match call
        .meta
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES_META))
    {
        Some(capabilities) => capabilities.get("extensions").cloned(),
        None => server.state.borrow().client_extensions.clone(),
    };
    reply(text_result(&declared.unwrap_or(Value::Null).to_string()))
}

pub(super) fn garbage(server: &Rc<Server>, _: ToolCall<'_>) -> Outcome {
    server.send(GARBAGE.as_bytes().to_vec());
    reply(text_result("garbage sent"))
}

pub(super) fn stderr(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let text = str_arg(call.args, "text")?;
    let lines = u64_arg(call.args, "lines", Some(1))?;
    let mut stderr = io::stderr().lock();
    for _ in 0..lines {
        let _ = writeln!(stderr, "{text}");
    }
    let _ = stderr.flush();
    reply(text_result(&format!("wrote {lines}")))
}

pub(super) fn ping_client(server: &Rc<Server>, _: ToolCall<'_>) -> Outcome {
    spawn(super::ask_client(
        Rc::clone(server),
        "ping".to_owned(),
        None,
    ))
}

/// `method` and the optional `params` of a request to the client.
fn client_request(args: &Map<String, Value>) -> Result<(String, Option<Value>), String> {
    let method = str_arg(args, "method")?.to_owned();
    let params = args.get("params").filter(|p| !p.is_null()).cloned();
    Ok((method, params))
}

pub(super) fn ask_client(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let (method, params) = client_request(call.args)?;
    spawn(super::ask_client(Rc::clone(server), method, params))
}

pub(super) fn ask_client_then_cancel(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let (method, params) = client_request(call.args)?;
    let after_ms = u64_arg(call.args, "after_ms", None)?;
    spawn(super::ask_client_then_cancel(
        Rc::clone(server),
        method,
        params,
        after_ms,
    ))
}

pub(super) fn sample(server: &Rc<Server>, _: ToolCall<'_>) -> Outcome {
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10,
    });
    spawn(super::ask_client(
        Rc::clone(server),
        "sampling/createMessage".to_owned(),
        Some(params),
    ))
}

pub(super) fn cancel_foreign(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let request_id = match call.args.get("request_id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => return Err("argument `request_id` must be a number or a string".into()),
    };
    server.send(notification(
        "notifications/cancelled",
        json!({"requestId": request_id, "reason": "foreign"}),
    ));
    reply(text_result("sent"))
}

pub(super) fn pause_reading(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let ms = u64_arg(call.args, "ms", None)?;
    Ok(Step::PauseReading(
        Ok(text_result("paused")),
        Duration::from_millis(ms),
    ))
}

pub(super) fn env(_: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let name = str_arg(call.args, "name")?;
    // std may panic on such names; they can never be set anyway.
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!("invalid environment variable name: {name:?}"));
    }
    let value = std::env::var_os(name)
        .map(|value| value.to_string_lossy().into_owned())
        .unwrap_or_default();
    reply(text_result(&value))
}

pub(super) fn cwd(_: &Rc<Server>, _: ToolCall<'_>) -> Outcome {
    let cwd =
        std::env::current_dir().map_err(|err| format!("cannot read current directory: {err}"))?;
    reply(text_result(&cwd.display().to_string()))
}

pub(super) fn log(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let level = str_arg(call.args, "level")?;
    let message = str_arg(call.args, "message")?;
    let parsed = LogLevel::parse(level).ok_or_else(|| {
        format!(
            "unknown log level {level:?}, expected one of {}",
            LOG_LEVELS.join(", ")
        )
    })?;
    let threshold = {
        let state = server.state.borrow();
        state.request_log_level.unwrap_or(Some(state.log_level))
    };
    // 2026-07-28: without a `logLevel` in the request, the server MUST NOT log.
    let outcome = if threshold.is_some_and(|threshold| parsed.0 >= threshold.0) {
        server.send(notification(
            "notifications/message",
            json!({"level": level, "logger": "demo", "data": message}),
        ));
        "logged"
    } else {
        "filtered"
    };
    reply(text_result(outcome))
}

pub(super) fn notify(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let outcome = match str_arg(call.args, "kind")? {
        kind @ ("tools" | "prompts" | "resources") => {
            server.send(bare_notification(&format!(
                "notifications/{kind}/list_changed"
            )));
            "sent"
        }
        "updated" => {
            let uri = str_arg(call.args, "uri")?;
            if server.state.borrow().subscriptions.contains(uri) {
                server.send(notification(
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
    reply(text_result(outcome))
}

pub(super) fn progress(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let steps = u64_arg(call.args, "steps", None)?;
    if steps > MAX_PROGRESS_STEPS {
        return Err(format!(
            "argument `steps` must be at most {MAX_PROGRESS_STEPS}, got {steps}"
        ));
    }
    let interval_ms = u64_arg(call.args, "interval_ms", None)?;
    let with_total = match call.args.get("total") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(with_total)) => *with_total,
        Some(other) => return Err(format!("argument `total` must be a boolean, got {other}")),
    };
    spawn(progress_tool(
        Rc::clone(server),
        steps,
        interval_ms,
        with_total,
        call.progress_token,
    ))
}

/// `task_sleep` and `task_required`: as a task when asked for one (`call_tool` has already
/// refused `task_required` without), else a plain cancellable sleep.
pub(super) fn task_sleep(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    let plan = SleepPlan::parse(call.args);
    match call.task {
        // Bad arguments fail the task, once created, rather than the call.
        Some(ask) => Ok(Step::Reply(server.create_task(
            call.request_key,
            ask,
            plan.map(TaskWork::Sleep),
            call.progress_token,
        ))),
        None => spawn(plain_sleep(Rc::clone(server), plan?, call.progress_token)),
    }
}

pub(super) fn task_input(server: &Rc<Server>, call: ToolCall<'_>) -> Outcome {
    match call.task {
        Some(ask) => Ok(Step::Reply(server.create_task(
            call.request_key,
            ask,
            TaskWork::parse_input(call.args),
            call.progress_token,
        ))),
        // `call_tool` refuses it first (taskSupport required).
        None => Err("task_input runs only as a task".to_owned()),
    }
}
