//! Authorization as the servers see it: one scripted actix-web server on 127.0.0.1 plays the MCP
//! resource server (`/mcp`, `401` without a valid token) and its authorization server (metadata,
//! registration, an authorization endpoint that approves by itself, a token endpoint the test can
//! hold, fail, or make issue refresh tokens). What is asserted is what reached them.
#![cfg(all(feature = "auth", feature = "actix-web"))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{
    future::IntoFuture,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use actix_mcp::{
    auth::{
        AgentFuture, Credentials, FileStore, Headless, Lease, OAuth, OAuthConfig, StoreFuture,
        UserAgent,
    },
    AuthErrorKind, Cancellation, Client, Error, HttpTransport,
};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::{json, Value};
use tokio::sync::Notify;

mod common;
use common::eventually;

#[cfg(feature = "redis")]
#[path = "support/redis.rs"]
mod redis_server;
#[path = "../examples/web_auth.rs"]
#[allow(dead_code, reason = "the example's main is not run here")]
mod web_auth;

#[derive(Default)]
struct Servers {
    base: Mutex<String>,
    /// The token the resource server accepts now (`None`: none yet, or revoked).
    valid: Mutex<Option<String>>,
    issued: AtomicU64,
    authorizations: AtomicUsize,
    token_requests: AtomicUsize,
    refresh_grants: AtomicUsize,
    /// Token requests wait here while set (the test releases them).
    hold_tokens: AtomicBool,
    release: Notify,
    /// The token endpoint refuses every grant.
    refuse_tokens: AtomicBool,
    /// The token endpoint answers 200 and then one byte of its body every 200 ms, for ever.
    drip_tokens: AtomicBool,
    /// Issue refresh tokens, and access tokens that expire after this many seconds.
    refresh: AtomicBool,
    expires_in: AtomicU64,
    /// Every `/mcp` POST: (its JSON-RPC body, the token it carried, whether it was accepted).
    posts: Mutex<Vec<(Value, Option<String>, bool)>>,
    /// The `slow` call's answer waits for this.
    slow: Notify,
    /// The protected resource metadata is only where the `Bearer` challenge says, after a
    /// `DPoP` challenge in another `WWW-Authenticate` value.
    hidden_metadata: AtomicBool,
    /// Requests for either metadata document.
    metadata_fetches: AtomicUsize,
    /// Every `DELETE`: the token it carried, whether it was accepted, its `MCP-Protocol-Version`.
    deletes: Mutex<Vec<Delete>>,
}

/// A `DELETE` as the server saw it: its token, whether it was accepted, its version header.
type Delete = (Option<String>, bool, Option<String>);

impl Servers {
    fn accepted_calls(&self, id: &Value) -> usize {
        let posts = self.posts.lock().unwrap();
        posts.iter().filter(|p| p.0["id"] == *id && p.2).count()
    }

    /// `notifications/cancelled` for `id`, accepted or not.
    fn cancels_of(&self, id: &Value) -> usize {
        let posts = self.posts.lock().unwrap();
        posts
            .iter()
            .filter(|p| {
                p.0["method"] == "notifications/cancelled" && p.0["params"]["requestId"] == *id
            })
            .count()
    }

    fn issue(&self) -> Value {
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("tok-{n}");
        *self.valid.lock().unwrap() = Some(token.clone());
        let mut answer = json!({"access_token": token, "token_type": "Bearer",
            "expires_in": self.expires_in.load(Ordering::SeqCst).max(1)});
        if self.expires_in.load(Ordering::SeqCst) == 0 {
            answer["expires_in"] = json!(3600);
        }
        if self.refresh.load(Ordering::SeqCst) {
            answer["refresh_token"] = json!(format!("refresh-{n}"));
        }
        answer
    }
}

async fn mcp(req: HttpRequest, body: web::Bytes, servers: web::Data<Servers>) -> HttpResponse {
    let base = servers.base.lock().unwrap().clone();
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let valid = token.is_some() && *servers.valid.lock().unwrap() == token;
    if req.method() == actix_web::http::Method::DELETE {
        let version = req.headers().get("mcp-protocol-version");
        let version = version.and_then(|v| v.to_str().ok()).map(str::to_owned);
        servers
            .deletes
            .lock()
            .unwrap()
            .push((token, valid, version));
        return if valid {
            HttpResponse::Ok().finish()
        } else {
            HttpResponse::Unauthorized().finish()
        };
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = body["method"].as_str().unwrap_or("").to_owned();
    let id = body["id"].clone();
    servers
        .posts
        .lock()
        .unwrap()
        .push((body.clone(), token, valid));
    if !valid && servers.hidden_metadata.load(Ordering::SeqCst) {
        return HttpResponse::Unauthorized()
            .append_header(("www-authenticate", r#"DPoP algs="ES256""#))
            .append_header((
                "www-authenticate",
                format!(
                    r#"Bearer error="invalid_token", resource_metadata="{base}/hidden/mcp.json""#
                ),
            ))
            .json(json!({"error": "invalid_token"}));
    }
    if !valid {
        return HttpResponse::Unauthorized()
            .insert_header((
                "www-authenticate",
                format!(
                    r#"Bearer error="invalid_token", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                ),
            ))
            .json(json!({"error": "invalid_token"}));
    }
    if id.is_null() {
        return HttpResponse::Accepted().finish();
    }
    let result = match method.as_str() {
        "initialize" => {
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted-protected", "version": "1"}});
            return HttpResponse::Ok()
                .insert_header(("mcp-session-id", "protected-session"))
                .json(json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
        "tools/call" if body["params"]["name"] == "slow" => {
            servers.slow.notified().await;
            json!({"content": [{"type": "text", "text": "slow done"}]})
        }
        "tools/call" => {
            let arguments = &body["params"]["arguments"];
            let text = arguments.get("text").unwrap_or(&arguments["message"]);
            json!({"content": [{"type": "text", "text": text}]})
        }
        "tools/list" => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
        _ => json!({}),
    };
    HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

async fn authorization_server(
    req: HttpRequest,
    body: web::Bytes,
    servers: web::Data<Servers>,
) -> HttpResponse {
    let base = servers.base.lock().unwrap().clone();
    let hidden = servers.hidden_metadata.load(Ordering::SeqCst);
    if req.path().contains("well-known") {
        servers.metadata_fetches.fetch_add(1, Ordering::SeqCst);
    }
    match req.path() {
        "/.well-known/oauth-protected-resource/mcp" if hidden => HttpResponse::NotFound().finish(),
        "/.well-known/oauth-protected-resource/mcp" | "/hidden/mcp.json" => HttpResponse::Ok()
            .json(json!({
            "resource": format!("{base}/mcp"), "authorization_servers": [base]})),
        "/.well-known/oauth-authorization-server" => HttpResponse::Ok().json(json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "registration_endpoint": format!("{base}/register"),
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "authorization_response_iss_parameter_supported": true})),
        "/register" => HttpResponse::Created().json(json!({
            "client_id": "registered-client", "client_secret": "registered-s3cret",
            "token_endpoint_auth_method": "client_secret_basic"})),
        "/authorize" => {
            servers.authorizations.fetch_add(1, Ordering::SeqCst);
            let query: Vec<(String, String)> =
                url::form_urlencoded::parse(req.query_string().as_bytes())
                    .into_owned()
                    .collect();
            let get = |name: &str| {
                query
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let location = format!(
                "{}?code=c0de&state={}&iss={}",
                get("redirect_uri"),
                get("state"),
                base
            );
            HttpResponse::Found()
                .insert_header(("location", location))
                .finish()
        }
        "/token" => {
            servers.token_requests.fetch_add(1, Ordering::SeqCst);
            let form: Vec<(String, String)> =
                url::form_urlencoded::parse(&body).into_owned().collect();
            if form
                .iter()
                .any(|(k, v)| k == "grant_type" && v == "refresh_token")
            {
                servers.refresh_grants.fetch_add(1, Ordering::SeqCst);
            }
            while servers.hold_tokens.load(Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_millis(5), servers.release.notified())
                    .await;
            }
            if servers.drip_tokens.load(Ordering::SeqCst) {
                return HttpResponse::Ok()
                    .content_type("application/json")
                    .streaming(drip());
            }
            if servers.refuse_tokens.load(Ordering::SeqCst) {
                return HttpResponse::BadRequest().json(json!({"error": "invalid_grant",
                    "error_description": "the code is not valid"}));
            }
            HttpResponse::Ok().json(servers.issue())
        }
        _ => HttpResponse::NotFound().finish(),
    }
}

/// A body that never ends: a space every 200 ms.
fn drip() -> impl futures::Stream<Item = Result<web::Bytes, actix_web::Error>> {
    futures::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Some((Ok(web::Bytes::from_static(b" ")), ()))
    })
}

fn start() -> (String, Arc<Servers>) {
    let servers = web::Data::new(Servers::default());
    let data = servers.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/mcp", web::post().to(mcp))
            .route("/mcp", web::delete().to(mcp))
            .default_service(web::to(authorization_server))
    })
    .workers(2)
    .bind(("127.0.0.1", 0))
    .expect("bind 127.0.0.1");
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    let base = format!("http://127.0.0.1:{port}");
    *servers.base.lock().unwrap() = base.clone();
    (format!("{base}/mcp"), servers.into_inner())
}

fn oauth() -> OAuth {
    OAuth::new(
        Headless::new("http://127.0.0.1:9/callback"),
        OAuthConfig::default(),
    )
}

/// Connects through the authorization flow and waits until the handshake's last message was
/// accepted, so a test's revocation meets only its own requests.
async fn connect(url: &str, oauth: &OAuth, servers: &Servers) -> Client {
    let client = Client::connect(HttpTransport::new(url).auth(oauth.clone()))
        .await
        .expect("connect through the authorization flow");
    eventually("the handshake is over", || {
        servers
            .posts
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.0["method"] == "notifications/initialized" && p.2)
    })
    .await;
    client
}

/// How many `tools/call` POSTs the resource server refused.
fn refused_calls(servers: &Servers) -> usize {
    let posts = servers.posts.lock().unwrap();
    posts
        .iter()
        .filter(|p| p.0["method"] == "tools/call" && !p.2)
        .count()
}

fn echo(client: &Client, text: &str) -> actix_mcp::CallFuture<actix_mcp::CallToolResult> {
    client
        .call_tool("echo", json!({"text": text}))
        .into_future()
}

/// Issue 20: closing ends the session with a `DELETE` through the authorized path: the token and
/// the protocol version on it, so the server accepts it (it was sent bare and refused `401`).
#[actix::test]
async fn the_closing_delete_carries_the_token_and_the_version() {
    let (url, servers) = start();
    let client = connect(&url, &oauth(), &servers).await;
    assert_eq!(echo(&client, "hi").await.unwrap().text(), "hi");
    client.shutdown().await;
    let deletes = servers.deletes.lock().unwrap().clone();
    let held = servers.valid.lock().unwrap().clone();
    assert_eq!(deletes, [(held, true, Some("2025-11-25".to_owned()))]);
}

/// Issue 20: a run with a stored token sent an unauthenticated POST and fetched both metadata
/// documents before using it. The token kept for this server goes on the very first request;
/// refused (revoked), it costs one `401` and a refresh, not the browser.
#[actix::test]
async fn a_stored_token_is_sent_first_without_discovery() {
    let (url, servers) = start();
    servers.refresh.store(true, Ordering::SeqCst);
    let path = std::env::temp_dir().join(format!("stored-first-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let oauth = || {
        let config = OAuthConfig::default().store(FileStore::new(&path));
        OAuth::new(Headless::new("http://127.0.0.1:9/callback"), config)
    };
    let first = connect(&url, &oauth(), &servers).await;
    assert_eq!(echo(&first, "one").await.unwrap().text(), "one");
    first.shutdown().await;

    // The next run, as a CLI's would be: the same file, a new OAuth.
    let (posts, fetches) = (
        servers.posts.lock().unwrap().len(),
        servers.metadata_fetches.load(Ordering::SeqCst),
    );
    let second = Client::connect(HttpTransport::new(&url).auth(oauth()))
        .await
        .unwrap();
    assert_eq!(echo(&second, "two").await.unwrap().text(), "two");
    let refused = servers.posts.lock().unwrap()[posts..]
        .iter()
        .filter(|p| !p.2)
        .count();
    assert_eq!(
        refused, 0,
        "every request of the second run carried the token"
    );
    assert_eq!(
        servers.metadata_fetches.load(Ordering::SeqCst),
        fetches,
        "no discovery"
    );
    second.shutdown().await;

    // Revoked meanwhile: one 401, then the stored refresh token, never the browser again.
    *servers.valid.lock().unwrap() = None;
    let third = Client::connect(HttpTransport::new(&url).auth(oauth()))
        .await
        .unwrap();
    assert_eq!(echo(&third, "three").await.unwrap().text(), "three");
    assert_eq!(servers.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(servers.refresh_grants.load(Ordering::SeqCst), 1);
    let _ = std::fs::remove_file(&path);
}

/// A store whose every write fails, as on a read-only mount (its reads find nothing).
struct ReadOnlyStore;

impl actix_mcp::auth::CredentialStore for ReadOnlyStore {
    fn read<'a>(&'a self, _key: &'a str) -> StoreFuture<'a, Option<actix_mcp::auth::Stored>> {
        Box::pin(async { Ok(None) })
    }

    fn write<'a>(
        &'a self,
        _key: &'a str,
        _credentials: &'a Credentials,
        _lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async { Err(read_only()) })
    }

    fn remove<'a>(&'a self, _key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async { Err(read_only()) })
    }

    fn try_lease<'a>(&'a self, _key: &'a str, _ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async { Err(read_only()) })
    }

    fn renew<'a>(&'a self, _lease: &'a Lease, _ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async { Err(read_only()) })
    }

    fn release<'a>(&'a self, _lease: &'a Lease) -> StoreFuture<'a, ()> {
        Box::pin(async { Err(read_only()) })
    }
}

fn read_only() -> actix_mcp::auth::StoreError {
    actix_mcp::auth::StoreError::Unavailable("read-only file system".into())
}

/// A store that cannot be written cannot coordinate the sign-in with other processes: that
/// costs the coordination, not the sign-in, which runs here (as before there was any to
/// coordinate), and the calls are answered.
#[actix::test]
async fn a_store_that_cannot_be_written_still_lets_the_user_sign_in() {
    let (url, servers) = start();
    let config = OAuthConfig::default().store(ReadOnlyStore);
    let oauth = OAuth::new(Headless::new("http://127.0.0.1:9/callback"), config);
    let client = connect(&url, &oauth, &servers).await;
    assert_eq!(
        echo(&client, "signed in").await.unwrap().text(),
        "signed in"
    );
    assert_eq!(servers.authorizations.load(Ordering::SeqCst), 1);
    client.shutdown().await;
}

/// A thousand requests meet `401` at once (the token was revoked): one authorization and one
/// token request serve them all, and each request reaches the server once with the new token.
#[actix::test]
async fn a_thousand_requests_that_meet_401_share_one_authorization() {
    let (url, servers) = start();
    let oauth = oauth();
    let client = connect(&url, &oauth, &servers).await;
    assert_eq!(servers.authorizations.load(Ordering::SeqCst), 1);
    *servers.valid.lock().unwrap() = None; // revoked

    let calls: Vec<_> = (0..1000).map(|i| echo(&client, &i.to_string())).collect();
    let ids: Vec<Value> = calls.iter().map(|c| json!(c.id().as_u64())).collect();
    let outcomes = futures::future::join_all(calls).await;
    for (i, outcome) in outcomes.iter().enumerate() {
        assert_eq!(
            outcome
                .as_ref()
                .expect("retried after authorization")
                .text(),
            i.to_string()
        );
    }
    assert_eq!(
        servers.authorizations.load(Ordering::SeqCst),
        2,
        "one more authorization"
    );
    assert_eq!(
        servers.token_requests.load(Ordering::SeqCst),
        2,
        "one more token request"
    );
    for id in &ids {
        assert_eq!(servers.accepted_calls(id), 1, "each request is served once");
    }
}

#[actix::test]
async fn the_bearer_challenge_is_read_after_a_dpop_one_in_another_header() {
    let (url, servers) = start();
    servers.hidden_metadata.store(true, Ordering::SeqCst);
    let oauth = oauth();
    let client = connect(&url, &oauth, &servers).await;
    assert_eq!(
        echo(&client, "found").await.expect("authorized").text(),
        "found"
    );
    assert_eq!(servers.authorizations.load(Ordering::SeqCst), 1);
}

/// A request waiting for authorization is cancelled: its caller is woken at once, and nothing of
/// it reaches the server afterwards (no retry, no `notifications/cancelled`).
#[actix::test]
async fn a_request_cancelled_while_waiting_for_authorization_is_never_sent() {
    let (url, servers) = start();
    let oauth = oauth();
    let client = connect(&url, &oauth, &servers).await;
    *servers.valid.lock().unwrap() = None;
    servers.hold_tokens.store(true, Ordering::SeqCst);

    let token = Cancellation::new();
    let call = client
        .call_tool("echo", json!({"text": "never"}))
        .cancellation(&token)
        .into_future();
    let id = json!(call.id().as_u64());
    let call = actix_rt::spawn(call);
    eventually(
        "the call met 401 and the flow waits at the token endpoint",
        || refused_calls(&servers) == 1 && servers.token_requests.load(Ordering::SeqCst) == 2,
    )
    .await;
    token.cancel_with_reason("user gave up");
    let outcome = call.await.expect("the call task");
    assert!(
        outcome.unwrap_err().is_cancelled(),
        "woken while authorization is pending"
    );

    servers.hold_tokens.store(false, Ordering::SeqCst);
    servers.release.notify_waiters();
    let after = echo(&client, "after").await.expect("later calls work");
    assert_eq!(after.text(), "after");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        servers.accepted_calls(&id),
        0,
        "the cancelled request was never sent again: {:?}",
        servers.posts.lock().unwrap()
    );
    assert_eq!(
        servers.cancels_of(&id),
        0,
        "and no cancel was written for it"
    );
}

/// Issue 20: a request waiting for authorization does not time out meanwhile (a sign-in has a
/// bound of its own, and a person in a browser takes minutes); sent again, its timeout starts
/// again in full. It used to fail with the connect or request timeout while the user signed in.
#[actix::test]
async fn a_request_waiting_for_sign_in_has_its_timeout_paused() {
    let (url, servers) = start();
    let oauth = oauth();
    let client = connect(&url, &oauth, &servers).await;
    *servers.valid.lock().unwrap() = None;
    servers.hold_tokens.store(true, Ordering::SeqCst);

    let call = client
        .call_tool("echo", json!({"text": "signed in"}))
        .timeout(Duration::from_secs(1))
        .into_future();
    let call = actix_rt::spawn(call);
    eventually(
        "the call met 401 and the flow waits at the token endpoint",
        || refused_calls(&servers) == 1 && servers.token_requests.load(Ordering::SeqCst) == 2,
    )
    .await;
    // Longer than the call's timeout: it would have expired while the user signed in.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!call.is_finished(), "still waiting for the sign-in");
    servers.hold_tokens.store(false, Ordering::SeqCst);
    servers.release.notify_waiters();
    let answer = call
        .await
        .expect("the call task")
        .expect("answered after sign-in");
    assert_eq!(answer.text(), "signed in");
}

/// A user agent whose browser never comes back.
struct NeverBack;

impl UserAgent for NeverBack {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1:9/callback".into()
    }

    fn authorize(&self, _url: url::Url) -> AgentFuture {
        Box::pin(futures::future::pending())
    }
}

/// Issue 20: the sign-in is bounded by its own timeout, and says it waited for the browser (it
/// used to end with the connect timeout's "request timed out").
#[actix::test]
async fn a_sign_in_that_never_comes_back_ends_with_its_own_error() {
    let (url, _servers) = start();
    let config = OAuthConfig::default().sign_in_timeout(Duration::from_millis(300));
    let oauth = OAuth::new(NeverBack, config);
    let outcome = Client::connect(HttpTransport::new(&url).auth(oauth)).await;
    match outcome {
        Err(Error::Unauthorized { kind, message }) => {
            assert_eq!(kind, AuthErrorKind::SignInTimedOut);
            assert!(message.contains("browser"), "{message}");
        }
        other => panic!("expected the sign-in's own timeout, got {other:?}"),
    }
}

/// Issue 34: after the browser step, a token endpoint that never answers, or answers a byte at
/// a time, fails the sign-in within the request timeout with an error naming the endpoint (it
/// waited 30 s whatever the user had set).
#[actix::test]
async fn a_token_endpoint_that_hangs_or_drips_fails_within_the_request_timeout() {
    for drips in [false, true] {
        let (url, servers) = start();
        servers.hold_tokens.store(!drips, Ordering::SeqCst);
        servers.drip_tokens.store(drips, Ordering::SeqCst);
        let config = OAuthConfig::default().request_timeout(Duration::from_millis(300));
        let oauth = OAuth::new(Headless::new("http://127.0.0.1:9/callback"), config);
        let connect = Client::connect(HttpTransport::new(&url).auth(oauth));
        // Well under the 30 s the library waited before: the bound set is what ended it.
        let outcome = tokio::time::timeout(Duration::from_secs(20), connect).await;
        let base = servers.base.lock().unwrap().clone();
        match outcome {
            Ok(Err(Error::Unauthorized { kind, message })) => {
                assert_eq!(kind, AuthErrorKind::TimedOut, "{message}");
                assert!(
                    message.contains(&format!("{base} did not answer within 300 ms")),
                    "drips {drips}: {message}"
                );
            }
            Ok(other) => panic!("drips {drips}: expected TimedOut, got {other:?}"),
            Err(_) => panic!("drips {drips}: the token request was not bounded"),
        }
        assert_eq!(servers.token_requests.load(Ordering::SeqCst), 1);
    }
}

/// The authorization server refuses the grant: every waiting request ends with a typed error
/// (one token request for all of them), none hangs, and the error holds no secret.
#[actix::test]
async fn a_failed_authorization_ends_every_waiting_request_with_a_typed_error() {
    let (url, servers) = start();
    let oauth = oauth();
    let client = connect(&url, &oauth, &servers).await;
    *servers.valid.lock().unwrap() = None;
    servers.refuse_tokens.store(true, Ordering::SeqCst);
    servers.hold_tokens.store(true, Ordering::SeqCst);

    let calls: Vec<_> = (0..50)
        .map(|i| actix_rt::spawn(echo(&client, &i.to_string())))
        .collect();
    // All fifty wait for the one flow, which then fails.
    eventually("every call met 401", || refused_calls(&servers) == 50).await;
    servers.hold_tokens.store(false, Ordering::SeqCst);
    servers.release.notify_waiters();
    let outcomes: Vec<_> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|joined| joined.expect("the call task"))
        .collect();
    for outcome in outcomes {
        match outcome.unwrap_err() {
            Error::Unauthorized { kind, message } => {
                assert_eq!(kind, AuthErrorKind::Token);
                assert!(message.contains("invalid_grant"), "{message}");
                assert!(!message.contains("s3cret") && !message.contains("c0de"));
            }
            other => panic!("expected Unauthorized, got {other:?}"),
        }
    }
    assert_eq!(
        servers.token_requests.load(Ordering::SeqCst),
        2,
        "one try for all of them"
    );
    assert!(!client.is_closed(), "the connection itself goes on");
}

/// With refresh tokens: a `401` is answered by a refresh, not a new authorization; a token about
/// to expire is refreshed before the next request, while a long request's stream stays open.
#[actix::test]
async fn tokens_are_refreshed_on_401_and_before_expiry_while_a_request_runs() {
    let (url, servers) = start();
    servers.refresh.store(true, Ordering::SeqCst);
    let oauth = oauth();
    let client = connect(&url, &oauth, &servers).await;

    *servers.valid.lock().unwrap() = None;
    assert_eq!(echo(&client, "a").await.unwrap().text(), "a");
    assert_eq!(
        servers.authorizations.load(Ordering::SeqCst),
        1,
        "no new authorization"
    );
    assert_eq!(
        servers.refresh_grants.load(Ordering::SeqCst),
        1,
        "a refresh instead"
    );

    // Tokens of 2 s from now on: due for a refresh after half their life (1 s).
    servers.expires_in.store(2, Ordering::SeqCst);
    *servers.valid.lock().unwrap() = None;
    assert_eq!(echo(&client, "b").await.unwrap().text(), "b");
    let refreshes = servers.refresh_grants.load(Ordering::SeqCst);
    let slow = actix_rt::spawn(client.call_tool("slow", json!({})).into_future());
    eventually("the slow call runs", || {
        servers
            .posts
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.0["params"]["name"] == "slow" && p.2)
    })
    .await;
    assert_eq!(
        servers.refresh_grants.load(Ordering::SeqCst),
        refreshes,
        "a token just granted is not refreshed (it was, on every request, when shorter than 30 s)"
    );
    // Expiry is in whole seconds: past a second, the token is due whatever the rounding.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(echo(&client, "c").await.unwrap().text(), "c");
    assert!(
        servers.refresh_grants.load(Ordering::SeqCst) > refreshes,
        "refreshed before sending, the token being about to expire"
    );
    servers.slow.notify_waiters();
    assert_eq!(slow.await.unwrap().unwrap().text(), "slow done");
}

/// Tokens, secrets and codes never show in `Debug`.
#[actix::test]
async fn secrets_never_show_in_debug_output() {
    let (url, _servers) = start();
    let config = OAuthConfig::default()
        .client_id("pre")
        .client_secret("pre-s3cret");
    let oauth = OAuth::new(Headless::new("http://127.0.0.1:9/callback"), config);
    let transport = HttpTransport::new(&url).auth(oauth.clone());
    let shown = format!("{oauth:?} {transport:?}");
    assert!(!shown.contains("pre-s3cret"), "{shown}");
    let credentials = Credentials {
        client_id: "c".into(),
        client_secret: Some("s3cret".into()),
        access_token: Some("tok-secret".into()),
        refresh_token: Some("refresh-secret".into()),
        ..Credentials::default()
    };
    let shown = format!("{credentials:?}");
    assert!(
        !shown.contains("s3cret")
            && !shown.contains("tok-secret")
            && !shown.contains("refresh-secret")
    );
}

/// A browser that follows no redirect: each step of a sign-in is the test's.
#[derive(Clone)]
struct Browser(reqwest::Client);

impl Browser {
    fn new() -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client");
        Self(client)
    }

    async fn get(&self, url: String) -> reqwest::Response {
        self.0.get(url).send().await.expect("GET")
    }

    async fn get_with_cookie(&self, url: String, cookie: &str) -> reqwest::Response {
        let request = self.0.get(url).header("cookie", cookie);
        request.send().await.expect("GET")
    }
}

/// Where a redirect sends the browser.
fn location(response: &reqwest::Response) -> String {
    response.headers()["location"]
        .to_str()
        .expect("a redirect")
        .to_owned()
}

/// The web-service flow (`examples/web_auth.rs`): a user signs in through the service (begin: to
/// the authorization server; complete: the service's own callback route), then the service calls
/// tools with that user's token. A user who did not sign in gets nothing.
#[actix::test]
async fn a_web_service_signs_a_user_in_and_calls_tools_on_their_behalf() {
    let (mcp_url, servers) = start();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let service_url = format!("http://{}", listener.local_addr().unwrap());
    let service = web_auth::Service::new(mcp_url, format!("{service_url}/callback"));
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(service.clone()))
            .configure(web_auth::routes)
    })
    .workers(1)
    .listen(listener)
    .expect("listen")
    .run();
    actix_rt::spawn(server);
    let browser = Browser::new();
    let get = |url: String| browser.get(url);

    let bob = get(format!("{service_url}/tools?user=bob")).await;
    assert_eq!(bob.status(), 401, "not signed in");

    let login = get(format!("{service_url}/login?user=alice")).await;
    assert_eq!(login.status(), 302);
    let authorize = location(&login);
    assert!(authorize.contains("code_challenge_method=S256") && authorize.contains("resource="));
    let approved = get(authorize).await; // the authorization server approves by itself
    let callback = location(&approved);
    assert!(callback.starts_with(&format!("{service_url}/callback?")));
    let signed_in = get(callback).await;
    assert_eq!(signed_in.status(), 200, "{:?}", signed_in.text().await);

    let tools = get(format!("{service_url}/tools?user=alice")).await;
    let tools = tools.text().await.unwrap();
    let tools: Value = serde_json::from_str(&tools).unwrap_or_else(|_| panic!("{tools}"));
    assert_eq!(tools["tools"], json!(["echo"]));
    let call = get(format!(
        "{service_url}/call?user=alice&tool=echo&message=hi"
    ))
    .await;
    assert_eq!(call.json::<Value>().await.unwrap()["text"], "hi");
    let calls_with_a_token = servers
        .posts
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.0["method"] == "tools/call" && p.2 && p.1.is_some())
        .count();
    assert_eq!(
        calls_with_a_token, 1,
        "the call went out with alice's token"
    );
    assert_eq!(
        get(format!("{service_url}/tools?user=bob")).await.status(),
        401
    );
}

/// A loopback port free a moment ago, for the CLI's callback listener.
fn free_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    listener
        .local_addr()
        .expect("its address")
        .port()
        .to_string()
}

/// The authorization URL the CLI prints on stderr when it needs a sign-in.
async fn authorization_url(
    stderr: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) -> String {
    loop {
        let line = stderr
            .next_line()
            .await
            .unwrap()
            .expect("the CLI prints the authorization URL");
        if let Some(url) = line.trim().strip_prefix("http") {
            return format!("http{url}");
        }
    }
}

/// The CLI's flow (`actix-mcp --url …` against a server that answers 401): it prints the
/// authorization URL, waits on its loopback callback, and keeps the tokens in an owner-only file,
/// so the next run needs no browser.
#[actix::test]
async fn the_cli_signs_in_with_a_loopback_callback_and_keeps_the_tokens() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let (url, servers) = start();
    let config_home =
        std::env::temp_dir().join(format!("actix-mcp-cli-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&config_home);
    let port = free_port();
    let run = || {
        tokio::process::Command::new(common::program(common::workspace_bins::CLI))
            .args([
                "--url",
                &url,
                "--callback-port",
                &port,
                "call",
                "echo",
                r#"{"text":"via the cli"}"#,
            ])
            .env("XDG_CONFIG_HOME", &config_home)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the CLI starts")
    };
    let mut first = run();
    let mut stderr = BufReader::new(first.stderr.take().unwrap()).lines();
    let authorize = authorization_url(&mut stderr).await;
    // The "browser": the authorization server approves and sends it to the CLI's callback.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let approved = browser.get(&authorize).send().await.unwrap();
    let callback = approved.headers()["location"].to_str().unwrap().to_owned();
    assert!(callback.starts_with(&format!("http://127.0.0.1:{port}/callback?")));
    let page = browser.get(&callback).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let output = first.wait_with_output().await.unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("via the cli"));

    let file = config_home.join("actix-mcp/credentials.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("tokens kept")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "readable by the owner only");
    }
    let second = run().wait_with_output().await.unwrap();
    assert!(second.status.success(), "{second:?}");
    assert!(String::from_utf8_lossy(&second.stdout).contains("via the cli"));
    assert_eq!(
        servers.authorizations.load(Ordering::SeqCst),
        1,
        "the second run used the kept token"
    );
    let _ = std::fs::remove_dir_all(&config_home);
}

/// Issue 20: the CLI waits for the browser as long as `--sign-in-timeout` says (not the connect
/// timeout), then exits 124 saying it waited for the browser.
#[actix::test]
async fn the_cli_bounds_the_browser_wait_by_its_sign_in_timeout() {
    let (url, _servers) = start();
    let config_home =
        std::env::temp_dir().join(format!("actix-mcp-cli-sign-in-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&config_home);
    let port = free_port();
    // Nobody opens the URL: the sign-in never comes back. The connect timeout is shorter than
    // the sign-in's, and must not end the wait.
    let output = tokio::process::Command::new(common::program(common::workspace_bins::CLI))
        .args(["--url", &url, "--callback-port", &port])
        .args([
            "--connect-timeout",
            "0.5",
            "--sign-in-timeout",
            "2",
            "tools",
        ])
        .env("XDG_CONFIG_HOME", &config_home)
        .env("BROWSER", "true")
        .kill_on_drop(true)
        .output()
        .await
        .expect("the CLI runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(124), "{stderr}");
    assert!(
        stderr.contains("Waiting for the sign-in in the browser"),
        "{stderr}"
    );
    assert!(
        stderr.contains("no sign-in within 2 s: the browser never came back"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&config_home);
}

/// Issue 34: `--connect-timeout` bounds the machine's steps of a sign-in: with the browser done
/// and a token endpoint that never answers, the CLI exits 124 after it, naming the endpoint and
/// the option, while the sign-in timeout is far longer.
#[actix::test]
async fn the_cli_bounds_a_hanging_token_endpoint_by_its_connect_timeout() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let (url, servers) = start();
    servers.hold_tokens.store(true, Ordering::SeqCst);
    let config_home =
        std::env::temp_dir().join(format!("actix-mcp-cli-hang-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&config_home);
    let port = free_port();
    let mut cli = tokio::process::Command::new(common::program(common::workspace_bins::CLI))
        .args(["--url", &url, "--callback-port", &port])
        .args(["--connect-timeout", "1", "--sign-in-timeout", "60"])
        .args(["--timeout", "60", "tools"])
        .env("XDG_CONFIG_HOME", &config_home)
        .env("BROWSER", "true")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the CLI starts");
    let mut stderr = BufReader::new(cli.stderr.take().unwrap()).lines();
    let authorize = authorization_url(&mut stderr).await;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let approved = browser.get(&authorize).send().await.unwrap();
    let callback = approved.headers()["location"].to_str().unwrap().to_owned();
    // The page may wait for the exchange: the browser does not hold the test up.
    actix_rt::spawn(async move { browser.get(&callback).send().await });
    let mut said = String::new();
    while let Some(line) = stderr.next_line().await.unwrap() {
        said.push_str(&line);
        said.push('\n');
    }
    let status = tokio::time::timeout(Duration::from_secs(20), cli.wait())
        .await
        .expect("the CLI ended within the connect timeout, not the sign-in's")
        .unwrap();
    assert_eq!(status.code(), Some(124), "{said}");
    let base = servers.base.lock().unwrap().clone();
    assert!(
        said.contains(&format!("{base} did not answer within 1 s")),
        "{said}"
    );
    assert!(said.contains("--connect-timeout"), "{said}");
    let _ = std::fs::remove_dir_all(&config_home);
}

/// The web service as two replicas sharing one `RedisStore` (Debian's `redis-server`) behind one
/// callback URL, no sticky sessions: alice begins signing in on replica A and her callback lands
/// on replica B, which completes it (the sign-in sealed in its `state`; for bob's cookie it does
/// not open); A, which never got her callback, calls tools with her token from Redis; once it
/// expired, both replicas call at once and the authorization server sees one refresh. Each
/// user's tokens are kept under their own scope: bob has none.
#[cfg(feature = "redis")]
#[actix::test]
async fn web_service_replicas_share_each_users_tokens_and_refresh_once() {
    let (mcp_url, servers) = start();
    servers.refresh.store(true, Ordering::SeqCst);
    servers.expires_in.store(2, Ordering::SeqCst);
    let redis = redis_server::start();
    let mut urls = Vec::new();
    let listeners: Vec<_> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1"))
        .collect();
    // The one public callback URL (the load balancer's): here, replica A's.
    let callback_url = format!("http://{}/callback", listeners[0].local_addr().unwrap());
    for listener in listeners {
        let url = format!("http://{}", listener.local_addr().unwrap());
        let store = actix_mcp::auth::RedisStore::connect(&redis.url(), [9; 32], "replicas:")
            .await
            .expect("Redis");
        let service = web_auth::Service::replica(&mcp_url, &callback_url, store, [7; 32]);
        let server = HttpServer::new(move || {
            App::new()
                .app_data(web::Data::new(service.clone()))
                .configure(web_auth::routes)
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        actix_rt::spawn(server);
        urls.push(url);
    }
    let (a, b) = (&urls[0], &urls[1]);
    let browser = Browser::new();
    let get = |url: String| browser.get(url);
    let login = get(format!("{a}/login?user=alice")).await;
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("web_auth_user=alice"), "{cookie}");
    let approved = get(location(&login)).await;
    // The load balancer sends the callback to replica B.
    let on_b = location(&approved).replacen(a.as_str(), b.as_str(), 1);
    assert!(on_b.starts_with(&format!("{b}/callback?")), "{on_b}");
    let as_bob = browser
        .get_with_cookie(on_b.clone(), "web_auth_user=bob")
        .await;
    assert_eq!(
        as_bob.status(),
        401,
        "alice's sign-in does not open for bob"
    );
    let signed_in = browser.get_with_cookie(on_b, "web_auth_user=alice").await;
    assert_eq!(signed_in.status(), 200, "{:?}", signed_in.text().await);
    let authorizations = servers.authorizations.load(Ordering::SeqCst);

    let call = |replica: &str| get(format!("{replica}/call?user=alice&tool=echo&message=hi"));
    let on_a = call(a).await;
    assert_eq!(on_a.status(), 200, "replica A serves alice");
    assert_eq!(on_a.json::<Value>().await.unwrap()["text"], "hi");
    assert_eq!(get(format!("{a}/tools?user=bob")).await.status(), 401);

    // Past the access token's life: both replicas at once.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let refreshes = servers.refresh_grants.load(Ordering::SeqCst);
    let (on_a, on_b) = futures::join!(call(a), call(b));
    assert_eq!((on_a.status().as_u16(), on_b.status().as_u16()), (200, 200));
    assert_eq!(
        servers.refresh_grants.load(Ordering::SeqCst) - refreshes,
        1,
        "one refresh for both replicas"
    );
    assert_eq!(
        servers.authorizations.load(Ordering::SeqCst),
        authorizations,
        "no new sign-in"
    );
}
