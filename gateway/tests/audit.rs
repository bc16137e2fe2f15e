//! The audit trail (`--audit FILE`): behind a local issuer made in the test, with server `a`
//! granting `add` only to admins, each routed request leaves one JSON line naming who (issuer,
//! subject), which session, server and item, a digest of its arguments and how it ended
//! (answered, refused by the access rules, cancelled and by what), and none holds a token or an
//! argument's value.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

#[path = "support/issuer.rs"]
mod issuer;

use issuer::{now, Issuer};
use serde_json::{json, Value};
use support::*;

const MODERN: &str = "2026-07-28";
const SESSIONS: &str = "2025-11-25";
const BOTH: &str = "application/json, text/event-stream";
/// What a call's arguments hold that the trail must never show.
const SECRET: &str = "the-argument-value-no-record-may-hold";

fn token(issuer: &Issuer, audience: &str, sub: &str) -> String {
    let now = now();
    issuer.token(
        json!({"iss": issuer.url, "aud": audience, "sub": sub, "scope": "mcp",
        "exp": now + 600, "iat": now}),
    )
}

/// The records written so far.
fn records(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[actix_rt::test]
async fn every_routed_request_leaves_one_record_of_who_what_and_how_it_ended() {
    let issuer = Issuer::start();
    let rules = json!({"access": [{"allow": {"tools": ["echo", "sleep"]}},
        {"scopes": ["admin"], "allow": {"tools": ["*"]}}]});
    let upstreams = Upstreams::with("audit", rules);
    let trail = upstreams.dir.join("audit.jsonl");
    let trail_arg = trail.to_str().unwrap().to_owned();
    let how = [
        "--authorization-server",
        &issuer.url,
        "--scope",
        "mcp",
        "--audit",
        &trail_arg,
    ];
    let gateway = listen_with(&upstreams, &how);
    let url = gateway.1.clone();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let (alice, bob) = (token(&issuer, &url, "alice"), token(&issuer, &url, "bob"));

    // alice, stateless: an echo answered, an add refused by the rules.
    let modern = |token: &str, name: &str, arguments: Value| {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        http.post(&url)
            .header("authorization", format!("Bearer {token}"))
            .header("accept", BOTH)
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .json(&call)
            .send()
    };
    let echoed = modern(&alice, "a__echo", json!({"text": SECRET}))
        .await
        .unwrap();
    assert_eq!(echoed.status(), 200);
    let refused = modern(&alice, "a__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // bob, in a session: a long call, cancelled.
    let in_session = |session: Option<&str>, message: Value| {
        let mut request = http
            .post(&url)
            .header("authorization", format!("Bearer {bob}"));
        request = request
            .header("accept", BOTH)
            .header("mcp-protocol-version", SESSIONS);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.json(&message).send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": SESSIONS, "capabilities": {},
        "clientInfo": {"name": "audit", "version": "1"}}});
    let opened = in_session(None, initialize).await.unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = opened.text().await;
    let sleep = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "a__sleep", "arguments": {"ms": 60_000}}});
    let call = in_session(Some(&session), sleep);
    let call = actix_rt::spawn(async move { call.await.map(|r| r.status()) });
    upstream_call(&upstreams, "a", "sleep").await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "changed my mind"}});
    assert_eq!(
        in_session(Some(&session), cancel).await.unwrap().status(),
        202
    );
    let _ = call.await;

    let written = until("three records", || {
        let written = records(&trail);
        (written.len() >= 3).then_some(written)
    })
    .await;
    assert_eq!(written.len(), 3, "{written:#?}");
    let of = |subject: &str, item: &str| {
        written
            .iter()
            .find(|r| r["subject"] == subject && r["item"] == item)
            .unwrap_or_else(|| panic!("no record of {subject}'s {item}: {written:#?}"))
            .clone()
    };
    let echo = of("alice", "echo");
    assert_eq!(
        (echo["outcome"].clone(), echo["server"].clone()),
        (json!("answered"), json!("a"))
    );
    assert_eq!(echo["issuer"], issuer.url.as_str());
    assert_eq!(echo["method"], "tools/call");
    assert_eq!(
        echo["session"],
        Value::Null,
        "a stateless call has no session"
    );
    assert_eq!(echo["arguments_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(of("alice", "add")["outcome"], "refused");
    let sleep = of("bob", "sleep");
    assert_eq!(sleep["outcome"], "cancelled", "{sleep}");
    assert!(
        sleep["by"].as_str().unwrap().contains("changed my mind"),
        "{sleep}"
    );
    assert_eq!(sleep["session"], session.as_str());
    assert!(sleep["duration_ms"].as_f64().unwrap() > 0.0);

    let text = std::fs::read_to_string(&trail).unwrap();
    assert!(!text.contains(SECRET), "an argument's value in the trail");
    assert!(
        !text.contains(&alice) && !text.contains(&bob),
        "a token in the trail"
    );
}
