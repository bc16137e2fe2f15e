//! The gateway over stdio in front of two demo servers (real processes, each journalling what it
//! reads): one catalogue under `server__tool` names, calls routed to their server, and every
//! cancellation carried to the upstream server, ordered after its request, whether the
//! downstream client cancels or goes away.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use std::{
    io::{BufRead, BufReader, Write},
    process::Stdio,
};

use actix_mcp::Client;
use serde_json::{json, Value};
use support::*;

#[actix_rt::test]
async fn the_config_says_which_tools_and_prompts_are_offered_and_under_what_names() {
    let offered = json!({
        "tools": {"deny": ["stats", "sleep"], "rename": {"echo": "say"}},
        "prompts": {"allow": ["greet"]},
    });
    let upstreams = Upstreams::with("offered", offered);
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    let tools = client.tools().await.expect("a list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"a__say") && names.contains(&"b__echo"),
        "{names:?}"
    );
    assert!(!names.contains(&"a__echo"), "renamed: {names:?}");
    assert!(
        !names.contains(&"a__stats") && names.contains(&"b__stats"),
        "{names:?}"
    );

    // The renamed tool reaches the server under its own name; a denied one is not routed.
    let answer = client
        .call_tool("a__say", json!({"text": "renamed"}))
        .await
        .expect("answered");
    assert_eq!(answer.text(), "renamed");
    let called: Vec<Value> = upstreams
        .read_by("a")
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].clone())
        .collect();
    assert_eq!(called, [json!("echo")]);
    assert!(client
        .call_tool("a__sleep", json!({"ms": 1}))
        .await
        .is_err());
    assert!(client
        .call_tool("a__echo", json!({"text": "x"}))
        .await
        .is_err());
    let after: usize = upstreams
        .read_by("a")
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(after, 1, "nothing denied reached the server");

    let prompts = client.prompts().await.expect("prompts");
    let prompt_names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(prompt_names.contains(&"a__greet"), "{prompt_names:?}");
    assert!(
        prompt_names.iter().filter(|n| n.starts_with("a__")).count() == 1,
        "{prompt_names:?}"
    );
}

#[actix_rt::test]
async fn a_task_passes_through_and_its_cancel_is_a_tasks_cancel_upstream() {
    let upstreams = Upstreams::new("tasks");
    let client = Client::builder()
        .era(actix_mcp::ProtocolEra::Legacy)
        .connect(upstreams.transport())
        .await
        .expect("the gateway");
    // A task that ends: created upstream, polled and its result read through the gateway.
    client
        .call_tool("a__task_sleep", json!({"ms": 20}))
        .as_task()
        .await
        .expect("the task's result");
    let read = upstreams.read_by("a");
    let created = read
        .iter()
        .find(|m| m["method"] == "tools/call" && m["params"]["task"].is_object())
        .expect("the tools/call reached the server as a task");
    assert_eq!(created["params"]["name"], "task_sleep");
    assert!(
        read.iter().any(|m| m["method"] == "tasks/result"),
        "{read:?}"
    );

    // A task cancelled downstream is cancelled upstream with tasks/cancel, under its own id.
    let token = actix_mcp::Cancellation::new();
    let call = client
        .call_tool("a__task_sleep", json!({"ms": 60_000}))
        .as_task()
        .cancellation(&token);
    let call = actix_rt::spawn(std::future::IntoFuture::into_future(call));
    until("the long task is made upstream", || {
        let read = upstreams.read_by("a");
        read.iter()
            .any(|m| m["params"]["arguments"]["ms"] == 60_000)
            .then_some(())
    })
    .await;
    token.cancel();
    let outcome = call.await.expect("joined");
    assert!(
        matches!(outcome, Err(ref e) if e.is_cancelled()),
        "{outcome:?}"
    );
    let cancel = until("tasks/cancel reaches the server", || {
        let read = upstreams.read_by("a");
        read.into_iter().find(|m| m["method"] == "tasks/cancel")
    })
    .await;
    let upstream_id = cancel["params"]["taskId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        !upstream_id.is_empty() && !upstream_id.starts_with("a."),
        "{cancel}"
    );
    let notified = upstreams
        .read_by("a")
        .into_iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .count();
    assert_eq!(notified, 0, "a task is cancelled with tasks/cancel only");
}

#[actix_rt::test]
async fn log_messages_reach_a_client_that_asked_for_them_at_their_level() {
    use actix_mcp::LoggingLevel;
    let upstreams = Upstreams::new("logging");
    let client = Client::builder()
        .era(actix_mcp::ProtocolEra::Legacy)
        .connect(upstreams.transport())
        .await
        .expect("the gateway");
    let mut notifications = client.notifications();
    client
        .set_logging_level(LoggingLevel::Warning)
        .await
        .expect("logging/setLevel is served");
    let asked = upstreams
        .read_by("a")
        .into_iter()
        .any(|m| m["method"] == "logging/setLevel" && m["params"]["level"] == "warning");
    assert!(
        asked,
        "the upstream server was asked for warnings before the answer"
    );
    for (level, message) in [("info", "below"), ("error", "above")] {
        let arguments = json!({"level": level, "message": message});
        client.call_tool("a__log", arguments).await.expect("logged");
    }
    let message = next_log(&mut notifications).await;
    assert_eq!(
        message.level,
        LoggingLevel::Error,
        "the info one is filtered"
    );
    assert_eq!(message.data, json!("above"));
    assert_eq!(
        message.logger.as_deref(),
        Some("a/demo"),
        "named after its server"
    );
}

#[actix_rt::test]
async fn the_callers_trace_context_reaches_the_upstream_server() {
    let upstreams = Upstreams::new("trace");
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut meta = serde_json::Map::new();
    meta.insert("traceparent".into(), json!(traceparent));
    meta.insert("tracestate".into(), json!("vendor=1"));
    meta.insert("io.example/private".into(), json!("not for upstream"));
    client
        .call_tool("a__echo", json!({"text": "traced"}))
        .meta(meta)
        .await
        .expect("answered");
    let call = upstreams
        .read_by("a")
        .into_iter()
        .find(|m| m["method"] == "tools/call")
        .expect("the call reached the server");
    let carried = &call["params"]["_meta"];
    assert_eq!(carried["traceparent"], traceparent, "{call}");
    assert_eq!(carried["tracestate"], "vendor=1", "{call}");
    assert!(
        carried.get("io.example/private").is_none(),
        "only the trace context: {call}"
    );
}

#[actix_rt::test]
async fn every_servers_tools_are_listed_under_its_name_and_routed_to_it() {
    let upstreams = Upstreams::new("routes");
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    let tools = client.tools().await.expect("a list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"a__echo") && names.contains(&"b__echo"),
        "{names:?}"
    );
    assert!(names.iter().all(|n| n.len() <= 64), "{names:?}");

    let answer = client
        .call_tool("b__echo", json!({"text": "to b"}))
        .await
        .expect("answered");
    assert_eq!(answer.text(), "to b");
    let calls_at = |server: &str| {
        upstreams
            .read_by(server)
            .into_iter()
            .filter(|m| m["method"] == "tools/call")
            .count()
    };
    assert_eq!((calls_at("a"), calls_at("b")), (0, 1));
    let unknown = client.call_tool("c__echo", json!({})).await;
    assert!(unknown.is_err(), "{unknown:?}");

    // Prompts by their gateway names; resources by URI, served by the first server listing it.
    let prompts = client.prompts().await.expect("prompts");
    assert!(prompts.iter().any(|p| p.name == "b__greet"), "{prompts:?}");
    let mut arguments = serde_json::Map::new();
    arguments.insert("name".into(), json!("Ada"));
    let greeting = client
        .get_prompt("b__greet", arguments)
        .await
        .expect("a prompt");
    assert!(serde_json::to_string(&greeting).unwrap().contains("Ada"));
    let resources = client.resources().await.expect("resources");
    assert!(resources.iter().any(|r| r.uri == "demo://counter"));
    client.read_resource("demo://counter").await.expect("read");
    let reads_at = |server: &str| {
        upstreams
            .read_by(server)
            .into_iter()
            .filter(|m| m["method"] == "resources/read" || m["method"] == "prompts/get")
            .map(|m| m["method"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(reads_at("a"), ["resources/read"]);
    assert_eq!(reads_at("b"), ["prompts/get"]);
    client.shutdown().await;
}

#[actix_rt::test]
async fn a_downstream_cancel_reaches_the_upstream_server_after_its_request() {
    let upstreams = Upstreams::new("cancel");
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    let cancelled = cancel_a_sleep(&client, &upstreams).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("the user left"), "{cancelled}");
    client.shutdown().await;
}

/// A downstream client that goes away (its stdin closed, mid-call): the gateway cancels the call
/// upstream before it exits, and the servers are stopped.
#[actix_rt::test]
async fn a_downstream_client_that_goes_away_cancels_its_calls_upstream() {
    let upstreams = Upstreams::new("gone");
    let (mut gateway, mut stdin, stdout) = initialized_raw(&upstreams);
    let mut stdout = BufReader::new(stdout);
    let mut send = |message: Value| writeln!(&mut stdin, "{message}").expect("written");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the initialize answer");
    assert!(line.contains("actix-mcp-gateway"), "{line}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "a__sleep", "arguments": {"ms": 60_000}}}));
    let id = upstream_call(&upstreams, "a", "sleep").await;
    // The downstream client goes away.
    drop(stdin);
    let status = until("the gateway exits", || gateway.try_wait().expect("status")).await;
    assert!(status.success(), "{status}");
    let cancelled = cancel_after_request(&upstreams, "a", &id).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("went away"), "{cancelled}");
}

/// A call with a progress token: the upstream server's progress reaches the downstream client
/// under the downstream's own token, then the answer.
#[actix_rt::test]
async fn upstream_progress_reaches_the_downstream_client() {
    let upstreams = Upstreams::new("progress");
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    assert_eq!(progress_of(&client, "a__progress").await, 3);
    client.shutdown().await;
}

/// An upstream server's `tools/list_changed` reaches the downstream client.
#[actix_rt::test]
async fn an_upstream_list_changed_reaches_the_downstream_client() {
    let upstreams = Upstreams::new("changed");
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    let mut notifications = client.notifications();
    client
        .call_tool("a__notify", json!({"kind": "tools"}))
        .await
        .expect("sent");
    let changed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match notifications.next().await {
                Some(actix_mcp::ServerNotification::ToolsListChanged) => return true,
                Some(_) => continue,
                None => return false,
            }
        }
    })
    .await;
    assert_eq!(changed, Ok(true));
    client.shutdown().await;
}

/// An upstream server that crashes is restarted by the gateway's supervision: the next call to
/// it is answered, by its new process, and the other server never noticed.
#[actix_rt::test]
async fn an_upstream_that_crashes_is_restarted_and_served_again() {
    let upstreams = Upstreams::new("restart");
    let client = Client::connect(upstreams.transport())
        .await
        .expect("the gateway");
    let pid = |answer: actix_mcp::CallToolResult| answer.text();
    let before = pid(client.call_tool("a__pid", json!({})).await.expect("a pid"));
    let crashed = client.call_tool("a__crash", json!({})).await;
    assert!(crashed.is_err(), "{crashed:?}");
    let after = until_answered(&client, "a__pid").await;
    assert_ne!(before, after, "a new process");
    let b = client
        .call_tool("b__echo", json!({"text": "still here"}))
        .await
        .expect("b answers");
    assert_eq!(b.text(), "still here");
    client.shutdown().await;
}

/// Calls `tool` until it is answered (the server is being restarted meanwhile); its text.
async fn until_answered(client: &Client, tool: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(answer) = client.call_tool(tool, json!({})).await {
            return answer.text();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{tool} never answered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A client that stops reading its stdout while the gateway has more for it (here a flood of
/// upstream logs) is taken as gone: its call is cancelled upstream and the gateway ends, rather
/// than holding all it cannot deliver.
#[actix_rt::test]
async fn a_client_that_stops_reading_its_stdout_is_taken_as_gone() {
    let upstreams = Upstreams::new("stdio-unread");
    // Its stdout never read: the pipe fills, then what waits behind it.
    let (mut gateway, mut stdin, _stdout) = initialized_raw(&upstreams);
    let mut send = |message: Value| writeln!(&mut stdin, "{message}").expect("written");
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
        "params": {"level": "debug"}}),
    );
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "a__sleep", "arguments": {"ms": 60_000}}}));
    let id = upstream_call(&upstreams, "a", "sleep").await;
    for n in 0..8 {
        send(
            json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
            "params": {"name": "b__flood", "arguments": {"count": 1000, "size": 65_536}}}),
        );
    }
    let status = until("the gateway exits", || gateway.try_wait().expect("status")).await;
    assert!(status.success(), "{status}");
    let cancelled = cancel_after_request(&upstreams, "a", &id).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("did not read its stdout"), "{cancelled}");
}

/// The gateway over stdio as a raw client drives it, `initialize` sent: the process and its
/// pipes.
fn initialized_raw(
    upstreams: &Upstreams,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::process::ChildStdout,
) {
    let mut gateway = upstreams
        .gateway()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let mut stdin = gateway.stdin.take().unwrap();
    let stdout = gateway.stdout.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    writeln!(&mut stdin, "{initialize}").expect("written");
    (gateway, stdin, stdout)
}
