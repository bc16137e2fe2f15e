//! The refresh storm (`--scenarios refresh`): N worker processes × M concurrent calls for D
//! seconds against a protected MCP server whose authorization server rotates refresh tokens,
//! revokes the grant when a spent refresh token comes back, and issues access tokens that live
//! T seconds. Every worker shares one credential store: the file store, and (built with
//! `--features redis`) Redis, a `redis-server` on 127.0.0.1 started here.
//!
//! Counted at the authorization server: refresh requests per token generation (must be exactly
//! one each), replays and refusals (`invalid_grant`), sign-ins after the first; at the workers:
//! calls answered and failed, sign-ins asked for. Each store also has a storm in which the grant
//! is revoked halfway (as an administrator or a password change does): every process then needs
//! a sign-in, and exactly one must happen, for all of them. Not a timed test: the figures go to
//! `BENCHMARKS.md`.

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    process::{Command, ExitCode, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use actix_mcp::{
    auth::{AgentFuture, CredentialStore, FileStore, Headless, OAuth, OAuthConfig, UserAgent},
    Client, HttpTransport,
};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::{json, Value};

#[cfg(feature = "redis")]
#[path = "../../tests/support/redis.rs"]
mod redis_server;

/// The storm's size.
struct Size {
    processes: usize,
    concurrency: usize,
    duration: Duration,
    token_ttl: u64,
}

const FULL: Size = Size {
    processes: 4,
    concurrency: 50,
    duration: Duration::from_secs(60),
    token_ttl: 3,
};
const SMOKE: Size = Size {
    processes: 2,
    concurrency: 8,
    duration: Duration::from_secs(8),
    token_ttl: 2,
};

const CLIENT_ID: &str = "refresh-storm";
const REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

/// The authorization server's grant: one valid refresh token at a time.
#[derive(Default)]
struct Grant {
    generation: u64,
    refresh: String,
    spent: HashSet<String>,
    revoked: bool,
    /// Access tokens issued and when each expires.
    access: HashMap<String, Instant>,
    /// Refresh requests that carried each generation's refresh token.
    attempts: HashMap<u64, u64>,
    spent_generation: HashMap<String, u64>,
}

#[derive(Default)]
struct Authority {
    base: Mutex<String>,
    ttl: AtomicU64,
    grant: Mutex<Grant>,
    sign_ins: AtomicU64,
    refreshes: AtomicU64,
    replays: AtomicU64,
    refused: AtomicU64,
    calls: AtomicU64,
    unauthorized: AtomicU64,
}

impl Grant {
    /// Revoked: its tokens refused, until the next sign-in.
    fn revoke(&mut self) {
        self.revoked = true;
        self.access.clear();
    }
}

impl Authority {
    fn issue(&self, grant: &mut Grant) -> Value {
        grant.generation += 1;
        let n = grant.generation;
        grant.refresh = format!("refresh-{n}");
        let access = format!("access-{n}");
        let ttl = self.ttl.load(Ordering::Relaxed);
        grant
            .access
            .insert(access.clone(), Instant::now() + Duration::from_secs(ttl));
        json!({"access_token": access, "token_type": "Bearer", "expires_in": ttl,
            "refresh_token": grant.refresh, "scope": "mcp offline_access"})
    }

    fn refresh(&self, token: &str) -> HttpResponse {
        let mut grant = self.grant.lock().unwrap();
        if !grant.revoked && token == grant.refresh {
            let generation = grant.generation;
            *grant.attempts.entry(generation).or_default() += 1;
            grant.spent.insert(token.to_owned());
            grant.spent_generation.insert(token.to_owned(), generation);
            self.refreshes.fetch_add(1, Ordering::Relaxed);
            let answer = self.issue(&mut grant);
            return HttpResponse::Ok().json(answer);
        }
        if let Some(generation) = grant.spent_generation.get(token).copied() {
            *grant.attempts.entry(generation).or_default() += 1;
            // A spent refresh token came back: a replay. The whole grant is revoked.
            self.replays.fetch_add(1, Ordering::Relaxed);
            grant.revoke();
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        HttpResponse::BadRequest().json(json!({"error": "invalid_grant"}))
    }

    fn valid(&self, token: Option<&str>) -> bool {
        let grant = self.grant.lock().unwrap();
        token
            .and_then(|t| grant.access.get(t))
            .is_some_and(|expires| *expires > Instant::now())
    }
}

async fn authorization_server(
    req: HttpRequest,
    body: web::Bytes,
    authority: web::Data<Authority>,
) -> HttpResponse {
    let base = authority.base.lock().unwrap().clone();
    match req.path() {
        "/.well-known/oauth-protected-resource/mcp" | "/.well-known/oauth-protected-resource" => {
            HttpResponse::Ok().json(json!({"resource": format!("{base}/mcp"),
                "authorization_servers": [base], "scopes_supported": ["mcp"]}))
        }
        "/.well-known/oauth-authorization-server" => HttpResponse::Ok().json(json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["mcp", "offline_access"],
        })),
        "/authorize" => {
            let query: HashMap<String, String> =
                url::form_urlencoded::parse(req.query_string().as_bytes())
                    .into_owned()
                    .collect();
            let redirect = query.get("redirect_uri").cloned().unwrap_or_default();
            let state = query.get("state").cloned().unwrap_or_default();
            HttpResponse::Found()
                .insert_header((
                    "location",
                    format!("{redirect}?code=the-code&state={state}"),
                ))
                .finish()
        }
        "/token" => {
            let form: HashMap<String, String> =
                url::form_urlencoded::parse(&body).into_owned().collect();
            match form.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    authority.sign_ins.fetch_add(1, Ordering::Relaxed);
                    // A new grant; the spent tokens stay spent.
                    let mut grant = authority.grant.lock().unwrap();
                    grant.revoked = false;
                    HttpResponse::Ok().json(authority.issue(&mut grant))
                }
                Some("refresh_token") => {
                    authority.refresh(form.get("refresh_token").map_or("", String::as_str))
                }
                _ => HttpResponse::BadRequest().json(json!({"error": "unsupported_grant_type"})),
            }
        }
        _ => HttpResponse::NotFound().finish(),
    }
}

async fn mcp(req: HttpRequest, body: web::Bytes, authority: web::Data<Authority>) -> HttpResponse {
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !authority.valid(token) {
        authority.unauthorized.fetch_add(1, Ordering::Relaxed);
        let base = authority.base.lock().unwrap().clone();
        let challenge = format!(
            r#"Bearer error="invalid_token", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
        );
        return HttpResponse::Unauthorized()
            .insert_header(("www-authenticate", challenge))
            .finish();
    }
    if req.method() == actix_web::http::Method::DELETE {
        return HttpResponse::Ok().finish();
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = body["id"].clone();
    if id.is_null() {
        return HttpResponse::Accepted().finish();
    }
    let result = match body["method"].as_str().unwrap_or_default() {
        "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "refresh-storm", "version": "1"}}),
        "tools/call" => {
            authority.calls.fetch_add(1, Ordering::Relaxed);
            json!({"content": [{"type": "text", "text": body["params"]["arguments"]["text"]}]})
        }
        _ => json!({}),
    };
    HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Starts the authorization server and the MCP server on one port, on a thread of their own.
fn start_authority(ttl: u64) -> (Arc<Authority>, String) {
    let authority = web::Data::new(Authority::default());
    authority.ttl.store(ttl, Ordering::Relaxed);
    let data = authority.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
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
            let _ = tx.send(port);
            let _ = server.run().await;
        });
    });
    let port = rx.recv().expect("the authority listens");
    let base = format!("http://127.0.0.1:{port}");
    *authority.base.lock().unwrap() = base.clone();
    (authority.into_inner(), base)
}

/// A user agent that counts the sign-ins asked for; each takes the person
/// [`PERSON_TAKES`] (the authorization server then approves it without them).
struct Counted(Arc<AtomicU64>, Headless);

/// How long a person takes to sign in: long next to the processes' polling, short next to a
/// storm.
const PERSON_TAKES: Duration = Duration::from_secs(1);

impl UserAgent for Counted {
    fn redirect_uri(&self) -> String {
        REDIRECT_URI.into()
    }

    fn authorize(&self, url: url::Url) -> AgentFuture {
        self.0.fetch_add(1, Ordering::Relaxed);
        let answer = self.1.authorize(url);
        Box::pin(async move {
            tokio::time::sleep(PERSON_TAKES).await;
            answer.await
        })
    }
}

/// Where the workers keep their tokens.
enum Place {
    File(PathBuf),
    #[cfg(feature = "redis")]
    Redis(String),
}

impl Place {
    fn arg(&self) -> String {
        match self {
            Place::File(path) => path.to_string_lossy().into_owned(),
            #[cfg(feature = "redis")]
            Place::Redis(url) => url.clone(),
        }
    }
}

async fn open(place: &str) -> Result<Arc<dyn CredentialStore>, String> {
    #[cfg(feature = "redis")]
    if place.starts_with("redis://") {
        let key: [u8; 32] = [0x2a; 32];
        let store = actix_mcp::auth::RedisStore::connect(place, key, "storm:")
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Arc::new(store));
    }
    Ok(Arc::new(FileStore::new(place)))
}

/// The storm's worker: `concurrency` calls at once until `seconds` pass; one JSON line.
pub fn worker() -> ExitCode {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let mcp_url = var("STORM_MCP_URL");
    let place = var("STORM_STORE");
    let seconds: u64 = var("STORM_SECONDS").parse().unwrap_or(10);
    let concurrency: usize = var("STORM_CONCURRENCY").parse().unwrap_or(8);
    let outcome = actix_rt::System::new().block_on(async move {
        let store = open(&place).await?;
        let asked = Arc::new(AtomicU64::new(0));
        let config = OAuthConfig::default()
            .client_id(CLIENT_ID)
            .shared_store(store);
        let agent = Counted(asked.clone(), Headless::new(REDIRECT_URI));
        let oauth = OAuth::new(agent, config);
        let client = Client::connect(HttpTransport::new(&mcp_url).auth(oauth))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let errors = Arc::new(Mutex::new(HashMap::<String, u64>::new()));
        let loops = (0..concurrency).map(|i| {
            let (client, ok, failed, errors) =
                (client.clone(), ok.clone(), failed.clone(), errors.clone());
            async move {
                while Instant::now() < deadline {
                    let text = i.to_string();
                    match client.call_tool("echo", json!({ "text": text })).await {
                        Ok(answer) if answer.text() == text => ok.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => failed.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            *errors.lock().unwrap().entry(e.to_string()).or_default() += 1;
                            failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }
        });
        futures::future::join_all(loops).await;
        client.shutdown().await;
        let errors = errors.lock().unwrap().clone();
        Ok::<_, String>(json!({
            "calls": ok.load(Ordering::Relaxed),
            "failed": failed.load(Ordering::Relaxed),
            "sign_ins_asked": asked.load(Ordering::Relaxed),
            "errors": errors,
        }))
    });
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("refresh storm worker: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One storm over `place` (the grant revoked halfway if `revoke`): the figures, and whether
/// each is what it must be.
fn storm(
    exe: &std::path::Path,
    size: &Size,
    place: &Place,
    name: &str,
    revoke: bool,
) -> Result<bool, String> {
    let (authority, base) = start_authority(size.token_ttl);
    let mcp_url = format!("{base}/mcp");
    // The one sign-in, here, before the storm.
    let place_arg = place.arg();
    actix_rt::System::new().block_on(async {
        let store = open(&place_arg).await?;
        let config = OAuthConfig::default()
            .client_id(CLIENT_ID)
            .shared_store(store);
        let oauth = OAuth::new(Headless::new(REDIRECT_URI), config);
        let client = Client::connect(HttpTransport::new(&mcp_url).auth(oauth))
            .await
            .map_err(|e| format!("the first sign-in: {e}"))?;
        client.shutdown().await;
        Ok::<_, String>(())
    })?;
    let workers: Vec<_> = (0..size.processes)
        .map(|_| {
            Command::new(exe)
                .args(["--worker", "actix-mcp", "--scenario", "refresh-storm"])
                .env("STORM_MCP_URL", &mcp_url)
                .env("STORM_STORE", &place_arg)
                .env("STORM_SECONDS", size.duration.as_secs().to_string())
                .env("STORM_CONCURRENCY", size.concurrency.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("a worker: {e}"))
        })
        .collect::<Result<_, _>>()?;
    if revoke {
        std::thread::sleep(size.duration / 2);
        authority.grant.lock().unwrap().revoke();
    }
    let mut totals = (0u64, 0u64, 0u64);
    let mut errors = serde_json::Map::new();
    for worker in workers {
        let output = worker
            .wait_with_output()
            .map_err(|e| format!("a worker: {e}"))?;
        let line: Value = serde_json::from_slice(&output.stdout)
            .map_err(|_| format!("a worker failed ({})", output.status))?;
        totals.0 += line["calls"].as_u64().unwrap_or(0);
        totals.1 += line["failed"].as_u64().unwrap_or(0);
        totals.2 += line["sign_ins_asked"].as_u64().unwrap_or(0);
        if let Some(e) = line["errors"].as_object() {
            errors.extend(e.clone());
        }
    }
    let grant = authority.grant.lock().unwrap();
    let per_generation: Vec<u64> = grant.attempts.values().copied().collect();
    let most = per_generation.iter().max().copied().unwrap_or(0);
    let least = per_generation.iter().min().copied().unwrap_or(0);
    let refreshes = authority.refreshes.load(Ordering::Relaxed);
    let replays = authority.replays.load(Ordering::Relaxed);
    let refused = authority.refused.load(Ordering::Relaxed);
    let sign_ins = authority.sign_ins.load(Ordering::Relaxed) - 1;
    let (calls, failed, asked) = totals;
    let name = if revoke {
        format!("{name}, grant revoked halfway")
    } else {
        name.to_owned()
    };
    println!(
        "| {name} | {} × {} | {} s | {} s | {calls} | {failed} | {refreshes} | {least}–{most} | {refused} | {replays} | {sign_ins} | {asked} | {} |",
        size.processes,
        size.concurrency,
        size.duration.as_secs(),
        size.token_ttl,
        authority.unauthorized.load(Ordering::Relaxed),
    );
    if !errors.is_empty() {
        eprintln!("errors: {}", Value::Object(errors));
    }
    // A revoked grant: its refresh token refused once, then one sign-in for every process.
    let (refusals, signed) = if revoke { (1, 1) } else { (0, 0) };
    Ok(failed == 0
        && refused == refusals
        && replays == 0
        && sign_ins == signed
        && asked == signed
        && most <= 1)
}

/// `--scenarios refresh`: the storm over the file store and (with `--features redis`) Redis.
pub fn orchestrate(smoke: bool) -> ExitCode {
    let size = if smoke { SMOKE } else { FULL };
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("cannot find this program");
        return ExitCode::FAILURE;
    };
    println!(
        "| store | processes × calls | for | token life | calls | failed | refreshes | \
         refreshes per generation | invalid_grant | replays | sign-ins | sign-ins asked | 401s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let dir = std::env::temp_dir().join(format!("actix-mcp-storm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    #[cfg_attr(
        not(feature = "redis"),
        allow(unused_mut, reason = "mutated with redis only")
    )]
    let mut places = vec![("file", Place::File(dir.join("credentials.json")))];
    #[cfg(feature = "redis")]
    let redis = redis_server::start();
    #[cfg(feature = "redis")]
    places.push(("redis", Place::Redis(redis.url())));
    let mut clean = true;
    for (name, place) in &places {
        for revoke in [false, true] {
            match storm(&exe, &size, place, name, revoke) {
                Ok(ok) => clean &= ok,
                Err(e) => {
                    eprintln!("{name}: {e}");
                    clean = false;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if clean {
        ExitCode::SUCCESS
    } else {
        eprintln!("the storm lost a refresh, a call or a sign-in");
        ExitCode::FAILURE
    }
}
