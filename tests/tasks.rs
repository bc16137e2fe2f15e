//! Tasks against the demo server, a real child process, in both eras: a task call is awaited
//! like any call, and cancelling it at every moment of its life is checked at the server (its
//! counters and the journal of every line it read): `tasks/cancel` for a task, never a
//! `notifications/cancelled`, nothing at all for a call never written.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::time::Duration;

use actix_mcp::{Cancellation, Client, Error, TaskStatus};
use common::*;
use futures::StreamExt;
use serde_json::{json, Value};

async fn connected(journal: &Journal, era: &str) -> Client {
    let client = Client::connect(journal.server().args(["--era", era]))
        .await
        .unwrap();
    client.tools().await.unwrap(); // learns which tools must run as tasks
    client
}

async fn stat(client: &Client, path: &str) -> u64 {
    let stats = server_stats(client).await;
    stats.pointer(path).and_then(Value::as_u64).unwrap_or(0)
}

/// No `notifications/cancelled` ever named a task-creating call or a request about a task
/// (a `subscriptions/listen` that ends with its follow may be cancelled: it is no task).
fn no_cancel_notification(journal: &Journal) {
    let frames = journal.frames();
    let about_tasks: Vec<&Value> = frames
        .iter()
        .filter(|f| {
            let method = f["method"].as_str().unwrap_or("");
            method == "tools/call" || method.starts_with("tasks/")
        })
        .map(|f| &f["id"])
        .collect();
    let cancelled: Vec<&Value> = frames
        .iter()
        .filter(|f| f["method"] == "notifications/cancelled")
        .map(|f| &f["params"]["requestId"])
        .collect();
    assert!(
        cancelled.iter().all(|id| !about_tasks.contains(id)),
        "a task is never cancelled with notifications/cancelled: {cancelled:?}"
    );
}

/// A tool that must run as a task is run as one without asking, in both eras, and its status
/// messages reach the caller.
#[actix::test]
async fn a_required_task_tool_is_awaited_like_any_call_in_both_eras() {
    for era in ["legacy", "modern"] {
        let journal = Journal::new(&format!("tasks-required-{era}"));
        let client = connected(&journal, era).await;
        let messages = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = messages.clone();
        let result = client
            .call_tool("task_required", json!({"ms": 300, "steps": 3}))
            .on_task_status(move |task| {
                seen.lock()
                    .unwrap()
                    .push(task.status_message.clone().unwrap_or_default());
            })
            .await
            .unwrap();
        assert_eq!(result.text(), "slept 300 ms in 3 steps", "{era}");
        assert_eq!(stat(&client, "/tasks/completed").await, 1, "{era}");
        // Followed by polling, or (2026-07-28) by the status notifications it listened for.
        let followed =
            stat(&client, "/task_gets").await + stat(&client, "/task_notifications").await;
        assert!(followed >= 1, "{era}: followed");
        assert!(messages
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.starts_with("step ")));
        let created = journal
            .frames()
            .into_iter()
            .find(|f| f["method"] == "tools/call" && f["params"]["name"] == "task_required")
            .unwrap();
        if era == "legacy" {
            assert!(
                created["params"]["task"].is_object(),
                "params.task: {created}"
            );
        } else {
            let extensions = &created["params"]["_meta"]
                ["io.modelcontextprotocol/clientCapabilities"]["extensions"];
            assert!(
                extensions["io.modelcontextprotocol/tasks"].is_object(),
                "{created}"
            );
        }
        no_cancel_notification(&journal);
    }
}

/// Cancelled before the creating call is written: nothing reaches the server.
#[actix::test]
async fn cancelled_before_it_is_written_a_task_call_sends_nothing() {
    let journal = Journal::new("tasks-before-written");
    let client = connected(&journal, "legacy").await;
    let token = Cancellation::new();
    token.cancel();
    let refused = client
        .call_tool("task_sleep", json!({"ms": 60_000}))
        .as_task()
        .cancellation(&token)
        .await;
    assert!(refused.unwrap_err().is_cancelled());
    let detached = client
        .call_tool("task_sleep", json!({"ms": 60_000}))
        .cancellation(&token)
        .start_task()
        .await;
    assert!(detached.unwrap_err().is_cancelled());
    assert_eq!(stat(&client, "/tasks/created").await, 0);
    assert!(!journal.lines().iter().any(|l| l.contains("task_sleep")));
}

/// Cancelled while the creating call is in flight (the server is not reading): the caller is
/// woken at once; the call is not cancelled on the wire; once the server answers, the task it
/// made gets `tasks/cancel`: no task is left running.
#[actix::test]
async fn cancelled_while_the_creating_call_is_in_flight_the_task_it_makes_is_cancelled() {
    let journal = Journal::new("tasks-creating");
    let client = connected(&journal, "legacy").await;
    client
        .call_tool("pause_reading", json!({"ms": 700}))
        .await
        .unwrap();
    let token = Cancellation::new();
    let call = client
        .call_tool("task_sleep", json!({"ms": 60_000}))
        .as_task()
        .cancellation(&token);
    let running = tokio::spawn(std::future::IntoFuture::into_future(call));
    tokio::time::sleep(Duration::from_millis(100)).await; // written to the pipe, not read
    token.cancel();
    assert!(
        running.await.unwrap().unwrap_err().is_cancelled(),
        "woken at once"
    );
    eventually_async("the task it made is cancelled", || async {
        stat(&client, "/tasks/cancelled").await == 1
    })
    .await;
    assert_eq!(stat(&client, "/task_cancels").await, 1);
    assert_eq!(
        stat(&client, "/tasks/working").await,
        0,
        "nothing left running"
    );
    assert_eq!(stat(&client, "/cancels_for_tasks").await, 0);
    no_cancel_notification(&journal);
}

/// Cancelled while the task runs, three ways (token, dropped future, timeout): the caller is
/// woken at once and the server gets `tasks/cancel`, never `notifications/cancelled`, in both
/// eras.
#[actix::test]
async fn cancelled_while_it_runs_a_task_gets_tasks_cancel_in_both_eras() {
    for era in ["legacy", "modern"] {
        let journal = Journal::new(&format!("tasks-running-{era}"));
        let client = connected(&journal, era).await;
        let long = || {
            client
                .call_tool("task_sleep", json!({"ms": 60_000}))
                .as_task()
        };
        let until_working = |n: u64| {
            let client = client.clone();
            async move {
                eventually_async("the task runs", || async {
                    stat(&client, "/tasks/working").await == n
                })
                .await;
            }
        };

        // By token.
        let token = Cancellation::new();
        let by_token = tokio::spawn(std::future::IntoFuture::into_future(
            long().cancellation(&token),
        ));
        until_working(1).await;
        token.cancel_with_reason("enough");
        assert!(by_token.await.unwrap().unwrap_err().is_cancelled());
        eventually_async("cancelled at the server", || async {
            stat(&client, "/tasks/cancelled").await == 1
        })
        .await;

        // By dropping the future.
        let dropped = tokio::spawn(std::future::IntoFuture::into_future(long()));
        until_working(1).await;
        dropped.abort();
        eventually_async("cancelled at the server", || async {
            stat(&client, "/tasks/cancelled").await == 2
        })
        .await;

        // By timeout.
        let timed_out = long().timeout(Duration::from_millis(400)).await;
        assert!(
            matches!(timed_out, Err(Error::Timeout { .. })),
            "{era}: {timed_out:?}"
        );
        eventually_async("cancelled at the server", || async {
            stat(&client, "/tasks/cancelled").await == 3
        })
        .await;

        assert_eq!(stat(&client, "/task_cancels").await, 3, "{era}");
        assert_eq!(
            stat(&client, "/tasks/working").await,
            0,
            "{era}: none orphaned"
        );
        assert_eq!(stat(&client, "/cancels_for_tasks").await, 0, "{era}");
        no_cancel_notification(&journal);
    }
}

/// A detached task runs on without its handle, and is resumed by its id; cancelling a task
/// that already ended reports the state it ended in, without an error.
#[actix::test]
async fn a_detached_task_runs_on_and_is_resumed_by_id() {
    let journal = Journal::new("tasks-detached");
    let client = connected(&journal, "legacy").await;
    let handle = client
        .call_tool("task_sleep", json!({"ms": 300, "steps": 2}))
        .start_task()
        .await
        .unwrap();
    let id = handle.id().to_owned();
    drop(handle);
    let listed = client.list_tasks(None).await.unwrap();
    assert!(
        listed.tasks.iter().any(|t| t.task_id == id),
        "tasks/list names it"
    );
    assert_eq!(
        stat(&client, "/tasks/working").await,
        1,
        "dropping the handle cancels nothing"
    );
    let resumed = client.task(id.clone());
    let result = resumed.wait().await.unwrap();
    assert_eq!(result.text(), "slept 300 ms in 2 steps");
    assert_eq!(resumed.get().await.unwrap().status, TaskStatus::Completed);
    let after = resumed.cancel().await.unwrap();
    assert_eq!(
        after.status,
        TaskStatus::Completed,
        "the final state, no error"
    );
    assert_eq!(stat(&client, "/task_cancels_unknown_or_terminal").await, 1);
    assert_eq!(
        client.task(id).result().await.unwrap().text(),
        "slept 300 ms in 2 steps"
    );
    no_cancel_notification(&journal);
}

/// A resumed wait that is cancelled cancels the task.
#[actix::test]
async fn a_resumed_wait_cancelled_cancels_the_task() {
    let journal = Journal::new("tasks-resumed-cancel");
    let client = connected(&journal, "legacy").await;
    let handle = client
        .call_tool("task_sleep", json!({"ms": 60_000}))
        .start_task()
        .await
        .unwrap();
    let token = Cancellation::new();
    let wait = handle.wait().cancellation(&token);
    let waiting = tokio::spawn(std::future::IntoFuture::into_future(wait));
    eventually_async("polled", || async {
        stat(&client, "/task_gets").await >= 1
    })
    .await;
    token.cancel();
    assert!(waiting.await.unwrap().unwrap_err().is_cancelled());
    eventually_async("cancelled at the server", || async {
        stat(&client, "/tasks/cancelled").await == 1
    })
    .await;
    no_cancel_notification(&journal);
}

/// A server that pushes `notifications/tasks/status` is followed by them: the statuses reach
/// the caller as they come, and polling is not needed meanwhile.
#[actix::test]
async fn status_notifications_are_used_when_the_server_sends_them() {
    let client = Client::connect(demo_server().arg("--task-status-notifications"))
        .await
        .unwrap();
    client.tools().await.unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let result = client
        .call_tool("task_sleep", json!({"ms": 400, "steps": 40}))
        .as_task()
        .on_task_status(move |task| {
            record
                .lock()
                .unwrap()
                .push(task.status_message.clone().unwrap_or_default());
        })
        .await
        .unwrap();
    assert_eq!(result.text(), "slept 400 ms in 40 steps");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.len() > 10,
        "each pushed status reached the caller (polling every 100 ms would see about 4): {seen:?}"
    );
    assert!(
        stat(&client, "/task_gets").await < 4,
        "notifications every 10 ms leave no poll due"
    );
}

/// A task that needs input midway gets it from the elicitation handler, in both eras: through
/// `tasks/result` (2025-11-25: the server asks over the connection) or `tasks/update`
/// (2026-07-28: the task lists its input requests), and then completes.
#[actix::test]
async fn a_task_needing_input_midway_is_answered_by_the_handler_in_both_eras() {
    for era in ["legacy", "modern"] {
        let client = Client::builder()
            .on_form_elicitation(|form, _| async move {
                let mut content = serde_json::Map::new();
                content.insert("answer".into(), json!(format!("yes to {}", form.message)));
                Ok(actix_mcp::ElicitResult::accept(content))
            })
            .connect(demo_server().args(["--era", era]))
            .await
            .unwrap();
        client.tools().await.unwrap();
        let result = client
            .call_tool("task_input", json!({"ms": 200}))
            .timeout(Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(
            result.text(),
            "answered: yes to Continue the task?",
            "{era}"
        );
        assert_eq!(stat(&client, "/task_inputs_answered").await, 1, "{era}");
        let updates = stat(&client, "/task_updates").await;
        assert_eq!(
            updates,
            u64::from(era == "modern"),
            "{era}: tasks/update only in 2026"
        );
    }
}

/// 2026-07-28: a followed task's status is asked for with `subscriptions/listen` (`taskIds`),
/// the pushed `notifications/tasks` are used, and the subscription ends with the follow.
#[actix::test]
async fn a_modern_task_is_followed_through_a_listen_subscription_that_ends_with_it() {
    let journal = Journal::new("tasks-listen");
    let client = connected(&journal, "modern").await;
    let result = client
        .call_tool("task_sleep", json!({"ms": 300, "steps": 6}))
        .as_task()
        .await
        .unwrap();
    assert_eq!(result.text(), "slept 300 ms in 6 steps");
    let frames = journal.frames();
    let created = frames
        .iter()
        .find(|f| f["method"] == "tools/call" && f["params"]["name"] == "task_sleep")
        .unwrap();
    let listen = frames
        .iter()
        .find(|f| f["method"] == "subscriptions/listen")
        .expect("a subscription was asked for");
    let task_ids = &listen["params"]["notifications"]["taskIds"];
    assert_eq!(task_ids.as_array().map(Vec::len), Some(1), "{listen}");
    assert!(created["id"] != listen["id"]);
    assert!(
        stat(&client, "/task_notifications").await >= 1,
        "notifications were pushed"
    );
    eventually_async("the subscription ends with the follow", || async {
        stat(&client, "/listens_open").await == 0
    })
    .await;
    no_cancel_notification(&journal);
}

/// Progress the task reports under its creating call's token reaches the caller's progress
/// listener for the task's whole life, though the creating call was answered at once.
#[actix::test]
async fn a_tasks_progress_reaches_the_caller_in_both_eras() {
    for era in ["legacy", "modern"] {
        let journal = Journal::new(&format!("tasks-progress-{era}"));
        let client = connected(&journal, era).await;
        let (call, mut progress) = client
            .call_tool("task_sleep", json!({"ms": 300, "steps": 5}))
            .as_task()
            .progress_stream();
        let (call, mut statuses) = call.task_status_stream();
        let result = call.await.unwrap();
        let mut states = Vec::new();
        while let Some(task) = statuses.next().await {
            states.push(task.status);
        }
        assert_eq!(
            states.last(),
            Some(&TaskStatus::Completed),
            "{era}: {states:?}"
        );
        assert_eq!(result.text(), "slept 300 ms in 5 steps", "{era}");
        let mut seen = Vec::new();
        while let Ok(Some(p)) =
            tokio::time::timeout(Duration::from_millis(200), progress.next()).await
        {
            seen.push(p.progress);
        }
        assert!(seen.len() >= 3, "{era}: progress during the task: {seen:?}");
    }
}

/// A detached start in the 2026-07-28 era hands back the task (the server made it) rather than
/// following it to its end. Regression: the creating call used to follow the task itself, so
/// `start_task` waited for the end and then found no task.
#[actix::test]
async fn a_detached_start_in_the_modern_era_returns_at_once() {
    let journal = Journal::new("tasks-detached-modern");
    let client = connected(&journal, "modern").await;
    let handle = client
        .call_tool("task_sleep", json!({"ms": 60_000}))
        .start_task()
        .await
        .unwrap();
    assert_eq!(stat(&client, "/tasks/working").await, 1, "still running");
    let cancelled = handle.cancel().await.unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    no_cancel_notification(&journal);
}
