//! `call` on a task tool: the task is created, its status messages shown in the progress bar,
//! its result printed. Ctrl-C sends `tasks/cancel` and waits for its answer before exiting 130,
//! so the server has the cancel even though the program ends right after.

use actix_mcp::{Cancellation, Client, Error};
use serde_json::{Map, Value};

use super::{output, Failure};

pub async fn follow(
    client: &Client,
    name: &str,
    args: Map<String, Value>,
    interrupt: &Cancellation,
    out: &output::Printer,
) -> Result<(), Failure> {
    let handle = client
        .call_tool(name, Value::Object(args))
        .cancellation(interrupt)
        .start_task()
        .await?;
    let bar = output::ProgressBar::new(!out.json);
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
        () = interrupt.cancelled() => {
            bar.finish();
            // Waited for: the server has the cancel before the connection closes.
            let state = handle.cancel().await;
            let reason = interrupt.reason().map(str::to_owned);
            return Err(match state {
                Ok(task) => Failure {
                    message: format!(
                        "{} (task {} {})",
                        Error::Cancelled { reason: reason.clone() },
                        task.task_id,
                        task.status.as_str()
                    ),
                    code: 130,
                },
                Err(_) => Error::Cancelled { reason: reason.clone() }.into(),
            });
        }
    };
    bar.finish();
    out.tool_result(&outcome?)
}
