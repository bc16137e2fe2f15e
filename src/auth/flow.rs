//! The flow: one authorization (or refresh) at a time for every request refused with the same
//! state; what a refusal calls for (a refresh, a new authorization, a step-up with more
//! scopes); which grant this client uses; the credentials held between flows.

use std::{
    collections::HashMap,
    sync::{MutexGuard, PoisonError},
};

use url::Url;

use super::{
    challenge::Challenge,
    config::OAuthConfig,
    discovery::{self, AuthorizationServerMetadata},
    failure,
    fetch::Fetcher,
    grants::{self, JWT_BEARER},
    identity,
    store::Lease,
    vocabulary::{apply_answer, choose_scopes, is_dpop, needs_refresh, now_secs, store_key, Found},
    web::Pending,
    AuthErrorKind, Credentials, IdentityAssertion, OAuth,
};
use crate::error::Error;

/// How many times a `403 insufficient_scope` may send us back to the authorization server.
const MAX_STEP_UPS: u32 = 2;

#[derive(Default)]
pub(super) struct State {
    /// What the current credentials were obtained from.
    pub granted: Option<Grant>,
    /// Bumped by every flow (authorization or refresh), successful or not.
    attempts: u64,
    last: Option<Result<(), Error>>,
    step_ups: u32,
    /// Web flow: authorizations begun and not completed, by `state`.
    pub pending: HashMap<String, Pending>,
    /// A token the store kept for this resource, sent before any discovery; the first `401`
    /// replaces it with the full flow.
    primed: Option<Credentials>,
}

pub(super) struct Grant {
    pub issuer: String,
    pub resource: String,
    pub metadata: AuthorizationServerMetadata,
    pub credentials: Credentials,
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

/// What a refusal calls for.
#[derive(Debug, PartialEq, Eq)]
enum Remedy {
    /// A refresh if a refresh token is held, else a new authorization.
    Reauthorize,
    /// A new authorization asking for these scopes.
    StepUp(Vec<String>),
}

/// `401`: authorize again. `403 insufficient_scope`: authorize with the union of the held and
/// the challenged scopes, unless that brings nothing new or the step-ups are spent.
fn remedy(
    status: u16,
    challenge: &Challenge,
    held: &[String],
    step_ups: u32,
) -> Result<Remedy, Error> {
    if status != 403 {
        return Ok(Remedy::Reauthorize);
    }
    if !challenge.is_insufficient_scope() {
        return Err(failure(
            AuthErrorKind::Denied,
            format!("the server refused the request (403 {:?})", challenge.error),
        ));
    }
    let mut wanted = held.to_vec();
    for scope in challenge.scopes() {
        if !wanted.contains(&scope) {
            wanted.push(scope);
        }
    }
    if wanted == held || step_ups >= MAX_STEP_UPS {
        return Err(failure(
            AuthErrorKind::InsufficientScope,
            format!(
                "the server asks for scopes {:?} that re-authorizing does not bring",
                challenge.scope.as_deref().unwrap_or_default()
            ),
        ));
    }
    Ok(Remedy::StepUp(wanted))
}

/// Whether stored credentials are worth taking up instead of the token just refused: another
/// token, not expired unless it can be refreshed.
fn adoptable(stored: &Credentials, current_token: Option<&str>, now: u64) -> bool {
    if stored.access_token.is_none() || stored.access_token.as_deref() == current_token {
        return false;
    }
    let expired = stored.expires_at.is_some_and(|at| at <= now);
    !expired || stored.refresh_token.is_some()
}

/// The grant this client uses at an authorization server.
#[derive(Debug)]
enum GrantKind {
    /// Workload identity: this JWT, with the `jwt-bearer` grant.
    JwtBearer(String),
    /// A user's access token at a service acting for them, exchanged (RFC 8693).
    TokenExchange(String),
    /// Enterprise-managed: an ID-JAG from the IdP, with the `jwt-bearer` grant.
    IdentityAssertion(IdentityAssertion),
    /// Machine to machine.
    ClientCredentials,
    /// With a user, through the user agent.
    AuthorizationCode,
}

/// What is configured, else client credentials when the server offers no code grant and the
/// client has an id, else the authorization code.
fn grant_kind(config: &OAuthConfig, metadata: &AuthorizationServerMetadata) -> GrantKind {
    if let Some(assertion) = &config.jwt_bearer {
        return GrantKind::JwtBearer(assertion.clone());
    }
    if let Some(subject) = &config.token_exchange {
        return GrantKind::TokenExchange(subject.clone());
    }
    if let Some(identity) = &config.identity_assertion {
        return GrantKind::IdentityAssertion(identity.clone());
    }
    let offered = metadata.grant_types_supported.as_deref();
    let offers = |grant: &str| offered.is_some_and(|g| g.iter().any(|x| x == grant));
    let no_code_grant =
        offered.is_some() && !offers("authorization_code") && offers("client_credentials");
    if config.client_credentials || (no_code_grant && config.client_id.is_some()) {
        GrantKind::ClientCredentials
    } else {
        GrantKind::AuthorizationCode
    }
}

/// The key of the copy of a resource's latest credentials kept by resource alone: the issuer is
/// not known before discovery, and the point of the copy is to need none.
fn latest_key(resource: &str) -> String {
    store_key("latest", resource)
}

/// The `Authorization` header value for `credentials`, if they hold a token.
fn authorization_header(credentials: &Credentials) -> Option<String> {
    let token = credentials.access_token.as_deref()?;
    let kind = if is_dpop(credentials) {
        "DPoP"
    } else {
        "Bearer"
    };
    Some(format!("{kind} {token}"))
}

impl OAuth {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
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
        let held = state.granted.as_ref().map(|grant| &grant.credentials);
        let header = held
            .or(state.primed.as_ref())
            .and_then(authorization_header);
        (header, seen)
    }

    /// Takes up the token the store kept for `resource` (the MCP server's URL) when nothing is
    /// held yet and it has not expired: the first request carries it, with no `401` and no
    /// discovery. A token that is refused costs one `401`, then the usual flow.
    pub(crate) async fn prime(&self, resource: &str) {
        if self.state().granted.is_some() {
            return;
        }
        let stored = match self.inner.config.store.read(&latest_key(resource)).await {
            Ok(stored) => stored.map(|s| s.credentials),
            Err(e) => {
                // The flow reads the store again and reports it, if it comes to that.
                tracing::warn!(error = %e, "cannot read the stored token");
                None
            }
        };
        let Some(stored) = stored else {
            return;
        };
        let live = stored.expires_at.is_none_or(|at| at > now_secs());
        let mut state = self.state();
        if state.granted.is_none()
            && state.primed.is_none()
            && live
            && stored.access_token.is_some()
            && !is_dpop(&stored)
        {
            state.primed = Some(stored);
        }
    }

    /// Whether the held token expires within the margin and can be refreshed.
    pub(crate) fn expiring(&self) -> bool {
        let state = self.state();
        state
            .granted
            .as_ref()
            .is_some_and(|grant| needs_refresh(&grant.credentials, now_secs()))
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
            if let Some(nonce) = refusal.dpop_nonce {
                if self.accept_resource_nonce(nonce) {
                    // Not a new authorization: the same token, a proof with the server's nonce.
                    return Ok(());
                }
            }
        }
        let outcome = self.run(server, refusal.status, &challenge).await;
        self.finish(outcome.clone());
        outcome
    }

    pub(super) fn finish(&self, outcome: Result<(), Error>) {
        let mut state = self.state();
        state.attempts += 1;
        state.last = Some(outcome);
    }

    async fn run(&self, server: &Url, status: u16, challenge: &Challenge) -> Result<(), Error> {
        let remedy = {
            let state = self.state();
            let held = state
                .granted
                .as_ref()
                .map(|g| g.credentials.scopes.as_slice());
            remedy(status, challenge, held.unwrap_or_default(), state.step_ups)?
        };
        match remedy {
            Remedy::StepUp(wanted) => {
                self.state().step_ups += 1;
                self.authorize(server, challenge, Some(wanted)).await
            }
            Remedy::Reauthorize if self.refresh().await.unwrap_or(false) => Ok(()),
            Remedy::Reauthorize => self.authorize(server, challenge, None).await,
        }
    }

    /// Uses the refresh token, if one is held, once for every process sharing the store
    /// (`refresh.rs`). `Ok(false)`: there is none, or it was refused.
    async fn refresh(&self) -> Result<bool, Error> {
        let held = {
            let state = self.state();
            state.granted.as_ref().and_then(|grant| {
                grant.credentials.refresh_token.as_ref()?;
                Some(super::refresh::Held {
                    metadata: grant.metadata.clone(),
                    issuer: grant.issuer.clone(),
                    resource: grant.resource.clone(),
                    credentials: grant.credentials.clone(),
                })
            })
        };
        match held {
            Some(held) => self.coordinated_refresh(held).await,
            None => Ok(false),
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
        let fetcher = Fetcher::new(self.inner.config.request_timeout)?;
        let found = self
            .discover(&fetcher, server, challenge.resource_metadata.as_deref())
            .await?;
        let need = super::sign_in::Need {
            refused: self.current_token(),
            wanted: scopes.clone().unwrap_or_default(),
        };
        if scopes.is_none() && self.adopt_stored(&found).await? {
            // A token kept from an earlier run (or another process): tried before anything
            // else, refreshed first if it is expiring.
            if !self.expiring() || self.refresh().await? {
                return Ok(());
            }
        }
        if scopes.is_none() && self.adopt_refused_primed(&found) && self.refresh().await? {
            return Ok(()); // the kept token was refused, its refresh token was not
        }
        let scopes = choose_scopes(&found, challenge.scopes(), scopes);
        let bearer = |assertion| {
            vec![
                ("grant_type", JWT_BEARER.to_owned()),
                ("assertion", assertion),
            ]
        };
        let form = match grant_kind(&self.inner.config, &found.metadata) {
            GrantKind::AuthorizationCode => {
                return self
                    .coordinated_sign_in(&fetcher, server, found, scopes, need)
                    .await
            }
            GrantKind::JwtBearer(assertion) => bearer(assertion),
            GrantKind::TokenExchange(subject) => grants::token_exchange_form(subject),
            GrantKind::IdentityAssertion(identity) => {
                let (issuer, resource) = (&found.metadata.issuer, &found.resource);
                let id_jag =
                    grants::identity_assertion_grant(&fetcher, &identity, issuer, resource).await?;
                bearer(id_jag)
            }
            GrantKind::ClientCredentials => vec![("grant_type", "client_credentials".to_owned())],
        };
        self.grant_without_user(&fetcher, &found, form, scopes)
            .await
    }

    /// This client's identity at the authorization server `found` names (`identity.rs`), with
    /// the credentials held for that issuer, if any.
    pub(super) async fn identity(
        &self,
        fetcher: &Fetcher,
        found: &Found,
    ) -> Result<Credentials, Error> {
        let granted = {
            let state = self.state();
            let granted = state.granted.as_ref().filter(|g| g.issuer == found.issuer);
            granted.map(|g| g.credentials.clone())
        };
        let redirect_uri = self.inner.agent.redirect_uri();
        identity::identity(&self.inner.config, redirect_uri, granted, fetcher, found).await
    }

    /// A grant at the token endpoint without a user (client credentials, `jwt-bearer`): the
    /// request as `grants.rs` makes it, posted with a DPoP proof if the client proves
    /// possession, and the answer kept.
    async fn grant_without_user(
        &self,
        fetcher: &Fetcher,
        found: &Found,
        form: grants::Form,
        scopes: Vec<String>,
    ) -> Result<(), Error> {
        let request = grants::without_user(&self.inner.config, found, form, &scopes)?;
        let answer = self
            .post_grant_with_dpop(
                fetcher,
                &request.endpoint,
                &request.form,
                request.authorization.as_deref(),
            )
            .await?;
        let mut credentials = request.credentials;
        apply_answer(&mut credentials, answer, scopes, now_secs());
        self.keep(&found.metadata, &found.resource, credentials)
            .await;
        Ok(())
    }

    /// Takes up the credentials the store keeps for this authorization server and resource, if
    /// they hold another token than the one just refused.
    async fn adopt_stored(&self, found: &Found) -> Result<bool, Error> {
        let key = store_key(&found.issuer, &found.resource);
        let stored = self.inner.config.store.read(&key).await;
        let Some(stored) = stored? else {
            return Ok(false);
        };
        let stored = stored.credentials;
        if !adoptable(&stored, self.current_token().as_deref(), now_secs()) {
            return Ok(false);
        }
        self.hold_grant(&found.metadata, &found.resource, stored);
        Ok(true)
    }

    /// The access token held (or primed): the one a refusal refused.
    fn current_token(&self) -> Option<String> {
        let state = self.state();
        let held = state.granted.as_ref().map(|g| &g.credentials);
        held.or(state.primed.as_ref())
            .and_then(|credentials| credentials.access_token.clone())
    }

    /// Holds the primed token that was just refused, now that its authorization server is
    /// known, if it can be refreshed.
    fn adopt_refused_primed(&self, found: &Found) -> bool {
        let primed = self.state().primed.take();
        match primed.filter(|primed| primed.refresh_token.is_some()) {
            Some(primed) => {
                self.hold_grant(&found.metadata, &found.resource, primed);
                true
            }
            None => false,
        }
    }

    /// The protected resource's metadata, then its authorization server's.
    pub(super) async fn discover(
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
        self.enable_dpop_for(&metadata);
        Ok(Found {
            issuer,
            resource: resource_metadata.resource,
            scopes_supported: resource_metadata.scopes_supported,
            metadata,
        })
    }

    /// Holds `credentials` as the current grant and stores them (a store that fails is
    /// reported; the token is still held, for this process).
    pub(super) async fn keep(
        &self,
        metadata: &AuthorizationServerMetadata,
        resource: &str,
        credentials: Credentials,
    ) {
        self.store_grant(metadata, resource, &credentials, None)
            .await;
        self.hold_grant(metadata, resource, credentials);
    }

    /// Writes the grant under its key and the resource's latest key; the old authorization
    /// server's entry is removed if the resource moved.
    pub(super) async fn store_grant(
        &self,
        metadata: &AuthorizationServerMetadata,
        resource: &str,
        credentials: &Credentials,
        lease: Option<&Lease>,
    ) {
        let store = &self.inner.config.store;
        // A DPoP-bound grant is kept with its key: another process's refresh needs it.
        let with_key;
        let credentials = match self.dpop_secret() {
            Some(key) if is_dpop(credentials) && credentials.dpop_key.is_none() => {
                with_key = Credentials {
                    dpop_key: Some(key),
                    ..credentials.clone()
                };
                &with_key
            }
            _ => credentials,
        };
        let moved_from = {
            let state = self.state();
            let old = state
                .granted
                .as_ref()
                .filter(|g| g.issuer != metadata.issuer);
            old.map(|old| store_key(&old.issuer, &old.resource))
        };
        let written = async {
            if let Some(old) = moved_from {
                // Nothing of the old authorization server is reused, there or anywhere.
                store.remove(&old).await?;
            }
            store
                .write(&store_key(&metadata.issuer, resource), credentials, lease)
                .await?;
            store.write(&latest_key(resource), credentials, None).await
        };
        if let Err(e) = written.await {
            tracing::warn!(error = %e, "cannot store the credentials");
        }
    }

    /// Holds `credentials` as the current grant, without writing the store.
    pub(super) fn hold_grant(
        &self,
        metadata: &AuthorizationServerMetadata,
        resource: &str,
        credentials: Credentials,
    ) {
        self.use_dpop_key_of(&credentials);
        let mut state = self.state();
        state.primed = None;
        state.granted = Some(Grant {
            issuer: metadata.issuer.clone(),
            resource: resource.to_owned(),
            metadata: metadata.clone(),
            credentials,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::vocabulary::{apply_answer, TokenAnswer};

    fn metadata(extra: serde_json::Value) -> AuthorizationServerMetadata {
        let mut document = serde_json::json!({"issuer": "https://as.example.com"});
        if let (Some(into), Some(extra)) = (document.as_object_mut(), extra.as_object()) {
            into.extend(extra.clone());
        }
        serde_json::from_value(document).unwrap()
    }

    fn kind_of(error: Error) -> AuthErrorKind {
        match error {
            Error::Unauthorized { kind, .. } => kind,
            other => panic!("not an authorization error: {other:?}"),
        }
    }

    #[test]
    fn a_step_up_asks_for_the_union_of_held_and_challenged_scopes() {
        let challenge =
            Challenge::parse(r#"Bearer error="insufficient_scope", scope="read write admin""#);
        let held = ["read".to_owned(), "offline_access".to_owned()];
        assert_eq!(
            remedy(403, &challenge, &held, 0).unwrap(),
            Remedy::StepUp(vec![
                "read".into(),
                "offline_access".into(),
                "write".into(),
                "admin".into()
            ])
        );
    }

    #[test]
    fn a_step_up_that_brings_nothing_new_or_one_too_many_fails() {
        let challenge = Challenge::parse(r#"Bearer error="insufficient_scope", scope="read""#);
        let held = ["read".to_owned()];
        let error = remedy(403, &challenge, &held, 0).unwrap_err();
        assert_eq!(kind_of(error), AuthErrorKind::InsufficientScope);
        let more = Challenge::parse(r#"Bearer error="insufficient_scope", scope="write""#);
        assert!(remedy(403, &more, &held, MAX_STEP_UPS - 1).is_ok());
        let error = remedy(403, &more, &held, MAX_STEP_UPS).unwrap_err();
        assert_eq!(kind_of(error), AuthErrorKind::InsufficientScope);
    }

    #[test]
    fn a_401_reauthorizes_and_another_403_is_denied() {
        let challenge = Challenge::parse(r#"Bearer error="invalid_token""#);
        assert_eq!(
            remedy(401, &challenge, &[], 9).unwrap(),
            Remedy::Reauthorize
        );
        let error = remedy(403, &challenge, &[], 0).unwrap_err();
        assert_eq!(kind_of(error), AuthErrorKind::Denied);
    }

    #[test]
    fn stored_credentials_are_taken_up_only_with_another_usable_token() {
        let now = 1_000_000;
        let stored = |token: Option<&str>, expires_at, refresh: bool| Credentials {
            access_token: token.map(str::to_owned),
            expires_at,
            refresh_token: refresh.then(|| "r".to_owned()),
            ..Credentials::default()
        };
        assert!(adoptable(
            &stored(Some("new"), Some(now + 60), false),
            Some("old"),
            now
        ));
        assert!(adoptable(&stored(Some("new"), None, false), None, now));
        assert!(
            !adoptable(&stored(Some("old"), None, false), Some("old"), now),
            "the refused one"
        );
        assert!(!adoptable(&stored(None, None, true), None, now));
        assert!(
            !adoptable(&stored(Some("new"), Some(now), false), None, now),
            "expired"
        );
        assert!(
            adoptable(&stored(Some("new"), Some(now), true), None, now),
            "refreshable"
        );
    }

    #[test]
    fn the_grant_is_the_configured_one_else_the_code_grant() {
        let config = OAuthConfig::default();
        let any = metadata(serde_json::json!({}));
        assert!(matches!(
            grant_kind(&config, &any),
            GrantKind::AuthorizationCode
        ));
        let machine =
            metadata(serde_json::json!({"grant_types_supported": ["client_credentials"]}));
        assert!(
            matches!(grant_kind(&config, &machine), GrantKind::AuthorizationCode),
            "no client id: nothing to present"
        );
        let with_id = config.clone().client_id("c");
        assert!(matches!(
            grant_kind(&with_id, &machine),
            GrantKind::ClientCredentials
        ));
        let both = metadata(serde_json::json!(
            {"grant_types_supported": ["authorization_code", "client_credentials"]}));
        assert!(matches!(
            grant_kind(&with_id, &both),
            GrantKind::AuthorizationCode
        ));
        assert!(matches!(
            grant_kind(&config.clone().client_credentials(), &both),
            GrantKind::ClientCredentials
        ));
        assert!(matches!(
            grant_kind(&with_id.clone().jwt_bearer("jwt"), &both),
            GrantKind::JwtBearer(assertion) if assertion == "jwt"
        ));
        assert!(matches!(
            grant_kind(&with_id.token_exchange("user's"), &both),
            GrantKind::TokenExchange(subject) if subject == "user's"
        ));
        let form = grants::token_exchange_form("user's".into());
        assert!(form.contains(&("subject_token", "user's".into())));
        assert!(form
            .iter()
            .any(|(k, v)| *k == "grant_type" && v.ends_with(":token-exchange")));
    }

    #[test]
    fn a_token_answer_is_kept_with_its_expiry_and_every_scope() {
        let mut credentials = Credentials {
            refresh_token: Some("old-refresh".into()),
            ..Credentials::default()
        };
        let answer = TokenAnswer {
            access_token: "t".into(),
            token_type: Some("DPoP".into()),
            expires_in: Some(60),
            refresh_token: None,
            scope: Some("read write".into()),
        };
        apply_answer(
            &mut credentials,
            answer,
            vec!["write".into(), "extra".into()],
            100,
        );
        assert_eq!(credentials.expires_at, Some(160));
        assert_eq!(credentials.refresh_token.as_deref(), Some("old-refresh"));
        assert_eq!(credentials.scopes, ["read", "write", "extra"]);
        assert_eq!(
            authorization_header(&credentials).as_deref(),
            Some("DPoP t")
        );
        credentials.token_type = None;
        assert_eq!(
            authorization_header(&credentials).as_deref(),
            Some("Bearer t")
        );
    }

    #[test]
    fn only_401_and_403_insufficient_scope_are_refusals_to_answer() {
        use http::{header::WWW_AUTHENTICATE, HeaderMap, HeaderValue};
        let mut headers = HeaderMap::new();
        assert!(Refusal::from_response(500, &headers).is_none());
        assert!(Refusal::from_response(403, &headers).is_none());
        let refusal = Refusal::from_response(401, &headers).unwrap();
        assert_eq!(refusal.challenge, Challenge::default());
        headers.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("DPoP algs=\"ES256\""),
        );
        headers.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer error="insufficient_scope", scope="x""#),
        );
        headers.insert("dpop-nonce", HeaderValue::from_static("n1"));
        let refusal = Refusal::from_response(403, &headers).unwrap();
        assert_eq!(refusal.challenge.scopes(), ["x"]);
        assert_eq!(refusal.dpop_nonce.as_deref(), Some("n1"));
    }
}
