//! Many processes, one grant, a provider that rotates refresh tokens and revokes a grant whose
//! refresh token comes back (the npm `oidc-provider`, DPoP on): after the access token
//! expired, three `actix-mcp` commands started together refresh it once. The provider's own
//! events count the refreshes, the refusals and the sign-ins; the protected MCP server sees each
//! command's call. Over the file store and over Redis (Debian's `redis-server` on 127.0.0.1).
//! And when a sign-in is needed (nothing stored, or the grant lost), commands started together
//! open one sign-in window between them; the browser is a script on `PATH` that notes who
//! opened which window, and the test plays the person at it.
//!
//! Before the stores coordinated, the same three commands sent the same refresh token: the
//! provider answered `200, 400, 400` and revoked the grant. Before the sign-in was coordinated,
//! each command needing one opened its own window.
#![cfg(all(feature = "auth", feature = "actix-web", feature = "redis"))]
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

#[path = "support/gateway_stdio.rs"]
mod gateway_stdio;
#[path = "support/redis.rs"]
mod redis_server;
#[path = "support/workspace_bins.rs"]
mod workspace_bins;

include!("support/oidc.rs");

use actix_mcp::auth::{FileStore, RedisStore};

/// The key the Redis store encrypts with, as the CLI takes it (64 hex digits).
const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn key() -> [u8; 32] {
    let mut key = [0; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::try_from(i).unwrap();
    }
    key
}

/// Signs the person in once through the provider's pages, with `store` keeping the grant; the
/// access token's expiry.
async fn sign_in_once(server: &ResourceServer, store: Arc<dyn CredentialStore>) -> u64 {
    let log = Arc::new(AgentLog::default());
    let config = OAuthConfig::default().shared_store(store.clone());
    let oauth = OAuth::new(Person { log: log.clone() }, config);
    let client = Client::connect(HttpTransport::new(&server.mcp_url).auth(oauth))
        .await
        .expect("connect through the provider's sign-in");
    echo(&client, "signed in").await.expect("the first call");
    client.shutdown().await;
    assert_eq!(log.runs.load(Ordering::SeqCst), 1, "one sign-in");
    let latest = format!("latest {}", server.mcp_url);
    let stored = store
        .read(&latest)
        .await
        .expect("readable")
        .expect("stored");
    assert!(
        stored.credentials.refresh_token.is_some(),
        "a refresh token"
    );
    assert!(
        stored.credentials.dpop_key.is_some(),
        "the DPoP key kept with it"
    );
    stored.credentials.expires_at.expect("an expiry")
}

/// Waits until the Unix time is past `expires_at`.
async fn until_expired(expires_at: u64) {
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        if now > expires_at {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `actix-mcp --url … --credentials credentials … call echo {"text":"from i"}`, with `sign_in`
/// (the sign-in options) and `env`, its output piped.
fn echo_command(
    i: usize,
    server: &ResourceServer,
    credentials: &str,
    sign_in: &[String],
    env: &[(&str, &str)],
) -> Command {
    let cli = workspace_bins::program(workspace_bins::ALL, workspace_bins::CLI, true);
    let mut command = Command::new(&cli);
    command
        .args(["--url", &server.mcp_url, "--credentials", credentials])
        .args(sign_in)
        .args(["call", "echo", &format!(r#"{{"text":"from {i}"}}"#)])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Runs `n` `actix-mcp … call echo` at once with `--credentials credentials` (and `env`).
fn commands_at_once(
    n: usize,
    server: &ResourceServer,
    credentials: &str,
    env: &[(&str, &str)],
) -> Vec<std::process::Output> {
    // A sign-in would wait for a browser: none comes, so it fails fast instead.
    let no_browser = ["--sign-in-timeout", "3", "--callback-port", "0"].map(String::from);
    let children: Vec<Child> = (0..n)
        .map(|i| {
            let mut command = echo_command(i, server, credentials, &no_browser, env);
            command.spawn().expect("the CLI starts")
        })
        .collect();
    children
        .into_iter()
        .map(|child| child.wait_with_output().expect("the CLI ends"))
        .collect()
}

/// What the provider saw after the sign-in (its events from `before`): one refresh, no
/// refusal, no revocation, no sign-in.
fn one_refresh_only(provider: &OpenIdProvider, before: usize) {
    let events = provider.events();
    let after = &events[before..];
    let count = |prefix: &str| after.iter().filter(|e| e.starts_with(prefix)).count();
    assert_eq!(
        count("grant.success grant_type=refresh_token"),
        1,
        "one refresh: {after:#?}"
    );
    assert_eq!(count("grant.error"), 0, "no refusal: {after:#?}");
    assert_eq!(count("grant.revoked"), 0, "no revocation: {after:#?}");
    assert_eq!(count("interaction.started"), 0, "no sign-in: {after:#?}");
}

/// [`one_refresh_only`], and every command answered.
fn check(provider: &OpenIdProvider, before: usize, outputs: &[std::process::Output]) {
    answered(&outputs.iter().enumerate().collect::<Vec<_>>());
    one_refresh_only(provider, before);
}

/// A provider whose token endpoint holds its answers back 1.5 s: a refresh is still on its way
/// when the other commands come to theirs (without the lease, each sends the refresh token
/// the first one just spent).
async fn slow_provider(server: &ResourceServer) -> OpenIdProvider {
    let env = [("TOKEN_DELAY_MS", "1500")];
    OpenIdProvider::start_with(&server.mcp_url, &server.secret, &env).await
}

#[actix::test]
async fn three_commands_over_one_file_refresh_once() {
    let grant = Expired::new("shared", &[("TOKEN_DELAY_MS", "1500")]).await;
    let before = grant.provider.events().len();
    let path = grant.path.to_string_lossy();
    let outputs = commands_at_once(3, &grant.server, &path, &[]);
    check(&grant.provider, before, &outputs);
}

/// A grant signed in once into a Redis store (Debian's `redis-server`, started here), its
/// access token expired, at a slow provider.
struct ExpiredInRedis {
    redis: redis_server::Redis,
    server: Arc<ResourceServer>,
    provider: OpenIdProvider,
}

impl ExpiredInRedis {
    async fn new() -> Self {
        installed();
        let redis = redis_server::start();
        let server = ResourceServer::start();
        let provider = slow_provider(&server).await;
        *server.issuer.lock().unwrap() = provider.issuer.clone();
        let store = RedisStore::connect(&redis.url(), key(), "actix-mcp:")
            .await
            .expect("Redis");
        let expires_at = sign_in_once(&server, Arc::new(store)).await;
        until_expired(expires_at).await;
        Self {
            redis,
            server,
            provider,
        }
    }
}

#[actix::test]
async fn three_commands_over_one_redis_refresh_once() {
    let grant = ExpiredInRedis::new().await;
    let before = grant.provider.events().len();
    let env = [("ACTIX_MCP_CREDENTIALS_KEY", KEY_HEX)];
    let outputs = commands_at_once(3, &grant.server, &grant.redis.url(), &env);
    check(&grant.provider, before, &outputs);
}

/// A grant signed in once into a file store, its access token expired, at a provider started
/// with `env`.
struct Expired {
    server: Arc<ResourceServer>,
    provider: OpenIdProvider,
    dir: PathBuf,
    path: PathBuf,
}

impl Expired {
    async fn new(name: &str, env: &[(&str, &str)]) -> Self {
        installed();
        let server = ResourceServer::start();
        let provider = OpenIdProvider::start_with(&server.mcp_url, &server.secret, env).await;
        *server.issuer.lock().unwrap() = provider.issuer.clone();
        let dir = std::env::temp_dir().join(format!("actix-mcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("credentials.json");
        let expires_at = sign_in_once(&server, Arc::new(FileStore::new(&path))).await;
        until_expired(expires_at).await;
        Self {
            server,
            provider,
            dir,
            path,
        }
    }

    /// One command, killed (SIGKILL) once the provider says `event` after `before`.
    async fn kill_holder_at(&self, event: &str) {
        let before = self.provider.events().len();
        let cli = workspace_bins::program(workspace_bins::ALL, workspace_bins::CLI, true);
        let mut holder = Command::new(&cli)
            .args(["--url", &self.server.mcp_url, "--credentials"])
            .arg(&self.path)
            .args(["call", "echo", r#"{"text":"killed"}"#])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the CLI starts");
        loop_until(event, || {
            let events = self.provider.events();
            events[before..].iter().any(|e| e == event).then_some(())
        })
        .await;
        holder.kill().expect("SIGKILL");
        let _ = holder.wait();
    }
}

impl Drop for Expired {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The command holding the lease is killed (SIGKILL) while its refresh waits at the provider's
/// door (the provider holds that request and never processes it: it never reached it). The
/// others wait out that one lease, one of them refreshes, and nobody signs in.
#[actix::test]
async fn a_holder_killed_before_its_refresh_reached_the_provider_costs_one_lease() {
    // Token request 1 is the sign-in's; 2 is the holder's refresh, never processed.
    let env = [("TOKEN_DELAY_MS", "1500"), ("HOLD_TOKEN_REQUEST", "2")];
    let grant = Expired::new("dead", &env).await;
    grant.kill_holder_at("token.held").await;
    let killed_at = Instant::now();

    let after_kill = grant.provider.events().len();
    let path = grant.path.to_string_lossy();
    let outputs = commands_at_once(2, &grant.server, &path, &[]);
    check(&grant.provider, after_kill, &outputs);
    // They waited for the dead holder's lease to end (a bound, not a timing assertion).
    assert!(killed_at.elapsed() < Duration::from_secs(60));
}

/// The command holding the lease is killed (SIGKILL) after its refresh reached the provider
/// (which rotates the refresh token all the same) and before it stored the answer: the next
/// command's refresh is refused once, the loss is reported once and clearly, and it costs one
/// sign-in, in one window, for both commands. Never a loop of replays.
#[actix::test]
async fn a_holder_killed_after_the_rotation_costs_one_refusal_and_one_sign_in() {
    let grant = Expired::new("killed", &[("TOKEN_DELAY_MS", "1500")]).await;
    let before = grant.provider.events().len();
    // The provider has rotated the refresh token and holds its answer back: kill the holder.
    grant.kill_holder_at("token.answered").await;
    let (server, provider, path) = (&grant.server, &grant.provider, &grant.path);
    let rotated = provider.events()[before..]
        .iter()
        .filter(|e| e.starts_with("grant.success grant_type=refresh_token"))
        .count();
    assert_eq!(rotated, 1, "the holder's refresh rotated the token");

    let after_kill = provider.events().len();
    let browser = Browser::new("after-rotation");
    let children = commands_with_browser(2, server, &path.to_string_lossy(), &browser, &[]);
    sign_in_at(&browser.window(0).await).await;
    let outputs = outputs(children).await;
    let events = provider.events();
    let after = &events[after_kill..];
    let count = |prefix: &str| after.iter().filter(|e| e.starts_with(prefix)).count();
    assert_eq!(count("grant.error"), 1, "one refusal, no loop: {after:#?}");
    assert_eq!(
        count("grant.success grant_type=refresh_token"),
        0,
        "{after:#?}"
    );
    let reported = outputs
        .iter()
        .filter(|o| {
            String::from_utf8_lossy(&o.stderr).contains("the stored refresh token was refused")
        })
        .count();
    assert_eq!(reported, 1, "the loss is reported once");
    answered(&outputs.iter().enumerate().collect::<Vec<_>>());
    browser.opened(1);
    signed_in_once(provider, after_kill);
}

/// Runs `n` gateways over stdio at once, each in front of `server` with `--credentials
/// credentials` (and `env`): each connects upstream as it starts (so they meet the expired token
/// together), then routes one `p__echo`. What each client was answered.
fn gateways_at_once(
    n: usize,
    server: &ResourceServer,
    credentials: &str,
    env: &[(&str, &str)],
    sign_in_timeout_ms: u64,
) -> Vec<Value> {
    let dir = std::env::temp_dir().join(format!("gateway-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gateway = workspace_bins::program(workspace_bins::ALL, workspace_bins::GATEWAY, true);
    let children: Vec<Child> = (0..n)
        .map(|i| {
            // A callback port each, as replicas on machines of their own have.
            let auth = json!({"callbackPort": free_port(), "signInTimeoutMs": sign_in_timeout_ms});
            let upstream = json!({"type": "http", "url": server.mcp_url, "auth": auth});
            let config = dir.join(format!("mcp-{i}.json"));
            std::fs::write(&config, json!({"mcpServers": {"p": upstream}}).to_string()).unwrap();
            let mut command = Command::new(&gateway);
            command
                .arg("--config")
                .arg(&config)
                .args(["--stdio", "--credentials", credentials])
                .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            for (name, value) in env {
                command.env(name, value);
            }
            command.spawn().expect("the gateway starts")
        })
        .collect();
    let replies: Vec<_> = children
        .into_iter()
        .enumerate()
        .map(|(i, child)| std::thread::spawn(move || one_routed_echo(child, i)))
        .collect();
    replies.into_iter().map(|r| r.join().unwrap()).collect()
}

/// The handshake with a gateway, `p__echo` once it is listed, end of input; the call's answer.
fn one_routed_echo(gateway: Child, i: usize) -> Value {
    let mut downstream = gateway_stdio::Downstream::start(gateway);
    downstream.until_offered("p__echo");
    let called = downstream.call(
        "p__echo",
        json!({"arguments": {"text": format!("from {i}")}}),
    );
    assert!(downstream.finish(), "gateway {i}");
    called
}

/// Replicas of the gateway share their upstream grant through one Redis store: signed in to
/// once elsewhere (as with `actix-mcp --credentials redis://…`), its access token expired, two
/// gateways started together refresh it once, sign in nowhere, and route their calls.
#[actix::test]
async fn gateway_replicas_over_one_redis_refresh_their_upstream_grant_once() {
    let grant = ExpiredInRedis::new().await;
    let before = grant.provider.events().len();
    let env = [("ACTIX_MCP_CREDENTIALS_KEY", KEY_HEX)];
    let url = grant.redis.url();
    let replies = tokio::task::spawn_blocking({
        let server = grant.server.clone();
        // A sign-in would wait for a browser: none comes, so it would fail fast instead.
        move || gateways_at_once(2, &server, &url, &env, 3_000)
    })
    .await
    .unwrap();
    routed(&replies);
    one_refresh_only(&grant.provider, before);
}

/// Every gateway routed its own echo.
fn routed(replies: &[Value]) {
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(
            reply["result"]["content"][0]["text"],
            format!("from {i}"),
            "{reply}"
        );
    }
}

/// Two gateway replicas started together over one Redis store, nothing stored: both need the
/// upstream sign-in; one opens the window, the other adopts its grant, and both route their
/// calls. (Each has a callback port of its own, as replicas on machines of their own: before
/// the sign-in was coordinated, each opened a window.)
#[actix::test]
async fn gateway_replicas_needing_an_upstream_sign_in_open_one_window() {
    let (server, provider) = first_run().await;
    let redis = redis_server::start();
    let browser = Browser::new("gateway-window");
    let (url, path) = (redis.url(), browser.path());
    let replies = tokio::task::spawn_blocking({
        let server = server.clone();
        move || {
            let env = [("ACTIX_MCP_CREDENTIALS_KEY", KEY_HEX), ("PATH", &path)];
            gateways_at_once(2, &server, &url, &env, 60_000)
        }
    });
    sign_in_at(&browser.window(0).await).await;
    routed(&replies.await.unwrap());
    browser.opened(1);
    signed_in_once(&provider, 0);
}

// Sign-ins: the browser each command would open is a script on `PATH` (`xdg-open`) that notes
// which process asked and the URL; the test plays the person at those windows.

/// The browser the commands open.
struct Browser {
    dir: PathBuf,
    log: PathBuf,
    /// The loopback port every command listens on for its sign-in's answer (one at a time).
    port: u16,
}

/// A window opened: by which process, at which URL.
#[derive(Debug, Clone)]
struct Window {
    pid: u32,
    url: Url,
}

impl Browser {
    fn new(name: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("browser-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("opened");
        let script = dir.join("xdg-open");
        let body = format!(
            "#!/bin/sh\nprintf '%s %s\\n' \"$PPID\" \"$1\" >> '{}'\n",
            log.display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            dir,
            log,
            port: free_port(),
        }
    }

    /// The sign-in options of a command that opens this browser.
    fn options(&self) -> Vec<String> {
        let port = self.port.to_string();
        ["--sign-in-timeout", "60", "--callback-port", &port]
            .map(String::from)
            .to_vec()
    }

    /// `PATH` with this browser first.
    fn path(&self) -> String {
        let path = std::env::var("PATH").unwrap_or_default();
        format!("{}:{path}", self.dir.display())
    }

    /// Every window opened so far, in order (a line being written is not one yet).
    fn windows(&self) -> Vec<Window> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        complete
            .lines()
            .map(|line| {
                let (pid, url) = line.split_once(' ').expect("pid url");
                Window {
                    pid: pid.parse().expect("a pid"),
                    url: Url::parse(url).expect("a URL"),
                }
            })
            .collect()
    }

    /// Exactly `n` windows were opened.
    fn opened(&self, n: usize) {
        let windows = self.windows();
        assert_eq!(windows.len(), n, "{windows:#?}");
    }

    /// Waits for window number `n` (from 0).
    async fn window(&self, n: usize) -> Window {
        loop_until("a sign-in window", || self.windows().get(n).cloned()).await
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port nothing listens on (for a callback listener).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// A credentials file of a test's own (its directory removed on drop).
struct CredentialsFile(PathBuf);

impl CredentialsFile {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }

    /// As `--credentials` takes it.
    fn arg(&self) -> String {
        self.0
            .join("credentials.json")
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for CredentialsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The person signs in at `window`; the provider's answer goes to the command's loopback.
async fn sign_in_at(window: &Window) {
    let log = AgentLog::default();
    let answer = follow_sign_in(window.url.clone(), &log)
        .await
        .expect("the provider's pages lead to the redirect");
    let delivered = reqwest::get(answer).await.expect("the command's loopback");
    assert!(delivered.status().is_success(), "{delivered:?}");
}

/// Starts `n` echo commands at once over `credentials`, opening `browser` (and `env`).
fn commands_with_browser(
    n: usize,
    server: &ResourceServer,
    credentials: &str,
    browser: &Browser,
    env: &[(&str, &str)],
) -> Vec<Child> {
    let path = browser.path();
    let mut env = env.to_vec();
    env.push(("PATH", &path));
    (0..n)
        .map(|i| {
            let mut command = echo_command(i, server, credentials, &browser.options(), &env);
            command.spawn().expect("the CLI starts")
        })
        .collect()
}

/// Each command's output, once it ends.
async fn outputs(children: Vec<Child>) -> Vec<std::process::Output> {
    tokio::task::spawn_blocking(move || {
        let outputs = children.into_iter().map(|c| c.wait_with_output());
        outputs.map(|o| o.expect("the CLI ends")).collect()
    })
    .await
    .unwrap()
}

/// Every command answered its own echo.
fn answered(outputs: &[(usize, &std::process::Output)]) {
    for (i, output) in outputs {
        assert!(
            output.status.success(),
            "command {i}: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            format!("from {i}")
        );
    }
}

/// The provider saw one person sign in, and one code exchanged (after its first `before`
/// events).
fn signed_in_once(provider: &OpenIdProvider, before: usize) {
    let events = provider.events().split_off(before);
    let count = |prefix: &str| events.iter().filter(|e| e.starts_with(prefix)).count();
    assert_eq!(count("interaction.started prompt=login"), 1, "{events:#?}");
    assert_eq!(
        count("grant.success grant_type=authorization_code"),
        1,
        "{events:#?}"
    );
}

/// A provider with no grant for this client yet, and its protected MCP server.
async fn first_run() -> (Arc<ResourceServer>, OpenIdProvider) {
    installed();
    let server = ResourceServer::start();
    let provider = OpenIdProvider::start(&server.mcp_url, &server.secret).await;
    *server.issuer.lock().unwrap() = provider.issuer.clone();
    (server, provider)
}

/// Three commands started together with nothing stored (a first run, or a grant lost): one
/// opens the sign-in window, the others wait for it and adopt its token. Before the sign-in
/// was coordinated, each opened its own window (and all but one failed to listen on the
/// callback port).
#[actix::test]
async fn three_commands_needing_a_sign_in_open_one_window() {
    let (server, provider) = first_run().await;
    let file = CredentialsFile::new("one-window");
    let browser = Browser::new("one-window");
    let children = commands_with_browser(3, &server, &file.arg(), &browser, &[]);
    sign_in_at(&browser.window(0).await).await;
    let outputs = outputs(children).await;
    answered(&outputs.iter().enumerate().collect::<Vec<_>>());
    browser.opened(1);
    signed_in_once(&provider, 0);
    let waited = outputs
        .iter()
        .filter(|o| String::from_utf8_lossy(&o.stderr).contains("waiting for it"))
        .count();
    assert_eq!(waited, 2, "the others said they wait");
}

/// The same over one Redis store, as a service's replicas share it.
#[actix::test]
async fn two_commands_needing_a_sign_in_over_redis_open_one_window() {
    let (server, provider) = first_run().await;
    let redis = redis_server::start();
    let browser = Browser::new("redis-window");
    let env = [("ACTIX_MCP_CREDENTIALS_KEY", KEY_HEX)];
    let children = commands_with_browser(2, &server, &redis.url(), &browser, &env);
    sign_in_at(&browser.window(0).await).await;
    let outputs = outputs(children).await;
    answered(&outputs.iter().enumerate().collect::<Vec<_>>());
    browser.opened(1);
    signed_in_once(&provider, 0);
}

/// The command whose window is open is killed (SIGKILL) before the person signs in: its lease
/// ends by itself, one other command opens one window, and both others are answered.
#[actix::test]
async fn a_command_killed_during_its_sign_in_costs_one_lease_and_one_window() {
    let (server, provider) = first_run().await;
    let file = CredentialsFile::new("killed-window");
    let browser = Browser::new("killed-window");
    let mut children = commands_with_browser(3, &server, &file.arg(), &browser, &[]);
    let first = browser.window(0).await;
    let holder = children
        .iter()
        .position(|c| c.id() == first.pid)
        .expect("a command opened it");
    let mut killed = children.remove(holder);
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    let second = browser.window(1).await;
    assert_ne!(second.pid, first.pid);
    sign_in_at(&second).await;
    let outputs = outputs(children).await;
    let numbered: Vec<_> = (0..3).filter(|i| *i != holder).zip(&outputs).collect();
    answered(&numbered);
    browser.opened(2);
    signed_in_once(&provider, 0);
}

/// A web service's sign-in begun on one replica and completed on another, at the real provider:
/// the sealed `state` (`OAuthConfig::shared_sign_ins`) goes through its pages and comes back
/// intact, the replica that completes it fetches the metadata again, checks `iss`, exchanges the
/// code, and calls with the token; a replica with another key refuses it.
#[actix::test]
async fn a_web_sign_in_begun_on_one_replica_completes_on_another() {
    use actix_mcp::auth::Application;
    let (server, provider) = first_run().await;
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let replica = |key: [u8; 32]| {
        let config = OAuthConfig::default()
            .shared_store(store.clone())
            .shared_sign_ins(key, "alice");
        OAuth::new(Application::new(REDIRECT_URI), config)
    };
    let url = replica([5; 32])
        .begin(&server.mcp_url)
        .await
        .expect("begun on A");
    let state = url.query_pairs().find(|(k, _)| k == "state").unwrap().1;
    assert!(state.starts_with("s1."), "sealed: {state}");
    let log = AgentLog::default();
    let answer = follow_sign_in(url.clone(), &log).await.expect("signed in");
    let callback = Callback::from_redirect(&answer).expect("a code");

    let other_key = replica([6; 32]).complete(callback.clone()).await;
    assert!(
        matches!(
            other_key,
            Err(Error::Unauthorized {
                kind: AuthErrorKind::ResponseMismatch,
                ..
            })
        ),
        "{other_key:?}"
    );
    let on_b = replica([5; 32]);
    on_b.complete(callback).await.expect("completed on B");
    let client = Client::connect(HttpTransport::new(&server.mcp_url).auth(on_b))
        .await
        .expect("connected with B's token");
    echo(&client, "from b").await.expect("called");
    client.shutdown().await;
    signed_in_once(&provider, 0);
}
