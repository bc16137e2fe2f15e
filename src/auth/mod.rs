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
//! 1. the challenge (`WWW-Authenticate`) is read: `resource_metadata`, `scope`, `error`;
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
mod discovery;
mod fetch;
mod store;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{SystemTime, UNIX_EPOCH},
};

use oauth2::{
    basic::BasicClient, AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EndpointNotSet, EndpointSet, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken,
    Scope, TokenResponse, TokenUrl,
};
use url::Url;

pub use self::{
    agent::{AgentFuture, Application, Callback, Headless, Loopback, UserAgent},
    challenge::Challenge,
    discovery::{AuthorizationServerMetadata, ProtectedResourceMetadata},
    store::{CredentialStore, Credentials, FileStore, MemoryStore},
};
use self::{
    challenge::split_scopes,
    discovery::check_secure,
    fetch::{Fetcher, HttpError},
};
pub use crate::error::AuthErrorKind;
use crate::error::Error;

/// How many times a `403 insufficient_scope` may send us back to the authorization server.
const MAX_STEP_UPS: u32 = 2;

/// Refresh a token this long before it expires.
const REFRESH_MARGIN_SECS: u64 = 30;

pub(crate) fn failure(kind: AuthErrorKind, message: String) -> Error {
    Error::Unauthorized { kind, message }
}

/// Who this client is to authorization servers, and where its credentials are kept.
#[derive(Clone)]
pub struct OAuthConfig {
    client_id: Option<String>,
    client_secret: Option<String>,
    client_metadata_url: Option<String>,
    client_name: String,
    application_type: String,
    store: Arc<dyn CredentialStore>,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        Self {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            client_name: "actix-mcp".into(),
            application_type: "native".into(),
            store: Arc::new(MemoryStore::default()),
        }
    }
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .field("application_type", &self.application_type)
            .finish()
    }
}

impl OAuthConfig {
    /// A pre-registered client (used first, before CIMD or registration).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// The https URL of this client's Client ID Metadata Document, used as its client id by
    /// authorization servers that support CIMD.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// `native` (default: a loopback redirect) or `web`, as registered.
    pub fn application_type(mut self, kind: impl Into<String>) -> Self {
        self.application_type = kind.into();
        self
    }

    pub fn store(mut self, store: impl CredentialStore) -> Self {
        self.store = Arc::new(store);
        self
    }
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
    state: Mutex<State>,
    /// Held while an authorization or a refresh runs: everyone else waits, then uses its outcome.
    flight: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// What the current credentials were obtained from.
    granted: Option<Grant>,
    /// Bumped by every flow (authorization or refresh), successful or not.
    attempts: u64,
    last: Option<Result<(), Error>>,
    step_ups: u32,
    /// Web flow: authorizations begun and not completed, by `state`.
    pending: HashMap<String, Pending>,
}

struct Grant {
    issuer: String,
    resource: String,
    metadata: AuthorizationServerMetadata,
    credentials: Credentials,
}

struct Pending {
    server: Url,
    issuer: String,
    resource: String,
    metadata: AuthorizationServerMetadata,
    credentials: Credentials,
    verifier: PkceCodeVerifier,
    scopes: Vec<String>,
}

/// What a request saw of the authorization when it was sent: a `401` it meets is answered by the
/// next flow unless one already ran since.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    attempts: u64,
}

/// What the server's refusal of a request asks for.
pub(crate) struct Refusal<'a> {
    pub status: u16,
    pub challenge: Option<&'a str>,
}

type Oauth2Client =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    pub fn new(agent: impl UserAgent, config: OAuthConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                agent: Arc::new(agent),
                state: Mutex::new(State::default()),
                flight: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned state is still consistent.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The `Authorization` header value for the next request, if a token is held.
    pub(crate) fn authorization(&self) -> (Option<String>, Seen) {
        let state = self.state();
        let seen = Seen {
            attempts: state.attempts,
        };
        let header = state.granted.as_ref().and_then(|grant| {
            let token = grant.credentials.access_token.as_deref()?;
            let kind = match grant.credentials.token_type.as_deref() {
                Some(t) if t.eq_ignore_ascii_case("dpop") => "DPoP",
                _ => "Bearer",
            };
            Some(format!("{kind} {token}"))
        });
        (header, seen)
    }

    /// Whether the held token expires within the margin and can be refreshed.
    pub(crate) fn expiring(&self) -> bool {
        let state = self.state();
        let Some(grant) = &state.granted else {
            return false;
        };
        let soon = now_secs() + REFRESH_MARGIN_SECS;
        grant.credentials.refresh_token.is_some()
            && grant.credentials.expires_at.is_some_and(|at| at <= soon)
    }

    /// Refreshes the token before it expires (one refresh for everyone waiting).
    pub(crate) async fn refresh_if_expiring(&self, seen: Seen) {
        if !self.expiring() {
            return;
        }
        let _flight = self.inner.flight.lock().await;
        if self.state().attempts != seen.attempts {
            return;
        }
        let outcome = self.refresh().await;
        self.finish(outcome.map(|_| ()));
    }

    /// Called when the server refused a request (`401`, or `403 insufficient_scope`): runs one
    /// authorization (or refresh) for every request that saw the same state, and returns its
    /// outcome. `Ok` means: send the request again.
    pub(crate) async fn recover(
        &self,
        server: &Url,
        refusal: Refusal<'_>,
        seen: Seen,
    ) -> Result<(), Error> {
        let _flight = self.inner.flight.lock().await;
        {
            let state = self.state();
            if state.attempts != seen.attempts {
                // A flow ran since this request was sent: its outcome is ours.
                return state.last.clone().unwrap_or(Ok(()));
            }
        }
        let challenge = Challenge::parse(refusal.challenge.unwrap_or_default());
        let outcome = self.run(server, refusal.status, &challenge).await;
        self.finish(outcome.clone());
        outcome
    }

    fn finish(&self, outcome: Result<(), Error>) {
        let mut state = self.state();
        state.attempts += 1;
        state.last = Some(outcome);
    }

    async fn run(&self, server: &Url, status: u16, challenge: &Challenge) -> Result<(), Error> {
        if status == 403 {
            if !challenge.is_insufficient_scope() {
                return Err(failure(
                    AuthErrorKind::Denied,
                    format!("the server refused the request (403 {:?})", challenge.error),
                ));
            }
            let (previous, step_ups) = {
                let state = self.state();
                let previous = state
                    .granted
                    .as_ref()
                    .map(|g| g.credentials.scopes.clone())
                    .unwrap_or_default();
                (previous, state.step_ups)
            };
            let mut wanted = previous.clone();
            for scope in challenge.scopes() {
                if !wanted.contains(&scope) {
                    wanted.push(scope);
                }
            }
            if wanted == previous || step_ups >= MAX_STEP_UPS {
                return Err(failure(
                    AuthErrorKind::InsufficientScope,
                    format!(
                        "the server asks for scopes {:?} that re-authorizing does not bring",
                        challenge.scope.as_deref().unwrap_or_default()
                    ),
                ));
            }
            self.state().step_ups += 1;
            return self.authorize(server, challenge, Some(wanted)).await;
        }
        if self.refresh().await.unwrap_or(false) {
            return Ok(());
        }
        self.authorize(server, challenge, None).await
    }

    /// Uses the refresh token, if one is held. `Ok(false)`: there is none.
    async fn refresh(&self) -> Result<bool, Error> {
        let (metadata, resource, credentials) = {
            let state = self.state();
            let Some(grant) = &state.granted else {
                return Ok(false);
            };
            if grant.credentials.refresh_token.is_none() {
                return Ok(false);
            }
            (
                grant.metadata.clone(),
                grant.resource.clone(),
                grant.credentials.clone(),
            )
        };
        let Some(refresh_token) = credentials.refresh_token.clone() else {
            return Ok(false);
        };
        let fetcher = Fetcher::new()?;
        let client = self.oauth2_client(&metadata, &credentials)?;
        let http = |request| fetcher.execute(request);
        let answer = client
            .exchange_refresh_token(&RefreshToken::new(refresh_token))
            .add_extra_param("resource", resource.clone())
            .request_async(&http)
            .await;
        match answer {
            Ok(token) => {
                let mut updated = credentials.clone();
                apply_token(&mut updated, &token, credentials.scopes.clone());
                self.keep(&metadata, &resource, updated);
                Ok(true)
            }
            Err(e) => {
                tracing::debug!(error = %token_error(&e), "token refresh failed");
                // The refresh token is spent or refused: a full authorization follows.
                if let Some(grant) = self.state().granted.as_mut() {
                    grant.credentials.refresh_token = None;
                }
                Ok(false)
            }
        }
    }

    /// The whole flow: discovery, identity, authorization request, token.
    async fn authorize(
        &self,
        server: &Url,
        challenge: &Challenge,
        scopes: Option<Vec<String>>,
    ) -> Result<(), Error> {
        let fetcher = Fetcher::new()?;
        let (issuer, resource, metadata, credentials, scopes) = self
            .prepare(
                &fetcher,
                server,
                challenge.resource_metadata.as_deref(),
                challenge.scopes(),
                scopes,
            )
            .await?;
        let client = self.oauth2_client(&metadata, &credentials)?;
        let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(pkce)
            .add_extra_param("resource", resource.clone());
        for scope in &scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state) = request.url();
        let callback = self.inner.agent.authorize(url).await?;
        if callback.state.as_deref() != Some(state.secret().as_str()) {
            return Err(failure(
                AuthErrorKind::ResponseMismatch,
                "the authorization response's state is not ours".into(),
            ));
        }
        let pending = Pending {
            server: server.clone(),
            issuer,
            resource,
            metadata,
            credentials,
            verifier,
            scopes,
        };
        self.exchange(&fetcher, pending, callback).await
    }

    /// Discovery and identity: everything before the authorization request.
    async fn prepare(
        &self,
        fetcher: &Fetcher,
        server: &Url,
        hint: Option<&str>,
        challenged: Vec<String>,
        scopes: Option<Vec<String>>,
    ) -> Result<
        (
            String,
            String,
            AuthorizationServerMetadata,
            Credentials,
            Vec<String>,
        ),
        Error,
    > {
        let resource_metadata = discovery::protected_resource(fetcher, server, hint).await?;
        let issuer = resource_metadata
            .authorization_servers
            .first()
            .cloned()
            .ok_or_else(|| {
                failure(
                    AuthErrorKind::Discovery,
                    "the protected resource metadata names no authorization server".into(),
                )
            })?;
        let metadata = discovery::authorization_server(fetcher, &issuer).await?;
        let s256 = metadata
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        if !s256 {
            return Err(failure(
                AuthErrorKind::PkceUnsupported,
                format!("{issuer} does not support PKCE with S256"),
            ));
        }
        let resource = resource_metadata.resource.clone();
        let credentials = self
            .identity(fetcher, &issuer, &resource, &metadata)
            .await?;
        let mut scopes = match scopes {
            Some(scopes) => scopes,
            None if !challenged.is_empty() => challenged,
            None => resource_metadata
                .scopes_supported
                .clone()
                .unwrap_or_default(),
        };
        if !scopes.is_empty()
            && metadata.supports_scope("offline_access")
            && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".into());
        }
        Ok((issuer, resource, metadata, credentials, scopes))
    }

    /// This client's identity at `issuer`, in the spec's priority.
    async fn identity(
        &self,
        fetcher: &Fetcher,
        issuer: &str,
        resource: &str,
        metadata: &AuthorizationServerMetadata,
    ) -> Result<Credentials, Error> {
        let config = &self.inner.config;
        if let Some(client_id) = &config.client_id {
            let method = secret_method(config.client_secret.is_some(), metadata);
            return Ok(Credentials {
                client_id: client_id.clone(),
                client_secret: config.client_secret.clone(),
                auth_method: method,
                ..Credentials::default()
            });
        }
        // Held for this issuer (never another's: a migrated resource gets a new registration).
        let key = store_key(issuer, resource);
        let held = {
            let state = self.state();
            state
                .granted
                .as_ref()
                .filter(|g| g.issuer == issuer)
                .map(|g| g.credentials.clone())
        };
        if let Some(held) = held.or_else(|| config.store.load(&key)) {
            return Ok(held);
        }
        if let Some(url) = &config.client_metadata_url {
            if metadata.client_id_metadata_document_supported == Some(true) {
                return Ok(Credentials {
                    client_id: url.clone(),
                    auth_method: "none".into(),
                    ..Credentials::default()
                });
            }
        }
        let Some(endpoint) = &metadata.registration_endpoint else {
            return Err(failure(
                AuthErrorKind::NoClientIdentity,
                format!("{issuer} offers no registration and this client has no client id for it"),
            ));
        };
        let endpoint = check_secure("registration endpoint", endpoint)?;
        let supported = metadata
            .token_endpoint_auth_methods_supported
            .clone()
            .unwrap_or_else(|| vec!["client_secret_basic".into()]);
        let requested = ["none", "client_secret_basic", "client_secret_post"]
            .into_iter()
            .find(|m| supported.iter().any(|s| s == m))
            .unwrap_or("none");
        let body = serde_json::json!({
            "client_name": config.client_name,
            "redirect_uris": [self.inner.agent.redirect_uri()],
            "application_type": config.application_type,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": requested,
        });
        let (status, answer) = fetcher.post_json(endpoint, &body).await?;
        if !(200..300).contains(&status) {
            return Err(failure(
                AuthErrorKind::Registration,
                format!("{issuer} refused the registration (HTTP {status})"),
            ));
        }
        #[derive(serde::Deserialize)]
        struct Registered {
            client_id: String,
            #[serde(default)]
            client_secret: Option<String>,
            #[serde(default)]
            token_endpoint_auth_method: Option<String>,
        }
        let registered: Registered = serde_json::from_slice(&answer).map_err(|e| {
            failure(
                AuthErrorKind::Registration,
                format!("{issuer}'s registration answer: {e}"),
            )
        })?;
        let method = registered
            .token_endpoint_auth_method
            .clone()
            .unwrap_or_else(|| secret_method(registered.client_secret.is_some(), metadata));
        Ok(Credentials {
            client_id: registered.client_id,
            client_secret: registered.client_secret,
            auth_method: method,
            registered: true,
            ..Credentials::default()
        })
    }

    fn oauth2_client(
        &self,
        metadata: &AuthorizationServerMetadata,
        credentials: &Credentials,
    ) -> Result<Oauth2Client, Error> {
        let endpoint = |what: &str, url: &Option<String>| -> Result<Url, Error> {
            let url = url.as_deref().ok_or_else(|| {
                failure(
                    AuthErrorKind::Discovery,
                    format!("{} has no {what}", metadata.issuer),
                )
            })?;
            check_secure(what, url)
        };
        let authorize = endpoint("authorization endpoint", &metadata.authorization_endpoint)?;
        let token = endpoint("token endpoint", &metadata.token_endpoint)?;
        let redirect = RedirectUrl::new(self.inner.agent.redirect_uri())
            .map_err(|e| failure(AuthErrorKind::Discovery, format!("redirect URI: {e}")))?;
        let mut client = BasicClient::new(ClientId::new(credentials.client_id.clone()))
            .set_auth_uri(AuthUrl::from_url(authorize))
            .set_token_uri(TokenUrl::from_url(token))
            .set_redirect_uri(redirect);
        match (credentials.auth_method.as_str(), &credentials.client_secret) {
            ("client_secret_basic", Some(secret)) => {
                client = client
                    .set_client_secret(ClientSecret::new(secret.clone()))
                    .set_auth_type(AuthType::BasicAuth);
            }
            ("client_secret_post", Some(secret)) => {
                client = client
                    .set_client_secret(ClientSecret::new(secret.clone()))
                    .set_auth_type(AuthType::RequestBody);
            }
            _ => client = client.set_auth_type(AuthType::RequestBody),
        }
        Ok(client)
    }

    /// The authorization response: checks `iss` (RFC 9207), exchanges the code, keeps the tokens.
    async fn exchange(
        &self,
        fetcher: &Fetcher,
        pending: Pending,
        callback: Callback,
    ) -> Result<(), Error> {
        let advertised = pending
            .metadata
            .authorization_response_iss_parameter_supported
            == Some(true);
        match (&callback.iss, advertised) {
            (None, true) => {
                return Err(failure(
                    AuthErrorKind::ResponseMismatch,
                    "the authorization response lacks the iss its server advertises".into(),
                ))
            }
            (Some(iss), _) if *iss != pending.metadata.issuer => {
                return Err(failure(
                    AuthErrorKind::ResponseMismatch,
                    format!(
                        "the authorization response comes from {iss:?}, not {:?}",
                        pending.metadata.issuer
                    ),
                ))
            }
            _ => {}
        }
        let client = self.oauth2_client(&pending.metadata, &pending.credentials)?;
        let http = |request| fetcher.execute(request);
        let token = client
            .exchange_code(AuthorizationCode::new(callback.code))
            .set_pkce_verifier(pending.verifier)
            .add_extra_param("resource", pending.resource.clone())
            .request_async(&http)
            .await
            .map_err(|e| failure(AuthErrorKind::Token, token_error(&e)))?;
        let mut credentials = pending.credentials;
        apply_token(&mut credentials, &token, pending.scopes);
        let _ = &pending.server;
        let _ = &pending.issuer;
        self.keep(&pending.metadata, &pending.resource, credentials);
        Ok(())
    }

    /// Holds `credentials` as the current grant and stores them.
    fn keep(
        &self,
        metadata: &AuthorizationServerMetadata,
        resource: &str,
        credentials: Credentials,
    ) {
        let issuer = metadata.issuer.clone();
        let mut state = self.state();
        if let Some(old) = state.granted.as_ref().filter(|g| g.issuer != issuer) {
            // The resource moved to another authorization server: nothing of the old one is
            // reused, there or anywhere.
            self.inner
                .config
                .store
                .remove(&store_key(&old.issuer, &old.resource));
        }
        self.inner
            .config
            .store
            .save(&store_key(&issuer, resource), &credentials);
        state.granted = Some(Grant {
            issuer,
            resource: resource.to_owned(),
            metadata: metadata.clone(),
            credentials,
        });
    }

    /// A multi-user web service's first half: discovers `server`'s authorization server and
    /// returns the URL to send the user to. The PKCE verifier and `state` are kept here until
    /// [`complete`](Self::complete). The redirect URI is the [`Application`] agent's.
    pub async fn begin(&self, server: &str) -> Result<Url, Error> {
        let server = Url::parse(server)
            .map_err(|e| failure(AuthErrorKind::Discovery, format!("server URL: {e}")))?;
        let fetcher = Fetcher::new()?;
        let (issuer, resource, metadata, credentials, scopes) = self
            .prepare(&fetcher, &server, None, Vec::new(), None)
            .await?;
        let client = self.oauth2_client(&metadata, &credentials)?;
        let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(pkce)
            .add_extra_param("resource", resource.clone());
        for scope in &scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state) = request.url();
        self.state().pending.insert(
            state.secret().clone(),
            Pending {
                server,
                issuer,
                resource,
                metadata,
                credentials,
                verifier,
                scopes,
            },
        );
        Ok(url)
    }

    /// The second half: the service's callback route got `callback` (`code`, `state`, `iss`).
    pub async fn complete(&self, callback: Callback) -> Result<(), Error> {
        let pending = callback
            .state
            .as_ref()
            .and_then(|state| self.state().pending.remove(state))
            .ok_or_else(|| {
                failure(
                    AuthErrorKind::ResponseMismatch,
                    "no authorization was begun with this state".into(),
                )
            })?;
        let fetcher = Fetcher::new()?;
        let _flight = self.inner.flight.lock().await;
        let outcome = self.exchange(&fetcher, pending, callback).await;
        self.finish(outcome.clone());
        outcome
    }

    /// Whether a token is held.
    pub fn is_authorized(&self) -> bool {
        self.authorization().0.is_some()
    }
}

fn secret_method(has_secret: bool, metadata: &AuthorizationServerMetadata) -> String {
    if !has_secret {
        return "none".into();
    }
    let supported = metadata.token_endpoint_auth_methods_supported.as_deref();
    let offers = |m: &str| supported.is_none_or(|s| s.iter().any(|x| x == m));
    if offers("client_secret_basic") {
        "client_secret_basic".into()
    } else if offers("client_secret_post") {
        "client_secret_post".into()
    } else {
        "client_secret_basic".into()
    }
}

fn store_key(issuer: &str, resource: &str) -> String {
    format!("{issuer} {resource}")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn apply_token(
    credentials: &mut Credentials,
    token: &oauth2::basic::BasicTokenResponse,
    requested: Vec<String>,
) {
    credentials.access_token = Some(token.access_token().secret().clone());
    credentials.token_type = Some(token.token_type().as_ref().to_owned());
    credentials.expires_at = token.expires_in().map(|d| now_secs() + d.as_secs());
    if let Some(refresh) = token.refresh_token() {
        credentials.refresh_token = Some(refresh.secret().clone());
    }
    credentials.scopes = match token.scopes() {
        Some(granted) if !granted.is_empty() => {
            let mut scopes: Vec<String> = granted.iter().map(|s| s.to_string()).collect();
            for scope in requested {
                if !scopes.contains(&scope) {
                    scopes.push(scope);
                }
            }
            scopes
        }
        _ => requested,
    };
    let _ = split_scopes;
}

/// What the token endpoint said, without anything secret.
fn token_error(
    error: &oauth2::RequestTokenError<HttpError, oauth2::basic::BasicErrorResponse>,
) -> String {
    match error {
        oauth2::RequestTokenError::ServerResponse(response) => format!(
            "the token endpoint answered {}{}",
            response.error(),
            response
                .error_description()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        oauth2::RequestTokenError::Request(e) => format!("token request failed: {e}"),
        oauth2::RequestTokenError::Parse(e, _) => format!("the token answer does not parse: {e}"),
        oauth2::RequestTokenError::Other(e) => format!("token request failed: {e}"),
    }
}
