//! Tasks: `call` on a task tool, and `task get|result|cancel ID` on one started before.
//!
//! A followed task has its status messages shown in the progress bar and its result printed.
//! Ctrl-C sends `tasks/cancel` and waits for its answer before exiting 130, so the server has
//! the cancel even though the program ends right after.

use actix_mcp::{Error, TaskHandle};
use serde_json::{Map, Value};

use super::Session;
use crate::args::TaskAction;
use crate::{output, Failure};

/// `task get|result|cancel ID`: a task's state, its result (waited for), or its cancel.
pub async fn act(session: &Session<'_>, action: TaskAction, id: &str) -> Result<(), Failure> {
    let handle = session.client.task(id);
    match action {
        TaskAction::Get => session.out.task(&handle.get().await?),
        TaskAction::Cancel => session.out.task(&handle.cancel().await?),
        TaskAction::Result => {
            let result = tokio::select! {
                result = handle.wait() => result?,
                () = session.interrupt.cancelled() => return Err(session.interrupted()),
            };
            session.out.tool_result(&result)
        }
    }
}

/// `call` as a task: started, followed to its end, its result printed.
pub async fn follow(
    session: &Session<'_>,
    name: &str,
    args: Map<String, Value>,
) -> Result<(), Failure> {
    let handle = session
        .client
        .call_tool(name, Value::Object(args))
        .cancellation(session.interrupt)
        .start_task()
        .await?;
    let bar = output::ProgressBar::new(!session.out.json);
    let work = async {
        loop {
            let task = handle.get().await?;
            bar.status(&format!(
                "{}{}",
                task.status.as_str(),
                task.status_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ));
            if task.status.is_terminal() {
                return handle.result().await;
            }
            tokio::time::sleep(task.poll_interval()).await;
        }
    };
    let outcome = tokio::select! {
        outcome = work => outcome,
        () = session.interrupt.cancelled() => {
            bar.finish();
            return Err(cancel(session, &handle).await);
        }
    };
    bar.finish();
    session.out.tool_result(&outcome?)
}

/// Ctrl-C during a followed task: `tasks/cancel`, waited for so that the server has the cancel
/// before the connection closes; the failure (exit 130) names the state the task ends in.
async fn cancel(session: &Session<'_>, handle: &TaskHandle) -> Failure {
    let state = handle.cancel().await;
    let reason = session.interrupt.reason().map(str::to_owned);
    match state {
        Ok(task) => Failure {
            message: format!(
                "{} (task {} {})",
                Error::Cancelled { reason },
                task.task_id,
                task.status.as_str()
            ),
            code: 130,
        },
        Err(_) => Error::Cancelled { reason }.into(),
    }
}
