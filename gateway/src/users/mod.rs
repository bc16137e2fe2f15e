//! Each user's own identity upstream. With `--authorization-server`, an upstream HTTP server with
//! `auth` (and not `"shared": true`) is reached with each user's own grant, on a connection of
//! that user's: opened on first use, closed when idle (`--user-connection-idle`), bounded in
//! number (`--max-user-connections`), each with the library's cancellation guarantees. A user
//! with no grant yet is sent to sign in through the gateway (`sign_in.rs`): the call is answered
//! with MCP's `URLElicitationRequired` error (`-32042`) naming the gateway's sign-in URL, and the
//! user's sessions are told when the sign-in is complete. The gateway's own connection of such
//! a server only lists it (the catalogue); it never carries a user's call.

pub mod sign_in;
mod store;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::{Duration, Instant},
};

use actix_mcp::{auth::CredentialStore, client::ConnectOptions, config::ServerConfig, Client};
use serde_json::json;

pub use sign_in::SignIns;
use store::UserStore;

use crate::{
    owner::{Bearer, Owner},
    replies::Refusal,
};

/// MCP: the request needs the user to go through a URL first (`URLElicitationRequiredError`).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The per-user servers and the connections of their users.
pub struct Users {
    store: Arc<dyn CredentialStore>,
    /// Each per-user server's config and connect options (its request handlers).
    servers: HashMap<String, (ServerConfig, ConnectOptions)>,
    /// Set when the gateway serves HTTP with users: where sign-ins come back to.
    serving: OnceLock<Serving>,
    connections: Mutex<HashMap<(Owner, String), Arc<Connection>>>,
    pub sign_ins: SignIns,
}

/// What the HTTP side tells: its public origin, and its limits.
pub struct Serving {
    /// `scheme://authority` of `--resource`.
    pub origin: String,
    /// The gateway's own resource URL (`--resource`): what a sign-in confirms its user against.
    pub resource: String,
    pub max_connections: usize,
    pub idle: Duration,
}

/// One user's connection to one server, made on first use.
struct Connection {
    /// The client, and the user's token it was made with (`tokenExchange`: exchanged from it).
    client: tokio::sync::Mutex<Option<(Client, Option<Bearer>)>>,
    last_used: Mutex<Instant>,
}

impl Users {
    /// The servers of `servers` that are reached per user: HTTP ones with `auth`, not `shared`.
    pub fn new(
        store: Arc<dyn CredentialStore>,
        servers: impl IntoIterator<Item = (ServerConfig, ConnectOptions)>,
    ) -> Self {
        let per_user = servers.into_iter().filter(|(server, _)| {
            let http = matches!(
                server.transport,
                actix_mcp::config::TransportConfig::Http { .. }
            );
            http && server.auth.is_some() && !server.shared
        });
        Self {
            store,
            servers: per_user.map(|(s, o)| (s.name.clone(), (s, o))).collect(),
            serving: OnceLock::new(),
            connections: Mutex::default(),
            sign_ins: SignIns::default(),
        }
    }

    /// The gateway serves users over HTTP: per-user servers are per user from now on.
    pub fn serve(&self, serving: Serving) {
        let _ = self.serving.set(serving);
    }

    pub fn serving(&self) -> Option<&Serving> {
        self.serving.get()
    }

    /// Whether `server` is reached with each user's own grant (for `owner`, a user).
    pub fn per_user(&self, owner: &Owner, server: &str) -> bool {
        self.serving.get().is_some()
            && matches!(owner, Owner::User { .. })
            && self.servers.contains_key(server)
    }

    /// `owner`'s part of the credential store.
    fn store_of(&self, owner: &Owner) -> Arc<dyn CredentialStore> {
        Arc::new(UserStore::new(self.store.clone(), owner))
    }

    /// `owner`'s connection to `server`, made now if need be. Without a grant of theirs:
    /// `-32042` with the gateway's sign-in URL for them.
    /// With `tokenExchange`, the user's token upstream is exchanged from `token`, their current
    /// one: a connection made from an older token is replaced (its calls in flight keep it until
    /// they end).
    pub async fn client(
        &self,
        owner: &Owner,
        server: &str,
        token: Option<&Bearer>,
    ) -> Result<Client, Refusal> {
        let Some(serving) = self.serving.get() else {
            return Err(Refusal::params(
                "per-user servers need the gateway's HTTP side",
            ));
        };
        let connection = self.connection(owner, server, serving)?;
        let Some((config, options)) = self.servers.get(server) else {
            return Err(Refusal::params(format!("no server {server:?}")));
        };
        let exchange = config.auth.as_ref().is_some_and(|a| a.token_exchange);
        let token = token.filter(|_| exchange);
        let mut slot = connection.client.lock().await;
        let current = |(client, made_from): &(Client, Option<Bearer>)| {
            !client.is_closed() && made_from.as_ref() == token
        };
        if let Some((client, _)) = slot.as_ref().filter(|made| current(made)) {
            return Ok(client.clone());
        }
        let redirect = format!("{}{}", serving.origin, sign_in::CALLBACK);
        let subject = token.map(|t| &*t.0);
        let transport = config
            .transport_for_user(self.store_of(owner), &redirect, subject)
            .map_err(|e| Refusal::from_error(&e))?;
        match options.clone().connect(transport).await {
            Ok(client) => {
                *slot = Some((client.clone(), token.cloned()));
                Ok(client)
            }
            Err(e) if needs_sign_in(&e) => Err(self.sign_in_required(owner, server, serving)),
            Err(e) => Err(Refusal::from_error(&e)),
        }
    }

    /// The slot of `owner`'s connection to `server`; refused past the bound.
    fn connection(
        &self,
        owner: &Owner,
        server: &str,
        serving: &Serving,
    ) -> Result<Arc<Connection>, Refusal> {
        let mut connections = self.lock();
        let key = (owner.clone(), server.to_owned());
        if let Some(connection) = connections.get(&key) {
            *connection
                .last_used
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now();
            return Ok(connection.clone());
        }
        if connections.len() >= serving.max_connections {
            let why = format!(
                "the gateway holds its limit of {} per-user upstream connections \
                 (--max-user-connections)",
                serving.max_connections
            );
            return Err(Refusal(crate::replies::INTERNAL_ERROR, why, None));
        }
        let connection = Arc::new(Connection {
            client: tokio::sync::Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
        });
        connections.insert(key, connection.clone());
        Ok(connection)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Owner, String), Arc<Connection>>> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the connections unused for longer than the idle limit (their calls are over: a
    /// call in flight holds its client, which keeps its connection open until it ends).
    pub async fn sweep(&self, now: Instant) {
        let Some(serving) = self.serving.get() else {
            return;
        };
        let idle: Vec<Arc<Connection>> = {
            let mut connections = self.lock();
            let mut idle = Vec::new();
            connections.retain(|_, connection| {
                let last = *connection
                    .last_used
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let keep = now.saturating_duration_since(last) < serving.idle;
                if !keep {
                    idle.push(connection.clone());
                }
                keep
            });
            idle
        };
        // Dropped, not closed: a call still in flight keeps its connection until it ends.
        for connection in idle {
            connection.client.lock().await.take();
        }
    }

    /// What a request on `owner`'s connection to `server` failed with, as the downstream
    /// client is answered: a want of the user's authorization is the `-32042` of a sign-in.
    pub fn refusal(&self, owner: &Owner, server: &str, error: &actix_mcp::Error) -> Refusal {
        match (needs_sign_in(error), self.serving.get()) {
            (true, Some(serving)) if self.per_user(owner, server) => {
                self.sign_in_required(owner, server, serving)
            }
            _ => Refusal::from_error(error),
        }
    }

    /// The `-32042` answer: the URL of a sign-in for `owner` at `server`, through the gateway.
    fn sign_in_required(&self, owner: &Owner, server: &str, serving: &Serving) -> Refusal {
        let ticket = self.sign_ins.ticket(owner, server);
        let url = format!("{}{}{ticket}", serving.origin, sign_in::START);
        let message = format!(
            "Sign in to {server} so that the gateway can act there as you; then try again."
        );
        let data = json!({"elicitations": [{
            "mode": "url", "elicitationId": ticket, "url": url, "message": message,
        }]});
        Refusal(URL_ELICITATION_REQUIRED, message, Some(data))
    }
}

/// Whether connecting failed for want of the user's authorization.
fn needs_sign_in(error: &actix_mcp::Error) -> bool {
    matches!(
        error,
        actix_mcp::Error::Unauthorized {
            kind: actix_mcp::AuthErrorKind::InteractionRequired,
            ..
        }
    )
}
