//! A multi-user web service that calls an OAuth-protected MCP server on its users' behalf.
//!
//! ```text
//! cargo run --example web_auth --features actix-web -- https://mcp.example.com/mcp
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
            users: Mutex::default(),
            begun: Mutex::default(),
        })
    }

    fn oauth_of(&self, user: &str) -> OAuth {
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        users
            .entry(user.to_owned())
            .or_insert_with(|| User {
                oauth: OAuth::new(
                    Application::new(self.callback_url.clone()),
                    OAuthConfig::default()
                        .client_name("actix-mcp web example")
                        .application_type(ApplicationType::Web),
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
            HttpResponse::Found()
                .insert_header(("location", url.to_string()))
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

async fn callback(
    service: web::Data<Arc<Service>>,
    query: web::Query<CallbackQuery>,
) -> HttpResponse {
    let user = {
        let mut begun = service.begun.lock().unwrap_or_else(|e| e.into_inner());
        begun.remove(&query.state)
    };
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
    let Some(client) = service.client_of(&query.user) else {
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
    let Some(client) = service.client_of(&query.user) else {
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

#[allow(dead_code)]
#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mcp_url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:3001/mcp".into());
    let service = Service::new(mcp_url, "http://127.0.0.1:8080/callback");
    println!("open http://127.0.0.1:8080/login?user=alice");
    actix_web::HttpServer::new(move || {
        actix_web::App::new()
            .app_data(web::Data::new(service.clone()))
            .configure(routes)
    })
    .bind(("127.0.0.1", 8080))?
    .run()
    .await
}
