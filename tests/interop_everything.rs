//! Interop with the official reference server, `@modelcontextprotocol/server-everything`
//! (npm, pinned; see `common/everything.rs` for how it is installed), over stdio and over
//! Streamable HTTP (its `streamableHttp` mode, on 127.0.0.1). Each check runs on both.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

mod common;

use actix_mcp::protocol::form_schema::PrimitiveSchema;
#[cfg(feature = "http")]
use actix_mcp::HttpTransport;
use actix_mcp::{Cancellation, Client, Error, ServerNotification, StdioTransport, Transport};
use common::eventually_async;
#[cfg(feature = "http")]
use common::everything::http_everything;
use common::everything::server_script;
use futures::StreamExt;
use serde_json::{json, Map, Value};

fn stdio() -> StdioTransport {
    StdioTransport::new("node")
        .arg(server_script())
        .arg("stdio")
}

/// Minimal arguments that work for each tool of the pinned version.
fn arguments_for(tool: &str) -> Value {
    match tool {
        "echo" => json!({"message": "hi"}),
        "get-annotated-message" => json!({"messageType": "success"}),
        "get-structured-content" => json!({"location": "Chicago"}),
        "get-sum" => json!({"a": 1, "b": 2}),
        "gzip-file-as-resource" => {
            json!({"name": "x.gz", "data": "data:text/plain;base64,aGVsbG8="})
        }
        "trigger-long-running-operation" => json!({"duration": 0.2, "steps": 2}),
        "trigger-sampling-request" => json!({"prompt": "hello"}),
        "trigger-sampling-request-async" => json!({"prompt": "hello async"}),
        "simulate-research-query" => json!({"topic": "x"}),
        "trigger-url-elicitation" => json!({"url": "https://example.com/sign-in"}),
        _ => json!({}),
    }
}

async fn connect_with_handlers(transport: impl Transport, roots_asked: Arc<AtomicUsize>) -> Client {
    // The typed handlers: what the reference server sends must read as the crate's types.
    Client::builder()
        .on_roots(move |_| {
            roots_asked.fetch_add(1, Ordering::SeqCst);
            async { Ok(vec![actix_mcp::Root::new("file:///tmp", Some("tmp"))]) }
        })
        .on_sampling(|request, _| async move {
            let asked = request.messages[0].content.text();
            Ok(actix_mcp::CreateMessageResult::text(
                "actix-mcp-test",
                format!("sampled: {asked}"),
            ))
        })
        .on_form_elicitation(|form, _| async move {
            // Every field answered from its typed schema: a string "Bob", the first choice of
            // an enum, a number's default or minimum, true for a checkbox.
            let mut content = serde_json::Map::new();
            for (name, field) in &form.requested_schema.properties {
                let value = match field {
                    PrimitiveSchema::String(_) => json!("Bob"),
                    PrimitiveSchema::Number(n) => {
                        json!(n.default.clone().or(n.minimum.clone()).unwrap_or(1.into()))
                    }
                    PrimitiveSchema::Boolean(_) => json!(true),
                    PrimitiveSchema::SingleSelect(_) => json!(field.choices()[0].0),
                    PrimitiveSchema::MultiSelect(_) => json!([field.choices()[0].0]),
                    PrimitiveSchema::Other(other) => panic!("untyped field {name}: {other}"),
                    _ => panic!("a field kind this test does not know: {name}"),
                };
                content.insert(name.clone(), value);
            }
            Ok(actix_mcp::ElicitResult::accept(content))
        })
        .on_url_elicitation(|url, _| async move {
            assert!(!url.url.is_empty());
            Ok(actix_mcp::ElicitResult::accepted())
        })
        .connect(transport)
        .await
        .expect("connect to server-everything")
}

#[actix::test]
async fn every_tool_of_the_reference_server_answers_over_stdio() {
    every_tool_answers(stdio()).await;
}

#[cfg(feature = "http")]
#[actix::test]
async fn every_tool_of_the_reference_server_answers_over_http() {
    let server = http_everything();
    every_tool_answers(HttpTransport::new(&server.url)).await;
}

async fn every_tool_answers(transport: impl Transport) {
    let roots_asked = Arc::new(AtomicUsize::new(0));
    let client = connect_with_handlers(transport, roots_asked.clone()).await;
    assert_eq!(client.server_info().name, "mcp-servers/everything");
    assert_eq!(client.protocol_version(), "2025-11-25");

    let tools = client.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "echo",
        "get-sum",
        "trigger-long-running-operation",
        "trigger-sampling-request",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    for tool in &tools {
        let result = client
            .call_tool(&tool.name, arguments_for(&tool.name))
            .timeout(Duration::from_secs(20))
            .await;
        match result {
            // Task-only tools (simulate-research-query) are run as tasks without asking.
            Ok(result) => assert!(!result.failed(), "{}: {:?}", tool.name, result.content),
            // A URL-mode elicitation the server wants completed first.
            Err(Error::UrlElicitationRequired { .. }) if tool.name.contains("url-elicitation") => {}
            Err(e) => panic!("{}: {e}", tool.name),
        }
    }
    let echo = client
        .call_tool("echo", json!({"message": "ping?"}))
        .await
        .unwrap();
    assert!(echo.text().contains("ping?"));
    let sum = client
        .call_tool("get-sum", json!({"a": 40, "b": 2}))
        .await
        .unwrap();
    assert!(sum.text().contains("42"));
    let sampled = client
        .call_tool("trigger-sampling-request", json!({"prompt": "hello"}))
        .await
        .unwrap();
    let text = sampled.text();
    assert!(
        text.contains("sampled: ") && text.contains("hello"),
        "{text}"
    );
    let elicited = client
        .call_tool("trigger-elicitation-request", json!({}))
        .await
        .unwrap();
    assert!(elicited.text().contains("Bob"), "{:?}", elicited.content);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while roots_asked.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server asked for roots"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let roots = client.call_tool("get-roots-list", json!({})).await.unwrap();
    assert!(roots.text().contains("file:///tmp"), "{:?}", roots.content);

    // URL-mode elicitation by the error path: -32042 as a typed error naming the URL; the
    // same call again goes the request path, answered by the URL handler.
    let arguments = json!({"url": "https://example.com/consent", "elicitationId": "e-1",
        "errorPath": true});
    let error = client
        .call_tool("trigger-url-elicitation", arguments.clone())
        .await
        .unwrap_err();
    let actix_mcp::Error::UrlElicitationRequired {
        elicitations: wanted,
        ..
    } = error
    else {
        panic!("not a URL elicitation error: {error:?}");
    };
    assert_eq!(wanted.len(), 1);
    assert!(wanted[0].url.starts_with("https://"), "{:?}", wanted[0]);
    let retried = client
        .call_tool("trigger-url-elicitation", arguments)
        .await
        .unwrap();
    assert!(!retried.failed(), "{:?}", retried.content);
}

#[actix::test]
async fn every_resource_and_prompt_of_the_reference_server_reads_over_stdio() {
    every_resource_and_prompt_reads(stdio()).await;
}

#[cfg(feature = "http")]
#[actix::test]
async fn every_resource_and_prompt_of_the_reference_server_reads_over_http() {
    let server = http_everything();
    every_resource_and_prompt_reads(HttpTransport::new(&server.url)).await;
}

async fn every_resource_and_prompt_reads(transport: impl Transport) {
    let client = Client::connect(transport).await.unwrap();
    let resources = client.resources().await.unwrap();
    assert!(!resources.is_empty());
    for resource in &resources {
        let read = client.read_resource(&resource.uri).await.unwrap();
        assert!(!read.contents.is_empty(), "{}", resource.uri);
        read.contents[0].bytes().unwrap();
    }
    let templates = client.resource_templates().await.unwrap();
    for template in &templates {
        let uri = template.uri_template.replace("{resourceId}", "1");
        let read = client.read_resource(&uri).await.unwrap();
        assert!(!read.contents[0].bytes().unwrap().is_empty(), "{uri}");
    }
    let prompts = client.prompts().await.unwrap();
    assert!(!prompts.is_empty());
    for prompt in &prompts {
        let args: Map<String, Value> = prompt
            .arguments
            .iter()
            .filter(|a| a.is_required())
            .map(|a| {
                let value = match a.name.as_str() {
                    "department" => "Engineering",
                    "resourceType" => "Text",
                    "resourceId" => "1",
                    "name" => "Alice",
                    _ => "Paris",
                };
                (a.name.clone(), json!(value))
            })
            .collect();
        let got = client.get_prompt(&prompt.name, args).await.unwrap();
        assert!(!got.messages.is_empty(), "{}", prompt.name);
    }
}

#[actix::test]
async fn the_long_running_operation_reports_progress_and_is_cancelled_over_stdio() {
    long_running_operation_progress_and_cancel(stdio(), true).await;
}

#[cfg(feature = "http")]
#[actix::test]
async fn the_long_running_operation_reports_progress_and_is_cancelled_over_http() {
    let server = http_everything();
    // Over HTTP the client closes the request's stream once the cancel is accepted: the
    // progress the server still sends never arrives.
    long_running_operation_progress_and_cancel(HttpTransport::new(&server.url), false).await;
}

async fn long_running_operation_progress_and_cancel(
    transport: impl Transport,
    late_progress: bool,
) {
    let client = Client::connect(transport).await.unwrap();
    let token = Cancellation::new();
    let (call, mut progress) = client
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 4, "steps": 8}),
        )
        .cancellation(&token)
        .progress_stream();
    let call = actix_rt::spawn(async move { call.await });
    let first = tokio::time::timeout(Duration::from_secs(10), progress.next())
        .await
        .expect("progress within 10 s")
        .expect("progress");
    assert_eq!(first.total, Some(8.0));
    token.cancel_with_reason("enough");
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    // This server keeps sending progress after a cancel; what arrives is dropped, and the
    // connection stays usable.
    if late_progress {
        eventually_async("late progress to arrive and be dropped", || async {
            client.stats().await.unwrap().progress_dropped >= 1
        })
        .await;
    }
    client.ping().await.unwrap();
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.cancels_sent, 1);
    assert_eq!(stats.late_responses, 0, "a cancelled request got no answer");
}

#[actix::test]
async fn log_messages_from_the_reference_server_reach_subscribers_over_stdio() {
    log_messages_reach_subscribers(stdio()).await;
}

#[cfg(feature = "http")]
#[actix::test]
async fn log_messages_from_the_reference_server_reach_subscribers_over_http() {
    let server = http_everything();
    log_messages_reach_subscribers(HttpTransport::new(&server.url)).await;
}

async fn log_messages_reach_subscribers(transport: impl Transport) {
    let client = Client::connect(transport).await.unwrap();
    let mut notifications = client.notifications();
    client
        .call_tool("toggle-simulated-logging", json!({}))
        .await
        .unwrap();
    let log = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(ServerNotification::Log(log)) = notifications.next().await {
                return log;
            }
        }
    })
    .await
    .expect("a log message within 10 s");
    assert!(!log.data.is_null());
}

/// The reference server's research tool requires a task; asked with `ambiguous: true`, it
/// needs input midway: its elicitation reaches the typed handler through `tasks/result`, and
/// the report comes back.
#[actix::test]
async fn the_research_task_runs_and_asks_the_elicitation_handler_when_ambiguous() {
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let client = Client::builder()
        .on_form_elicitation(move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                let mut content = serde_json::Map::new();
                content.insert("interpretation".into(), json!("technical"));
                Ok(actix_mcp::ElicitResult::accept(content))
            }
        })
        .connect(stdio())
        .await
        .unwrap();
    client.tools().await.unwrap();
    let statuses = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = statuses.clone();
    let report = client
        .call_tool(
            "simulate-research-query",
            json!({"topic": "actix", "ambiguous": true}),
        )
        .on_task_status(move |task| seen.lock().unwrap().push(task.status.as_str().to_owned()))
        .timeout(Duration::from_secs(60))
        .await
        .unwrap();
    assert!(!report.failed(), "{:?}", report.content);
    assert!(report.text().contains("actix"), "{}", report.text());
    assert!(
        asked.load(Ordering::SeqCst) >= 1,
        "the elicitation handler was asked"
    );
    assert!(!statuses.lock().unwrap().is_empty());
}

/// The server asks for sampling and elicitation **as tasks** (2025-11-25): the client answers
/// with a task at once, runs the typed handler, and serves the server's `tasks/get` and
/// `tasks/result`; the tools report the handlers' answers.
#[actix::test]
async fn the_servers_task_augmented_requests_run_as_client_tasks() {
    let client = connect_with_handlers(stdio(), Arc::new(AtomicUsize::new(0))).await;
    let tools = client.tools().await.unwrap();
    for expected in [
        "trigger-sampling-request-async",
        "trigger-elicitation-request-async",
    ] {
        assert!(
            tools.iter().any(|t| t.name == expected),
            "offered once the client declares tasks: {expected}"
        );
    }
    let sampled = client
        .call_tool(
            "trigger-sampling-request-async",
            json!({"prompt": "hello async"}),
        )
        .timeout(Duration::from_secs(60))
        .await
        .unwrap();
    let text = sampled.text();
    assert!(!sampled.failed(), "{text}");
    assert!(
        text.contains("sampled: ") && text.contains("hello async"),
        "{text}"
    );
    assert!(!text.contains("[SYNC]"), "answered as a task: {text}");

    let elicited = client
        .call_tool("trigger-elicitation-request-async", json!({}))
        .timeout(Duration::from_secs(60))
        .await
        .unwrap();
    let text = elicited.text();
    assert!(!elicited.failed(), "{text}");
    assert!(text.contains("Bob"), "{text}");
}
