//! Three gateway replicas behind HAProxy (no affinity: each request goes to the next replica)
//! sharing one Redis: a 2025-11-25 session is served by every replica, a call's progress comes
//! back on its own POST, a cancel that reaches another replica than its call's still cancels
//! it upstream, a closed session is closed everywhere, and a replica SIGKILLed in the middle
//! of a call leaves nothing running upstream while its sessions go on through the others.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use std::collections::BTreeSet;

use futures::StreamExt as _;
use serde_json::{json, Value};
use support::{cancel_after_request, cluster::Cluster, upstream_call};

/// What a survivor tells an upstream server of a dead replica's call.
const SETTLED: &str = "the gateway replica that made this call stopped";

/// A raw client of the load balancer's `/mcp`, in one 2025-11-25 session once initialized.
struct Raw {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
}

/// A response: which replica served it, its status, its messages (JSON, or each SSE event).
struct Served {
    replica: String,
    status: u16,
    messages: Vec<Value>,
}

impl Raw {
    fn new(url: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            session: None,
        }
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, &self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request
    }

    async fn send(&self, message: Value) -> reqwest::Response {
        let sent = self
            .request(reqwest::Method::POST)
            .body(message.to_string());
        sent.send().await.expect("the load balancer answers")
    }

    async fn post(&self, message: Value) -> Served {
        let response = self.send(message).await;
        let replica = replica_of(&response);
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        Served {
            replica,
            status,
            messages: messages_in(&text),
        }
    }

    async fn initialize(&mut self) -> Served {
        let response = self
            .send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                }}),
            )
            .await;
        let session = response.headers().get("mcp-session-id");
        self.session = Some(session.expect("a session").to_str().unwrap().to_owned());
        let replica = replica_of(&response);
        let status = response.status().as_u16();
        let messages = messages_in(&response.text().await.unwrap());
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(self.post(initialized).await.status, 202);
        Served {
            replica,
            status,
            messages,
        }
    }

    async fn list(&self, id: u64) -> Served {
        self.post(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .await
    }
}

fn replica_of(response: &reqwest::Response) -> String {
    let replica = response.headers().get("x-replica");
    replica
        .expect("HAProxy names the replica")
        .to_str()
        .unwrap()
        .to_owned()
}

/// The JSON messages of a body: one JSON message, or an event stream's `data:` lines.
fn messages_in(text: &str) -> Vec<Value> {
    if let Ok(message) = serde_json::from_str(text) {
        return vec![message];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

fn answer(served: &Served) -> &Value {
    let mut answers = served.messages.iter().filter(|m| m.get("id").is_some());
    answers.next_back().expect("an answer")
}

#[actix_rt::test]
async fn a_session_opened_on_one_replica_is_served_by_every_one() {
    let cluster = Cluster::start("served", 3);
    let mut client = Raw::new(&cluster.url);
    let opened = client.initialize().await;
    assert_eq!(opened.status, 200);
    let mut served_by = BTreeSet::from([opened.replica]);
    for id in 1..=3 {
        let listed = client.list(id).await;
        assert_eq!(listed.status, 200, "{:?}", listed.messages);
        let tools = &answer(&listed)["result"]["tools"];
        let names: Vec<&str> = (tools.as_array().unwrap().iter())
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(
            names.contains(&"a__sleep") && names.contains(&"b__echo"),
            "{names:?}"
        );
        served_by.insert(listed.replica);
    }
    assert_eq!(
        served_by.len(),
        3,
        "every replica served the session: {served_by:?}"
    );

    // A call's progress comes back on its own POST, whichever replica took it.
    let progress = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "a__progress", "arguments": {"steps": 3, "interval_ms": 10},
        "_meta": {"progressToken": "p"},
    }});
    let called = client.post(progress).await;
    let updates = (called.messages.iter())
        .filter(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p");
    assert_eq!(updates.count(), 3, "{:?}", called.messages);
    assert_eq!(answer(&called)["id"], 4);

    // Closed at one replica, the session is gone at all of them.
    let closed = client
        .request(reqwest::Method::DELETE)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status().as_u16(), 200);
    for id in 5..=7 {
        assert_eq!(client.list(id).await.status, 404);
    }
}

#[actix_rt::test]
async fn a_session_is_its_owners_only_and_its_id_is_not_enough_to_forge_one() {
    let cluster = Cluster::start("unknown", 3);
    let mut stranger = Raw::new(&cluster.url);
    stranger.session = Some("0123456789abcdef0123456789abcdef".into());
    for id in 1..=3 {
        assert_eq!(stranger.list(id).await.status, 404, "an id never given");
    }
}

#[actix_rt::test]
async fn a_cancel_that_reaches_another_replica_cancels_the_call_upstream() {
    let cluster = Cluster::start("cancel", 3);
    let mut client = Raw::new(&cluster.url);
    client.initialize().await;
    let call = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {
        "name": "a__sleep", "arguments": {"ms": 60_000},
    }});
    let response = client.send(call).await;
    let calling = replica_of(&response);
    let mut stream = response.bytes_stream();
    let upstream_id = upstream_call(&cluster.upstreams, "a", "sleep").await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
        "requestId": 10, "reason": "changed my mind",
    }});
    let cancelled = client.post(cancel).await;
    assert_eq!(cancelled.status, 202);
    assert_ne!(
        cancelled.replica, calling,
        "the cancel reached another replica"
    );
    let read = cancel_after_request(&cluster.upstreams, "a", &upstream_id).await;
    let reason = "cancelled by the downstream client: changed my mind";
    assert_eq!(read["params"]["reason"], reason);
    // The call's POST ends without an answer.
    let mut rest = Vec::new();
    while let Some(Ok(bytes)) = stream.next().await {
        rest.extend_from_slice(&bytes);
    }
    let rest = messages_in(&String::from_utf8_lossy(&rest));
    assert!(rest.iter().all(|m| m.get("result").is_none()), "{rest:?}");
}

#[actix_rt::test]
async fn a_replica_killed_mid_call_leaves_nothing_running_upstream_and_its_sessions_go_on() {
    let mut cluster = Cluster::start("killed", 3);
    let mut client = Raw::new(&cluster.url);
    client.initialize().await;
    let call = json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call", "params": {
        "name": "a__sleep", "arguments": {"ms": 60_000},
    }});
    let response = client.send(call).await;
    let calling = replica_of(&response);
    let mut stream = response.bytes_stream();
    let upstream_id = upstream_call(&cluster.upstreams, "a", "sleep").await;

    cluster.kill(&calling);
    // The call it held fails at its client: its stream ends with no answer.
    let mut body = Vec::new();
    while let Some(Ok(bytes)) = stream.next().await {
        body.extend_from_slice(&bytes);
    }
    let messages = messages_in(&String::from_utf8_lossy(&body));
    assert!(
        messages.iter().all(|m| m.get("result").is_none()),
        "{messages:?}"
    );

    // A survivor cancels what it left running upstream, once its lease lapsed.
    let read = cancel_after_request(&cluster.upstreams, "a", &upstream_id).await;
    assert_eq!(read["params"]["reason"], SETTLED);

    // The session goes on through the others.
    let mut served_by = BTreeSet::new();
    for id in 21..=24 {
        let listed = client.list(id).await;
        assert_eq!(listed.status, 200, "{:?}", listed.messages);
        served_by.insert(listed.replica);
    }
    assert!(!served_by.contains(&calling), "{served_by:?}");
    assert_eq!(served_by.len(), 2, "{served_by:?}");
}
