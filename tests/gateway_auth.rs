//! The gateway as an OAuth protected resource (`--authorization-server`), against a real,
//! certified OpenID provider (npm `oidc-provider`, see `support/oidc.rs`) issuing JWT access
//! tokens for the gateway's URL: a request without a token is refused with the challenge that
//! names the gateway's protected resource metadata; a client of this library follows it to the
//! provider, signs in through its pages, and calls through the gateway with the token, which
//! the gateway checks against the provider's JWKS; a forged token is refused.
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

/// The gateway in front of one demo server, requiring tokens of `issuer`, on `port`.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn gateway(port: u16, issuer: &str, dir: &std::path::Path) -> Gateway {
    let demo = workspace_bins::program(workspace_bins::ALL, workspace_bins::DEMO_SERVER, true);
    let program = workspace_bins::program(workspace_bins::ALL, workspace_bins::GATEWAY, true);
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"demo": {"command": demo}}}).to_string(),
    )
    .unwrap();
    let mut child = Command::new(program)
        .arg("--config")
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--authorization-server", issuer, "--scope", "mcp"])
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

#[actix::test]
async fn a_client_signs_in_at_the_provider_the_gateway_names_and_calls_with_its_token() {
    installed();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let provider =
        OpenIdProvider::start_with(&url, "unused-secret", &[("ACCESS_TOKEN_FORMAT", "jwt")]).await;
    let dir = std::env::temp_dir().join(format!("gateway-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _gateway = gateway(port, &provider.issuer, &dir);

    // No token: 401, and where to learn how to get one.
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let refused = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let metadata: Value = http
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], url);
    assert_eq!(metadata["authorization_servers"][0], provider.issuer);
    assert_eq!(metadata["scopes_supported"], json!(["mcp"]));

    // A forged token: refused, saying why.
    let forged = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .bearer_auth("eyJhbGciOiJSUzI1NiIsImtpZCI6Im5vIn0.e30.c2ln")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let challenge = forged.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("invalid_token"), "{challenge}");

    // The library's client: follows the challenge to the provider, signs in, calls.
    let log = Arc::new(AgentLog::default());
    let oauth = OAuth::new(Person { log: log.clone() }, OAuthConfig::default());
    let client = Client::connect(HttpTransport::new(&url).auth(oauth))
        .await
        .expect("connect through the provider's sign-in");
    let answer = client
        .call_tool("demo__echo", json!({"text": "through the gateway"}))
        .await
        .expect("answered");
    assert_eq!(answer.text(), "through the gateway");
    assert_eq!(log.runs.load(Ordering::SeqCst), 1, "one sign-in");
    // The token was asked for the gateway (RFC 8707): a JWT with the gateway as its audience,
    // the only kind the gateway takes (a token for another resource fails its `aud` check).
    let events = provider.events();
    let accepted = events
        .iter()
        .find(|e| e.starts_with("authorization.accepted"))
        .expect("an authorization request");
    assert!(accepted.contains(&format!("resource={url}")), "{accepted}");
    assert!(accepted.contains("scope=mcp"), "{accepted}");
    assert!(
        events
            .iter()
            .any(|e| e == "grant.success grant_type=authorization_code"),
        "{events:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
