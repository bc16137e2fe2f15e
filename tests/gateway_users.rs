//! Each user's own identity upstream, against a real, certified OpenID provider (npm
//! `oidc-provider`, `support/oidc.rs`) that is the authorization server of both the gateway and
//! an upstream MCP server needing OAuth of its own (another audience; it checks each token by
//! introspection and lets anyone list its tools, only its users call them). Two users sign in
//! to the gateway; a user's first call to the upstream server is answered `-32042` with the
//! gateway's sign-in URL, nothing reaching upstream; the person signs in through it (first to
//! the gateway, as that user, then at the upstream's provider); the call then succeeds, and the
//! upstream server sees each user's own subject on that user's calls, never the other's. A link
//! made for one user, opened by another, is refused.
#![cfg(all(feature = "auth", feature = "actix-web"))]
#![allow(
    dead_code,
    unused_imports,
    reason = "it includes helpers shared by other tests"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

include!("support/oidc.rs");

#[path = "support/workspace_bins.rs"]
mod workspace_bins;

/// The gateway process, killed on drop.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The gateway on `port`, requiring tokens of `issuer`, before `upstream` (per user, with
/// `auth` as given).
fn gateway(port: u16, issuer: &str, upstream: &str, auth: Value, dir: &std::path::Path) -> Gateway {
    let program = workspace_bins::program(workspace_bins::ALL, workspace_bins::GATEWAY, true);
    let config = dir.join("mcp.json");
    let servers = json!({"mcpServers": {"up": {"url": upstream, "auth": auth}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let mut child = Command::new(program)
        .arg("--config")
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--authorization-server", issuer, "--scope", "mcp"])
        .arg("--credentials")
        .arg(dir.join("credentials.json"))
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the gateway ended"
        );
        if line.contains("listening on") {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Gateway(child)
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A person at the browser who signs in as `user`.
struct PersonAs {
    log: Arc<AgentLog>,
    user: &'static str,
}

impl UserAgent for PersonAs {
    fn redirect_uri(&self) -> String {
        REDIRECT_URI.to_owned()
    }

    fn authorize(&self, url: Url) -> AgentFuture {
        let (log, user) = (self.log.clone(), self.user);
        Box::pin(async move {
            let redirect = follow_sign_in_as(url, &log, user).await;
            let redirect = redirect.map_err(|message| Error::Unauthorized {
                kind: AuthErrorKind::Denied,
                message,
            })?;
            Callback::from_redirect(&redirect)
        })
    }
}

/// `user`'s client of the gateway at `url`, signed in at the provider.
async fn signed_in(url: &str, user: &'static str) -> Client {
    let log = Arc::new(AgentLog::default());
    let oauth = OAuth::new(PersonAs { log, user }, OAuthConfig::default());
    Client::connect(HttpTransport::new(url).auth(oauth))
        .await
        .expect("signed in to the gateway")
}

/// `user`'s client that declares URL-mode elicitation: it opens each URL asked in a browser
/// and signs in there as `user`, then agrees; `asked` counts the URLs.
async fn signed_in_eliciting(
    url: &str,
    user: &'static str,
    era: actix_mcp::client::ProtocolEra,
    asked: Arc<AtomicUsize>,
) -> Client {
    let log = Arc::new(AgentLog::default());
    let oauth = OAuth::new(PersonAs { log, user }, OAuthConfig::default());
    Client::builder()
        .era(era)
        .on_url_elicitation(move |elicitation, _token| {
            let asked = asked.clone();
            async move {
                asked.fetch_add(1, Ordering::SeqCst);
                let (status, page) = browse(&elicitation.url, user).await;
                assert_eq!(status, 200, "{page}");
                Ok(actix_mcp::protocol::elicitation::ElicitResult {
                    action: actix_mcp::protocol::elicitation::ElicitAction::Accept,
                    content: None,
                    meta: None,
                    extra: Default::default(),
                })
            }
        })
        .connect(HttpTransport::new(url).auth(oauth))
        .await
        .expect("signed in to the gateway")
}

/// A browser at `url`, as `user`: follows every redirect (the gateway's and the provider's),
/// signs in and consents on the provider's pages, and ends on the first page without a form.
async fn browse(url: &str, user: &str) -> (u16, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut cookies = BTreeMap::new();
    let mut next = (
        reqwest::Method::GET,
        Url::parse(url).unwrap(),
        None::<String>,
    );
    for _ in 0..30 {
        let (method, at, form) = next;
        let mut request = http.request(method, at.clone());
        if !cookies.is_empty() {
            let header: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header("cookie", header.join("; "));
        }
        if let Some(form) = form {
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form);
        }
        let response = request.send().await.unwrap();
        keep_cookies(&mut cookies, response.headers());
        let status = response.status();
        if status.is_redirection() {
            let location = response.headers()["location"].to_str().unwrap().to_owned();
            next = (reqwest::Method::GET, at.join(&location).unwrap(), None);
            continue;
        }
        let page = response.text().await.unwrap();
        let Some((action, mut fields, _)) = read_form(&page) else {
            return (status.as_u16(), page);
        };
        if fields
            .iter()
            .any(|(name, value)| name == "prompt" && value == "login")
        {
            fields.push(("login".into(), user.into()));
            fields.push(("password".into(), "any password will do".into()));
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        next = (reqwest::Method::POST, at.join(&action).unwrap(), Some(body));
    }
    panic!("the browser went round in circles");
}

/// The URL of a `-32042` refusal (the library reads it as `UrlElicitationRequired`).
fn sign_in_url(outcome: Result<actix_mcp::CallToolResult, Error>) -> String {
    match outcome {
        Err(Error::UrlElicitationRequired { elicitations, .. }) => {
            assert_eq!(elicitations.len(), 1, "{elicitations:?}");
            assert_eq!(elicitations[0].mode, "url");
            assert!(elicitations[0].elicitation_id.is_some());
            elicitations[0].url.clone()
        }
        other => panic!("not a sign-in request: {other:?}"),
    }
}

/// The subjects of the upstream calls the server accepted, in order. (A call without the
/// user's grant goes out without a token and is refused there: nothing runs.)
fn subjects_of_calls(upstream: &ResourceServer) -> Vec<String> {
    let seen = upstream.seen.lock().unwrap();
    let calls = seen.iter().filter(|s| s.what == "tools/call");
    let refused = calls.clone().filter(|s| s.verdict.is_err());
    assert!(
        refused.clone().all(|s| s.token.is_none()),
        "a refused call carried a token"
    );
    calls
        .filter_map(|s| s.verdict.as_ref().ok())
        .map(|answer| answer["sub"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The upstream server (anyone lists, only its users call) and the provider that is both its
/// authorization server and the gateway's (`more` of its environment), on the gateway's port.
async fn stage(more: &[(&str, &str)]) -> (Arc<ResourceServer>, OpenIdProvider, u16, String) {
    installed();
    let upstream = ResourceServer::start();
    upstream.open_lists.store(true, Ordering::SeqCst);
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let extra = json!([upstream.mcp_url]).to_string();
    let mut env = vec![
        ("ACCESS_TOKEN_FORMAT", "jwt"),
        ("EXTRA_RESOURCES", extra.as_str()),
    ];
    env.extend_from_slice(more);
    let provider = OpenIdProvider::start_with(&url, &upstream.secret, &env).await;
    *upstream.issuer.lock().unwrap() = provider.issuer.clone();
    (upstream, provider, port, url)
}

#[actix::test]
async fn each_user_signs_in_upstream_through_the_gateway_and_calls_as_themselves() {
    let (upstream, provider, port, url) = stage(&[]).await;
    let dir = std::env::temp_dir().join(format!("gateway-users-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _gateway = gateway(port, &provider.issuer, &upstream.mcp_url, json!({}), &dir);

    let alice = signed_in(&url, "alice").await;
    let bob = signed_in(&url, "bob").await;

    // No grant of alice's yet: where to sign in, and nothing ran upstream.
    let first = alice
        .call_tool("up__echo", json!({"text": "alice 1"}))
        .await;
    let alice_link = sign_in_url(first);
    assert!(alice_link.starts_with(&format!("http://127.0.0.1:{port}/oauth/start/")));
    let bob_link = sign_in_url(bob.call_tool("up__echo", json!({"text": "bob 1"})).await);
    assert_ne!(alice_link, bob_link);
    assert!(
        subjects_of_calls(&upstream).is_empty(),
        "a call ran upstream"
    );

    // Bob's link opened by alice: refused; bob still has no grant.
    let (status, page) = browse(&bob_link, "alice").await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("another user"), "{page}");
    let still = bob.call_tool("up__echo", json!({"text": "bob 2"})).await;
    sign_in_url(still);

    // Each signs in through their own link, and calls as themselves.
    let (status, page) = browse(&alice_link, "alice").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Signed in to up"), "{page}");
    let answer = alice
        .call_tool("up__echo", json!({"text": "alice 3"}))
        .await;
    assert_eq!(answer.expect("answered").text(), "alice 3");
    let bob_link = sign_in_url(bob.call_tool("up__echo", json!({"text": "bob 3"})).await);
    let (status, page) = browse(&bob_link, "bob").await;
    assert_eq!(status, 200, "{page}");
    let answer = bob.call_tool("up__echo", json!({"text": "bob 4"})).await;
    assert_eq!(answer.expect("answered").text(), "bob 4");
    let answer = alice
        .call_tool("up__echo", json!({"text": "alice 5"}))
        .await;
    assert_eq!(answer.expect("answered").text(), "alice 5");

    assert_eq!(subjects_of_calls(&upstream), ["alice", "bob", "alice"]);
    // One upstream subscription serves every session, on the gateway's own connection: for a
    // per-user server it is refused rather than made with the gateway's grant.
    let subscribed = alice.subscribe_resource("up://notes").await;
    let refused = format!("{subscribed:?}");
    assert!(refused.contains("each user's own grant"), "{refused}");
    assert!(!upstream
        .seen
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.what == "resources/subscribe"));

    // Clients that take URL elicitations: asked on the call's stream (2025-11-25) or in its
    // `input_required` answer (2026-07-28); the call goes on once the person signed in.
    use actix_mcp::client::ProtocolEra;
    for (user, era) in [
        ("carol", ProtocolEra::Legacy),
        ("dave", ProtocolEra::Modern),
    ] {
        let asked = Arc::new(AtomicUsize::new(0));
        let client = signed_in_eliciting(&url, user, era, asked.clone()).await;
        let text = format!("{user} 1");
        let answer = client.call_tool("up__echo", json!({ "text": text })).await;
        assert_eq!(answer.expect("answered after the sign-in").text(), text);
        assert_eq!(asked.load(Ordering::SeqCst), 1, "{user}");
        let subjects = subjects_of_calls(&upstream);
        assert_eq!(subjects.last().map(String::as_str), Some(user));
        client.shutdown().await;
    }
    // Each user's token upstream is their own.
    let tokens: HashSet<String> = {
        let seen = upstream.seen.lock().unwrap();
        let calls = seen.iter().filter(|s| s.what == "tools/call");
        let accepted = calls.filter(|s| s.verdict.is_ok());
        accepted.filter_map(|s| s.token.clone()).collect()
    };
    assert_eq!(tokens.len(), 4, "one token per user");

    // A prompt and a read of a per-user server: asked in band of a client that takes URL
    // elicitations, refused with the link to one that does not.
    let asked = Arc::new(AtomicUsize::new(0));
    let erin = signed_in_eliciting(&url, "erin", ProtocolEra::Legacy, asked.clone()).await;
    let prompt = erin.get_prompt("up__greet", serde_json::Map::new()).await;
    assert!(prompt.is_ok(), "{prompt:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let frank = signed_in(&url, "frank").await;
    let read = frank.read_resource("up://notes").await;
    let Err(Error::UrlElicitationRequired { elicitations, .. }) = read else {
        panic!("not a sign-in request: {read:?}");
    };
    let (status, page) = browse(&elicitations[0].url, "frank").await;
    assert_eq!(status, 200, "{page}");
    let read = frank.read_resource("up://notes").await;
    assert!(read.is_ok(), "{read:?}");
    let readers: Vec<String> = {
        let seen = upstream.seen.lock().unwrap();
        let ok = |s: &&Seen| {
            s.verdict.is_ok() && ["prompts/get", "resources/read"].contains(&s.what.as_str())
        };
        seen.iter()
            .filter(ok)
            .map(|s| {
                s.verdict.as_ref().unwrap()["sub"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(readers, ["erin", "frank"]);
    erin.shutdown().await;
    frank.shutdown().await;

    // A cancel on alice's own connection reaches the server, after its call, with her token.
    let calls_before = subjects_of_calls(&upstream).len();
    let token = actix_mcp::Cancellation::new();
    let call = alice
        .call_tool("up__sleep", json!({"ms": 60_000}))
        .cancellation(&token);
    let call = actix_rt::spawn(call.into_future());
    let seen_as = |what: &'static str| {
        let upstream = upstream.clone();
        move || {
            let seen = upstream.seen.lock().unwrap();
            let found = seen.iter().rev().find(|s| s.what == what)?;
            let answer = found.verdict.as_ref().ok()?;
            Some(answer["sub"].as_str().unwrap_or("?").to_owned())
        }
    };
    loop_until("the sleep upstream", || {
        (subjects_of_calls(&upstream).len() > calls_before).then_some(())
    })
    .await;
    assert_eq!(seen_as("tools/call")(), Some("alice".to_owned()));
    token.cancel();
    assert!(call.await.unwrap().is_err(), "cancelled");
    let cancelled = loop_until("the cancel upstream", seen_as("notifications/cancelled")).await;
    assert_eq!(cancelled, "alice");

    // Each sign-in has its audit record, and none holds a token.
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sign_ins: Vec<(&Value, &Value)> = records
        .iter()
        .filter(|r| r["event"] == "sign_in")
        .map(|r| (&r["outcome"], &r["subject"]))
        .collect();
    assert_eq!(
        sign_ins,
        [
            (&json!("not_granted"), &Value::Null),
            (&json!("granted"), &json!("alice")),
            (&json!("granted"), &json!("bob")),
            (&json!("granted"), &json!("carol")),
            (&json!("granted"), &json!("dave")),
            (&json!("granted"), &json!("erin")),
            (&json!("granted"), &json!("frank")),
        ],
        "{audit}"
    );
    for token in &tokens {
        assert!(
            !audit.contains(token.as_str()),
            "a token in the audit trail"
        );
    }
    alice.shutdown().await;
    bob.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[actix::test]
async fn with_token_exchange_each_users_own_token_is_exchanged_without_a_browser() {
    let exchange = [("EXCHANGE_CLIENT", "gateway-exchange:exchange-secret")];
    let (upstream, provider, port, url) = stage(&exchange).await;
    let dir = std::env::temp_dir().join(format!("gateway-exchange-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let auth = json!({"clientId": "gateway-exchange", "clientSecret": "exchange-secret",
        "tokenExchange": true});
    let _gateway = gateway(port, &provider.issuer, &upstream.mcp_url, auth, &dir);

    let alice = signed_in(&url, "alice").await;
    let bob = signed_in(&url, "bob").await;
    for (client, text) in [(&alice, "alice 1"), (&bob, "bob 1"), (&alice, "alice 2")] {
        let answer = client.call_tool("up__echo", json!({ "text": text })).await;
        assert_eq!(answer.expect("answered, no sign-in asked").text(), text);
    }
    assert_eq!(subjects_of_calls(&upstream), ["alice", "bob", "alice"]);
    let exchanges = provider.count("token_exchange.success");
    assert_eq!(
        exchanges,
        2,
        "one exchange per user: {:?}",
        provider.events()
    );
    // What the upstream saw is the exchanged tokens: opaque ones of its own, not the JWTs the
    // users hold for the gateway.
    let tokens: HashSet<String> = {
        let seen = upstream.seen.lock().unwrap();
        let accepted = seen
            .iter()
            .filter(|s| s.what == "tools/call" && s.verdict.is_ok());
        accepted.filter_map(|s| s.token.clone()).collect()
    };
    assert_eq!(tokens.len(), 2);
    assert!(
        tokens.iter().all(|t| t.split('.').count() != 3),
        "a JWT reached upstream"
    );
    alice.shutdown().await;
    bob.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
