//! A policy per caller: server `a`'s `access` rules in `mcp.json` (everyone: `echo` and the
//! counter; scope `admin`: everything; the `contractors` group: never `echo`), server `b`
//! open to all. Against a local issuer made in the test, each caller's lists hold only what
//! they may use, a call outside the rules is refused with an error that names what is missing
//! (a `403` scope challenge where a scope would grant it), and nothing of a refused call
//! reaches server `a` (its journal).
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
const BOTH: &str = "application/json, text/event-stream";
/// The gateway's code for a refusal by the access rules.
const FORBIDDEN: i64 = -32003;

struct Guarded {
    gateway: Listening,
    upstreams: Upstreams,
    issuer: Issuer,
    http: reqwest::Client,
}

impl Guarded {
    fn start(name: &str) -> Self {
        let issuer = Issuer::start();
        let access = json!({"access": [
            {"allow": {"tools": ["echo"], "resources": ["demo://counter"]}},
            {"scopes": ["admin"], "allow": {"tools": ["*"], "prompts": ["*"], "resources": ["*"]}},
            {"claims": {"groups": "contractors"}, "deny": {"tools": ["echo"]}},
        ]});
        let upstreams = Upstreams::with(name, access);
        let how = ["--authorization-server", &issuer.url, "--scope", "mcp"];
        let gateway = listen_with(&upstreams, &how);
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        Self {
            gateway,
            upstreams,
            issuer,
            http,
        }
    }

    /// A token of `sub`'s granting `scope`, with `more` claims.
    fn token(&self, sub: &str, scope: &str, more: Value) -> String {
        let now = now();
        let mut claims = json!({"iss": self.issuer.url, "aud": self.gateway.1, "sub": sub,
            "scope": scope, "exp": now + 600, "iat": now});
        for (name, value) in more.as_object().unwrap() {
            claims[name] = value.clone();
        }
        self.issuer.token(claims)
    }

    /// A 2026-07-28 request (no session) with `token`: status, `WWW-Authenticate`, answer.
    async fn modern(&self, token: &str, method: &str, params: Value) -> (u16, String, Value) {
        let mut params = params;
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}});
        let name = params["name"].as_str().or(params["uri"].as_str());
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self.http.post(&self.gateway.1);
        request = request.header("authorization", format!("Bearer {token}"));
        request = request
            .header("accept", BOTH)
            .header("mcp-protocol-version", MODERN);
        request = request.header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let response = request.json(&message).send().await.expect("an answer");
        let status = response.status().as_u16();
        let challenge = response.headers().get("www-authenticate");
        let challenge = challenge.map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        (status, challenge.unwrap_or_default(), answer_of(&body))
    }

    /// The tool names `token`'s caller is listed.
    async fn tools(&self, token: &str) -> Vec<String> {
        let (status, _, answer) = self.modern(token, "tools/list", json!({})).await;
        assert_eq!(status, 200, "{answer}");
        tool_names(&answer)
    }

    /// The `tools/call`s of `tool` server `a` read.
    fn calls_at_a(&self, tool: &str) -> usize {
        let read = self.upstreams.read_by("a");
        read.iter()
            .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .count()
    }
}

/// The tool names of a `tools/list` answer.
fn tool_names(answer: &Value) -> Vec<String> {
    let tools = answer["result"]["tools"].as_array();
    let names = tools
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap().to_owned());
    names.collect()
}

/// The answer of a body: one JSON message, or the event stream's message with an id.
fn answer_of(body: &str) -> Value {
    let body = body.trim();
    if body.starts_with('{') {
        return serde_json::from_str(body).unwrap();
    }
    let data = body.lines().filter_map(|line| line.strip_prefix("data:"));
    let mut messages = data.filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok());
    messages
        .find(|m| m.get("id").is_some())
        .unwrap_or(Value::Null)
}

fn add(a: i64, b: i64) -> Value {
    json!({"name": "a__add", "arguments": {"a": a, "b": b}})
}

#[actix_rt::test]
async fn a_caller_sees_and_calls_only_what_the_rules_grant_and_a_scope_opens_more() {
    let guarded = Guarded::start("access-scope");
    let alice = guarded.token("alice", "mcp", json!({}));
    let tools = guarded.tools(&alice).await;
    assert!(tools.contains(&"a__echo".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"a__add".to_owned()), "{tools:?}");
    assert!(
        tools.contains(&"b__add".to_owned()),
        "server b has no rules: {tools:?}"
    );

    // Outside the rules, with a scope that would grant it: MCP's scope challenge.
    let (status, challenge, answer) = guarded.modern(&alice, "tools/call", add(1, 2)).await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp admin\""), "{challenge}");
    assert_eq!(answer["error"]["code"], FORBIDDEN, "{answer}");
    assert_eq!(answer["error"]["data"]["scope"], "admin", "{answer}");
    let (_, _, read) = guarded
        .modern(&alice, "resources/read", json!({"uri": "demo://blob/1"}))
        .await;
    assert_eq!(read["error"]["code"], FORBIDDEN, "{read}");

    // Stepped up: the same user with the scope sees and calls it.
    let admin = guarded.token("alice", "mcp admin", json!({}));
    assert!(guarded.tools(&admin).await.contains(&"a__add".to_owned()));
    let (status, _, answer) = guarded.modern(&admin, "tools/call", add(2, 3)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "5", "{answer}");
    // Only the admin's call reached server a (the connection is one, in order).
    assert_eq!(guarded.calls_at_a("add"), 1);
}

#[actix_rt::test]
async fn a_deny_for_a_claim_wins_and_no_scope_is_offered_for_it() {
    let guarded = Guarded::start("access-deny");
    let carol = guarded.token(
        "carol",
        "mcp admin",
        json!({"groups": ["staff", "contractors"]}),
    );
    let tools = guarded.tools(&carol).await;
    assert!(!tools.contains(&"a__echo".to_owned()), "{tools:?}");
    assert!(
        tools.contains(&"a__add".to_owned()),
        "admin still opens the rest: {tools:?}"
    );
    let echo = json!({"name": "a__echo", "arguments": {"text": "from carol"}});
    let (status, challenge, answer) = guarded.modern(&carol, "tools/call", echo).await;
    assert_eq!((status, challenge.as_str()), (200, ""), "{answer}");
    assert_eq!(answer["error"]["code"], FORBIDDEN, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("denied") && message.contains("rule 3"),
        "{message}"
    );

    // Someone else still calls echo; carol's call never reached server a.
    let bob = guarded.token("bob", "mcp", json!({}));
    let echo = json!({"name": "a__echo", "arguments": {"text": "from bob"}});
    let (status, _, answer) = guarded.modern(&bob, "tools/call", echo).await;
    assert_eq!(status, 200, "{answer}");
    let read = guarded.upstreams.read_by("a");
    let texts: Vec<&Value> = read
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| &m["params"]["arguments"]["text"])
        .collect();
    assert_eq!(texts, [&json!("from bob")]);
}

#[actix_rt::test]
async fn in_a_session_each_request_is_judged_by_its_own_token() {
    let guarded = Guarded::start("access-session");
    let alice = guarded.token("alice", "mcp", json!({}));
    let admin = guarded.token("alice", "mcp admin", json!({}));
    let post = |token: &str, session: Option<&str>, message: Value| {
        let mut request = guarded.http.post(&guarded.gateway.1);
        request = request.header("authorization", format!("Bearer {token}"));
        request = request
            .header("accept", BOTH)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.json(&message).send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "access", "version": "1"}}});
    let opened = post(&alice, None, initialize).await.unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = opened.text().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = post(&alice, Some(&session), list.clone()).await.unwrap();
    let before = tool_names(&answer_of(&listed.text().await.unwrap()));
    assert!(!before.contains(&"a__add".to_owned()), "{before:?}");
    let listed = post(&admin, Some(&session), list).await.unwrap();
    let after = tool_names(&answer_of(&listed.text().await.unwrap()));
    assert!(after.contains(&"a__add".to_owned()), "{after:?}");
}
