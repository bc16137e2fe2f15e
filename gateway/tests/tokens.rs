//! The gateway as an OAuth protected resource (`--authorization-server ISSUER --scope mcp`) in
//! front of two demo servers, against a local issuer made in the test (`support/issuer.rs`):
//! what a token must be to be let in, what a refusal says on the wire, what the issuer's JWKS
//! is asked for, and that one user's token never opens another user's session or its logs.
//! Every refused call is checked at the upstream server too: nothing of it reached server `a`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

#[path = "support/issuer.rs"]
mod issuer;

use std::time::{Duration, Instant};

use issuer::{now, Issuer};
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{json, Value};
use support::*;
use tokio::sync::mpsc;

const MODERN: &str = "2026-07-28";
const SESSIONS: &str = "2025-11-25";
const BOTH: &str = "application/json, text/event-stream";

/// The gateway requiring tokens of a local issuer, granting `mcp`, before servers `a` and `b`.
struct Protected {
    gateway: Listening,
    upstreams: Upstreams,
    issuer: Issuer,
    http: reqwest::Client,
}

impl Protected {
    fn start(name: &str) -> Self {
        let issuer = Issuer::start();
        let upstreams = Upstreams::new(name);
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

    /// The gateway's resource URL, as it printed it (`http://127.0.0.1:PORT/mcp`).
    fn url(&self) -> &str {
        &self.gateway.1
    }

    /// The claims of a good token of `sub`'s.
    fn claims(&self, sub: &str) -> Value {
        let now = now();
        json!({"iss": self.issuer.url, "aud": self.url(), "sub": sub, "scope": "mcp",
            "exp": now + 600, "iat": now})
    }

    /// A token of alice's: a good one with `changes` to its claims (a null removes the claim).
    fn token(&self, changes: Value) -> String {
        let mut claims = self.claims("alice");
        for (name, value) in changes.as_object().expect("claims") {
            match value {
                Value::Null => claims.as_object_mut().unwrap().remove(name),
                value => claims
                    .as_object_mut()
                    .unwrap()
                    .insert(name.clone(), value.clone()),
            };
        }
        self.issuer.token(claims)
    }

    /// A request to `/mcp` with this `Authorization`.
    fn request(&self, method: Method, authorization: &str) -> RequestBuilder {
        let request = self.http.request(method, self.url());
        request.header("authorization", authorization)
    }

    /// A 2026-07-28 stateless call of `a__echo` with `text`, on `request` (a POST).
    async fn call(&self, request: RequestBuilder, text: &str) -> Response {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "a__echo", "arguments": {"text": text},
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let request = request.header("accept", BOTH);
        let request = request.header("mcp-protocol-version", MODERN);
        let request = request.header("mcp-method", "tools/call");
        let request = request.header("mcp-name", "a__echo").json(&call);
        request.send().await.expect("the gateway answers")
    }

    /// [`call`](Self::call) with `Authorization: Bearer token`.
    async fn call_as(&self, token: &str, text: &str) -> Response {
        let request = self.request(Method::POST, &format!("Bearer {token}"));
        self.call(request, text).await
    }

    /// Whether server `a` read a call of `echo` with `text`.
    fn reached_a(&self, text: &str) -> bool {
        self.upstreams.read_by("a").iter().any(|m| {
            m["method"] == "tools/call"
                && m["params"]["name"] == "echo"
                && m["params"]["arguments"]["text"] == text
        })
    }

    /// `response` is the echo of `text`, and server `a` read its call.
    async fn answered(&self, response: Response, text: &str) {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert_eq!(status, 200, "{text}: {body}");
        let answer = messages(&body).into_iter().find(|m| m.get("id").is_some());
        let echoed = answer
            .as_ref()
            .and_then(|a| a["result"]["content"][0]["text"].as_str());
        assert_eq!(echoed, Some(text), "{answer:?}");
        until(&format!("server a reading {text}"), || {
            self.reached_a(text).then_some(())
        })
        .await;
    }

    /// Nothing of the calls of these texts reached server `a` (asked after a later call was
    /// read there: the connection is one, in order).
    fn never_reached(&self, texts: &[String]) {
        let read = self.upstreams.read_by("a");
        for text in texts {
            let reached = read.iter().any(|m| {
                m["method"] == "tools/call" && m["params"]["arguments"]["text"] == text.as_str()
            });
            assert!(!reached, "{text} reached server a");
        }
    }

    /// A 2025-11-25 session opened with `token` (`initialize`, then `initialized`): its id.
    async fn open_session(&self, token: &str) -> String {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": SESSIONS, "capabilities": {},
            "clientInfo": {"name": "tokens", "version": "1"}}});
        let request = self.request(Method::POST, &format!("Bearer {token}"));
        let opened = request.header("accept", BOTH).json(&initialize).send();
        let opened = opened.await.expect("the gateway answers");
        assert_eq!(opened.status(), 200);
        let id = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = opened.text().await;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let told = self.in_session(Method::POST, token, &id).json(&initialized);
        assert_eq!(told.send().await.unwrap().status(), 202);
        id
    }

    /// A request in session `session` with `token` (for a POST, taking either answer).
    fn in_session(&self, method: Method, token: &str, session: &str) -> RequestBuilder {
        let accept = match method {
            Method::GET => "text/event-stream",
            _ => BOTH,
        };
        let request = self.request(method, &format!("Bearer {token}"));
        let request = request
            .header("mcp-session-id", session)
            .header("accept", accept);
        request.header("mcp-protocol-version", SESSIONS)
    }
}

/// A request `id` of `method` with `params`.
fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `tools/call` request `id` of `name` with `arguments`.
fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

/// The JSON-RPC messages of a body: one JSON answer, or an event stream's.
fn messages(body: &str) -> Vec<Value> {
    let body = body.trim();
    if body.starts_with('{') {
        return serde_json::from_str(body).into_iter().collect();
    }
    let data = body.lines().filter_map(|line| line.strip_prefix("data:"));
    data.filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// `response` is a refusal with `status`, its `WWW-Authenticate` naming `error` if given: that
/// header.
fn refused(response: &Response, status: u16, error: Option<&str>, what: &str) -> String {
    let challenge = response.headers().get("www-authenticate");
    let challenge = challenge.and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(response.status(), status, "{what}: {challenge:?}");
    if let Some(error) = error {
        let named = format!("error=\"{error}\"");
        assert!(challenge.contains(&named), "{what}: {challenge:?}");
    }
    challenge.to_owned()
}

/// Passes each message of `response`'s event stream to `to`, as it comes.
fn follow(mut response: Response, to: mpsc::UnboundedSender<Value>) {
    actix_rt::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                for message in messages(&event) {
                    if to.send(message).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// The messages from `from` up to the log message of `data` (a bound on a hang, not a timing).
async fn until_log(from: &mut mpsc::UnboundedReceiver<Value>, data: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    let wait = async {
        while let Some(message) = from.recv().await {
            let found =
                message["method"] == "notifications/message" && message["params"]["data"] == data;
            seen.push(message);
            if found {
                return true;
            }
        }
        false
    };
    let found = tokio::time::timeout(Duration::from_secs(30), wait).await;
    assert_eq!(found, Ok(true), "no log of {data}: {seen:?}");
    seen
}

#[actix_rt::test]
async fn a_token_without_iss_aud_or_exp_or_for_another_audience_is_refused() {
    let gateway = Protected::start("tokens-claims");
    let mut texts = Vec::new();
    let cases = [
        ("no aud", json!({"aud": null})),
        ("no iss", json!({"iss": null})),
        ("no exp", json!({"exp": null})),
        ("another aud", json!({"aud": "http://other.example/mcp"})),
    ];
    for (what, changes) in cases {
        let response = gateway.call_as(&gateway.token(changes), what).await;
        refused(&response, 401, Some("invalid_token"), what);
        texts.push(what.to_owned());
    }
    let good = gateway.call_as(&gateway.token(json!({})), "good").await;
    gateway.answered(good, "good").await;
    gateway.never_reached(&texts);
}

#[actix_rt::test]
async fn a_token_not_yet_valid_is_refused_and_a_small_clock_skew_is_forgiven() {
    let gateway = Protected::start("tokens-nbf");
    let hour = now() + 3600;
    let mut texts = Vec::new();
    for (what, changes) in [("nbf in an hour", "nbf"), ("iat in an hour", "iat")] {
        let token = gateway.token(json!({ changes: hour }));
        let response = gateway.call_as(&token, what).await;
        refused(&response, 401, Some("invalid_token"), what);
        texts.push(what.to_owned());
    }
    // Within the default leeway (60 s): taken.
    let skewed = gateway.token(json!({"nbf": now() + 10}));
    let response = gateway.call_as(&skewed, "nbf in 10 s").await;
    gateway.answered(response, "nbf in 10 s").await;
    gateway.never_reached(&texts);
}

#[actix_rt::test]
async fn a_token_without_the_scope_is_answered_403_naming_the_scope_and_metadata() {
    let gateway = Protected::start("tokens-scope");
    let metadata = gateway
        .url()
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    let mut texts = Vec::new();
    let cases = [
        ("other scopes", json!({"scope": "openid profile"})),
        ("no scope", json!({"scope": null})),
    ];
    for (what, changes) in cases {
        let response = gateway.call_as(&gateway.token(changes), what).await;
        let challenge = refused(&response, 403, Some("insufficient_scope"), what);
        assert!(challenge.contains("scope=\"mcp\""), "{challenge}");
        let named = format!("resource_metadata=\"{metadata}\"");
        assert!(challenge.contains(&named), "{challenge}");
        texts.push(what.to_owned());
    }
    let good = gateway.call_as(&gateway.token(json!({})), "good").await;
    gateway.answered(good, "good").await;
    gateway.never_reached(&texts);
}

/// The URL a DPoP proof is checked against is the one the gateway serves, not one a client
/// names in forwarding headers (a proof made for another server is not let in here).
#[actix_rt::test]
async fn a_dpop_proof_for_another_host_named_in_forwarding_headers_is_refused() {
    let gateway = Protected::start("tokens-dpop");
    let key = gateway.issuer.dpop_key();
    let token = gateway.issuer.bound_token(gateway.claims("alice"), &key);
    let proof = |htu: &str| gateway.issuer.dpop_proof(&key, "POST", htu, &token);
    let post = || gateway.request(Method::POST, &format!("DPoP {token}"));
    let elsewhere = "https://other.example/mcp";
    let forwarded = [
        (
            "x-forwarded",
            post()
                .header("x-forwarded-host", "other.example")
                .header("x-forwarded-proto", "https"),
        ),
        (
            "forwarded",
            post().header("forwarded", "host=other.example;proto=https"),
        ),
    ];
    let mut texts = Vec::new();
    for (what, request) in forwarded {
        let response = gateway
            .call(request.header("dpop", proof(elsewhere)), what)
            .await;
        refused(&response, 401, None, what);
        texts.push(what.to_owned());
    }
    let own = post().header("dpop", proof(gateway.url()));
    let response = gateway.call(own, "own url").await;
    gateway.answered(response, "own url").await;
    gateway.never_reached(&texts);
}

impl Protected {
    /// `size` calls at once, each with a token naming a key the issuer does not have: each
    /// refused (`401`). Their texts.
    async fn unknown_keys(&self, wave: &str, size: usize) -> Vec<String> {
        let calls = (0..size).map(|i| async move {
            let text = format!("{wave} {i}");
            let claims = self.claims("alice");
            let token = self.issuer.token_with_kid(claims, &format!("kid {text}"));
            let response = self.call_as(&token, &text).await;
            refused(&response, 401, Some("invalid_token"), &text);
            text
        });
        futures::future::join_all(calls).await
    }

    /// Waves of [`unknown_keys`](Self::unknown_keys), the first at once, until one brings the
    /// issuer a JWKS fetch (the gateway may fetch again only once in a while: a bound, not a
    /// timing): how many fetches that wave brought. The texts sent go to `texts`.
    async fn until_a_fetch(&self, phase: &str, size: usize, texts: &mut Vec<String>) -> usize {
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut wave = 0;
        loop {
            let before = self.issuer.fetches();
            texts.extend(self.unknown_keys(&format!("{phase} {wave}"), size).await);
            let brought = self.issuer.fetches() - before;
            if brought > 0 {
                return brought;
            }
            assert!(Instant::now() < deadline, "no JWKS fetch for unknown keys");
            tokio::time::sleep(Duration::from_millis(250)).await;
            wave += 1;
        }
    }
}

/// Tokens naming keys the issuer does not have do not make the gateway hammer the issuer's
/// JWKS: 40 such calls at once bring one fetch at most, even when the gateway may fetch again;
/// a fetch that failed counts as one too. The keys it holds keep serving meanwhile.
#[actix_rt::test]
async fn bursts_of_unknown_key_ids_fetch_the_jwks_at_most_once_even_when_it_fails() {
    let gateway = Protected::start("tokens-burst");
    let mut texts = Vec::new();
    // The first wave right after startup (the startup fetch is recent): no fetch, or one.
    let brought = gateway.until_a_fetch("unknown", 40, &mut texts).await;
    assert_eq!(brought, 1, "40 calls at once brought {brought} fetches");

    gateway.issuer.fail_jwks(true);
    let brought = gateway.until_a_fetch("failing", 20, &mut texts).await;
    let before = gateway.issuer.fetches();
    texts.extend(gateway.unknown_keys("failing again", 20).await);
    let again = gateway.issuer.fetches() - before;
    let what = "fetches of a failing JWKS: by the wave that brought one, by the next";
    assert_eq!((brought, again), (1, 0), "{what}");

    let good = gateway.call_as(&gateway.token(json!({})), "good").await;
    gateway.answered(good, "good").await;
    gateway.never_reached(&texts);
}

#[actix_rt::test]
async fn a_token_of_the_issuers_new_key_is_taken_after_it_rotates() {
    let gateway = Protected::start("tokens-rotation");
    let before = gateway.call_as(&gateway.token(json!({})), "before").await;
    gateway.answered(before, "before").await;
    gateway.issuer.rotate();
    let token = gateway.token(json!({}));
    // The gateway may fetch the JWKS again only once in a while (a bound, not a timing).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut attempt = 0;
    let (response, text) = loop {
        attempt += 1;
        let text = format!("rotated {attempt}");
        let response = gateway.call_as(&token, &text).await;
        if response.status() != 401 || Instant::now() > deadline {
            break (response, text);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    gateway.answered(response, &text).await;
}

/// Bob's token with Alice's session id: every method answered 404 (no such session for him),
/// nothing of his reaches upstream, and her session is still hers.
#[actix_rt::test]
async fn another_users_token_cannot_use_or_close_a_session() {
    let gateway = Protected::start("tokens-sessions");
    let alice = gateway.issuer.token(gateway.claims("alice"));
    let bob = gateway.issuer.token(gateway.claims("bob"));
    let session = gateway.open_session(&alice).await;

    let echo = |id, text| tool_call(id, "a__echo", json!({ "text": text }));
    let post = gateway.in_session(Method::POST, &bob, &session);
    let post = post.json(&echo(2, "bob intrudes")).send().await.unwrap();
    let get = gateway.in_session(Method::GET, &bob, &session).send();
    let get = get.await.unwrap();
    let delete = gateway.in_session(Method::DELETE, &bob, &session).send();
    let delete = delete.await.unwrap();
    let statuses = [post.status(), get.status(), delete.status()].map(|s| s.as_u16());
    assert_eq!(statuses, [404, 404, 404], "bob's POST, GET and DELETE");
    drop((post, get, delete));

    let hers = gateway.in_session(Method::POST, &alice, &session);
    let hers = hers
        .json(&echo(3, "alice still here"))
        .send()
        .await
        .unwrap();
    gateway.answered(hers, "alice still here").await;
    gateway.never_reached(&["bob intrudes".to_owned()]);
}

/// A user's 2025-11-25 session asking for logs, its GET stream open: what comes on it, and
/// on its calls' streams, comes to `from`.
struct Listener {
    token: String,
    session: String,
    to: mpsc::UnboundedSender<Value>,
    from: mpsc::UnboundedReceiver<Value>,
}

impl Protected {
    async fn listener(&self, user: &str) -> Listener {
        let token = self.issuer.token(self.claims(user));
        let session = self.open_session(&token).await;
        let level = request(2, "logging/setLevel", json!({"level": "debug"}));
        let set = self.in_session(Method::POST, &token, &session).json(&level);
        let set = set.send().await.unwrap().text().await.unwrap();
        assert!(
            messages(&set).iter().any(|m| m["result"].is_object()),
            "{set}"
        );
        let get = self.in_session(Method::GET, &token, &session).send();
        let get = get.await.unwrap();
        assert_eq!(get.status(), 200, "{user}'s GET stream");
        let (to, from) = mpsc::unbounded_channel();
        follow(get, to.clone());
        Listener {
            token,
            session,
            to,
            from,
        }
    }

    /// `user` calls `a__log` with `message`: what came to them up to its log message (on the
    /// call's stream or the session's GET stream).
    async fn log(&self, user: &mut Listener, message: &str) -> Vec<Value> {
        let arguments = json!({"level": "info", "message": message});
        let call = tool_call(3, "a__log", arguments);
        let call = self
            .in_session(Method::POST, &user.token, &user.session)
            .json(&call);
        let call = call.send().await.unwrap();
        assert_eq!(call.status(), 200, "{message}");
        follow(call, user.to.clone());
        until_log(&mut user.from, message).await
    }
}

/// Two users' sessions, both asking for logs: a log of Alice's call never reaches Bob's
/// streams (it would come before his own log, on the one upstream connection).
#[actix_rt::test]
async fn one_users_upstream_logs_never_reach_another_users_session() {
    let gateway = Protected::start("tokens-logs");
    let mut alice = gateway.listener("alice").await;
    let mut bob = gateway.listener("bob").await;
    gateway.log(&mut alice, "alice-secret").await;
    let bobs = gateway.log(&mut bob, "bob-marker").await;
    let leaked = bobs.iter().any(|m| m["params"]["data"] == "alice-secret");
    assert!(!leaked, "bob was told alice's log: {bobs:?}");
}
