//! A multi-user web service that calls an OAuth-protected MCP server on its users' behalf.
//!
//! ```text
//! cargo run --example web_auth --features actix-web -- https://mcp.example.com/mcp
//! # several replicas sharing one Redis (each user's tokens, refreshed once for all of them),
//! # behind one public callback URL:
//! REDIS_URL=redis://127.0.0.1:6379/0 CREDENTIALS_KEY=<64 hex digits> PORT=8081 \
//!   CALLBACK_URL=https://service.example.com/callback \
//!   cargo run --example web_auth --features actix-web,redis -- https://mcp.example.com/mcp
//! # then, in a browser:
//! #   http://127.0.0.1:8080/login?user=alice     → the MCP server's sign-in page, then back
//! #   http://127.0.0.1:8080/tools?user=alice     → the tools, listed with alice's token
//! #   http://127.0.0.1:8080/call?user=alice&tool=echo&message=hi
//! ```
//!
//! Each user has an [`OAuth`] of their own (their tokens, their single flight). `/login` runs the
//! first half of the authorization (`OAuth::begin`: discovery, registration, PKCE) and sends the
//! browser to the authorization server; `/callback` runs the second half (`OAuth::complete`)
//! and connects a `Client` for that user. A user who has not signed in gets `401` from the
//! service, never someone else's session.
//!
//! With a `RedisStore` (feature `redis`) the service runs as several replicas: each user's
//! tokens are kept in Redis under that user's scope, a replica that never saw the user connects
//! with them, and a token that expires is refreshed once for every replica. A sign-in begun on
//! one replica completes on any (`OAuthConfig::shared_sign_ins`: it travels sealed in its
//! `state`, bound to the user, whom the callback knows by the service's cookie): no sticky
//! sessions.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use actix_mcp::{
    auth::{Application, ApplicationType, Callback, OAuth, OAuthConfig},
    Client, HttpTransport,
};
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

/// What the service keeps: the MCP server's URL, its own callback URL, and per user their
/// authorization and (once signed in) their connection.
pub struct Service {
    pub mcp_url: String,
    pub callback_url: String,
    /// Where the users' tokens live when replicas share them.
    #[cfg(feature = "redis")]
    store: Option<actix_mcp::auth::RedisStore>,
    /// The key replicas seal their sign-ins with, when they share them.
    sign_in_key: Option<[u8; 32]>,
    users: Mutex<HashMap<String, User>>,
    /// Authorizations begun and not completed: `state` → user.
    begun: Mutex<HashMap<String, String>>,
}

struct User {
    oauth: OAuth,
    client: Option<Client>,
}

impl Service {
    pub fn new(mcp_url: impl Into<String>, callback_url: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            mcp_url: mcp_url.into(),
            callback_url: callback_url.into(),
            #[cfg(feature = "redis")]
            store: None,
            sign_in_key: None,
            users: Mutex::default(),
            begun: Mutex::default(),
        })
    }

    /// A replica: the users' tokens in `store`, and their sign-ins sealed with `sign_in_key`,
    /// shared with the other replicas.
    #[cfg(feature = "redis")]
    pub fn replica(
        mcp_url: impl Into<String>,
        callback_url: impl Into<String>,
        store: actix_mcp::auth::RedisStore,
        sign_in_key: [u8; 32],
    ) -> Arc<Self> {
        Arc::new(Self {
            mcp_url: mcp_url.into(),
            callback_url: callback_url.into(),
            store: Some(store),
            sign_in_key: Some(sign_in_key),
            users: Mutex::default(),
            begun: Mutex::default(),
        })
    }

    /// The user's configuration: their tokens in memory, or in the shared store under their
    /// scope.
    fn config_of(&self, user: &str) -> OAuthConfig {
        let mut config = OAuthConfig::default()
            .client_name("actix-mcp web example")
            .application_type(ApplicationType::Web);
        if let Some(key) = self.sign_in_key {
            config = config.shared_sign_ins(key, user);
        }
        #[cfg(feature = "redis")]
        if let Some(store) = &self.store {
            return config.shared_store(Arc::new(store.scoped(user)));
        }
        let _ = user;
        config
    }

    fn oauth_of(&self, user: &str) -> OAuth {
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        users
            .entry(user.to_owned())
            .or_insert_with(|| User {
                oauth: OAuth::new(
                    Application::new(self.callback_url.clone()),
                    self.config_of(user),
                ),
                client: None,
            })
            .oauth
            .clone()
    }

    fn client_of(&self, user: &str) -> Option<Client> {
        let users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        users.get(user).and_then(|u| u.client.clone())
    }

    /// The user's connection: this replica's, else (with a shared store) one made with the
    /// tokens another replica keeps there. `None`: the user has not signed in.
    async fn client_for(&self, user: &str) -> Option<Client> {
        if let Some(client) = self.client_of(user) {
            return Some(client);
        }
        #[cfg(feature = "redis")]
        if self.store.is_some() {
            let transport = HttpTransport::new(self.mcp_url.clone()).auth(self.oauth_of(user));
            // Without stored tokens the server's 401 asks for a sign-in: no connection.
            let client = Client::connect(transport).await.ok()?;
            let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = users.get_mut(user) {
                entry.client = Some(client.clone());
            }
            return Some(client);
        }
        None
    }
}

#[derive(Deserialize)]
struct UserQuery {
    user: String,
}

async fn login(service: web::Data<Arc<Service>>, query: web::Query<UserQuery>) -> HttpResponse {
    let oauth = service.oauth_of(&query.user);
    match oauth.begin(&service.mcp_url).await {
        Ok(url) => {
            if let Some((_, state)) = url.query_pairs().find(|(k, _)| k == "state") {
                let mut begun = service.begun.lock().unwrap_or_else(|e| e.into_inner());
                begun.insert(state.into_owned(), query.user.clone());
            }
            // Who is signing in, for whichever replica gets the callback (a real service has
            // its session cookie).
            let cookie = actix_web::cookie::Cookie::build(USER_COOKIE, query.user.clone())
                .http_only(true)
                .same_site(actix_web::cookie::SameSite::Lax)
                .path("/")
                .finish();
            HttpResponse::Found()
                .insert_header(("location", url.to_string()))
                .cookie(cookie)
                .finish()
        }
        Err(e) => HttpResponse::BadGateway().body(format!("cannot start signing in: {e}")),
    }
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: String,
    state: String,
    iss: Option<String>,
}

/// The cookie naming who signs in.
const USER_COOKIE: &str = "web_auth_user";

async fn callback(
    request: actix_web::HttpRequest,
    service: web::Data<Arc<Service>>,
    query: web::Query<CallbackQuery>,
) -> HttpResponse {
    let begun_here = {
        let mut begun = service.begun.lock().unwrap_or_else(|e| e.into_inner());
        begun.remove(&query.state)
    };
    // Begun on another replica: the cookie says whose it is (and a state sealed for someone
    // else does not open for them).
    let shared = service.sign_in_key.is_some();
    let cookie = || request.cookie(USER_COOKIE).map(|c| c.value().to_owned());
    let user = begun_here.or_else(|| shared.then(cookie).flatten());
    let Some(user) = user else {
        return HttpResponse::BadRequest().body("unknown sign-in");
    };
    let oauth = service.oauth_of(&user);
    let callback = Callback {
        code: query.code.clone(),
        state: Some(query.state.clone()),
        iss: query.iss.clone(),
    };
    if let Err(e) = oauth.complete(callback).await {
        return HttpResponse::Unauthorized().body(format!("signing in failed: {e}"));
    }
    match Client::connect(HttpTransport::new(service.mcp_url.clone()).auth(oauth)).await {
        Ok(client) => {
            let mut users = service.users.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = users.get_mut(&user) {
                entry.client = Some(client);
            }
            HttpResponse::Ok().body(format!("{user} is signed in"))
        }
        Err(e) => HttpResponse::BadGateway().body(format!("cannot connect: {e}")),
    }
}

async fn tools(service: web::Data<Arc<Service>>, query: web::Query<UserQuery>) -> HttpResponse {
    let Some(client) = service.client_for(&query.user).await else {
        return HttpResponse::Unauthorized().body("sign in first: /login?user=…");
    };
    match client.tools().await {
        Ok(tools) => {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            HttpResponse::Ok().json(json!({ "tools": names }))
        }
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

#[derive(Deserialize)]
struct CallQuery {
    user: String,
    tool: String,
    message: Option<String>,
}

async fn call(service: web::Data<Arc<Service>>, query: web::Query<CallQuery>) -> HttpResponse {
    let Some(client) = service.client_for(&query.user).await else {
        return HttpResponse::Unauthorized().body("sign in first: /login?user=…");
    };
    let arguments = json!({ "message": query.message.clone().unwrap_or_default() });
    match client.call_tool(&query.tool, arguments).await {
        Ok(result) => HttpResponse::Ok().json(json!({ "text": result.text() })),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

/// The service's routes.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/login", web::get().to(login))
        .route("/callback", web::get().to(callback))
        .route("/tools", web::get().to(tools))
        .route("/call", web::get().to(call));
}

#[allow(dead_code, reason = "unused where a test includes this file")]
#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mcp_url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:3001/mcp".into());
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    // Replicas behind a load balancer share its public callback URL.
    let callback = std::env::var("CALLBACK_URL")
        .unwrap_or_else(|_| format!("http://127.0.0.1:{port}/callback"));
    let service = service(mcp_url, callback).await?;
    println!("open http://127.0.0.1:{port}/login?user=alice");
    actix_web::HttpServer::new(move || {
        actix_web::App::new()
            .app_data(web::Data::new(service.clone()))
            .configure(routes)
    })
    .bind(("127.0.0.1", port))?
    .run()
    .await
}

/// A replica sharing Redis when `REDIS_URL` is set (with `CREDENTIALS_KEY`, 64 hex digits),
/// else a service of its own.
#[allow(dead_code, reason = "unused where a test includes this file")]
async fn service(mcp_url: String, callback: String) -> std::io::Result<Arc<Service>> {
    #[cfg(feature = "redis")]
    if let Ok(redis) = std::env::var("REDIS_URL") {
        let hex = std::env::var("CREDENTIALS_KEY").unwrap_or_default();
        let key: [u8; 32] = hex::decode(hex.trim())
            .ok()
            .and_then(|key| key.try_into().ok())
            .ok_or_else(|| std::io::Error::other("CREDENTIALS_KEY: 32 bytes as 64 hex digits"))?;
        let store = actix_mcp::auth::RedisStore::connect(&redis, key, "web-auth-example:")
            .await
            .map_err(std::io::Error::other)?;
        // Another key than the store's, from the same secret.
        let sign_in_key = <sha2::Sha256 as sha2::Digest>::digest([b"sign-ins:", &key[..]].concat());
        return Ok(Service::replica(
            mcp_url,
            callback,
            store,
            sign_in_key.into(),
        ));
    }
    Ok(Service::new(mcp_url, callback))
}
