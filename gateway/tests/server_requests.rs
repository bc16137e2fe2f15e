//! An upstream server's requests (sampling here) carried to the downstream session whose call
//! caused them: two downstream sessions (clients of this library over HTTP, 2025-11-25), each
//! answering sampling its own way, call the demo server's `sample` tool through the gateway. The
//! answer the upstream server got names the session that called. Where the protocol cannot say
//! which session a request belongs to (both have calls in flight on that server), or the caller
//! cannot be asked (no capability), the server gets a clear error, never a guess. A 2026-07-28
//! caller is asked the multi-round-trip way: its call is answered `input_required`, and its
//! retry's input answers the upstream server, whose answer goes to the retry.
//! An upstream cancel of its request reaches the downstream handler.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use actix_mcp::{Cancellation, Client, CreateMessageResult, HttpTransport, ProtocolEra};
use serde_json::{json, Value};
use support::*;

/// A 2025-11-25 session whose sampling answers with `model`, counting how often it was asked.
async fn session(url: &str, model: &'static str, asked: Arc<AtomicUsize>) -> Client {
    Client::builder()
        .era(ProtocolEra::Legacy)
        .on_sampling(move |_, _| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move { Ok(CreateMessageResult::text(model, "sampled")) }
        })
        .connect(HttpTransport::new(url))
        .await
        .expect("a session")
}

/// A 2026-07-28 `tools/call` of `a__sample` with `extra` params (a retry's), POSTed as such a
/// client does (its `_meta` envelope declaring sampling, its headers): the JSON answer.
async fn post_modern_sample(url: &str, id: i64, extra: Value) -> Value {
    let mut params = json!({"name": "a__sample", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
                  "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "a__sample")
        .json(&call)
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON")
}

/// What the demo server's `sample` got back from its client: the whole JSON-RPC response.
async fn sampled(client: &Client) -> Value {
    let answer = client
        .call_tool("a__sample", json!({}))
        .await
        .expect("the tool answers");
    answer.structured_content.expect("structured")["response"].clone()
}

#[actix_rt::test]
async fn sampling_goes_to_the_session_whose_call_caused_it() {
    let upstreams = Upstreams::new("sampling");
    let gateway = listen(&upstreams);
    let (asked_a, asked_b) = (Arc::default(), Arc::default());
    let a = session(&gateway.1, "model-a", Arc::clone(&asked_a)).await;
    let b = session(&gateway.1, "model-b", Arc::clone(&asked_b)).await;

    assert_eq!(sampled(&a).await["result"]["model"], "model-a");
    assert_eq!(sampled(&b).await["result"]["model"], "model-b");
    assert_eq!(sampled(&a).await["result"]["model"], "model-a");
    assert_eq!(asked_a.load(Ordering::SeqCst), 2);
    assert_eq!(asked_b.load(Ordering::SeqCst), 1);
}

#[actix_rt::test]
async fn a_request_no_session_can_be_told_to_is_refused_not_guessed() {
    let upstreams = Upstreams::new("sampling-refused");
    let gateway = listen(&upstreams);
    let (asked_a, asked_b) = (Arc::<AtomicUsize>::default(), Arc::default());
    let a = session(&gateway.1, "model-a", Arc::clone(&asked_a)).await;
    let b = session(&gateway.1, "model-b", Arc::clone(&asked_b)).await;

    // Both sessions have a call in flight on server `a`: which one sampled is not in the protocol.
    let token = Cancellation::new();
    let held = a
        .call_tool("a__sleep", json!({"ms": 30_000}))
        .cancellation(&token);
    let held = actix_rt::spawn(std::future::IntoFuture::into_future(held));
    until("a's sleep is at the server", || {
        let read = upstreams.read_by("a");
        read.iter()
            .any(|m| m["params"]["name"] == "sleep")
            .then_some(())
    })
    .await;
    let response = sampled(&b).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("several downstream sessions"),
        "{response}"
    );
    token.cancel();
    let _ = held.await;

    // A client that did not declare sampling is not asked.
    let plain = Client::builder()
        .era(ProtocolEra::Legacy)
        .connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session without sampling");
    let response = sampled(&plain).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("did not declare"), "{response}");
    assert_eq!(asked_a.load(Ordering::SeqCst), 0);
    assert_eq!(asked_b.load(Ordering::SeqCst), 0);
}

#[actix_rt::test]
async fn an_upstream_cancel_of_its_request_reaches_the_downstream_handler() {
    let upstreams = Upstreams::new("sampling-cancel");
    let gateway = listen(&upstreams);
    let (cancelled, seen) = tokio::sync::oneshot::channel::<Option<String>>();
    let cancelled = std::sync::Mutex::new(Some(cancelled));
    let client = Client::builder()
        .era(ProtocolEra::Legacy)
        .on_sampling(move |_, token: Cancellation| {
            let report = cancelled.lock().unwrap().take();
            async move {
                // Never answers: waits for the server's cancel.
                token.cancelled().await;
                if let Some(report) = report {
                    let _ = report.send(token.reason().map(str::to_owned));
                }
                Ok(CreateMessageResult::text("late", "late"))
            }
        })
        .connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session");
    let params = json!({"messages": [], "maxTokens": 1});
    let arguments = json!({"method": "sampling/createMessage", "params": params, "after_ms": 300});
    let answer = client
        .call_tool("a__ask_client_then_cancel", arguments)
        .await
        .expect("the tool answers");
    let reason = seen.await.expect("the downstream handler was cancelled");
    assert!(reason.is_some(), "a cancel carries its reason");
    // The upstream server got no answer to the request it cancelled.
    assert!(
        answer.text().contains("null") || answer.is_error == Some(true),
        "{answer:?}"
    );
}

/// A 2026-07-28 client's call whose upstream server asks for sampling: the call is answered
/// `input_required` (the library's client answers with its handler and retries with the
/// input), and the upstream server gets the answer on its one call.
#[actix_rt::test]
async fn a_2026_07_28_caller_is_asked_through_input_required_and_its_retry_resumes_the_call() {
    let upstreams = Upstreams::new("sampling-mrtr");
    let gateway = listen(&upstreams);
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&asked);
    let modern = Client::builder()
        .era(ProtocolEra::Modern)
        .on_sampling(move |_, _| {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(CreateMessageResult::text(format!("modern-{n}"), "sampled")) }
        })
        .connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a 2026-07-28 client");
    let response = sampled(&modern).await;
    assert_eq!(response["result"]["model"], "modern-1", "{response}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // The upstream server saw one call, not one per round.
    let calls = upstreams
        .read_by("a")
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(calls, 1);

    // A retry naming a state nobody waits on is refused, not routed.
    let retry = json!({"requestState": "forged", "inputResponses": {"x": {"role": "assistant"}}});
    let answer = post_modern_sample(&gateway.1, 9, retry).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["id"], 9);
}

/// A 2026-07-28 client answered `input_required` that never retries (it went away between the
/// rounds: over HTTP there is no POST left to abort) has its call cancelled upstream once the
/// wait for its retry (`--input-wait`) is over; nothing is left running.
#[actix_rt::test]
async fn a_2026_07_28_call_never_retried_is_cancelled_upstream_after_the_input_wait() {
    let upstreams = Upstreams::new("sampling-mrtr-gone");
    let gateway = listen_with(&upstreams, &["--input-wait", "1"]);
    let answer = post_modern_sample(&gateway.1, 1, json!({})).await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{answer}");
    let asked = requests.values().next().unwrap();
    assert_eq!(asked["method"], "sampling/createMessage", "{answer}");
    assert!(result["requestState"].is_string(), "{answer}");

    let id = upstream_call(&upstreams, "a", "sample").await;
    let cancel = cancel_after_request(&upstreams, "a", &id).await;
    let reason = cancel["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("did not retry"), "{cancel}");
}
