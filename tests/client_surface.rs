//! The client surface against a scripted peer: pagination, progress, timeouts, server requests,
//! notifications.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use actix_mcp::transport::memory::{self, MemoryPeer};
use actix_mcp::{
    Cancellation, Client, ConnectOptions, CreateMessageResult, ElicitResult, Error, HandlerError,
    Progress, Root, ServerNotification,
};
use futures::StreamExt;
use serde_json::{json, Value};
use std::future::IntoFuture;

mod common;
use common::eventually;

async fn connected_with(options: ConnectOptions) -> (Client, MemoryPeer, Value) {
    let (transport, mut peer) = memory::pair();
    let server = async move {
        let init = peer
            .accept_handshake("2025-11-25")
            .await
            .expect("handshake");
        (peer, init)
    };
    let (client, (peer, init)) = futures::join!(options.connect(transport), server);
    (client.expect("connect"), peer, init)
}

async fn connected() -> (Client, MemoryPeer) {
    let (client, peer, _) = connected_with(Client::builder()).await;
    (client, peer)
}

async fn expect_frame(peer: &mut MemoryPeer) -> Value {
    tokio::time::timeout(Duration::from_secs(10), peer.recv())
        .await
        .expect("a frame within 10 s")
        .expect("transport open")
}

fn respond(peer: &MemoryPeer, request: &Value, result: Value) {
    peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
}

fn tools_page(names: &[&str], next: Option<&str>) -> Value {
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
        .collect();
    match next {
        Some(c) => json!({"tools": tools, "nextCursor": c}),
        None => json!({"tools": tools}),
    }
}

#[actix::test]
async fn all_pages_follow_cursors_in_order() {
    let (client, mut peer) = connected().await;
    let all = actix_rt::spawn({
        let client = client.clone();
        async move { client.tools().await }
    });
    let first = expect_frame(&mut peer).await;
    assert_eq!(first["method"], "tools/list");
    assert!(first.get("params").is_none(), "no cursor on the first page");
    respond(&peer, &first, tools_page(&["a", "b"], Some("c1")));
    let second = expect_frame(&mut peer).await;
    assert_eq!(second["params"]["cursor"], "c1");
    respond(&peer, &second, tools_page(&["c"], None));
    let names: Vec<String> = all
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[actix::test]
async fn a_repeated_cursor_stops_the_loop() {
    let (client, mut peer) = connected().await;
    let all = actix_rt::spawn({
        let client = client.clone();
        async move { client.tools().await }
    });
    let first = expect_frame(&mut peer).await;
    respond(&peer, &first, tools_page(&["a"], Some("loop")));
    let second = expect_frame(&mut peer).await;
    respond(&peer, &second, tools_page(&["b"], Some("loop")));
    let names: Vec<String> = all
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[actix::test]
async fn the_page_cap_fails_with_a_clear_error() {
    let (client, mut peer) = connected().await;
    let all = actix_rt::spawn({
        let client = client.clone();
        async move { client.tools().max_pages(3).await }
    });
    for i in 0..3 {
        let page = expect_frame(&mut peer).await;
        respond(&peer, &page, tools_page(&["t"], Some(&format!("c{i}"))));
    }
    let err = all.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::TooManyPages { limit: 3 }), "{err:?}");
    assert!(err.to_string().contains("more than 3 pages"));
}

#[actix::test]
async fn cancelling_mid_way_fails_without_a_partial_list() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    let all = actix_rt::spawn({
        let (client, token) = (client.clone(), token.clone());
        async move { client.prompts().cancellation(&token).await }
    });
    let first = expect_frame(&mut peer).await;
    respond(
        &peer,
        &first,
        json!({"prompts": [{"name": "p"}], "nextCursor": "n"}),
    );
    let second = expect_frame(&mut peer).await;
    token.cancel_with_reason("enough");
    let err = all.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Cancelled { reason: Some(ref r) } if r == "enough"));
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["params"]["requestId"], second["id"]);
}

#[actix::test]
async fn progress_reaches_its_own_request_only_while_it_runs() {
    let (client, mut peer) = connected().await;
    let seen = Arc::new(Mutex::new(Vec::<Progress>::new()));
    let with_progress = actix_rt::spawn({
        let (client, seen) = (client.clone(), seen.clone());
        async move {
            client
                .call_tool("work", json!({}))
                .on_progress(move |p| seen.lock().unwrap().push(p))
                .await
        }
    });
    let (plain_call, mut plain_progress) = client.request::<Value>("other", ()).progress_stream();
    let plain = actix_rt::spawn(async move { plain_call.await });
    let mut requests = [expect_frame(&mut peer).await, expect_frame(&mut peer).await];
    requests.sort_by_key(|r| r["method"].as_str().map(str::to_owned));
    let (other, work) = (&requests[0], &requests[1]);
    let token = &work["params"]["_meta"]["progressToken"];
    assert_eq!(token, &work["id"], "the token is the request id");
    assert_eq!(other["params"]["_meta"]["progressToken"], other["id"]);

    for i in 1..=3 {
        peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": i, "total": 3, "message": format!("step {i}")}}));
    }
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": other["id"], "progress": 0.5}}),
    );
    respond(&peer, work, json!({"content": []}));
    with_progress.await.unwrap().unwrap();
    // After the request finished, its progress is dropped.
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": token, "progress": 4}}),
    );
    client.stats().await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[2],
        Progress {
            progress: 3.0,
            total: Some(3.0),
            message: Some("step 3".into())
        }
    );
    assert_eq!(plain_progress.next().await.unwrap().progress, 0.5);
    respond(&peer, other, json!({}));
    plain.await.unwrap().unwrap();
    assert_eq!(
        plain_progress.next().await,
        None,
        "the stream ends with its request"
    );
    assert_eq!(client.stats().await.unwrap().progress_dropped, 1);
}

#[actix::test]
async fn no_progress_token_is_sent_when_nobody_listens() {
    let (client, mut peer) = connected().await;
    let call = actix_rt::spawn({
        let client = client.clone();
        async move { client.call_tool("x", json!({"a": 1})).await }
    });
    let request = expect_frame(&mut peer).await;
    assert_eq!(
        request["params"],
        json!({"name": "x", "arguments": {"a": 1}})
    );
    respond(&peer, &request, json!({"content": []}));
    call.await.unwrap().unwrap();
}

#[actix::test]
async fn meta_is_merged_into_params() {
    let (client, mut peer) = connected().await;
    let mut meta = serde_json::Map::new();
    meta.insert("traceparent".into(), json!("00-abc-def-01"));
    let call = actix_rt::spawn({
        let client = client.clone();
        async move { client.ping().meta(meta).await }
    });
    let request = expect_frame(&mut peer).await;
    assert_eq!(
        request["params"],
        json!({"_meta": {"traceparent": "00-abc-def-01"}})
    );
    respond(&peer, &request, json!({}));
    call.await.unwrap().unwrap();
}

#[actix::test]
async fn progress_restarts_the_timeout_but_the_total_cap_still_holds() {
    let (client, mut peer) = connected().await;
    let call = actix_rt::spawn({
        let client = client.clone();
        async move {
            client
                .request::<Value>("long", ())
                .timeout(Duration::from_millis(300))
                .reset_timeout_on_progress()
                .max_total_timeout(Duration::from_secs(30))
                .await
        }
    });
    let request = expect_frame(&mut peer).await;
    let token = request["params"]["_meta"]["progressToken"].clone();
    // Progress every 100 ms for 900 ms: three times the timeout, but it never goes quiet.
    for i in 1..=9 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peer.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": i}}),
        );
    }
    respond(&peer, &request, json!({"done": true}));
    assert_eq!(call.await.unwrap().unwrap(), json!({"done": true}));
}

/// TypeScript SDK #2695: the maximum total time must hold even when no progress ever arrives.
#[actix::test]
async fn the_total_cap_fires_without_any_progress() {
    let (client, mut peer) = connected().await;
    let call = actix_rt::spawn({
        let client = client.clone();
        async move {
            client
                .request::<Value>("silent", ())
                .timeout(Duration::from_secs(30))
                .reset_timeout_on_progress()
                .max_total_timeout(Duration::from_millis(100))
                .await
        }
    });
    let request = expect_frame(&mut peer).await;
    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Timeout { after } if after == Duration::from_millis(100)));
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["params"]["requestId"], request["id"]);
}

#[actix::test]
async fn the_connection_default_timeout_applies_and_a_call_can_opt_out() {
    let options = Client::builder().request_timeout(Duration::from_millis(50));
    let (client, mut peer, _) = connected_with(options).await;
    let err = client.ping().await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    let _ping = expect_frame(&mut peer).await;
    let _cancel = expect_frame(&mut peer).await;
    let patient = actix_rt::spawn({
        let client = client.clone();
        async move { client.ping().no_timeout().await }
    });
    let request = expect_frame(&mut peer).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    respond(&peer, &request, json!({}));
    patient.await.unwrap().unwrap();
}

#[actix::test]
async fn capabilities_declare_exactly_the_registered_handlers() {
    let (_client, _peer, init) = connected_with(Client::builder()).await;
    assert_eq!(init["capabilities"], json!({}));
    let options = Client::builder()
        .on_roots(|_| async { Ok(Vec::new()) })
        .on_form_elicitation(|_, _| async { Ok(ElicitResult::decline()) });
    let (_client, _peer, init) = connected_with(options).await;
    // An elicitation handler can also run as a task the server asks for (2025-11-25).
    assert_eq!(
        init["capabilities"],
        json!({"roots": {}, "elicitation": {"form": {}},
            "tasks": {"list": {}, "cancel": {}, "requests": {"elicitation": {"create": {}}}}})
    );
}

#[actix::test]
async fn server_requests_go_to_their_handlers_off_the_actor() {
    let options = Client::builder()
        .on_roots(|_| async {
            let root: Root = serde_json::from_value(json!({"uri": "file:///tmp", "name": "tmp"}))?;
            Ok(vec![root])
        })
        .on_sampling(|request, _| async move {
            // Slow: the connection keeps routing while it runs.
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(CreateMessageResult::text(
                "m",
                request.messages[0].content.text(),
            ))
        })
        .on_form_elicitation(|_, _| async { Err(HandlerError::new(-1, "user refused")) });
    let (client, mut peer, _) = connected_with(options).await;

    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}}));
    peer.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "roots/list"}));
    peer.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create",
        "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}}),
    );
    // While sampling sleeps, one of our requests completes.
    let ping = actix_rt::spawn({
        let client = client.clone();
        async move { client.ping().await }
    });
    let mut answers = Vec::new();
    let mut ping_answered = false;
    while answers.len() < 3 {
        let frame = expect_frame(&mut peer).await;
        if frame["method"] == "ping" {
            respond(&peer, &frame, json!({}));
            ping_answered = answers.len() < 3;
            continue;
        }
        answers.push(frame);
    }
    ping.await.unwrap().unwrap();
    assert!(ping_answered);
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).unwrap().clone();
    assert_eq!(by_id(2)["result"]["roots"][0]["name"], "tmp");
    assert_eq!(by_id(3)["error"]["code"], -1);
    assert_eq!(by_id(3)["error"]["message"], "user refused");
    assert_eq!(by_id(1)["result"]["content"]["text"], "hi");
    assert_eq!(
        answers.last().unwrap()["id"],
        1,
        "the slow handler answered last"
    );
}

/// A raw handler answers a method no typed handler covers, and takes a covered one from its
/// typed handler; a method nobody answers is refused with -32601. Typed params that do not read
/// are refused with -32602 without calling the handler.
#[actix::test]
async fn a_raw_handler_answers_any_method_and_overrides_a_typed_one() {
    let options = Client::builder()
        .on_sampling(|_, _| async { Ok(CreateMessageResult::text("typed", "typed")) })
        .on_form_elicitation(|_, _| async { Ok(ElicitResult::decline()) })
        .on_request_raw("sampling/createMessage", |params, _| async move {
            Ok(json!({"role": "assistant", "model": "raw", "echo": params}))
        })
        .on_request_raw(
            "x/custom",
            |params, _| async move { Ok(json!({"got": params})) },
        );
    let (_client, mut peer, init) = connected_with(options).await;
    assert_eq!(init["capabilities"]["sampling"], json!({}));

    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "x/custom", "params": {"a": 1}}));
    let custom = expect_frame(&mut peer).await;
    assert_eq!(custom["result"], json!({"got": {"a": 1}}));
    peer.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 1}}),
    );
    let sampled = expect_frame(&mut peer).await;
    assert_eq!(sampled["result"]["model"], "raw");
    peer.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "x/unknown"}));
    assert_eq!(expect_frame(&mut peer).await["error"]["code"], -32601);
    peer.send(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "elicitation/create",
        "params": {"message": 5}}),
    );
    assert_eq!(expect_frame(&mut peer).await["error"]["code"], -32602);
}

#[actix::test]
async fn a_server_cancel_tells_the_handler_and_suppresses_its_answer() {
    let told = Cancellation::new();
    let options = Client::builder().on_request_raw("sampling/createMessage", {
        let told = told.clone();
        move |_, token: Cancellation| {
            let told = told.clone();
            async move {
                token.cancelled().await;
                told.cancel_with_reason(token.reason().unwrap_or_default());
                Ok(json!({"too": "late"}))
            }
        }
    });
    let (client, mut peer, _) = connected_with(options).await;
    peer.send(
        &json!({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}}),
    );
    client.stats().await.unwrap();
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "s1", "reason": "server gave up"}}),
    );
    told.cancelled().await;
    assert_eq!(told.reason(), Some("cancelled by the server"));
    // Its answer is dropped: the next frame is our own request.
    let ping = actix_rt::spawn({
        let client = client.clone();
        async move { client.ping().await }
    });
    let next = expect_frame(&mut peer).await;
    assert_eq!(next["method"], "ping");
    respond(&peer, &next, json!({}));
    ping.await.unwrap().unwrap();
    assert_eq!(client.stats().await.unwrap().server_requests_cancelled, 1);
}

#[actix::test]
async fn a_panicking_handler_answers_internal_error() {
    let options = Client::builder().on_roots(|_| async {
        if true {
            panic!("boom");
        }
        Ok(Vec::new())
    });
    let (_client, mut peer, _) = connected_with(options).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "roots/list"}));
    let answer = expect_frame(&mut peer).await;
    assert_eq!(answer["error"]["code"], -32603);
}

#[actix::test]
async fn notifications_reach_streams_and_actors() {
    use actix::{Actor, Context, Handler};
    struct Collector(Arc<Mutex<Vec<ServerNotification>>>);
    impl Actor for Collector {
        type Context = Context<Self>;
    }
    impl Handler<ServerNotification> for Collector {
        type Result = ();
        fn handle(&mut self, n: ServerNotification, _: &mut Context<Self>) {
            self.0.lock().unwrap().push(n);
        }
    }
    let (client, peer) = connected().await;
    let mut stream = client.notifications();
    let collected = Arc::new(Mutex::new(Vec::new()));
    let actor = Collector(collected.clone()).start();
    client.subscribe(actor.recipient()).await.unwrap();

    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "demo://x"}}));
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "warning", "logger": "l", "data": {"k": 1}}}));
    assert_eq!(
        stream.next().await,
        Some(ServerNotification::ToolsListChanged)
    );
    assert_eq!(
        stream.next().await,
        Some(ServerNotification::ResourceUpdated {
            uri: "demo://x".into()
        })
    );
    match stream.next().await {
        Some(ServerNotification::Log(log)) => {
            assert_eq!(log.level, actix_mcp::LoggingLevel::Warning);
            assert_eq!(log.data, json!({"k": 1}));
        }
        other => panic!("{other:?}"),
    }
    eventually("the callback to see all three", || {
        collected.lock().unwrap().len() == 3
    })
    .await;
}

#[actix::test]
async fn a_slow_stream_subscriber_loses_the_oldest_and_counts_them() {
    let (client, peer) = connected().await;
    let mut stream = client.notifications();
    let total = actix_mcp::client::NOTIFICATION_BUFFER + 100;
    for i in 0..total {
        peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": i}}));
    }
    client.stats().await.unwrap();
    let first = stream.next().await.unwrap();
    assert_eq!(stream.dropped(), 100);
    match first {
        ServerNotification::Log(log) => assert_eq!(log.data, json!(100), "the oldest went"),
        other => panic!("{other:?}"),
    }
}

/// Regression: calls go through a queue the actor drains. If the actor is gone (its arbiter
/// stopped), a call must fail with `ActorStopped`, not sit in the queue waiting for ever.
#[actix::test]
async fn a_call_after_the_actor_is_gone_fails_instead_of_hanging() {
    let arbiter = actix::Arbiter::new();
    let options = Client::builder().placement(actix_mcp::Placement::Arbiter(arbiter.handle()));
    let (client, _peer, _) = connected_with(options).await;
    assert!(arbiter.stop());
    arbiter.join().expect("the arbiter thread ends");
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        client.call_tool("echo", json!({"text": "late"})),
    )
    .await
    .expect("answered, not left hanging");
    assert!(
        matches!(
            outcome,
            Err(Error::Closed {
                reason: actix_mcp::CloseReason::ActorStopped
            })
        ),
        "{outcome:?}"
    );
}

/// `-32042` (URL elicitation required) reaches the caller as a typed error with the
/// elicitations to complete; another error code stays a server error.
#[actix::test]
async fn url_elicitation_required_is_a_typed_error() {
    let (client, mut peer) = connected().await;
    let call = actix_rt::spawn(client.call_tool("needs-sign-in", json!({})).into_future());
    let request = expect_frame(&mut peer).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "error": {
        "code": -32042, "message": "sign in first",
        "data": {"elicitations": [{"mode": "url", "message": "sign in",
            "url": "https://example.com/sign-in", "elicitationId": "e1"}]}}}));
    let error = call.await.unwrap().unwrap_err();
    let Error::UrlElicitationRequired { elicitations, .. } = error else {
        panic!("not a URL elicitation error: {error:?}");
    };
    assert_eq!(elicitations.len(), 1);
    assert_eq!(elicitations[0].url, "https://example.com/sign-in");

    let call = actix_rt::spawn(client.call_tool("other", json!({})).into_future());
    let request = expect_frame(&mut peer).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "error": {
        "code": -32042, "message": "malformed", "data": {"elicitations": [{"url": 1}]}}}));
    assert!(matches!(
        call.await.unwrap().unwrap_err(),
        Error::Server { code: -32042, .. }
    ));
}

/// A call's future polled again after it ended says the calling code misused it; it is not
/// reported as the server breaking the protocol, and nothing more is sent.
#[actix::test]
async fn a_call_polled_after_its_end_reports_misuse_not_the_peer() {
    let (client, mut peer) = connected().await;
    let mut call = client.call_tool("echo", json!({})).into_future();
    let answering = async {
        let request = expect_frame(&mut peer).await;
        respond(&peer, &request, json!({"content": []}));
    };
    let (first, ()) = futures::join!(&mut call, answering);
    assert!(first.is_ok(), "{first:?}");
    let written = client.stats().await.unwrap().requests_written;
    let again = futures::poll!(&mut call);
    assert!(
        matches!(again, std::task::Poll::Ready(Err(Error::Misuse(_)))),
        "{again:?}"
    );
    let after = client.stats().await.unwrap().requests_written;
    assert_eq!(after, written, "polling again sent nothing");
}
