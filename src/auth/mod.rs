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
pub(crate) mod discovery;
mod fetch;
mod grants;
mod jwt;
mod store;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
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
    grants::IdentityAssertion,
    store::{CredentialStore, Credentials, FileStore, MemoryStore},
};
use self::{
    discovery::check_secure,
    fetch::{Fetcher, HttpError},
    grants::{TokenAnswer, JWT_BEARER},
    jwt::Es256Key,
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
    private_key_pem: Option<String>,
    jwt_bearer: Option<String>,
    identity_assertion: Option<IdentityAssertion>,
    client_credentials: bool,
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
            private_key_pem: None,
            jwt_bearer: None,
            identity_assertion: None,
            client_credentials: false,
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
            .field(
                "private_key",
                &self.private_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "jwt_bearer",
                &self.jwt_bearer.as_ref().map(|_| "<redacted>"),
            )
            .field("identity_assertion", &self.identity_assertion)
            .field("client_credentials", &self.client_credentials)
            .finish()
    }
}

impl OAuthConfig {
    /// A pre-registered client (used first, before CIMD or registration).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The pre-registered client's secret (sent as `client_secret_basic` or `client_secret_post`).
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

    /// The `client_name` sent in dynamic registration (default `actix-mcp`).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// `native` (default: a loopback redirect) or `web`, as registered.
    pub fn application_type(mut self, kind: impl Into<String>) -> Self {
        self.application_type = kind.into();
        self
    }

    /// Where credentials are kept, per authorization server and resource (default: in memory).
    pub fn store(mut self, store: impl CredentialStore) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Authenticate to the token endpoint with a signed assertion (`private_key_jwt`, RFC 7523)
    /// made with this PKCS#8 PEM P-256 key (ES256), instead of a secret.
    pub fn private_key_jwt(mut self, pem: impl Into<String>) -> Self {
        self.private_key_pem = Some(pem.into());
        self
    }

    /// Machine to machine: the client credentials grant, without a user (also chosen by itself
    /// when the authorization server offers no authorization code grant).
    pub fn client_credentials(mut self) -> Self {
        self.client_credentials = true;
        self
    }

    /// Workload identity (SEP-1933): exchange this JWT, issued to the workload by its platform,
    /// with the `jwt-bearer` grant.
    pub fn jwt_bearer(mut self, assertion: impl Into<String>) -> Self {
        self.jwt_bearer = Some(assertion.into());
        self
    }

    /// Enterprise-managed authorization (SEP-990): exchange the user's identity assertion at the
    /// enterprise IdP for an ID-JAG, then the ID-JAG for an access token.
    pub fn identity_assertion(mut self, assertion: IdentityAssertion) -> Self {
        self.identity_assertion = Some(assertion);
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
    /// Proof of possession (RFC 9449), once an authorization server asks for it.
    dpop: Mutex<Option<Dpop>>,
}

/// The DPoP key and the nonces the servers gave.
struct Dpop {
    key: Es256Key,
    authorization_server_nonce: Option<String>,
    resource_server_nonce: Option<String>,
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
pub(crate) struct Refusal {
    pub status: u16,
    /// Every `WWW-Authenticate` value, merged.
    pub challenge: Challenge,
    /// `DPoP-Nonce`: the server wants its nonce in the next proof.
    pub dpop_nonce: Option<String>,
}

impl Refusal {
    /// The refusal a response with `status` and `headers` is, if it is one the authorization
    /// answers: `401`, or `403` with `insufficient_scope` (a step-up).
    pub fn from_response(status: u16, headers: &http::HeaderMap) -> Option<Self> {
        if status != 401 && status != 403 {
            return None;
        }
        let challenge = Challenge::from_headers(headers);
        if status == 403 && !challenge.is_insufficient_scope() {
            return None;
        }
        let dpop_nonce = headers
            .get("dpop-nonce")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Some(Self {
            status,
            challenge,
            dpop_nonce,
        })
    }
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
    /// `agent` runs the authorization request; `config` says who this client is.
    pub fn new(agent: impl UserAgent, config: OAuthConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                agent: Arc::new(agent),
                state: Mutex::new(State::default()),
                flight: tokio::sync::Mutex::new(()),
                dpop: Mutex::new(None),
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
        refusal: Refusal,
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
        let challenge = refusal.challenge;
        if challenge.error.as_deref() == Some("use_dpop_nonce") {
            if let (Some(nonce), Some(dpop)) = (refusal.dpop_nonce, self.lock_dpop().as_mut()) {
                // Not a new authorization: the same token, a proof with the server's nonce.
                dpop.resource_server_nonce = Some(nonce);
                return Ok(());
            }
        }
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
        let http = |request| self.execute_with_dpop(&fetcher, request);
        let answer = client
            .exchange_refresh_token(&RefreshToken::new(refresh_token))
            .add_extra_param("resource", resource.clone())
            .request_async(&http)
            .await;
        match answer {
            Ok(token) => {
                let mut updated = credentials.clone();
                apply_answer(
                    &mut updated,
                    TokenAnswer::from(&token),
                    credentials.scopes.clone(),
                );
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

    /// The whole flow: discovery, then the grant this client uses (the authorization code with
    /// a user; a grant without one where configured or the only one offered).
    async fn authorize(
        &self,
        server: &Url,
        challenge: &Challenge,
        scopes: Option<Vec<String>>,
    ) -> Result<(), Error> {
        let fetcher = Fetcher::new()?;
        let found = self
            .discover(&fetcher, server, challenge.resource_metadata.as_deref())
            .await?;
        if scopes.is_none() && self.adopt_stored(&found) {
            return Ok(()); // a token kept from an earlier run: tried before anything else
        }
        let scopes = choose_scopes(&found, challenge.scopes(), scopes);
        let config = &self.inner.config;
        if let Some(assertion) = config.jwt_bearer.clone() {
            let form = vec![
                ("grant_type", JWT_BEARER.to_owned()),
                ("assertion", assertion),
            ];
            return self
                .grant_without_user(&fetcher, &found, form, scopes)
                .await;
        }
        if let Some(identity) = config.identity_assertion.clone() {
            let id_jag = grants::identity_assertion_grant(
                &fetcher,
                &identity,
                &found.metadata.issuer,
                &found.resource,
            )
            .await?;
            let form = vec![("grant_type", JWT_BEARER.to_owned()), ("assertion", id_jag)];
            return self
                .grant_without_user(&fetcher, &found, form, scopes)
                .await;
        }
        let offers = |grant: &str| {
            found
                .metadata
                .grant_types_supported
                .as_ref()
                .is_some_and(|g| g.iter().any(|x| x == grant))
        };
        let no_code_grant = found.metadata.grant_types_supported.is_some()
            && !offers("authorization_code")
            && offers("client_credentials");
        if config.client_credentials || (no_code_grant && config.client_id.is_some()) {
            let form = vec![("grant_type", "client_credentials".to_owned())];
            return self
                .grant_without_user(&fetcher, &found, form, scopes)
                .await;
        }
        require_s256(&found.metadata)?;
        let credentials = self
            .identity(&fetcher, &found.issuer, &found.resource, &found.metadata)
            .await?;
        let (url, state, pending) =
            self.authorization_request(server, found, credentials, scopes)?;
        let callback = self.inner.agent.authorize(url).await?;
        if callback.state.as_deref() != Some(state.as_str()) {
            return Err(failure(
                AuthErrorKind::ResponseMismatch,
                "the authorization response's state is not ours".into(),
            ));
        }
        self.exchange(&fetcher, pending, callback).await
    }

    /// Takes up the credentials the store keeps for this authorization server and resource, if
    /// they hold another token than the one just refused.
    fn adopt_stored(&self, found: &Found) -> bool {
        let Some(stored) = self
            .inner
            .config
            .store
            .load(&store_key(&found.issuer, &found.resource))
        else {
            return false;
        };
        let current = self
            .state()
            .granted
            .as_ref()
            .and_then(|g| g.credentials.access_token.clone());
        if stored.access_token.is_none() || stored.access_token == current {
            return false;
        }
        let expired = stored.expires_at.is_some_and(|at| at <= now_secs());
        if expired && stored.refresh_token.is_none() {
            return false;
        }
        self.keep(&found.metadata, &found.resource, stored);
        true
    }

    /// The protected resource's metadata, then its authorization server's.
    async fn discover(
        &self,
        fetcher: &Fetcher,
        server: &Url,
        hint: Option<&str>,
    ) -> Result<Found, Error> {
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
        let dpop = metadata
            .dpop_signing_alg_values_supported
            .as_ref()
            .is_some_and(|algs| algs.iter().any(|a| a == "ES256"));
        if dpop {
            self.lock_dpop().get_or_insert_with(|| Dpop {
                key: Es256Key::generate(),
                authorization_server_nonce: None,
                resource_server_nonce: None,
            });
        }
        Ok(Found {
            issuer,
            resource: resource_metadata.resource,
            scopes_supported: resource_metadata.scopes_supported,
            metadata,
        })
    }

    /// The authorization URL (PKCE S256, `state`, `resource`, scopes) and what completing it
    /// needs.
    fn authorization_request(
        &self,
        server: &Url,
        found: Found,
        credentials: Credentials,
        scopes: Vec<String>,
    ) -> Result<(Url, String, Pending), Error> {
        let client = self.oauth2_client(&found.metadata, &credentials)?;
        let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(pkce)
            .add_extra_param("resource", found.resource.clone());
        for scope in &scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state) = request.url();
        let pending = Pending {
            server: server.clone(),
            issuer: found.issuer,
            resource: found.resource,
            metadata: found.metadata,
            credentials,
            verifier,
            scopes,
        };
        Ok((url, state.secret().clone(), pending))
    }

    /// A grant at the token endpoint without a user: client credentials, `jwt-bearer`.
    async fn grant_without_user(
        &self,
        fetcher: &Fetcher,
        found: &Found,
        mut form: Vec<(&'static str, String)>,
        scopes: Vec<String>,
    ) -> Result<(), Error> {
        let config = &self.inner.config;
        let key = match &config.private_key_pem {
            Some(pem) => Some(Es256Key::from_pem(pem)?),
            None => None,
        };
        let credentials = Credentials {
            client_id: config.client_id.clone().unwrap_or_default(),
            client_secret: config.client_secret.clone(),
            auth_method: if key.is_some() {
                "private_key_jwt".into()
            } else {
                secret_method(config.client_secret.is_some(), &found.metadata)
            },
            ..Credentials::default()
        };
        let endpoint = found.metadata.token_endpoint.as_deref().ok_or_else(|| {
            failure(
                AuthErrorKind::Discovery,
                format!("{} has no token endpoint", found.issuer),
            )
        })?;
        let endpoint = check_secure("token endpoint", endpoint)?;
        let (client_form, authorization) =
            grants::client_authentication(&credentials, key.as_ref(), &found.metadata.issuer);
        if !credentials.client_id.is_empty() || !client_form.is_empty() {
            form.extend(client_form);
        }
        if !scopes.is_empty() {
            form.push(("scope", scopes.join(" ")));
        }
        form.push(("resource", found.resource.clone()));
        let answer = self
            .post_grant_with_dpop(fetcher, &endpoint, &form, authorization.as_deref())
            .await?;
        let mut credentials = credentials;
        apply_answer(&mut credentials, answer, scopes);
        self.keep(&found.metadata, &found.resource, credentials);
        Ok(())
    }

    /// A grant POST, with a DPoP proof when the client proves possession, sent again once with
    /// the server's nonce if it asks for one.
    async fn post_grant_with_dpop(
        &self,
        fetcher: &Fetcher,
        endpoint: &Url,
        form: &[(&str, String)],
        authorization: Option<&str>,
    ) -> Result<TokenAnswer, Error> {
        let mut retried = false;
        loop {
            let proof = self.proof("POST", endpoint, None, Nonce::AuthorizationServer);
            match grants::post_grant(fetcher, endpoint, form, authorization, proof).await {
                Ok(answer) => return Ok(answer),
                Err(refused) => match refused.dpop_nonce {
                    Some(nonce) if !retried && self.dpop_enabled() => {
                        retried = true;
                        if let Some(dpop) = self.lock_dpop().as_mut() {
                            dpop.authorization_server_nonce = Some(nonce);
                        }
                    }
                    _ => return Err(refused.error),
                },
            }
        }
    }

    /// Discovery and identity for the web flow: everything before the authorization request.
    async fn prepare(
        &self,
        fetcher: &Fetcher,
        server: &Url,
    ) -> Result<(Found, Credentials, Vec<String>), Error> {
        let found = self.discover(fetcher, server, None).await?;
        require_s256(&found.metadata)?;
        let credentials = self
            .identity(fetcher, &found.issuer, &found.resource, &found.metadata)
            .await?;
        let scopes = choose_scopes(&found, Vec::new(), None);
        Ok((found, credentials, scopes))
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
        let http = |request| self.execute_with_dpop(fetcher, request);
        let token = client
            .exchange_code(AuthorizationCode::new(callback.code))
            .set_pkce_verifier(pending.verifier)
            .add_extra_param("resource", pending.resource.clone())
            .request_async(&http)
            .await
            .map_err(|e| failure(AuthErrorKind::Token, token_error(&e)))?;
        let mut credentials = pending.credentials;
        apply_answer(&mut credentials, TokenAnswer::from(&token), pending.scopes);
        tracing::debug!(server = %pending.server, issuer = %pending.issuer, "authorized");
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
        let (found, credentials, scopes) = self.prepare(&fetcher, &server).await?;
        let (url, state, pending) =
            self.authorization_request(&server, found, credentials, scopes)?;
        self.state().pending.insert(state, pending);
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

    fn lock_dpop(&self) -> MutexGuard<'_, Option<Dpop>> {
        self.inner
            .dpop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn dpop_enabled(&self) -> bool {
        self.lock_dpop().is_some()
    }

    /// A DPoP proof for one request (a new `jti` each time), if the client proves possession:
    /// `ath` binds it to the access token sent with it.
    fn proof(&self, method: &str, url: &Url, token: Option<&str>, nonce: Nonce) -> Option<String> {
        let dpop = self.lock_dpop();
        let dpop = dpop.as_ref()?;
        let mut claims = serde_json::json!({
            "jti": jwt::jti(), "htm": method, "htu": htu(url), "iat": now_secs(),
        });
        let nonce = match nonce {
            Nonce::AuthorizationServer => &dpop.authorization_server_nonce,
            Nonce::ResourceServer => &dpop.resource_server_nonce,
        };
        if let Some(nonce) = nonce {
            claims["nonce"] = serde_json::json!(nonce);
        }
        if let Some(token) = token {
            use base64::Engine as _;
            use sha2::Digest as _;
            let hash = sha2::Sha256::digest(token.as_bytes());
            claims["ath"] =
                serde_json::json!(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash));
        }
        let header = serde_json::json!({"typ": "dpop+jwt", "jwk": dpop.key.public_jwk()});
        Some(dpop.key.sign(header, &claims))
    }

    /// The `DPoP` header for a request to the resource server, when the token is a DPoP one.
    pub(crate) fn resource_proof(&self, method: &str, url: &Url) -> Option<String> {
        let token = {
            let state = self.state();
            let credentials = &state.granted.as_ref()?.credentials;
            let dpop = credentials
                .token_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("dpop"));
            if !dpop {
                return None;
            }
            credentials.access_token.clone()?
        };
        self.proof(method, url, Some(&token), Nonce::ResourceServer)
    }

    /// The `oauth2` crate's requests, with a DPoP proof when the client proves possession, sent
    /// again once with the server's nonce if it asks for one.
    async fn execute_with_dpop(
        &self,
        fetcher: &Fetcher,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, HttpError> {
        if !self.dpop_enabled() {
            return fetcher.execute(request).await;
        }
        let (parts, body) = request.into_parts();
        let url = Url::parse(&parts.uri.to_string()).map_err(|e| HttpError::new(e.to_string()))?;
        let mut retried = false;
        loop {
            let mut request = http::Request::builder()
                .method(parts.method.clone())
                .uri(parts.uri.clone());
            for (name, value) in &parts.headers {
                request = request.header(name, value);
            }
            if let Some(proof) = self.proof(
                parts.method.as_str(),
                &url,
                None,
                Nonce::AuthorizationServer,
            ) {
                request = request.header("dpop", proof);
            }
            let request = request
                .body(body.clone())
                .map_err(|e| HttpError::new(e.to_string()))?;
            let response = fetcher.execute(request).await?;
            let nonce = response
                .headers()
                .get("dpop-nonce")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match nonce {
                Some(nonce) if !retried && response.status().is_client_error() => {
                    retried = true;
                    if let Some(dpop) = self.lock_dpop().as_mut() {
                        dpop.authorization_server_nonce = Some(nonce);
                    }
                }
                _ => return Ok(response),
            }
        }
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
    grants::now_secs()
}

impl From<&oauth2::basic::BasicTokenResponse> for TokenAnswer {
    fn from(token: &oauth2::basic::BasicTokenResponse) -> Self {
        TokenAnswer {
            access_token: token.access_token().secret().clone(),
            token_type: Some(token.token_type().as_ref().to_owned()),
            expires_in: token.expires_in().map(|d| d.as_secs()),
            refresh_token: token.refresh_token().map(|r| r.secret().clone()),
            scope: token.scopes().map(|scopes| {
                scopes
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            }),
        }
    }
}

/// Keeps a token answer in `credentials`; the scopes held are the granted ones and those asked.
fn apply_answer(credentials: &mut Credentials, answer: TokenAnswer, requested: Vec<String>) {
    credentials.access_token = Some(answer.access_token);
    credentials.token_type = answer.token_type;
    credentials.expires_at = answer.expires_in.map(|secs| now_secs() + secs);
    if let Some(refresh) = answer.refresh_token {
        credentials.refresh_token = Some(refresh);
    }
    let mut scopes = challenge::split_scopes(answer.scope.as_deref());
    for scope in requested {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    credentials.scopes = scopes;
}

/// What discovery found.
struct Found {
    issuer: String,
    /// The protected resource metadata's `resource`, byte for byte.
    resource: String,
    scopes_supported: Option<Vec<String>>,
    metadata: AuthorizationServerMetadata,
}

/// The challenge's scopes, else the resource's `scopes_supported`, else none (or the scopes a
/// step-up asks for); `offline_access` when the authorization server lists it.
fn choose_scopes(
    found: &Found,
    challenged: Vec<String>,
    chosen: Option<Vec<String>>,
) -> Vec<String> {
    let mut scopes = match chosen {
        Some(scopes) => scopes,
        None if !challenged.is_empty() => challenged,
        None => found.scopes_supported.clone().unwrap_or_default(),
    };
    if !scopes.is_empty()
        && found.metadata.supports_scope("offline_access")
        && !scopes.iter().any(|s| s == "offline_access")
    {
        scopes.push("offline_access".into());
    }
    scopes
}

fn require_s256(metadata: &AuthorizationServerMetadata) -> Result<(), Error> {
    let s256 = metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if s256 {
        Ok(())
    } else {
        Err(failure(
            AuthErrorKind::PkceUnsupported,
            format!("{} does not support PKCE with S256", metadata.issuer),
        ))
    }
}

/// Which server's nonce a DPoP proof carries.
#[derive(Clone, Copy)]
enum Nonce {
    AuthorizationServer,
    ResourceServer,
}

/// `htu`: the request URL without query and fragment.
fn htu(url: &Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
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
