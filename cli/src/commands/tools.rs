//! `tools` and `call`: the tool list, and a call waited for (with a progress bar), run as a
//! task, or started detached.

use actix_mcp::{Error, Progress};
use serde_json::{Map, Value};

use super::{parse_object, tasks, Session};
use crate::{output, parse, Failure};

/// `tools`: the server's tools.
pub async fn list(session: &Session<'_>) -> Result<(), Failure> {
    let tools = session
        .client
        .tools()
        .cancellation(session.interrupt)
        .await?;
    session.out.tools(&tools)
}

/// How `call` runs the tool.
#[derive(Clone, Copy)]
pub enum CallMode {
    /// A plain request, waited for.
    Wait,
    /// A task, followed to its end (`--task`).
    Task,
    /// A task, its id printed at once (`--detach`).
    Detach,
}

impl CallMode {
    /// The mode `--task` and `--detach` ask for; `--detach` implies `--task`.
    pub fn from_flags(task: bool, detach: bool) -> Self {
        match (task, detach) {
            (_, true) => CallMode::Detach,
            (true, false) => CallMode::Task,
            (false, false) => CallMode::Wait,
        }
    }
}

/// The tool's arguments: the JSON object, then the `--tool-arg` entries over its keys.
pub fn arguments(args: &str, tool_args: &[String]) -> Result<Map<String, Value>, Failure> {
    let mut arguments = parse_object(args, "arguments")?;
    arguments.extend(parse::tool_args(tool_args)?);
    Ok(arguments)
}

/// `call NAME [ARGS]`: calls the tool and prints its result (or, detached, the task's id).
pub async fn call(
    session: &Session<'_>,
    name: &str,
    args: &str,
    tool_args: &[String],
    mode: CallMode,
) -> Result<(), Failure> {
    let arguments = arguments(args, tool_args)?;
    let required = task_required(session, name).await?;
    match mode {
        CallMode::Detach => start_detached(session, name, arguments).await,
        CallMode::Task => tasks::follow(session, name, arguments).await,
        CallMode::Wait if required => tasks::follow(session, name, arguments).await,
        CallMode::Wait => wait_with_progress(session, name, arguments).await,
    }
}

/// Whether the tool only runs as a task (its taskSupport is "required").
///
/// The tool list is asked for whatever the mode: it carries the tools' output schemas, and the
/// result is checked against its tool's. A server that cannot list its tools is still called,
/// but not one that let the list time out: the call would make the user wait a second
/// --timeout.
async fn task_required(session: &Session<'_>, name: &str) -> Result<bool, Failure> {
    let tools = match session.client.tools().cancellation(session.interrupt).await {
        Ok(tools) => tools,
        Err(e @ Error::Timeout { .. }) => {
            let failure = Failure::from(e);
            return Err(Failure {
                message: format!("listing the tools: {}", failure.message),
                ..failure
            });
        }
        Err(_) => Vec::new(),
    };
    Ok(tools.iter().any(|t| {
        t.name == name
            && t.execution.as_ref().and_then(|e| e.task_support.as_deref()) == Some("required")
    }))
}

/// `call --detach`: starts the task and prints its id, for `task get|result|cancel ID`.
async fn start_detached(
    session: &Session<'_>,
    name: &str,
    arguments: Map<String, Value>,
) -> Result<(), Failure> {
    let handle = session
        .client
        .call_tool(name, Value::Object(arguments))
        .cancellation(session.interrupt)
        .start_task()
        .await?;
    session.out.task_started(handle.id())
}

/// A plain call: the server's progress notifications feed a progress bar (not with --json)
/// until the result comes.
async fn wait_with_progress(
    session: &Session<'_>,
    name: &str,
    arguments: Map<String, Value>,
) -> Result<(), Failure> {
    let bar = output::ProgressBar::new(!session.out.json);
    let progress = bar.clone();
    let result = session
        .client
        .call_tool(name, Value::Object(arguments))
        .cancellation(session.interrupt)
        .on_progress(move |p: Progress| progress.update(&p))
        .await;
    bar.finish();
    session.out.tool_result(&result?)
}
