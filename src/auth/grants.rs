//! The grants without a user (MCP's authorization extensions): client credentials (with a
//! secret or a `private_key_jwt` assertion), workload identity (a JWT exchanged with the
//! `jwt-bearer` grant, SEP-1933), and enterprise-managed authorization (an identity assertion
//! from the enterprise's IdP exchanged for an ID-JAG, then for an access token, SEP-990). Plus
//! the token endpoint exchange the `oauth2` crate has no builder for.

use base64::{engine::general_purpose::STANDARD, Engine as _};
use serde::Deserialize;
use url::Url;

use super::{
    discovery::require_secure,
    failure,
    fetch::Fetcher,
    identity::secret_method,
    jwt::Es256Key,
    vocabulary::{now_secs, Found, TokenAnswer},
    AuthErrorKind, Credentials, OAuthConfig, TokenAuthMethod,
};
use crate::error::Error;

pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// An identity assertion from the enterprise's IdP, to be exchanged for an ID-JAG.
#[derive(Clone)]
pub struct IdentityAssertion {
    /// The IdP's token endpoint (RFC 8693 token exchange); https, or http on a loopback host.
    pub token_endpoint: Url,
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

/// The claims of a `private_key_jwt` client assertion (RFC 7523 §3).
#[derive(serde::Serialize)]
struct AssertionClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

/// A client assertion for `private_key_jwt` (RFC 7523 §2.2): `iss` = `sub` = the client id,
/// `aud` = the authorization server's issuer, valid five minutes.
pub(crate) fn client_assertion(
    key: &Es256Key,
    client_id: &str,
    audience: &str,
) -> Result<String, Error> {
    let iat = now_secs();
    let claims = AssertionClaims {
        iss: client_id,
        sub: client_id,
        aud: audience,
        iat,
        exp: iat + 300,
        jti: super::jwt::jti(),
    };
    key.sign("JWT", None, &claims)
}

/// A form-encoded request body, as name and value pairs.
pub(crate) type Form = Vec<(&'static str, String)>;

/// The form parameters that authenticate the client, and its `Authorization` header if any.
pub(crate) fn client_authentication(
    credentials: &Credentials,
    key: Option<&Es256Key>,
    audience: &str,
) -> Result<(Form, Option<String>), Error> {
    Ok(
        match (credentials.auth_method, &credentials.client_secret) {
            (TokenAuthMethod::ClientSecretBasic, Some(secret)) => {
                let encode = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                let pair = format!("{}:{}", encode(&credentials.client_id), encode(secret));
                (Vec::new(), Some(format!("Basic {}", STANDARD.encode(pair))))
            }
            (TokenAuthMethod::ClientSecretPost, Some(secret)) => (
                vec![
                    ("client_id", credentials.client_id.clone()),
                    ("client_secret", secret.clone()),
                ],
                None,
            ),
            (TokenAuthMethod::PrivateKeyJwt, _) => match key {
                Some(key) => (
                    vec![
                        ("client_id", credentials.client_id.clone()),
                        ("client_assertion_type", CLIENT_ASSERTION_TYPE.to_owned()),
                        (
                            "client_assertion",
                            client_assertion(key, &credentials.client_id, audience)?,
                        ),
                    ],
                    None,
                ),
                None => (vec![("client_id", credentials.client_id.clone())], None),
            },
            _ => (vec![("client_id", credentials.client_id.clone())], None),
        },
    )
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
        .request(reqwest::Method::POST, endpoint.clone())
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
    let response = request
        .send()
        .await
        .map_err(|e| fetcher.failure(AuthErrorKind::Token, endpoint, &e))?;
    let status = response.status().as_u16();
    let nonce = response
        .headers()
        .get("dpop-nonce")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = fetcher.read_capped(endpoint, response).await?;
    if !(200..300).contains(&status) {
        let said = refusal_text(status, &body);
        return Err(Refused {
            error: failure(
                AuthErrorKind::Token,
                format!("the token endpoint at {origin} answered {said}"),
            ),
            dpop_nonce: nonce,
        });
    }
    let answer = serde_json::from_slice(&body).map_err(|e| {
        failure(
            AuthErrorKind::Token,
            format!("the token answer from {origin} does not parse: {e}"),
        )
    })?;
    Ok(answer)
}

/// What a token endpoint's error answer (RFC 6749 §5.2) says, its control characters made
/// visible; the status when it is not one.
fn refusal_text(status: u16, body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Refusal {
        error: String,
        #[serde(default)]
        error_description: Option<String>,
    }
    match serde_json::from_slice::<Refusal>(body) {
        Ok(Refusal {
            error,
            error_description: Some(description),
        }) => format!("{}: {}", error.escape_debug(), description.escape_debug()),
        Ok(Refusal { error, .. }) => error.escape_debug().to_string(),
        Err(_) => format!("HTTP {status}"),
    }
}

/// RFC 8693: `subject`, an access token, for an access token of the resource the form names.
pub(super) fn token_exchange_form(subject: String) -> Form {
    vec![
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("subject_token", subject),
        ("subject_token_type", ACCESS_TOKEN_TYPE.to_owned()),
        ("requested_token_type", ACCESS_TOKEN_TYPE.to_owned()),
    ]
}

/// RFC 8693 at the enterprise IdP: the user's ID token for an ID-JAG naming this authorization
/// server (`audience`) and resource.
pub(crate) async fn identity_assertion_grant(
    fetcher: &Fetcher,
    assertion: &IdentityAssertion,
    audience: &str,
    resource: &str,
) -> Result<String, Error> {
    require_secure("IdP token endpoint", &assertion.token_endpoint)?;
    let endpoint = assertion.token_endpoint.clone();
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

/// A grant without a user, ready to post: where, the form, the client's `Authorization`
/// header if it authenticates with one, and the credentials the answer completes.
pub(super) struct WithoutUser {
    pub endpoint: Url,
    pub form: Form,
    pub authorization: Option<String>,
    pub credentials: Credentials,
}

/// The request of a grant at the token endpoint without a user (client credentials,
/// `jwt-bearer`): the client as `config` says (a secret or a `private_key_jwt` assertion),
/// `form` completed with the client's authentication, `scopes` and the RFC 8707 `resource`.
pub(super) fn without_user(
    config: &OAuthConfig,
    found: &Found,
    mut form: Form,
    scopes: &[String],
) -> Result<WithoutUser, Error> {
    let key = match &config.private_key_pem {
        Some(pem) => Some(Es256Key::from_pem(pem)?),
        None => None,
    };
    let credentials = Credentials {
        client_id: config.client_id.clone().unwrap_or_default(),
        client_secret: config.client_secret.clone(),
        auth_method: match key {
            Some(_) => TokenAuthMethod::PrivateKeyJwt,
            None => secret_method(config.client_secret.is_some(), &found.metadata),
        },
        ..Credentials::default()
    };
    let endpoint = found.metadata.token_endpoint.clone().ok_or_else(|| {
        failure(
            AuthErrorKind::Discovery,
            format!("{:?} has no token endpoint", found.issuer),
        )
    })?;
    super::discovery::require_secure("token endpoint", &endpoint)?;
    let (client_form, authorization) =
        client_authentication(&credentials, key.as_ref(), &found.metadata.issuer)?;
    extend_grant_form(
        &mut form,
        &credentials,
        client_form,
        scopes,
        &found.resource,
    );
    Ok(WithoutUser {
        endpoint,
        form,
        authorization,
        credentials,
    })
}

/// A grant's form: the client's authentication (nothing for a client without an id, as a
/// workload's `jwt-bearer` grant may be), the scopes, the RFC 8707 `resource`.
fn extend_grant_form(
    form: &mut Form,
    credentials: &Credentials,
    client_form: Form,
    scopes: &[String],
    resource: &str,
) {
    if !credentials.client_id.is_empty() || !client_form.is_empty() {
        form.extend(client_form);
    }
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    form.push(("resource", resource.to_owned()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(method: TokenAuthMethod, secret: Option<&str>) -> Credentials {
        Credentials {
            client_id: "client:1".into(),
            client_secret: secret.map(str::to_owned),
            auth_method: method,
            ..Credentials::default()
        }
    }

    #[test]
    fn a_refusal_says_the_error_with_control_characters_visible() {
        let body = br#"{"error": "invalid_grant", "error_description": "expired\u001b[2J"}"#;
        assert_eq!(refusal_text(400, body), r"invalid_grant: expired\u{1b}[2J");
        assert_eq!(
            refusal_text(401, br#"{"error": "invalid_client"}"#),
            "invalid_client"
        );
        assert_eq!(refusal_text(502, b"<html>"), "HTTP 502");
    }

    #[test]
    fn the_client_authenticates_by_its_method() {
        let basic = credentials(TokenAuthMethod::ClientSecretBasic, Some("s&t"));
        let (form, header) = client_authentication(&basic, None, "https://as").unwrap();
        assert!(form.is_empty());
        // RFC 6749 §2.3.1: both form-encoded before the Basic encoding.
        assert_eq!(
            header,
            Some(format!("Basic {}", STANDARD.encode("client%3A1:s%26t")))
        );
        let post = credentials(TokenAuthMethod::ClientSecretPost, Some("s"));
        let (form, header) = client_authentication(&post, None, "https://as").unwrap();
        assert_eq!(
            form,
            [
                ("client_id", "client:1".to_owned()),
                ("client_secret", "s".to_owned())
            ]
        );
        assert_eq!(header, None);
        let public = credentials(TokenAuthMethod::None, Some("unused"));
        let (form, _) = client_authentication(&public, None, "https://as").unwrap();
        assert_eq!(form, [("client_id", "client:1".to_owned())]);
    }

    #[test]
    fn a_private_key_jwt_assertion_names_the_client_and_the_issuer() {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let key = Es256Key::generate();
        let jwt = credentials(TokenAuthMethod::PrivateKeyJwt, None);
        let (form, header) =
            client_authentication(&jwt, Some(&key), "https://as.example.com").unwrap();
        assert_eq!(header, None);
        assert_eq!(
            form[1],
            ("client_assertion_type", CLIENT_ASSERTION_TYPE.to_owned())
        );
        let assertion = &form[2].1;
        let claims = assertion.split('.').nth(1).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client:1");
        assert_eq!(claims["sub"], "client:1");
        assert_eq!(claims["aud"], "https://as.example.com");
        let lifetime = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
        assert_eq!(lifetime, 300);
    }

    #[test]
    fn a_grant_form_carries_scopes_and_resource_and_no_empty_client() {
        let mut form = vec![("grant_type", "client_credentials".to_owned())];
        let client = credentials(TokenAuthMethod::None, None);
        let client_form = vec![("client_id", "client:1".to_owned())];
        let scopes = ["a".to_owned(), "b".to_owned()];
        extend_grant_form(&mut form, &client, client_form, &scopes, "https://mcp");
        assert_eq!(
            form,
            [
                ("grant_type", "client_credentials".to_owned()),
                ("client_id", "client:1".to_owned()),
                ("scope", "a b".to_owned()),
                ("resource", "https://mcp".to_owned()),
            ]
        );
    }

    fn found(token_endpoint: &str) -> Found {
        let metadata = serde_json::json!({"issuer": "https://as.example.com",
            "token_endpoint": token_endpoint,
            "token_endpoint_auth_methods_supported": ["client_secret_basic"]});
        Found {
            issuer: "https://as.example.com".into(),
            resource: "https://mcp.example.com/mcp".into(),
            scopes_supported: None,
            metadata: serde_json::from_value(metadata).unwrap(),
        }
    }

    #[test]
    fn a_grant_without_user_carries_the_client_the_scopes_and_the_resource() {
        let config = OAuthConfig::default()
            .client_id("m2m")
            .client_secret("s3cret");
        let form = vec![("grant_type", "client_credentials".to_owned())];
        let scopes = ["read".to_owned()];
        let request = without_user(
            &config,
            &found("https://as.example.com/token"),
            form,
            &scopes,
        )
        .unwrap();
        assert_eq!(request.endpoint.as_str(), "https://as.example.com/token");
        assert_eq!(request.credentials.client_id, "m2m");
        let basic = STANDARD.encode("m2m:s3cret");
        assert_eq!(request.authorization, Some(format!("Basic {basic}")));
        let get = |name: &str| {
            request
                .form
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v)
        };
        assert_eq!(
            get("grant_type").map(String::as_str),
            Some("client_credentials")
        );
        assert_eq!(get("scope").map(String::as_str), Some("read"));
        assert_eq!(
            get("resource").map(String::as_str),
            Some("https://mcp.example.com/mcp")
        );
        assert!(
            get("client_secret").is_none(),
            "the secret goes in the header only"
        );
    }

    #[test]
    fn a_grant_without_user_needs_a_secure_token_endpoint() {
        let config = OAuthConfig::default().client_id("m2m");
        let insecure = without_user(&config, &found("http://as.example.com/token"), vec![], &[]);
        let Err(Error::Unauthorized { kind, .. }) = insecure else {
            panic!("an http token endpoint off loopback was taken");
        };
        assert_eq!(kind, AuthErrorKind::InsecureEndpoint);
        let mut none = found("https://as.example.com/token");
        none.metadata.token_endpoint = None;
        let missing = without_user(&config, &none, vec![], &[]);
        assert!(matches!(
            missing,
            Err(Error::Unauthorized {
                kind: AuthErrorKind::Discovery,
                ..
            })
        ));
    }
}
