//! The authorization code grant (with PKCE S256, `state` and the RFC 8707 `resource`): through
//! the [`UserAgent`](super::UserAgent) in one piece, or in two halves for a multi-user web
//! service ([`OAuth::begin`], [`OAuth::complete`]). The answer's `state` and (RFC 9207) `iss`
//! are checked before the code is exchanged.

use oauth2::{
    basic::BasicClient, AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EndpointNotSet, EndpointSet, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    TokenResponse, TokenUrl,
};
use url::Url;

use super::{
    discovery::{self, require_secure, AuthorizationServerMetadata},
    failure,
    fetch::{Fetcher, HttpError},
    sealed::SealedSignIn,
    vocabulary::{apply_answer, choose_scopes, now_secs, Found, TokenAnswer},
    AuthErrorKind, Callback, Credentials, OAuth, TokenAuthMethod,
};
use crate::error::Error;

type Oauth2Client =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// An authorization sent to the user, waiting for its answer.
pub(super) struct Pending {
    server: Url,
    issuer: String,
    resource: String,
    metadata: AuthorizationServerMetadata,
    credentials: Credentials,
    verifier: PkceCodeVerifier,
    scopes: Vec<String>,
}

pub(super) fn require_s256(metadata: &AuthorizationServerMetadata) -> Result<(), Error> {
    let s256 = metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if s256 {
        Ok(())
    } else {
        Err(failure(
            AuthErrorKind::PkceUnsupported,
            format!("{:?} does not support PKCE with S256", metadata.issuer),
        ))
    }
}

/// The answer must carry the `state` sent.
fn check_state(sent: &str, callback: &Callback) -> Result<(), Error> {
    if callback.state.as_deref() == Some(sent) {
        Ok(())
    } else {
        Err(failure(
            AuthErrorKind::ResponseMismatch,
            "the authorization response's state is not ours".into(),
        ))
    }
}

/// RFC 9207: an `iss` must be the issuer asked, and is required when the server advertises it.
fn check_issuer(metadata: &AuthorizationServerMetadata, callback: &Callback) -> Result<(), Error> {
    let advertised = metadata.authorization_response_iss_parameter_supported == Some(true);
    match &callback.iss {
        None if advertised => Err(failure(
            AuthErrorKind::ResponseMismatch,
            "the authorization response lacks the iss its server advertises".into(),
        )),
        Some(iss) if *iss != metadata.issuer => Err(failure(
            AuthErrorKind::ResponseMismatch,
            format!(
                "the authorization response comes from {:?}, not {:?}",
                iss, metadata.issuer
            ),
        )),
        _ => Ok(()),
    }
}

/// A failed token request as an error: [`AuthErrorKind::TimedOut`] if the endpoint did not
/// answer in time, else [`AuthErrorKind::Token`] with what it said.
pub(super) fn token_failure(
    error: &oauth2::RequestTokenError<HttpError, oauth2::basic::BasicErrorResponse>,
) -> Error {
    let kind = match error {
        oauth2::RequestTokenError::Request(e) if e.timed_out => AuthErrorKind::TimedOut,
        _ => AuthErrorKind::Token,
    };
    failure(kind, token_error(error))
}

/// What the token endpoint said, without anything secret.
pub(super) fn token_error(
    error: &oauth2::RequestTokenError<HttpError, oauth2::basic::BasicErrorResponse>,
) -> String {
    match error {
        oauth2::RequestTokenError::ServerResponse(response) => format!(
            "the token endpoint answered {}{}",
            response.error().to_string().escape_debug(),
            response
                .error_description()
                .map(|d| format!(": {}", d.escape_debug()))
                .unwrap_or_default()
        ),
        oauth2::RequestTokenError::Request(e) if e.timed_out => format!("token request: {e}"),
        oauth2::RequestTokenError::Request(e) => format!("token request failed: {e}"),
        oauth2::RequestTokenError::Parse(e, _) => format!("the token answer does not parse: {e}"),
        oauth2::RequestTokenError::Other(e) => format!("token request failed: {e}"),
    }
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

impl OAuth {
    /// A multi-user web service's first half: discovers `server`'s authorization server and
    /// returns the URL to send the user to. The PKCE verifier and `state` are kept here until
    /// [`complete`](Self::complete), or, with
    /// [`OAuthConfig::shared_sign_ins`](super::OAuthConfig::shared_sign_ins), sealed in the
    /// `state` itself for any replica to complete. The redirect URI is the
    /// [`Application`](super::Application) agent's.
    pub async fn begin(&self, server: &str) -> Result<Url, Error> {
        let server = Url::parse(server)
            .map_err(|e| failure(AuthErrorKind::Discovery, format!("server URL: {e}")))?;
        let fetcher = Fetcher::new(self.inner.config.request_timeout)?;
        let found = self.discover(&fetcher, &server, None).await?;
        require_s256(&found.metadata)?;
        let credentials = self.identity(&fetcher, &found).await?;
        let scopes = choose_scopes(&found, Vec::new(), None);
        let (url, state, pending) =
            self.authorization_request(&server, found, credentials, scopes)?;
        if self.inner.config.sealer.is_none() {
            self.state().pending.insert(state, pending);
        }
        Ok(url)
    }

    /// The second half: the service's callback route got `callback` (`code`, `state`, `iss`).
    pub async fn complete(&self, callback: Callback) -> Result<(), Error> {
        let state = callback.state.clone().unwrap_or_default();
        let begun_here = self.state().pending.remove(&state);
        let fetcher = Fetcher::new(self.inner.config.request_timeout)?;
        let pending = match begun_here {
            Some(pending) => pending,
            None => self.unseal(&fetcher, &state).await?,
        };
        let _flight = self.inner.flight.lock().await;
        let outcome = self.exchange(&fetcher, pending, callback).await;
        self.finish(outcome.clone());
        outcome
    }

    /// The sign-in `state` seals (`shared_sign_ins`), as this replica would have kept it: its
    /// authorization server's metadata fetched again.
    async fn unseal(&self, fetcher: &Fetcher, state: &str) -> Result<Pending, Error> {
        let Some(sealer) = &self.inner.config.sealer else {
            return Err(failure(
                AuthErrorKind::ResponseMismatch,
                "no authorization was begun with this state".into(),
            ));
        };
        let sealed = sealer.open(state, now_secs())?;
        let server = Url::parse(&sealed.server)
            .map_err(|e| failure(AuthErrorKind::Discovery, format!("server URL: {e}")))?;
        let metadata = discovery::authorization_server(fetcher, &sealed.issuer).await?;
        self.enable_dpop_for(&metadata);
        Ok(Pending {
            server,
            credentials: sealed.client(),
            verifier: PkceCodeVerifier::new(sealed.verifier),
            issuer: sealed.issuer,
            resource: sealed.resource,
            metadata,
            scopes: sealed.scopes,
        })
    }

    /// The `state` of a new authorization request: random, or (`shared_sign_ins`) the sign-in
    /// sealed for any replica to complete.
    fn new_state(
        &self,
        server: &Url,
        found: &Found,
        credentials: &Credentials,
        scopes: &[String],
        verifier: &PkceCodeVerifier,
    ) -> Result<CsrfToken, Error> {
        let Some(sealer) = &self.inner.config.sealer else {
            return Ok(CsrfToken::new_random());
        };
        let lifetime = self.inner.config.sign_in_timeout.as_secs();
        let sign_in = SealedSignIn {
            server: server.to_string(),
            issuer: found.issuer.clone(),
            resource: found.resource.clone(),
            verifier: verifier.secret().clone(),
            scopes: scopes.to_vec(),
            client_id: credentials.client_id.clone(),
            client_secret: credentials.client_secret.clone(),
            auth_method: credentials.auth_method,
            registered: credentials.registered,
            expires_at: now_secs().saturating_add(lifetime),
        };
        Ok(CsrfToken::new(sealer.seal(&sign_in)?))
    }

    /// The grant with a user, in one piece: identity, the authorization request through the
    /// user agent, the checks, the exchange.
    pub(super) async fn authorize_with_agent(
        &self,
        fetcher: &Fetcher,
        server: &Url,
        found: Found,
        scopes: Vec<String>,
    ) -> Result<(), Error> {
        require_s256(&found.metadata)?;
        let credentials = self.identity(fetcher, &found).await?;
        let (url, state, pending) =
            self.authorization_request(server, found, credentials, scopes)?;
        let callback = self.sign_in(url).await?;
        check_state(&state, &callback)?;
        self.exchange(fetcher, pending, callback).await
    }

    /// The user agent's part, within the sign-in bound: a person may take minutes (SSO, a second
    /// factor), so it is not bounded by the request that needed it.
    async fn sign_in(&self, url: Url) -> Result<Callback, Error> {
        let bound = self.inner.config.sign_in_timeout;
        let redirect = self.inner.agent.redirect_uri();
        match tokio::time::timeout(bound, self.inner.agent.authorize(url)).await {
            Ok(answer) => answer,
            Err(_) => Err(failure(
                AuthErrorKind::SignInTimedOut,
                format!(
                    "no sign-in within {} s: the browser never came back to {redirect} \
                     (raise the sign-in timeout to wait longer)",
                    bound.as_secs_f32()
                ),
            )),
        }
    }

    /// The `oauth2` crate's client for this authorization server and client identity.
    pub(super) fn oauth2_client(
        &self,
        metadata: &AuthorizationServerMetadata,
        credentials: &Credentials,
    ) -> Result<Oauth2Client, Error> {
        let endpoint = |what: &str, url: &Option<Url>| -> Result<Url, Error> {
            let url = url.as_ref().ok_or_else(|| {
                failure(
                    AuthErrorKind::Discovery,
                    format!("{:?} has no {what}", metadata.issuer),
                )
            })?;
            require_secure(what, url)?;
            Ok(url.clone())
        };
        let authorize = endpoint("authorization endpoint", &metadata.authorization_endpoint)?;
        let token = endpoint("token endpoint", &metadata.token_endpoint)?;
        let redirect = RedirectUrl::new(self.inner.agent.redirect_uri())
            .map_err(|e| failure(AuthErrorKind::Discovery, format!("redirect URI: {e}")))?;
        let client = BasicClient::new(ClientId::new(credentials.client_id.clone()))
            .set_auth_uri(AuthUrl::from_url(authorize))
            .set_token_uri(TokenUrl::from_url(token))
            .set_redirect_uri(redirect);
        let secret = credentials.client_secret.clone().map(ClientSecret::new);
        Ok(match (credentials.auth_method, secret) {
            (TokenAuthMethod::ClientSecretBasic, Some(secret)) => client
                .set_client_secret(secret)
                .set_auth_type(AuthType::BasicAuth),
            (TokenAuthMethod::ClientSecretPost, Some(secret)) => client
                .set_client_secret(secret)
                .set_auth_type(AuthType::RequestBody),
            _ => client.set_auth_type(AuthType::RequestBody),
        })
    }

    /// The authorization URL (PKCE S256, `state`, `resource`, scopes, `prompt=consent` with
    /// `offline_access`), its `state`, and what completing it needs.
    fn authorization_request(
        &self,
        server: &Url,
        found: Found,
        credentials: Credentials,
        scopes: Vec<String>,
    ) -> Result<(Url, String, Pending), Error> {
        let client = self.oauth2_client(&found.metadata, &credentials)?;
        let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
        let state = self.new_state(server, &found, &credentials, &scopes, &verifier)?;
        let mut request = client
            .authorize_url(move || state)
            .set_pkce_challenge(pkce)
            .add_extra_param("resource", found.resource.clone());
        for scope in &scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        // OpenID Connect Core §11: without `prompt=consent` a provider must ignore
        // `offline_access`, and no refresh token comes.
        if scopes.iter().any(|scope| scope == "offline_access") {
            request = request.add_extra_param("prompt", "consent");
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

    /// The authorization response: checks `iss` (RFC 9207), exchanges the code, keeps the tokens.
    async fn exchange(
        &self,
        fetcher: &Fetcher,
        pending: Pending,
        callback: Callback,
    ) -> Result<(), Error> {
        check_issuer(&pending.metadata, &callback)?;
        let client = self.oauth2_client(&pending.metadata, &pending.credentials)?;
        let http = |request| self.execute_with_dpop(fetcher, request);
        let token = client
            .exchange_code(AuthorizationCode::new(callback.code))
            .set_pkce_verifier(pending.verifier)
            .add_extra_param("resource", pending.resource.clone())
            .request_async(&http)
            .await
            .map_err(|e| token_failure(&e))?;
        let mut credentials = pending.credentials;
        let answer = TokenAnswer::from(&token);
        apply_answer(&mut credentials, answer, pending.scopes, now_secs());
        tracing::debug!(server = %pending.server, issuer = %pending.issuer, "authorized");
        self.keep(&pending.metadata, &pending.resource, credentials)
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
    use sha2::Digest as _;

    use super::*;
    use crate::auth::{Application, OAuthConfig};

    fn metadata(iss_advertised: bool) -> AuthorizationServerMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://as.example.com",
            "authorization_endpoint": "https://as.example.com/authorize",
            "token_endpoint": "https://as.example.com/token",
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": iss_advertised,
        }))
        .unwrap()
    }

    fn found(iss_advertised: bool) -> Found {
        Found {
            issuer: "https://as.example.com".into(),
            resource: "https://mcp.example.com/mcp".into(),
            scopes_supported: None,
            metadata: metadata(iss_advertised),
        }
    }

    fn oauth() -> OAuth {
        OAuth::new(
            Application::new("https://app.example.com/callback"),
            OAuthConfig::default(),
        )
    }

    fn callback(state: Option<&str>, iss: Option<&str>) -> Callback {
        Callback {
            code: "code".into(),
            state: state.map(str::to_owned),
            iss: iss.map(str::to_owned),
        }
    }

    fn kind_of(result: Result<(), Error>) -> Option<AuthErrorKind> {
        match result {
            Err(Error::Unauthorized { kind, .. }) => Some(kind),
            _ => None,
        }
    }

    #[test]
    fn the_authorization_url_carries_pkce_state_resource_and_scopes() {
        let oauth = oauth();
        let server = Url::parse("https://mcp.example.com/mcp").unwrap();
        let credentials = Credentials {
            client_id: "client-1".into(),
            ..Credentials::default()
        };
        let scopes = vec!["read".to_owned(), "offline_access".to_owned()];
        let (url, state, pending) = oauth
            .authorization_request(&server, found(false), credentials, scopes)
            .unwrap();
        let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(url.path(), "/authorize");
        assert_eq!(query["response_type"], "code");
        assert_eq!(query["client_id"], "client-1");
        assert_eq!(query["redirect_uri"], "https://app.example.com/callback");
        assert_eq!(query["state"], state);
        assert_eq!(query["resource"], "https://mcp.example.com/mcp");
        assert_eq!(query["scope"], "read offline_access");
        assert_eq!(query["prompt"], "consent", "offline_access needs consent");
        assert_eq!(query["code_challenge_method"], "S256");
        let challenge = sha2::Sha256::digest(pending.verifier.secret().as_bytes());
        assert_eq!(query["code_challenge"], URL_SAFE_NO_PAD.encode(challenge));
        let (other, other_state, _) = oauth
            .authorization_request(&server, found(false), Credentials::default(), Vec::new())
            .unwrap();
        assert_ne!(state, other_state, "a fresh state per request");
        assert!(
            !other.query_pairs().any(|(key, _)| key == "prompt"),
            "no prompt without offline_access: {other}"
        );
    }

    #[test]
    fn an_answer_with_another_state_is_refused() {
        assert!(check_state("s1", &callback(Some("s1"), None)).is_ok());
        let wrong = check_state("s1", &callback(Some("s2"), None));
        assert_eq!(kind_of(wrong), Some(AuthErrorKind::ResponseMismatch));
        let missing = check_state("s1", &callback(None, None));
        assert_eq!(kind_of(missing), Some(AuthErrorKind::ResponseMismatch));
    }

    #[test]
    fn an_answer_from_another_issuer_is_refused() {
        let ours = Some("https://as.example.com");
        assert!(check_issuer(&metadata(true), &callback(None, ours)).is_ok());
        assert!(check_issuer(&metadata(false), &callback(None, None)).is_ok());
        let other = Some("https://evil.example.com");
        for advertised in [false, true] {
            let mismatch = check_issuer(&metadata(advertised), &callback(None, other));
            assert_eq!(kind_of(mismatch), Some(AuthErrorKind::ResponseMismatch));
        }
        let missing = check_issuer(&metadata(true), &callback(None, None));
        assert_eq!(kind_of(missing), Some(AuthErrorKind::ResponseMismatch));
    }

    #[test]
    fn pkce_s256_is_required() {
        assert!(require_s256(&metadata(false)).is_ok());
        let mut plain = metadata(false);
        plain.code_challenge_methods_supported = Some(vec!["plain".into()]);
        let refused = require_s256(&plain);
        assert_eq!(kind_of(refused), Some(AuthErrorKind::PkceUnsupported));
    }

    #[actix_rt::test]
    async fn completing_checks_the_state_then_the_issuer_before_any_request() {
        let oauth = oauth();
        let unknown = oauth.complete(callback(Some("never-begun"), None)).await;
        assert_eq!(kind_of(unknown), Some(AuthErrorKind::ResponseMismatch));
        let server = Url::parse("https://mcp.example.com/mcp").unwrap();
        let (_, state, pending) = oauth
            .authorization_request(&server, found(true), Credentials::default(), Vec::new())
            .unwrap();
        oauth.state().pending.insert(state.clone(), pending);
        // The token endpoint is not reachable: an exchange would fail with `Token`.
        let forged = callback(Some(&state), Some("https://evil.example.com"));
        assert_eq!(
            kind_of(oauth.complete(forged).await),
            Some(AuthErrorKind::ResponseMismatch)
        );
        let again = oauth.complete(callback(Some(&state), None)).await;
        assert_eq!(
            kind_of(again),
            Some(AuthErrorKind::ResponseMismatch),
            "a state is used once"
        );
        assert!(!oauth.is_authorized());
    }
}
