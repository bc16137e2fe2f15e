//! Every client method against the bundled demo server, a real child process.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::time::Duration;

use actix_mcp::{
    Cancellation, Client, CompletionReference, Error, LoggingLevel, ResourceContents,
    ServerNotification,
};
use common::*;
use futures::StreamExt;
use serde_json::{json, Map, Value};

fn args(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

#[actix::test]
async fn every_list_follows_pages_of_the_server() {
    let client = Client::connect(demo_server().args(["--page-size", "2"]))
        .await
        .unwrap();
    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 2);
    assert!(first.page.next_cursor.is_some());
    let tools = client.tools().await.unwrap();
    assert!(tools.len() > 10 && tools.iter().any(|t| t.name == "sleep"));
    let resources = client.resources().await.unwrap();
    let uris: Vec<_> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "demo://text/1",
            "demo://text/2",
            "demo://text/3",
            "demo://blob/1",
            "demo://counter"
        ]
    );
    let templates = client.resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "demo://text/{id}");
    let prompts = client.prompts().await.unwrap();
    assert_eq!(
        prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["greet", "summarize"]
    );
    assert!(prompts[0].arguments[0].is_required());
}

#[actix::test]
async fn cursor_cycles_and_endless_pages_are_stopped() {
    let cycling =
        Client::connect(demo_server().args(["--page-size", "2", "--cursor-mode", "repeat"]))
            .await
            .unwrap();
    let tools = cycling.tools().await.unwrap();
    assert!(
        !tools.is_empty(),
        "stops at the repeated cursor with what it has"
    );
    let endless =
        Client::connect(demo_server().args(["--page-size", "2", "--cursor-mode", "endless"]))
            .await
            .unwrap();
    let err = endless.tools().max_pages(5).await.unwrap_err();
    assert!(matches!(err, Error::TooManyPages { limit: 5 }), "{err:?}");
}

#[actix::test]
async fn resources_read_as_text_and_as_decoded_blobs() {
    let client = Client::connect(demo_server()).await.unwrap();
    let text = client.read_resource("demo://text/7").await.unwrap();
    assert_eq!(text.contents[0].text(), Some("text 7"));
    let blob = client.read_resource("demo://blob/1").await.unwrap();
    assert!(matches!(blob.contents[0], ResourceContents::Blob { .. }));
    assert_eq!(
        blob.contents[0].bytes().unwrap(),
        (0..=255u8).collect::<Vec<_>>()
    );
    let missing = client.read_resource("demo://nope").await.unwrap_err();
    match missing {
        Error::Server { code, data, .. } => {
            assert_eq!(code, -32002);
            assert_eq!(data.unwrap()["uri"], "demo://nope");
        }
        other => panic!("{other:?}"),
    }
}

#[actix::test]
async fn subscriptions_bring_resource_updates_and_list_changes() {
    let client = Client::connect(demo_server()).await.unwrap();
    let mut notifications = client.notifications();
    client.subscribe_resource("demo://counter").await.unwrap();
    let sent = client
        .call_tool(
            "notify",
            json!({"kind": "updated", "uri": "demo://counter"}),
        )
        .await
        .unwrap();
    assert_eq!(sent.text(), "sent");
    assert_eq!(
        notifications.next().await,
        Some(ServerNotification::ResourceUpdated {
            uri: "demo://counter".into()
        })
    );
    client.unsubscribe_resource("demo://counter").await.unwrap();
    let after = client
        .call_tool(
            "notify",
            json!({"kind": "updated", "uri": "demo://counter"}),
        )
        .await
        .unwrap();
    assert_eq!(after.text(), "not subscribed");
    client
        .call_tool("notify", json!({"kind": "prompts"}))
        .await
        .unwrap();
    assert_eq!(
        notifications.next().await,
        Some(ServerNotification::PromptsListChanged)
    );
}

#[actix::test]
async fn prompts_take_arguments_and_report_missing_ones() {
    let client = Client::connect(demo_server()).await.unwrap();
    let formal = client
        .get_prompt("greet", args(&[("name", "Ada"), ("style", "formal")]))
        .await
        .unwrap();
    assert_eq!(formal.messages[0].text(), Some("Good day Ada"));
    let err = client.get_prompt("greet", Map::new()).await.unwrap_err();
    assert!(matches!(err, Error::Server { code: -32602, .. }), "{err:?}");
}

#[actix::test]
async fn completion_uses_the_reference_the_prefix_and_the_context() {
    let client = Client::connect(demo_server()).await.unwrap();
    let styles = client
        .complete(CompletionReference::prompt("greet"), "style", "f", None)
        .await
        .unwrap();
    assert_eq!(styles.completion.values, ["formal", "friendly", "funny"]);
    let names = client
        .complete(
            CompletionReference::prompt("greet"),
            "name",
            "",
            Some(args(&[("style", "formal")])),
        )
        .await
        .unwrap();
    assert_eq!(names.completion.values, ["Dr. Smith", "Ms. Jones"]);
    let ids = client
        .complete(
            CompletionReference::resource("demo://text/{id}"),
            "id",
            "1",
            None,
        )
        .await
        .unwrap();
    assert_eq!(ids.completion.values, ["1", "10"]);
}

#[actix::test]
async fn the_logging_level_filters_log_messages() {
    let client = Client::connect(demo_server()).await.unwrap();
    let mut notifications = client.notifications();
    client
        .set_logging_level(LoggingLevel::Warning)
        .await
        .unwrap();
    let filtered = client
        .call_tool("log", json!({"level": "info", "message": "quiet"}))
        .await
        .unwrap();
    assert_eq!(filtered.text(), "filtered");
    client
        .call_tool("log", json!({"level": "error", "message": "loud"}))
        .await
        .unwrap();
    match notifications.next().await {
        Some(ServerNotification::Log(log)) => {
            assert_eq!(log.level, LoggingLevel::Error);
            assert_eq!(log.data, "loud");
        }
        other => panic!("{other:?}"),
    }
    // The same level asked for at connect: `logging/setLevel` right after the handshake.
    let from_start = Client::builder()
        .log_level(LoggingLevel::Warning)
        .connect(demo_server())
        .await
        .unwrap();
    let quiet = from_start
        .call_tool("log", json!({"level": "info", "message": "quiet"}))
        .await
        .unwrap();
    assert_eq!(quiet.text(), "filtered");
    assert_eq!(server_stats(&from_start).await["log_level"], "warning");
}

#[actix::test]
async fn a_long_call_reports_progress_and_stops_when_cancelled() {
    let client = Client::connect(demo_server()).await.unwrap();
    let (call, mut progress) = client
        .call_tool("progress", json!({"steps": 3, "interval_ms": 20}))
        .progress_stream();
    let result = call.await.unwrap();
    assert_eq!(result.text(), "done 3");
    let mut seen = Vec::new();
    while let Some(p) = progress.next().await {
        seen.push((p.progress, p.total, p.message));
    }
    assert_eq!(seen[2], (3.0, Some(3.0), Some("step 3".into())));

    let token = Cancellation::new();
    let (call, mut progress) = client
        .call_tool("progress", json!({"steps": 1000, "interval_ms": 10}))
        .cancellation(&token)
        .progress_stream();
    let call = actix_rt::spawn(async move { call.await });
    progress.next().await.unwrap();
    token.cancel_with_reason("stop");
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    let stats = server_stats(&client).await;
    assert_eq!(stats["pending"], 0);
    assert_eq!(stats["cancels_matched"], 1);
}

#[actix::test]
async fn server_requests_reach_the_handlers_and_a_server_cancel_reaches_them_too() {
    let told = Cancellation::new();
    let client = Client::builder()
        .on_sampling(|request, _| async move {
            let text = request.messages[0].content.text();
            Ok(actix_mcp::CreateMessageResult::text("echo", text))
        })
        .on_roots({
            let told = told.clone();
            move |token: Cancellation| {
                let told = told.clone();
                async move {
                    token.cancelled().await;
                    told.cancel();
                    Ok(Vec::new())
                }
            }
        })
        .connect(demo_server())
        .await
        .unwrap();
    let sampled = client.call_tool("sample", json!({})).await.unwrap();
    assert_eq!(
        sampled.structured_content.unwrap()["response"]["result"]["content"]["text"],
        "hi"
    );
    let abandoned = client
        .call_tool(
            "ask_client_then_cancel",
            json!({"method": "roots/list", "after_ms": 50}),
        )
        .await
        .unwrap();
    assert_eq!(
        abandoned.structured_content.unwrap()["response"],
        Value::Null
    );
    tokio::time::timeout(Duration::from_secs(10), told.cancelled())
        .await
        .expect("the handler was told");
    let stats = server_stats(&client).await;
    assert_eq!(stats["client_responses_after_cancel"], 0);
}

#[derive(serde::Deserialize)]
struct Sum {
    sum: f64,
}

/// Structured results are checked against their tool's outputSchema (learned from the tool list,
/// on by default): a valid one reads as a Rust type, one that breaks the schema is a typed error
/// naming where and why; the check can be switched off per call and per client.
#[cfg(feature = "output-schema")]
#[actix::test]
async fn structured_results_are_checked_against_their_output_schema() {
    let client = Client::connect(demo_server()).await.unwrap();
    let tools = client.tools().await.unwrap();
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(
        add.output_schema.as_ref().unwrap()["required"],
        json!(["sum"])
    );

    let sum: Sum = client
        .call_tool("add", json!({"a": 2, "b": 3}))
        .await
        .unwrap()
        .structured()
        .unwrap();
    assert_eq!(sum.sum, 5.0);

    match client.call_tool("add-wrong", json!({"a": 2, "b": 3})).await {
        Err(Error::InvalidOutput {
            tool,
            path,
            problem,
        }) => {
            assert_eq!(tool, "add-wrong");
            assert_eq!(path, "/sum");
            assert!(problem.contains("number"), "{problem}");
        }
        other => panic!("expected InvalidOutput, got {other:?}"),
    }
    let unchecked = client
        .call_tool("add-wrong", json!({"a": 2, "b": 3}))
        .validate_output(false)
        .await
        .unwrap();
    assert_eq!(unchecked.structured_content, Some(json!({"sum": "5"})));

    let trusting = Client::builder()
        .validate_output(false)
        .connect(demo_server())
        .await
        .unwrap();
    trusting.tools().await.unwrap();
    assert!(trusting
        .call_tool("add-wrong", json!({"a": 1, "b": 1}))
        .await
        .is_ok());
}

/// Typed calls: arguments from any serializable value (a non-object is refused before anything
/// is sent), and a generic typed request for methods the client has no method for.
#[actix::test]
async fn typed_arguments_and_typed_requests() {
    #[derive(serde::Serialize)]
    struct Addends {
        a: i32,
        b: i32,
    }
    let client = Client::connect(demo_server()).await.unwrap();
    let result = client
        .call_tool_with("add", &Addends { a: 40, b: 2 })
        .await
        .unwrap();
    assert_eq!(result.structured::<Sum>().unwrap().sum, 42.0);

    let written = client.stats().await.unwrap().requests_written;
    match client.call_tool_with("add", &[1, 2]).await {
        Err(Error::Misuse(why)) => assert!(why.contains("must be a JSON object"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        client.stats().await.unwrap().requests_written,
        written,
        "nothing was sent"
    );

    #[derive(serde::Deserialize)]
    struct Listed {
        tools: Vec<serde_json::Value>,
    }
    let listed: Listed = client.request("tools/list", ()).await.unwrap();
    assert!(listed.tools.len() > 10);
}

/// Typed handlers answer the server's requests: sampling, form and URL elicitation, roots. The
/// capabilities declared are those registered (URL-mode elicitation only with a URL handler).
#[actix::test]
async fn typed_handlers_answer_the_servers_requests() {
    use actix_mcp::{CreateMessageResult, ElicitResult, Root};
    let journal = Journal::new("typed-handlers");
    let client = Client::builder()
        .on_sampling(|request, _| async move {
            let asked = request.messages[0].content.text();
            Ok(CreateMessageResult::text(
                "typed-model",
                format!("you said {asked}"),
            ))
        })
        .on_form_elicitation(|form, _| async move {
            let mut content = serde_json::Map::new();
            content.insert("name".into(), json!(format!("answer to {}", form.message)));
            Ok(ElicitResult::accept(content))
        })
        .on_url_elicitation(|url, _| async move {
            assert!(url.url.starts_with("https://"));
            Ok(ElicitResult::accepted())
        })
        .on_roots(|_| async { Ok(vec![Root::new("file:///work", Some("work"))]) })
        .connect(journal.server())
        .await
        .unwrap();
    let declared = &journal.frames()[0]["params"]["capabilities"];
    assert_eq!(declared["elicitation"], json!({"form": {}, "url": {}}));
    assert_eq!(declared["sampling"], json!({}));
    assert_eq!(declared["roots"], json!({}));

    let ask = |method: &str, params: Value| {
        client.call_tool("ask_client", json!({"method": method, "params": params}))
    };
    let sampled = ask(
        "sampling/createMessage",
        json!({"maxTokens": 10,
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}),
    )
    .await
    .unwrap();
    let response = &sampled.structured_content.unwrap()["response"];
    assert_eq!(response["result"]["content"]["text"], "you said hi");
    assert_eq!(response["result"]["model"], "typed-model");

    let form = ask(
        "elicitation/create",
        json!({"mode": "form", "message": "name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
    )
    .await
    .unwrap();
    let result = &form.structured_content.unwrap()["response"]["result"];
    assert_eq!(
        result,
        &json!({"action": "accept", "content": {"name": "answer to name?"}})
    );

    let url = ask(
        "elicitation/create",
        json!({"mode": "url", "message": "sign in",
        "url": "https://example.com/sign-in", "elicitationId": "e1"}),
    )
    .await
    .unwrap();
    assert_eq!(
        url.structured_content.unwrap()["response"]["result"],
        json!({"action": "accept"})
    );

    let roots = ask("roots/list", json!({})).await.unwrap();
    assert_eq!(
        roots.structured_content.unwrap()["response"]["result"],
        json!({"roots": [{"uri": "file:///work", "name": "work"}]})
    );

    let refused = ask("sampling/createMessage", json!({"messages": "not a list"}))
        .await
        .unwrap();
    assert_eq!(
        refused.structured_content.unwrap()["response"]["error"]["code"],
        -32602
    );
}

/// Only a form handler: URL mode is not declared.
#[actix::test]
async fn url_elicitation_is_declared_only_with_a_url_handler() {
    let journal = Journal::new("form-only");
    let _client = Client::builder()
        .on_form_elicitation(|_, _| async { Ok(actix_mcp::ElicitResult::decline()) })
        .connect(journal.server())
        .await
        .unwrap();
    let declared = &journal.frames()[0]["params"]["capabilities"];
    assert_eq!(declared["elicitation"], json!({"form": {}}));
}
