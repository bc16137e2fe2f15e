//! The grants without a user (MCP's authorization extensions): client credentials (with a
//! secret or a `private_key_jwt` assertion), workload identity (a JWT exchanged with the
//! `jwt-bearer` grant, SEP-1933), and enterprise-managed authorization (an identity assertion
//! from the enterprise's IdP exchanged for an ID-JAG, then for an access token, SEP-990). Plus
//! the token endpoint exchange the `oauth2` crate has no builder for.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::{engine::general_purpose::STANDARD, Engine as _};
use serde::Deserialize;
use serde_json::json;
use url::Url;

use super::{fetch::Fetcher, jwt::Es256Key, AuthErrorKind, Credentials};
use crate::error::Error;

pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// An identity assertion from the enterprise's IdP, to be exchanged for an ID-JAG.
#[derive(Clone)]
pub struct IdentityAssertion {
    /// The IdP's token endpoint (RFC 8693 token exchange).
    pub token_endpoint: String,
    /// The user's ID token from the IdP.
    pub id_token: String,
    /// This client's id at the IdP.
    pub client_id: Option<String>,
}

impl std::fmt::Debug for IdentityAssertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityAssertion")
            .field("token_endpoint", &self.token_endpoint)
            .field("id_token", &"<redacted>")
            .field("client_id", &self.client_id)
            .finish()
    }
}

/// A token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
pub(crate) struct TokenAnswer {
    pub access_token: String,
    #[serde(default)]
    pub token_type: Option<String>,
    #[serde(default)]
    pub expires_in: Option<u64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
}

/// A client assertion for `private_key_jwt` (RFC 7523 §2.2): `iss` = `sub` = the client id,
/// `aud` = the authorization server's issuer.
pub(crate) fn client_assertion(key: &Es256Key, client_id: &str, audience: &str) -> String {
    let now = now_secs();
    key.sign(
        json!({"typ": "JWT"}),
        &json!({"iss": client_id, "sub": client_id, "aud": audience,
            "iat": now, "exp": now + 300, "jti": super::jwt::jti()}),
    )
}

/// The form parameters that authenticate the client, and its `Authorization` header if any.
pub(crate) fn client_authentication(
    credentials: &Credentials,
    key: Option<&Es256Key>,
    audience: &str,
) -> (Vec<(&'static str, String)>, Option<String>) {
    match (credentials.auth_method.as_str(), &credentials.client_secret) {
        ("client_secret_basic", Some(secret)) => {
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", encode(&credentials.client_id), encode(secret));
            (Vec::new(), Some(format!("Basic {}", STANDARD.encode(pair))))
        }
        ("client_secret_post", Some(secret)) => (
            vec![
                ("client_id", credentials.client_id.clone()),
                ("client_secret", secret.clone()),
            ],
            None,
        ),
        ("private_key_jwt", _) => match key {
            Some(key) => (
                vec![
                    ("client_id", credentials.client_id.clone()),
                    ("client_assertion_type", CLIENT_ASSERTION_TYPE.to_owned()),
                    (
                        "client_assertion",
                        client_assertion(key, &credentials.client_id, audience),
                    ),
                ],
                None,
            ),
            None => (vec![("client_id", credentials.client_id.clone())], None),
        },
        _ => (vec![("client_id", credentials.client_id.clone())], None),
    }
}

/// A refused grant: what the endpoint said (never a secret), and its `DPoP-Nonce` if it sent one.
pub(crate) struct Refused {
    pub error: Error,
    pub dpop_nonce: Option<String>,
}

impl From<Error> for Refused {
    fn from(error: Error) -> Self {
        Self {
            error,
            dpop_nonce: None,
        }
    }
}

/// POSTs a grant to a token endpoint. `dpop`: a proof for this request, if the client proves
/// possession.
pub(crate) async fn post_grant(
    fetcher: &Fetcher,
    endpoint: &Url,
    form: &[(&str, String)],
    authorization: Option<&str>,
    dpop: Option<String>,
) -> Result<TokenAnswer, Refused> {
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let mut request = fetcher
        .client()
        .post(endpoint.clone())
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body);
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    if let Some(proof) = dpop {
        request = request.header("dpop", proof);
    }
    let origin = endpoint.origin().ascii_serialization();
    let response = request.send().await.map_err(|e| {
        super::failure(
            AuthErrorKind::Token,
            format!("token request to {origin}: {e}"),
        )
    })?;
    let status = response.status().as_u16();
    let nonce = response
        .headers()
        .get("dpop-nonce")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = super::fetch::read_capped(response).await?;
    if !(200..300).contains(&status) {
        #[derive(Deserialize)]
        struct Refusal {
            error: String,
            #[serde(default)]
            error_description: Option<String>,
        }
        let said = serde_json::from_slice::<Refusal>(&body)
            .map(|r| match r.error_description {
                Some(d) => format!("{}: {d}", r.error),
                None => r.error,
            })
            .unwrap_or_else(|_| format!("HTTP {status}"));
        return Err(Refused {
            error: super::failure(
                AuthErrorKind::Token,
                format!("the token endpoint at {origin} answered {said}"),
            ),
            dpop_nonce: nonce,
        });
    }
    let answer = serde_json::from_slice(&body).map_err(|e| {
        super::failure(
            AuthErrorKind::Token,
            format!("the token answer from {origin} does not parse: {e}"),
        )
    })?;
    Ok(answer)
}

/// RFC 8693 at the enterprise IdP: the user's ID token for an ID-JAG naming this authorization
/// server (`audience`) and resource.
pub(crate) async fn identity_assertion_grant(
    fetcher: &Fetcher,
    assertion: &IdentityAssertion,
    audience: &str,
    resource: &str,
) -> Result<String, Error> {
    let endpoint = super::discovery::check_secure("IdP token endpoint", &assertion.token_endpoint)?;
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("subject_token", assertion.id_token.clone()),
        ("subject_token_type", ID_TOKEN.to_owned()),
        ("requested_token_type", ID_JAG.to_owned()),
        ("audience", audience.to_owned()),
        ("resource", resource.to_owned()),
    ];
    if let Some(client_id) = &assertion.client_id {
        form.push(("client_id", client_id.clone()));
    }
    let answer = post_grant(fetcher, &endpoint, &form, None, None)
        .await
        .map_err(|refused| refused.error)?;
    Ok(answer.access_token)
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
