//! MCP authorization (feature `auth`): OAuth 2.1 for Streamable HTTP servers that answer `401`.
//!
//! ```no_run
//! # async fn run() -> Result<(), actix_mcp::Error> {
//! use actix_mcp::{auth::{Loopback, OAuth, OAuthConfig}, Client, HttpTransport};
//!
//! let oauth = OAuth::new(Loopback::new(8976), OAuthConfig::default());
//! let client = Client::connect(HttpTransport::new("https://mcp.example.com/mcp").auth(oauth)).await?;
//! # Ok(()) }
//! ```
//!
//! What happens on `401` (ours: the MCP discovery rules, the state, the single flight; the
//! `oauth2` crate: PKCE, the authorization URL, the token requests):
//! 1. the challenges of every `WWW-Authenticate` value are read (the `Bearer` and `DPoP` ones
//!    merged): `resource_metadata`, `scope`, `error`;
//! 2. the protected resource metadata is fetched (the hint, else the path-based then the root
//!    well-known URI); its `resource` must name this server;
//! 3. the authorization server's metadata (RFC 8414 then OpenID Connect, path-insertion forms
//!    first); its `issuer` must be exactly the one asked; S256 PKCE must be listed;
//! 4. the client's identity: pre-registered, else a Client ID Metadata Document URL when the
//!    server supports it, else dynamic registration (with `application_type`), else an error;
//! 5. scopes: the challenge's, else the resource's `scopes_supported`, else none;
//!    `offline_access` when the authorization server lists it;
//! 6. the authorization request (PKCE S256, `state`, the RFC 8707 `resource`) through the
//!    [`UserAgent`]; the answer's `state` and (RFC 9207) `iss` are checked;
//! 7. the code is exchanged for tokens (`client_secret_basic`, `client_secret_post` or `none`).
//!
//! Every request that meets `401` waits for **one** such flow (or one refresh), then is retried;
//! a `403 insufficient_scope` re-authorizes with the union of the scopes, a bounded number of
//! times. Credentials are kept per authorization server and resource in a [`CredentialStore`];
//! when the resource names another authorization server, the old registration is not reused.

mod agent;
mod challenge;
mod config;
pub(crate) mod discovery;
mod dpop;
mod fetch;
mod flow;
mod grants;
mod identity;
mod jwt;
mod lease;
mod refresh;
#[cfg(test)]
mod refresh_model;
mod refresh_states;
mod sealed;
mod sign_in;
#[cfg(test)]
mod sign_in_model;
mod sign_in_states;
mod store;
mod vocabulary;
mod web;

use std::sync::{Arc, Mutex};

pub(crate) use self::flow::{Refusal, Seen};
pub use self::{
    agent::{AgentFuture, Application, Callback, Headless, Loopback, UserAgent},
    challenge::Challenge,
    config::{ApplicationType, OAuthConfig, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SIGN_IN_TIMEOUT},
    discovery::{AuthorizationServerMetadata, ProtectedResourceMetadata},
    grants::IdentityAssertion,
    store::{
        CredentialStore, Credentials, FileStore, Lease, MemoryStore, StoreError, StoreFuture,
        Stored, TokenAuthMethod,
    },
};
pub use crate::error::AuthErrorKind;
use crate::error::Error;
#[cfg(feature = "redis")]
pub use store::RedisStore;

pub(crate) fn failure(kind: AuthErrorKind, message: String) -> Error {
    Error::Unauthorized { kind, message }
}

/// The authorization of one user (or one program) to MCP servers. Cheap to clone; clones share
/// the tokens and the single flight. A multi-user service keeps one per end user.
#[derive(Clone)]
pub struct OAuth {
    inner: Arc<Inner>,
}

struct Inner {
    config: OAuthConfig,
    agent: Arc<dyn UserAgent>,
    state: Mutex<flow::State>,
    /// Held while an authorization or a refresh runs: everyone else waits, then uses its outcome.
    flight: tokio::sync::Mutex<()>,
    /// Proof of possession (RFC 9449), once an authorization server asks for it.
    dpop: Mutex<Option<dpop::Dpop>>,
    /// Set once the store's token for the first resource was looked at (`OAuth::prime_once`).
    primed: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// `agent` runs the authorization request; `config` says who this client is.
    pub fn new(agent: impl UserAgent, config: OAuthConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                agent: Arc::new(agent),
                state: Mutex::new(flow::State::default()),
                flight: tokio::sync::Mutex::new(()),
                dpop: Mutex::new(None),
                primed: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// Takes up the token the store kept for `resource`, once (see `flow.rs`'s `prime`).
    pub(crate) async fn prime_once(&self, resource: &str) {
        self.inner.primed.get_or_init(|| self.prime(resource)).await;
    }

    /// Whether a token is held.
    pub fn is_authorized(&self) -> bool {
        self.authorization().0.is_some()
    }
}
