//! Proof of possession (DPoP, RFC 9449), once an authorization server lists `ES256`: one key per
//! [`OAuth`], a fresh proof per request (`htm`, `htu`, `iat`, a new `jti`; `ath` binding the
//! access token sent with it), and the nonces the authorization and resource servers give.

use std::sync::{MutexGuard, PoisonError};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use serde::Serialize;
use sha2::Digest as _;
use url::Url;

use super::{
    discovery::AuthorizationServerMetadata,
    fetch::{Fetcher, HttpError},
    grants,
    jwt::{self, Es256Key},
    vocabulary::{is_dpop, now_secs, TokenAnswer},
    Credentials, OAuth,
};
use crate::error::Error;

/// The DPoP key and the nonces the servers gave.
pub(super) struct Dpop {
    key: Es256Key,
    authorization_server_nonce: Option<String>,
    resource_server_nonce: Option<String>,
}

/// Which server's nonce a DPoP proof carries.
#[derive(Clone, Copy)]
pub(super) enum Nonce {
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

/// `ath`: the access token's SHA-256, base64url.
fn ath(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes()))
}

/// A proof's claims (RFC 9449 §4.2).
#[derive(Serialize)]
struct ProofClaims<'a> {
    jti: String,
    htm: &'a str,
    htu: String,
    iat: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    nonce: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ath: Option<String>,
}

impl OAuth {
    fn lock_dpop(&self) -> MutexGuard<'_, Option<Dpop>> {
        self.inner
            .dpop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn dpop_enabled(&self) -> bool {
        self.lock_dpop().is_some()
    }

    /// Proves possession from now on if `metadata` lists `ES256` (one key, made once).
    pub(super) fn enable_dpop_for(&self, metadata: &AuthorizationServerMetadata) {
        let es256 = metadata
            .dpop_signing_alg_values_supported
            .as_ref()
            .is_some_and(|algs| algs.iter().any(|a| a == "ES256"));
        if es256 {
            self.lock_dpop().get_or_insert_with(|| Dpop {
                key: Es256Key::generate(),
                authorization_server_nonce: None,
                resource_server_nonce: None,
            });
        }
    }

    /// The DPoP key, as kept with the tokens bound to it (`Credentials::dpop_key`).
    pub(super) fn dpop_secret(&self) -> Option<String> {
        self.lock_dpop().as_ref().map(|dpop| dpop.key.to_secret())
    }

    /// Proves possession with the key `credentials` were bound to (another process's), if they
    /// keep one: their refresh token only works with it.
    pub(super) fn use_dpop_key_of(&self, credentials: &Credentials) {
        let Some(key) = credentials
            .dpop_key
            .as_deref()
            .and_then(Es256Key::from_secret)
        else {
            return;
        };
        let mut dpop = self.lock_dpop();
        match dpop.as_mut() {
            Some(dpop) if dpop.key.to_secret() == key.to_secret() => {}
            Some(dpop) => {
                dpop.key = key;
                dpop.authorization_server_nonce = None;
                dpop.resource_server_nonce = None;
            }
            None => {
                *dpop = Some(Dpop {
                    key,
                    authorization_server_nonce: None,
                    resource_server_nonce: None,
                })
            }
        }
    }

    /// Keeps the nonce a server asked for; false when this client does not prove possession.
    fn keep_nonce(&self, nonce: Nonce, value: String) -> bool {
        let mut dpop = self.lock_dpop();
        let Some(dpop) = dpop.as_mut() else {
            return false;
        };
        match nonce {
            Nonce::AuthorizationServer => dpop.authorization_server_nonce = Some(value),
            Nonce::ResourceServer => dpop.resource_server_nonce = Some(value),
        }
        true
    }

    /// The resource server's `use_dpop_nonce`: the same token, the next proof with its nonce.
    pub(super) fn accept_resource_nonce(&self, nonce: String) -> bool {
        self.keep_nonce(Nonce::ResourceServer, nonce)
    }

    /// A DPoP proof for one request, if the client proves possession.
    pub(super) fn proof(
        &self,
        method: &str,
        url: &Url,
        token: Option<&str>,
        nonce: Nonce,
    ) -> Option<String> {
        let dpop = self.lock_dpop();
        let dpop = dpop.as_ref()?;
        let nonce = match nonce {
            Nonce::AuthorizationServer => &dpop.authorization_server_nonce,
            Nonce::ResourceServer => &dpop.resource_server_nonce,
        };
        let claims = ProofClaims {
            jti: jwt::jti(),
            htm: method,
            htu: htu(url),
            iat: now_secs(),
            nonce: nonce.as_deref(),
            ath: token.map(ath),
        };
        let jwk = dpop.key.public_jwk();
        match dpop.key.sign("dpop+jwt", Some(&jwk), &claims) {
            Ok(proof) => Some(proof),
            Err(e) => {
                tracing::warn!(error = %e, "no DPoP proof");
                None
            }
        }
    }

    /// The `DPoP` header for a request to the resource server, when the token is a DPoP one.
    pub(crate) fn resource_proof(&self, method: &str, url: &Url) -> Option<String> {
        let token = {
            let state = self.state();
            let credentials = &state.granted.as_ref()?.credentials;
            if !is_dpop(credentials) {
                return None;
            }
            credentials.access_token.clone()?
        };
        self.proof(method, url, Some(&token), Nonce::ResourceServer)
    }

    /// The `oauth2` crate's requests, with a DPoP proof when the client proves possession, sent
    /// again once with the server's nonce if it asks for one.
    pub(super) async fn execute_with_dpop(
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
            let method = parts.method.as_str();
            if let Some(proof) = self.proof(method, &url, None, Nonce::AuthorizationServer) {
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
                    self.keep_nonce(Nonce::AuthorizationServer, nonce);
                }
                _ => return Ok(response),
            }
        }
    }

    /// A grant POST, with a DPoP proof when the client proves possession, sent again once with
    /// the server's nonce if it asks for one.
    pub(super) async fn post_grant_with_dpop(
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
                Err(refused) => {
                    let asked = refused.dpop_nonce.filter(|_| !retried);
                    if !asked.is_some_and(|n| self.keep_nonce(Nonce::AuthorizationServer, n)) {
                        return Err(refused.error);
                    }
                    retried = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::{signature::Verifier, Signature, VerifyingKey};
    use serde_json::Value;

    use super::*;
    use crate::auth::{Headless, OAuthConfig};

    fn part(token: &str, at: usize) -> Value {
        let part = token.split('.').nth(at).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    fn with_dpop() -> OAuth {
        let oauth = OAuth::new(Headless::default(), OAuthConfig::default());
        let metadata: AuthorizationServerMetadata = serde_json::from_str(
            r#"{"issuer": "https://as.example.com", "dpop_signing_alg_values_supported": ["RS256", "ES256"]}"#,
        )
        .unwrap();
        oauth.enable_dpop_for(&metadata);
        oauth
    }

    #[test]
    fn no_proof_until_a_server_lists_es256() {
        let oauth = OAuth::new(Headless::default(), OAuthConfig::default());
        let url = Url::parse("https://mcp.example.com/mcp").unwrap();
        let rs256: AuthorizationServerMetadata = serde_json::from_str(
            r#"{"issuer": "https://as.example.com", "dpop_signing_alg_values_supported": ["RS256"]}"#,
        )
        .unwrap();
        oauth.enable_dpop_for(&rs256);
        assert!(oauth
            .proof("POST", &url, None, Nonce::AuthorizationServer)
            .is_none());
        assert!(
            !oauth.accept_resource_nonce("n".into()),
            "no nonce without DPoP"
        );
        assert!(with_dpop().dpop_enabled());
    }

    #[test]
    fn a_proof_names_the_request_binds_the_token_and_verifies() {
        let oauth = with_dpop();
        let url = Url::parse("https://mcp.example.com/mcp?session=1#frag").unwrap();
        let proof = oauth
            .proof("POST", &url, Some("access-token"), Nonce::ResourceServer)
            .unwrap();
        let header = part(&proof, 0);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        let claims = part(&proof, 1);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example.com/mcp");
        let hash = sha2::Sha256::digest(b"access-token");
        assert_eq!(claims["ath"], URL_SAFE_NO_PAD.encode(hash));
        assert!(claims["iat"].as_u64().is_some_and(|iat| iat > 0));
        assert!(claims.get("nonce").is_none());
        let again = oauth
            .proof("POST", &url, None, Nonce::ResourceServer)
            .unwrap();
        assert_ne!(part(&again, 1)["jti"], claims["jti"], "a new jti each time");
        assert!(part(&again, 1).get("ath").is_none(), "no token, no ath");
        assert_eq!(part(&again, 0)["jwk"], header["jwk"], "one key");

        let jwk = &header["jwk"];
        let coordinate = |c: &str| URL_SAFE_NO_PAD.decode(jwk[c].as_str().unwrap()).unwrap();
        let mut point = vec![4u8];
        point.extend(coordinate("x"));
        point.extend(coordinate("y"));
        let key = VerifyingKey::from_sec1_bytes(&point).unwrap();
        let (signed, signature) = proof.rsplit_once('.').unwrap();
        let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(signature).unwrap()).unwrap();
        assert!(key.verify(signed.as_bytes(), &signature).is_ok());
    }

    #[test]
    fn each_server_gets_its_own_nonce_back() {
        let oauth = with_dpop();
        let url = Url::parse("https://as.example.com/token").unwrap();
        assert!(oauth.accept_resource_nonce("rs-nonce".into()));
        oauth.keep_nonce(Nonce::AuthorizationServer, "as-nonce".into());
        let nonce_of = |nonce| {
            let proof = oauth.proof("POST", &url, None, nonce).unwrap();
            part(&proof, 1)["nonce"].clone()
        };
        assert_eq!(nonce_of(Nonce::ResourceServer), "rs-nonce");
        assert_eq!(nonce_of(Nonce::AuthorizationServer), "as-nonce");
    }
}
