//! What a server can make the client hold is capped (ARCHITECTURE.md, "Caps on what a server can
//! make us hold"): its requests in flight to our handlers, the answers it does not read, the
//! tasks it asks of us, and the status notifications of a task we follow. Each test plays the
//! server with the in-memory peer and observes the cap on the wire and in the counters.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::time::Duration;

use actix_mcp::transport::memory::{self, MemoryPeer};
use actix_mcp::{Client, ConnectOptions, CreateMessageResult, HandlerError};
use serde_json::{json, Value};
use std::future::IntoFuture;

/// The cap on the server's requests held at once (`MAX_SERVER_REQUESTS`, and the server's
/// tasks' `MAX_TASKS`).
const CAP: u64 = 1024;

async fn connected_with(options: ConnectOptions) -> (Client, MemoryPeer) {
    let (transport, mut peer) = memory::pair();
    let server = async move {
        peer.accept_handshake("2025-11-25")
            .await
            .expect("handshake");
        peer
    };
    let (client, peer) = futures::join!(options.connect(transport), server);
    (client.expect("connect"), peer)
}

/// A sampling handler that answers only when the server gives up on its request.
fn never_answers() -> ConnectOptions {
    Client::builder().on_sampling(|_, token| async move {
        token.cancelled().await;
        Err::<CreateMessageResult, _>(HandlerError::internal("cancelled"))
    })
}

async fn expect_frame(peer: &mut MemoryPeer) -> Value {
    tokio::time::timeout(Duration::from_secs(10), peer.recv())
        .await
        .expect("a frame within 10 s")
        .expect("transport open")
}

fn sampling(id: u64, task: bool) -> Value {
    let mut params = json!({"messages": [], "maxTokens": 1});
    if task {
        params["task"] = json!({"ttl": 60_000});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "sampling/createMessage", "params": params})
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

/// Waits (at most 10 s) until the connection counted `refused` refused server requests.
async fn refused_reaches(client: &Client, refused: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stats = client.stats().await.expect("stats");
        if stats.server_requests_refused >= refused || tokio::time::Instant::now() > deadline {
            assert_eq!(stats.server_requests_refused, refused);
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[actix::test]
async fn a_server_request_past_the_cap_of_running_handlers_is_refused_with_an_error() {
    let (client, mut peer) = connected_with(never_answers()).await;
    for id in 1..=CAP + 1 {
        peer.send(&sampling(id, false));
    }
    // Every handler of the first CAP still runs: the one answer is the refusal.
    let refusal = expect_frame(&mut peer).await;
    assert_eq!(refusal["id"], CAP + 1, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32603, "{refusal}");
    refused_reaches(&client, 1).await;

    // A ping holds nothing and is answered all the same.
    peer.send(&ping(CAP + 2));
    let pong = expect_frame(&mut peer).await;
    assert_eq!(pong["id"], CAP + 2);
    assert_eq!(pong["result"], json!({}));

    // Once the server gives one up, there is room again: the next request runs (no answer).
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 1}}),
    );
    peer.send(&sampling(CAP + 3, false));
    peer.send(&ping(CAP + 4));
    let pong = expect_frame(&mut peer).await;
    assert_eq!(pong["id"], CAP + 4, "request {} ran: {pong}", CAP + 3);
    assert_eq!(client.stats().await.unwrap().server_requests_refused, 1);
}

#[actix::test]
async fn answers_a_server_does_not_read_stop_at_the_cap_and_later_requests_go_unanswered() {
    let (client, mut peer) = connected_with(Client::builder()).await;
    // The server stops reading: the first answer's write never completes, later ones queue.
    peer.hold_writes();
    let sent = CAP + 1 + 200;
    for id in 1..=sent {
        peer.send(&ping(id));
    }
    // One answer is being written, CAP wait behind it, the rest were dropped.
    refused_reaches(&client, sent - 1 - CAP).await;
    peer.release_writes();
    for id in 1..=CAP + 1 {
        let pong = expect_frame(&mut peer).await;
        assert_eq!(pong["id"], id, "{pong}");
    }
    // The backlog is gone: a server that reads again is answered again.
    peer.send(&ping(sent + 1));
    let pong = expect_frame(&mut peer).await;
    assert_eq!(
        pong["id"],
        sent + 1,
        "the dropped ones were never answered: {pong}"
    );
}

#[actix::test]
async fn a_task_past_the_cap_of_running_server_tasks_is_refused_with_an_error() {
    let (client, mut peer) = connected_with(never_answers()).await;
    for id in 1..=CAP + 1 {
        peer.send(&sampling(id, true));
    }
    for id in 1..=CAP {
        let created = expect_frame(&mut peer).await;
        assert_eq!(created["id"], id);
        assert_eq!(created["result"]["task"]["status"], "working", "{created}");
    }
    let refusal = expect_frame(&mut peer).await;
    assert_eq!(refusal["id"], CAP + 1, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32603, "{refusal}");
    refused_reaches(&client, 1).await;
}

#[actix::test]
async fn status_notifications_that_come_while_the_follower_waits_collapse_to_the_newest() {
    let (client, mut peer) = connected_with(Client::builder()).await;
    let (call, mut states) = client.call_tool("slow", json!({})).task_status_stream();
    let call = actix_rt::spawn(async move { call.await });

    let create = expect_frame(&mut peer).await;
    assert_eq!(create["method"], "tools/call");
    let task = |status: &str, message: String, poll: u64| {
        json!({"taskId": "t1", "status": status, "statusMessage": message,
               "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
               "ttl": null, "pollInterval": poll})
    };
    peer.send(&json!({"jsonrpc": "2.0", "id": create["id"],
                      "result": {"task": task("working", "created".into(), 50)}}));
    // The follower polls, and waits for the answer while the server pushes statuses.
    let get = expect_frame(&mut peer).await;
    assert_eq!(get["method"], "tasks/get");
    let pushed = 1000;
    for n in 1..=pushed {
        peer.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                          "params": task("working", format!("pushed {n}"), 60_000)}),
        );
    }
    peer.send(&json!({"jsonrpc": "2.0", "id": get["id"],
                      "result": task("working", "polled".into(), 60_000)}));
    // Only the newest pushed status waited for the follower.
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("pushed 1000") {
        let state = tokio::time::timeout(Duration::from_secs(10), states.next())
            .await
            .expect("a state within 10 s")
            .expect("the call goes on");
        seen.push(state.status_message.unwrap_or_default());
    }
    assert_eq!(seen, ["created", "polled", "pushed 1000"]);
    assert_eq!(states.dropped(), 0);

    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                      "params": task("completed", "done".into(), 60_000)}),
    );
    let result = expect_frame(&mut peer).await;
    assert_eq!(result["method"], "tasks/result");
    peer.send(&json!({"jsonrpc": "2.0", "id": result["id"],
                      "result": {"content": [{"type": "text", "text": "ok"}]}}));
    let answer = call.await.unwrap().expect("the task's result");
    assert_eq!(answer.content.len(), 1);
}

/// Answers the next `tools/list` with `count` tools named `{prefix}{n}`.
async fn answer_tools_list(peer: &mut MemoryPeer, prefix: &str, count: usize) {
    let list = expect_frame(peer).await;
    assert_eq!(list["method"], "tools/list");
    let tools: Vec<Value> = (0..count)
        .map(|n| json!({"name": format!("{prefix}{n}"), "inputSchema": {"type": "object"}}))
        .collect();
    peer.send(&json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": tools}}));
}

#[actix::test]
async fn a_tool_list_past_the_cap_of_learned_tools_fails_and_known_tools_still_list() {
    const LEARNED_CAP: usize = 10_000;
    let (client, mut peer) = connected_with(Client::builder()).await;
    let first = client.list_tools(None);
    let (first, ()) = futures::join!(first.into_future(), answer_tools_list(&mut peer, "a", 6000));
    assert_eq!(first.expect("6000 tools are learned").tools.len(), 6000);
    // 6000 more names would make 12,000: refused, and nothing of the page is learned.
    let second = client.list_tools(Some("2"));
    let (second, ()) = futures::join!(
        second.into_future(),
        answer_tools_list(&mut peer, "b", 6000)
    );
    match second {
        Err(actix_mcp::Error::Protocol(why)) => assert!(why.contains("10000"), "{why}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
    // The same first page again adds no name; up to the cap, new names are still learned.
    let again = client.list_tools(None);
    let (again, ()) = futures::join!(again.into_future(), answer_tools_list(&mut peer, "a", 6000));
    assert_eq!(again.expect("known tools").tools.len(), 6000);
    let rest = client.list_tools(Some("3"));
    let (rest, ()) = futures::join!(
        rest.into_future(),
        answer_tools_list(&mut peer, "c", LEARNED_CAP - 6000)
    );
    assert_eq!(rest.expect("up to the cap").tools.len(), LEARNED_CAP - 6000);
}
