//! Cancellation semantics observed on the wire, against a scripted in-memory peer.
//!
//! The peer sees every frame the client writes and decides when a batch counts as written,
//! which lets these tests hold a request "being written" and check what the client does then.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::time::Duration;

use actix_mcp::transport::memory::{self, MemoryPeer};
use actix_mcp::{Cancel, Cancellation, Client, CloseReason, Error, GetStats, Request};
use serde_json::{json, Value};

async fn connected() -> (Client, MemoryPeer) {
    let (transport, mut peer) = memory::pair();
    let server = async move {
        peer.accept_handshake("2025-11-25")
            .await
            .expect("handshake");
        peer
    };
    let (client, peer) = futures::join!(Client::connect(transport), server);
    (client.expect("connect"), peer)
}

/// Sends a request from a task of its own, so the test can play the server meanwhile.
fn spawn_request(
    client: &Client,
    method: &'static str,
    token: Option<&Cancellation>,
) -> actix_rt::task::JoinHandle<Result<Value, Error>> {
    let call = client.request::<Value>(method, ());
    let call = match token {
        Some(token) => call.cancellation(token),
        None => call,
    };
    actix_rt::spawn(async move { call.await })
}

/// Makes sure the actor has handled everything sent to it before this call.
async fn settle(client: &Client) {
    client.stats().await.expect("stats");
}

fn respond(peer: &MemoryPeer, request: &Value, result: Value) {
    peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
}

async fn expect_frame(peer: &mut MemoryPeer) -> Value {
    tokio::time::timeout(Duration::from_secs(10), peer.recv())
        .await
        .expect("a frame within 10 s")
        .expect("transport open")
}

#[actix::test]
async fn a_request_with_an_already_cancelled_token_fails_before_anything_is_written() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    token.cancel_with_reason("too late");
    let err = client.ping().cancellation(&token).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled { reason: Some(ref r) } if r == "too late"));

    // The next thing on the wire is the next request, not the cancelled one nor a cancel.
    let next = spawn_request(&client, "next", None);
    let frame = expect_frame(&mut peer).await;
    assert_eq!(frame["method"], "next");
    respond(&peer, &frame, json!({}));
    next.await.unwrap().unwrap();
}

#[actix::test]
async fn cancelling_wakes_the_caller_at_once_and_sends_the_reason_on_the_wire() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    let call = actix_rt::spawn({
        let client = client.clone();
        let token = token.clone();
        async move {
            client
                .call_tool("sleep", json!({"ms": 60000}))
                .cancellation(&token)
                .await
        }
    });
    let request = expect_frame(&mut peer).await;
    assert_eq!(request["method"], "tools/call");

    token.cancel_with_reason("user pressed stop");
    // The server never answers: the caller must not depend on it.
    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Cancelled { reason: Some(ref r) } if r == "user pressed stop"));

    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    assert_eq!(cancel["params"]["reason"], "user pressed stop");
    assert!(cancel.get("id").is_none(), "a notification has no id");
}

#[actix::test]
async fn a_cancel_without_reason_omits_the_reason_key() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    let call = actix_rt::spawn({
        let client = client.clone();
        let token = token.clone();
        async move { client.ping().cancellation(&token).await }
    });
    let request = expect_frame(&mut peer).await;
    token.cancel();
    assert!(matches!(
        call.await.unwrap(),
        Err(Error::Cancelled { reason: None })
    ));
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["params"], json!({"requestId": request["id"]}));
}

/// A request still in the outbox when cancelled is removed: neither it nor a cancel for it is
/// ever written.
#[actix::test]
async fn a_request_cancelled_while_queued_is_never_written_nor_cancelled_on_the_wire() {
    let (client, mut peer) = connected().await;
    peer.hold_writes();
    let first = spawn_request(&client, "first", None);
    let first_frame = expect_frame(&mut peer).await;
    assert_eq!(first_frame["method"], "first");
    assert_eq!(peer.held_batches(), 1, "the first batch is being written");

    // The writer is busy, so this one waits in the outbox.
    let token = Cancellation::new();
    let queued = spawn_request(&client, "queued", Some(&token));
    settle(&client).await;
    token.cancel_with_reason("changed my mind");
    assert!(queued.await.unwrap().unwrap_err().is_cancelled());
    settle(&client).await;

    peer.release_writes();
    let third = spawn_request(&client, "third", None);
    let next = expect_frame(&mut peer).await;
    assert_eq!(
        next["method"], "third",
        "neither `queued` nor a cancel for it was written"
    );
    respond(&peer, &first_frame, json!({}));
    respond(&peer, &next, json!({}));
    first.await.unwrap().unwrap();
    third.await.unwrap().unwrap();
    assert_eq!(client.stats().await.unwrap().cancelled_before_write, 1);
    assert!(peer.try_recv().is_none());
}

/// The cancel of a request whose write is in progress goes out only after the transport
/// reports the write complete, so on the wire it always follows the complete request frame.
#[actix::test]
async fn a_cancel_during_the_write_waits_for_the_write_complete_event() {
    let (client, mut peer) = connected().await;
    peer.hold_writes();
    let token = Cancellation::new();
    let call = actix_rt::spawn({
        let client = client.clone();
        let token = token.clone();
        async move {
            client
                .request::<Value>("slow/write", ())
                .cancellation(&token)
                .await
        }
    });
    let request = expect_frame(&mut peer).await;
    token.cancel_with_reason("stop");
    // The caller is woken while the write is still in progress.
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    settle(&client).await;
    assert!(
        peer.try_recv().is_none(),
        "no cancel before the write completed"
    );

    // Even a long wait does not let the cancel out: only the write-complete event does.
    tokio::time::sleep(Duration::from_millis(200)).await;
    settle(&client).await;
    assert!(peer.try_recv().is_none(), "no timer releases the cancel");

    peer.release_writes();
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    assert_eq!(cancel["params"]["reason"], "stop");
}

#[actix::test]
async fn a_cancel_after_the_response_sends_nothing_and_a_double_cancel_sends_one() {
    let (client, mut peer) = connected().await;

    // Answered, then cancelled: nothing on the wire.
    let token = Cancellation::new();
    let call = actix_rt::spawn({
        let client = client.clone();
        let token = token.clone();
        async move { client.ping().cancellation(&token).await }
    });
    let request = expect_frame(&mut peer).await;
    respond(&peer, &request, json!({}));
    call.await.unwrap().unwrap();
    token.cancel();

    // Cancelled twice through the address: one notification.
    let request = Request::new("tools/call", Some(json!({"name": "sleep"})));
    let id = request.id();
    let pending = client.addr().send(request).await.unwrap();
    assert_eq!(pending.id(), id);
    let frame = expect_frame(&mut peer).await;
    assert_eq!(frame["id"], json!(id.as_u64()));
    client.addr().do_send(Cancel::with_reason(id, "first"));
    client.addr().do_send(Cancel::with_reason(id, "second"));
    assert!(matches!(pending.await, Err(Error::Cancelled { reason: Some(ref r) }) if r == "first"));
    settle(&client).await;

    let cancel = expect_frame(&mut peer).await;
    assert_eq!(
        cancel["params"],
        json!({"requestId": id.as_u64(), "reason": "first"})
    );
    settle(&client).await;
    assert!(peer.try_recv().is_none(), "exactly one notification");
    assert_eq!(client.stats().await.unwrap().cancels_sent, 1);
}

#[actix::test]
async fn dropping_the_request_future_cancels_it_on_the_wire() {
    let (client, mut peer) = connected().await;
    let call = actix_rt::spawn({
        let client = client.clone();
        async move { client.call_tool("sleep", json!({"ms": 60000})).await }
    });
    let request = expect_frame(&mut peer).await;
    call.abort();
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"], json!({"requestId": request["id"]}));
}

#[actix::test]
async fn dropping_a_pending_reply_from_the_address_cancels_it() {
    let (client, mut peer) = connected().await;
    let pending = client
        .addr()
        .send(Request::new("tools/call", None))
        .await
        .unwrap();
    let request = expect_frame(&mut peer).await;
    drop(pending);
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["params"]["requestId"], request["id"]);
}

/// The Ruby client's orphaned reader could swallow the next request's response after a cancel.
/// Here a late response is dropped at the router and the next response still reaches its caller.
#[actix::test]
async fn a_late_response_is_dropped_and_the_next_response_still_arrives() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    let cancelled = spawn_request(&client, "a", Some(&token));
    let a = expect_frame(&mut peer).await;
    token.cancel();
    assert!(cancelled.await.unwrap().unwrap_err().is_cancelled());
    let _cancel = expect_frame(&mut peer).await;

    let next = spawn_request(&client, "b", None);
    let b = expect_frame(&mut peer).await;
    respond(&peer, &a, json!({"for": "a"}));
    respond(&peer, &b, json!({"for": "b"}));
    assert_eq!(next.await.unwrap().unwrap(), json!({"for": "b"}));
    assert_eq!(client.stats().await.unwrap().late_responses, 1);
}

#[actix::test]
async fn a_timeout_cancels_on_the_wire_and_reports_timeout_not_cancelled() {
    let (client, mut peer) = connected().await;
    let call = actix_rt::spawn({
        let client = client.clone();
        async move {
            client
                .request::<Value>("slow", ())
                .timeout(Duration::from_millis(50))
                .await
        }
    });
    let request = expect_frame(&mut peer).await;
    assert!(matches!(call.await.unwrap(), Err(Error::Timeout { .. })));
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    assert_eq!(cancel["params"]["reason"], "timed out after 50 ms");
}

#[actix::test]
async fn initialize_is_never_cancelled_on_the_wire_and_a_cancelled_connect_closes() {
    let (transport, mut peer) = memory::pair();
    let token = Cancellation::new();
    let connect = actix_rt::spawn({
        let token = token.clone();
        async move {
            Client::builder()
                .cancellation(&token)
                .connect(transport)
                .await
        }
    });
    let init = expect_frame(&mut peer).await;
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    token.cancel_with_reason("user gave up");
    assert!(connect.await.unwrap().unwrap_err().is_cancelled());
    // The transport closes without a cancel for `initialize` ever being written.
    let after = tokio::time::timeout(Duration::from_secs(10), peer.recv())
        .await
        .expect("the transport closes");
    assert_eq!(after, None, "nothing after initialize: {after:?}");
}

#[actix::test]
async fn a_counter_offered_legacy_version_is_adopted_and_an_unknown_one_refused() {
    let (transport, mut peer) = memory::pair();
    let server = async move { peer.accept_handshake("2025-06-18").await };
    let (client, _) = futures::join!(Client::connect(transport), server);
    assert_eq!(client.unwrap().protocol_version(), "2025-06-18");

    let (transport, mut peer) = memory::pair();
    let server = async move {
        let init = peer.recv().await.unwrap();
        peer.send(&json!({"jsonrpc": "2.0", "id": init["id"], "result": {
            "protocolVersion": "1999-01-01", "capabilities": {},
            "serverInfo": {"name": "old", "version": "1"}}}));
        // Refused: no `initialized`, the transport closes.
        peer.recv().await
    };
    let (client, after) = futures::join!(Client::connect(transport), server);
    assert!(matches!(client.unwrap_err(), Error::Protocol(m) if m.contains("1999-01-01")));
    assert_eq!(after, None);
}

/// rmcp #1251: a server's `notifications/cancelled` for *its* request must never cancel one of
/// ours that shares the id.
#[actix::test]
async fn a_server_cancel_never_touches_our_request_with_the_same_id() {
    let (client, mut peer) = connected().await;
    let call = spawn_request(&client, "work", None);
    let request = expect_frame(&mut peer).await;
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": request["id"], "reason": "server side"}}),
    );
    respond(&peer, &request, json!({"done": true}));
    assert_eq!(call.await.unwrap().unwrap(), json!({"done": true}));
}

#[actix::test]
async fn server_ping_is_answered_and_other_server_requests_get_method_not_found() {
    let (_client, mut peer) = connected().await;
    peer.send(&json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
    peer.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}}),
    );
    let pong = expect_frame(&mut peer).await;
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "s1", "result": {}}));
    let refused = expect_frame(&mut peer).await;
    assert_eq!(refused["id"], 7);
    assert_eq!(refused["error"]["code"], -32601);
}

#[actix::test]
async fn invalid_frames_are_counted_and_skipped() {
    let (client, mut peer) = connected().await;
    let call = spawn_request(&client, "x", None);
    let request = expect_frame(&mut peer).await;
    for garbage in [
        "not json",
        "[1, 2]",
        "{\"jsonrpc\":\"2.0\"}",
        "{\"id\": 1}",
        "42",
        "\"s\"",
    ] {
        peer.send_raw(garbage);
    }
    respond(&peer, &request, json!({"ok": 1}));
    assert_eq!(call.await.unwrap().unwrap(), json!({"ok": 1}));
    assert_eq!(
        client.stats().await.unwrap().invalid_frames,
        7,
        "[1, 2] holds two bad frames"
    );
}

#[actix::test]
async fn a_server_error_keeps_code_message_and_data() {
    let (client, mut peer) = connected().await;
    let call = spawn_request(&client, "x", None);
    let request = expect_frame(&mut peer).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": request["id"],
        "error": {"code": -32602, "message": "bad params", "data": {"field": "x"}}}));
    match call.await.unwrap() {
        Err(Error::Server {
            code,
            message,
            data,
        }) => {
            assert_eq!((code, message.as_str()), (-32602, "bad params"));
            assert_eq!(data, Some(json!({"field": "x"})));
        }
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[actix::test]
async fn a_closed_transport_fails_pending_requests_and_later_ones_fast() {
    let (client, mut peer) = connected().await;
    let call = spawn_request(&client, "x", None);
    expect_frame(&mut peer).await;
    peer.close(CloseReason::EndOfStream);
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Closed {
                reason: CloseReason::EndOfStream
            }
        ),
        "{err:?}"
    );
    let later = client.ping().await.unwrap_err();
    assert!(later.is_closed());
}

#[actix::test]
async fn ten_thousand_concurrent_requests_with_out_of_order_responses_all_correlate() {
    const N: usize = 10_000;
    let (client, mut peer) = connected().await;
    let calls: Vec<_> = (0..N)
        .map(|i| {
            let client = client.clone();
            actix_rt::spawn(async move {
                let result = client.request::<Value>("echo", json!({"n": i})).await?;
                Ok::<_, Error>((i, result))
            })
        })
        .collect();
    let mut requests = Vec::with_capacity(N);
    while requests.len() < N {
        requests.push(expect_frame(&mut peer).await);
    }
    // Answer in reverse order, each with what its own request carried.
    for request in requests.iter().rev() {
        respond(&peer, request, json!({"n": request["params"]["n"]}));
    }
    for call in calls {
        let (i, result) = call.await.unwrap().unwrap();
        assert_eq!(result["n"], i);
    }
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.in_flight, 0);
    assert_eq!(stats.responses_delivered, N as u64 + 1, "plus initialize");
}

#[actix::test]
async fn get_stats_reports_what_is_in_flight() {
    let (client, mut peer) = connected().await;
    let pending = client.addr().send(Request::new("x", None)).await.unwrap();
    expect_frame(&mut peer).await;
    let stats = client.addr().send(GetStats).await.unwrap();
    assert_eq!(stats.in_flight, 1);
    pending.detach();
}

#[actix::test]
async fn one_token_cancels_every_request_it_covers() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let (client, token) = (client.clone(), token.clone());
            actix_rt::spawn(async move {
                client
                    .request::<Value>(format!("m{i}"), ())
                    .cancellation(&token)
                    .await
            })
        })
        .collect();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(expect_frame(&mut peer).await["id"].clone());
    }
    token.cancel_with_reason("all of them");
    for call in calls {
        assert!(call.await.unwrap().unwrap_err().is_cancelled());
    }
    let mut cancelled = Vec::new();
    for _ in 0..3 {
        let cancel = expect_frame(&mut peer).await;
        assert_eq!(cancel["params"]["reason"], "all of them");
        cancelled.push(cancel["params"]["requestId"].clone());
    }
    cancelled.sort_by_key(|v| v.as_u64());
    assert_eq!(cancelled, ids);
}

/// Ruby checklist 2 and 12: a token that is never cancelled changes nothing: the request is
/// written once, its response returned unchanged, and no cancel follows.
#[actix::test]
async fn an_uncancelled_token_changes_nothing_on_the_wire() {
    let (client, mut peer) = connected().await;
    let token = Cancellation::new();
    let call = spawn_request(&client, "x", Some(&token));
    let request = expect_frame(&mut peer).await;
    respond(&peer, &request, json!({"value": [1, 2, 3]}));
    assert_eq!(call.await.unwrap().unwrap(), json!({"value": [1, 2, 3]}));
    settle(&client).await;
    assert!(peer.try_recv().is_none());
    assert_eq!(
        client.stats().await.unwrap().requests_written,
        2,
        "initialize and x"
    );
}

/// Ruby checklist 11: the write of a cancelled request fails (the connection breaks) before its
/// write-complete event. The caller already has its `Cancelled`; nothing panics, and later
/// requests fail fast with the close reason.
#[actix::test]
async fn a_write_that_fails_after_a_cancel_leaves_the_caller_cancelled() {
    let (client, mut peer) = connected().await;
    peer.hold_writes();
    let token = Cancellation::new();
    let call = spawn_request(&client, "x", Some(&token));
    expect_frame(&mut peer).await;
    token.cancel_with_reason("bye");
    assert!(
        matches!(call.await.unwrap(), Err(Error::Cancelled { reason: Some(ref r) }) if r == "bye")
    );
    peer.close(CloseReason::WriteFailed(std::sync::Arc::new(
        std::io::Error::other("broken pipe"),
    )));
    let later = client.ping().await.unwrap_err();
    assert!(
        matches!(
            later,
            Error::Closed {
                reason: CloseReason::WriteFailed(_)
            }
        ),
        "{later:?}"
    );
    assert!(
        peer.try_recv().is_none(),
        "no cancel after the write failed"
    );
}

/// A request cancelled while its write is in progress, then answered before the write
/// completes: the waiting cancel is dropped (the answer made it moot) and the answer is not
/// handed to anyone.
#[actix::test]
async fn an_answer_before_the_write_completes_drops_the_waiting_cancel() {
    let (client, mut peer) = connected().await;
    peer.hold_writes();
    let token = Cancellation::new();
    let call = spawn_request(&client, "x", Some(&token));
    let request = expect_frame(&mut peer).await;
    token.cancel();
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    respond(&peer, &request, json!({}));
    settle(&client).await;
    peer.release_writes();
    settle(&client).await;
    assert!(
        peer.try_recv().is_none(),
        "no cancel for an answered request"
    );
    let stats = client.stats().await.unwrap();
    assert_eq!(
        (stats.late_responses, stats.cancels_sent, stats.in_flight),
        (1, 0, 0)
    );
}

/// Closing does not lose what was already decided: a cancel waiting for its request's
/// write-complete event is still written before the transport closes.
#[actix::test]
async fn close_writes_a_cancel_that_waited_for_its_write() {
    let (client, mut peer) = connected().await;
    peer.hold_writes();
    let token = Cancellation::new();
    let call = spawn_request(&client, "x", Some(&token));
    let request = expect_frame(&mut peer).await;
    token.cancel_with_reason("bye");
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    client.close().await;
    assert!(client.ping().await.unwrap_err().is_closed());
    peer.release_writes();
    let cancel = expect_frame(&mut peer).await;
    assert_eq!(
        cancel["params"],
        json!({"requestId": request["id"], "reason": "bye"})
    );
    let end = tokio::time::timeout(Duration::from_secs(10), peer.recv())
        .await
        .unwrap();
    assert_eq!(end, None, "then the transport closes");
}

/// No input from a server may panic the connection: thousands of malformed, truncated,
/// mistyped and hostile frames are skipped, and the connection keeps working.
#[actix::test]
async fn hostile_frames_never_break_the_connection() {
    let (client, mut peer) = connected().await;
    let shapes = [
        r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":-1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1e400,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":"999999999999999999999","error":{"code":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":1.5,"message":7}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":[],"progress":"x"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"nope"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":5}}"#,
        r#"{"jsonrpc":"2.0","id":"s","method":"ping","params":[1,2]}"#,
        r#"{"jsonrpc":"2.0","id":"s2","method":42}"#,
        r#"[{"jsonrpc":"2.0","method":"x"},[],{},null]"#,
        r#"{"method":"#,
        "\u{0}\u{1}\u{ffff}",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..5_000 {
        let frame: Vec<u8> = match i % 3 {
            0 => shapes[(next() % shapes.len() as u64) as usize]
                .as_bytes()
                .to_vec(),
            1 => {
                // A valid shape cut short at a random point.
                let shape = shapes[(next() % shapes.len() as u64) as usize].as_bytes();
                shape[..(next() as usize % (shape.len() + 1))].to_vec()
            }
            _ => (0..(next() % 64)).map(|_| next() as u8).collect(),
        };
        peer.send_raw(frame);
    }
    let deep = "[".repeat(100_000);
    peer.send_raw(deep);
    // Every server request among them got an answer or nothing; drain what was written.
    let call = spawn_request(&client, "still/alive", None);
    loop {
        let frame = expect_frame(&mut peer).await;
        if frame["method"] == "still/alive" {
            respond(&peer, &frame, json!({"ok": true}));
            break;
        }
    }
    assert_eq!(call.await.unwrap().unwrap(), json!({"ok": true}));
    assert!(client.stats().await.unwrap().invalid_frames > 1_000);
}
