//! Who this client is to authorization servers: [`OAuthConfig`], set by the application.

use std::{sync::Arc, time::Duration};

use serde::Serialize;
use url::Url;

use super::{sealed::Sealer, store::MemoryStore, CredentialStore, IdentityAssertion};

/// What kind of client registers (OpenID Connect Dynamic Client Registration
/// `application_type`): it decides which redirect URIs the authorization server accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ApplicationType {
    /// A program on the user's device, redirected to a loopback listener (CLIs, desktop).
    #[default]
    Native,
    /// A web service, redirected to its own https callback route.
    Web,
}

/// Who this client is to authorization servers, and where its credentials are kept.
#[derive(Clone)]
pub struct OAuthConfig {
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
    pub(super) client_metadata_url: Option<Url>,
    pub(super) client_name: String,
    pub(super) application_type: ApplicationType,
    pub(super) store: Arc<dyn CredentialStore>,
    pub(super) private_key_pem: Option<String>,
    pub(super) jwt_bearer: Option<String>,
    pub(super) token_exchange: Option<String>,
    pub(super) identity_assertion: Option<IdentityAssertion>,
    pub(super) client_credentials: bool,
    pub(super) sign_in_timeout: Duration,
    pub(super) request_timeout: Duration,
    pub(super) sealer: Option<Sealer>,
}

/// How long a sign-in in the browser may take by default: SSO and a second factor take minutes.
pub const DEFAULT_SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// How long one request of the machine's steps may take by default (as the default connect
/// timeout, [`DEFAULT_CONNECT_TIMEOUT`](crate::client::DEFAULT_CONNECT_TIMEOUT)).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for OAuthConfig {
    fn default() -> Self {
        Self {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            client_name: "actix-mcp".into(),
            application_type: ApplicationType::Native,
            store: Arc::new(MemoryStore::default()),
            private_key_pem: None,
            jwt_bearer: None,
            token_exchange: None,
            identity_assertion: None,
            client_credentials: false,
            sign_in_timeout: DEFAULT_SIGN_IN_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            sealer: None,
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
            .field(
                "token_exchange",
                &self.token_exchange.as_ref().map(|_| "<redacted>"),
            )
            .field("identity_assertion", &self.identity_assertion)
            .field("client_credentials", &self.client_credentials)
            .field("sign_in_timeout", &self.sign_in_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("sealer", &self.sealer)
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
    pub fn client_metadata_url(mut self, url: Url) -> Self {
        self.client_metadata_url = Some(url);
        self
    }

    /// The `client_name` sent in dynamic registration (default `actix-mcp`).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// The `application_type` sent in dynamic registration (default
    /// [`Native`](ApplicationType::Native)).
    pub fn application_type(mut self, kind: ApplicationType) -> Self {
        self.application_type = kind;
        self
    }

    /// Where credentials are kept, per authorization server and resource (default: in memory).
    pub fn store(mut self, store: impl CredentialStore) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Where the credentials are kept, shared with others holding the same `Arc` (e.g. one
    /// [`FileStore`](super::FileStore) or `RedisStore` for every server of a config).
    pub fn shared_store(mut self, store: Arc<dyn CredentialStore>) -> Self {
        self.store = store;
        self
    }

    /// Authenticate to the token endpoint with a signed assertion (`private_key_jwt`, RFC 7523)
    /// made with this PKCS#8 PEM P-256 key (ES256), instead of a secret.
    pub fn private_key_jwt(mut self, pem: impl Into<String>) -> Self {
        self.private_key_pem = Some(pem.into());
        self
    }

    /// How long the user may take to sign in through the [`UserAgent`](super::UserAgent)
    /// (default [`DEFAULT_SIGN_IN_TIMEOUT`], 5 min). Requests waiting for the sign-in have their
    /// own timeouts paused meanwhile, and restarted when they are sent again.
    pub fn sign_in_timeout(mut self, timeout: Duration) -> Self {
        self.sign_in_timeout = timeout;
        self
    }

    /// How long each request of the machine's steps may take, its answer's body included
    /// (default [`DEFAULT_REQUEST_TIMEOUT`], 30 s): discovery, registration, the code exchange,
    /// a refresh, every grant without a user. One that does not answer in time fails the
    /// authorization with [`AuthErrorKind::TimedOut`](crate::AuthErrorKind::TimedOut), naming
    /// the endpoint. Only the person's wait is bounded by the [sign-in
    /// timeout](Self::sign_in_timeout). A client usually sets it to its connect timeout.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// For a web service run as several replicas: each sign-in begun with
    /// [`OAuth::begin`](super::OAuth::begin) travels sealed in its `state` (XChaCha20-Poly1305
    /// under `key`, bound to `owner`), so any replica whose `OAuth` has the same key and owner
    /// can [`complete`](super::OAuth::complete) it: no sticky sessions. `owner` names the user
    /// this `OAuth` is for: a `state` begun for another is refused, as is one altered or older
    /// than the sign-in timeout. Keep `key` as other secrets; every replica needs the same.
    pub fn shared_sign_ins(mut self, key: [u8; 32], owner: impl Into<String>) -> Self {
        self.sealer = Some(Sealer::new(key, owner.into()));
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

    /// Token exchange (RFC 8693): this access token, the user's at a service acting for them
    /// (a gateway), exchanged at the server's authorization server for a token of the server's
    /// own, with this client's id and secret. No browser: when the exchanged token expires, the
    /// exchange is made again with the same subject token.
    pub fn token_exchange(mut self, subject_token: impl Into<String>) -> Self {
        self.token_exchange = Some(subject_token.into());
        self
    }

    /// Enterprise-managed authorization (SEP-990): exchange the user's identity assertion at the
    /// enterprise IdP for an ID-JAG, then the ID-JAG for an access token.
    pub fn identity_assertion(mut self, assertion: IdentityAssertion) -> Self {
        self.identity_assertion = Some(assertion);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_application_type_is_sent_by_its_registered_name() {
        assert_eq!(ApplicationType::default(), ApplicationType::Native);
        let names = serde_json::to_value([ApplicationType::Native, ApplicationType::Web]);
        assert_eq!(names.unwrap(), serde_json::json!(["native", "web"]));
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let config = OAuthConfig::default()
            .client_id("id")
            .client_secret("s3cret")
            .private_key_jwt("-----BEGIN PRIVATE KEY-----")
            .jwt_bearer("workload-jwt");
        let shown = format!("{config:?}");
        assert!(shown.contains("\"id\""), "{shown}");
        for secret in ["s3cret", "BEGIN PRIVATE", "workload-jwt"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }
}
