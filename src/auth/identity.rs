//! This client's identity at an authorization server, in the spec's priority: pre-registered,
//! else what is held for this issuer, else a Client ID Metadata Document URL when the server
//! supports it, else dynamic client registration (RFC 7591), else an error.

use serde::{Deserialize, Serialize};
use url::Url;

use super::{
    config::OAuthConfig,
    discovery::{require_secure, AuthorizationServerMetadata},
    failure,
    fetch::Fetcher,
    vocabulary::{store_key, Found},
    ApplicationType, AuthErrorKind, Credentials, TokenAuthMethod,
};
use crate::error::Error;

/// Where the identity comes from.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    /// Known already: pre-registered, held, or a metadata document URL.
    Known(Credentials),
    /// To be registered at `endpoint`.
    Register {
        endpoint: Url,
        request: RegistrationRequest,
    },
}

/// An RFC 7591 registration request (the fields MCP clients send).
#[derive(Debug, PartialEq, Eq, Serialize)]
struct RegistrationRequest {
    client_name: String,
    redirect_uris: Vec<String>,
    application_type: ApplicationType,
    grant_types: [&'static str; 2],
    response_types: [&'static str; 1],
    token_endpoint_auth_method: TokenAuthMethod,
}

/// The registration's answer (the fields this client keeps).
#[derive(Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// How a client with (or without) a secret authenticates at this server: `client_secret_basic`
/// unless only `client_secret_post` is listed.
pub(super) fn secret_method(
    has_secret: bool,
    metadata: &AuthorizationServerMetadata,
) -> TokenAuthMethod {
    if !has_secret {
        return TokenAuthMethod::None;
    }
    let supported = metadata.token_endpoint_auth_methods_supported.as_deref();
    let offers = |m: TokenAuthMethod| supported.is_none_or(|s| s.iter().any(|x| x == m.as_str()));
    if !offers(TokenAuthMethod::ClientSecretBasic) && offers(TokenAuthMethod::ClientSecretPost) {
        TokenAuthMethod::ClientSecretPost
    } else {
        TokenAuthMethod::ClientSecretBasic
    }
}

/// The method a registration asks for: a public client where allowed, else a secret (RFC 8414:
/// an absent list means `client_secret_basic`).
fn registration_method(metadata: &AuthorizationServerMetadata) -> TokenAuthMethod {
    let basic = [TokenAuthMethod::ClientSecretBasic.as_str().to_owned()];
    let supported = metadata
        .token_endpoint_auth_methods_supported
        .as_deref()
        .unwrap_or(&basic);
    [
        TokenAuthMethod::None,
        TokenAuthMethod::ClientSecretBasic,
        TokenAuthMethod::ClientSecretPost,
    ]
    .into_iter()
    .find(|m| supported.iter().any(|s| s == m.as_str()))
    .unwrap_or(TokenAuthMethod::None)
}

/// Where this client's identity at `metadata.issuer` comes from; `held` is asked only when the
/// client is not pre-registered.
fn choose_identity(
    config: &OAuthConfig,
    redirect_uri: String,
    metadata: &AuthorizationServerMetadata,
    held: impl FnOnce() -> Option<Credentials>,
) -> Result<Identity, Error> {
    if let Some(client_id) = &config.client_id {
        return Ok(Identity::Known(Credentials {
            client_id: client_id.clone(),
            client_secret: config.client_secret.clone(),
            auth_method: secret_method(config.client_secret.is_some(), metadata),
            ..Credentials::default()
        }));
    }
    if let Some(held) = held() {
        return Ok(Identity::Known(held));
    }
    if let Some(url) = &config.client_metadata_url {
        if metadata.client_id_metadata_document_supported == Some(true) {
            return Ok(Identity::Known(Credentials {
                client_id: url.as_str().to_owned(),
                auth_method: TokenAuthMethod::None,
                ..Credentials::default()
            }));
        }
    }
    let Some(endpoint) = &metadata.registration_endpoint else {
        return Err(failure(
            AuthErrorKind::NoClientIdentity,
            format!(
                "{:?} offers no registration and this client has no client id for it",
                metadata.issuer
            ),
        ));
    };
    require_secure("registration endpoint", endpoint)?;
    let request = RegistrationRequest {
        client_name: config.client_name.clone(),
        redirect_uris: vec![redirect_uri],
        application_type: config.application_type,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: registration_method(metadata),
    };
    Ok(Identity::Register {
        endpoint: endpoint.clone(),
        request,
    })
}

/// The credentials a registration answer gives; the method it registered must be one this
/// client can use.
fn registered_credentials(
    answer: &[u8],
    metadata: &AuthorizationServerMetadata,
) -> Result<Credentials, Error> {
    let issuer = &metadata.issuer;
    let registered: Registered = serde_json::from_slice(answer).map_err(|e| {
        failure(
            AuthErrorKind::Registration,
            format!("{issuer:?}'s registration answer: {e}"),
        )
    })?;
    let auth_method = match registered.token_endpoint_auth_method.as_deref() {
        None => secret_method(registered.client_secret.is_some(), metadata),
        Some(name) => TokenAuthMethod::from_name(name).ok_or_else(|| {
            failure(
                AuthErrorKind::Registration,
                format!(
                    "{issuer:?} registered this client for {:?}, a token endpoint \
                     authentication it cannot do",
                    name.escape_debug().to_string()
                ),
            )
        })?,
    };
    Ok(Credentials {
        client_id: registered.client_id,
        client_secret: registered.client_secret,
        auth_method,
        registered: true,
        ..Credentials::default()
    })
}

/// This client's identity at the authorization server `found` names: `granted` (the
/// credentials held for that issuer, never another's: a migrated resource gets a new
/// registration), else those stored for it, else as `config` chooses, registering if it must.
pub(super) async fn identity(
    config: &OAuthConfig,
    redirect_uri: String,
    granted: Option<Credentials>,
    fetcher: &Fetcher,
    found: &Found,
) -> Result<Credentials, Error> {
    let held = match granted {
        Some(granted) => Some(granted),
        None => {
            let key = store_key(&found.issuer, &found.resource);
            let stored = config.store.read(&key).await?;
            stored.map(|s| s.credentials)
        }
    };
    let held = || held;
    match choose_identity(config, redirect_uri, &found.metadata, held)? {
        Identity::Known(credentials) => Ok(credentials),
        Identity::Register { endpoint, request } => {
            let (status, answer) = fetcher.post_json(endpoint, &request).await?;
            if !(200..300).contains(&status) {
                return Err(failure(
                    AuthErrorKind::Registration,
                    format!(
                        "{:?} refused the registration (HTTP {status})",
                        found.issuer
                    ),
                ));
            }
            registered_credentials(&answer, &found.metadata)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(extra: serde_json::Value) -> AuthorizationServerMetadata {
        let mut document = serde_json::json!({
            "issuer": "https://as.example.com",
            "registration_endpoint": "https://as.example.com/register",
        });
        if let (Some(into), Some(extra)) = (document.as_object_mut(), extra.as_object()) {
            into.extend(extra.clone());
        }
        serde_json::from_value(document).unwrap()
    }

    const REDIRECT: &str = "http://127.0.0.1:8976/callback";

    fn cimd() -> Url {
        Url::parse("https://app.example.com/c.json").unwrap()
    }

    fn choose(config: &OAuthConfig, metadata: &AuthorizationServerMetadata) -> Identity {
        choose_identity(config, REDIRECT.into(), metadata, || None).unwrap()
    }

    #[test]
    fn a_pre_registered_client_is_used_first_with_the_secret_method_offered() {
        let config = OAuthConfig::default().client_id("pre").client_secret("s");
        let post_only = metadata(serde_json::json!(
            {"token_endpoint_auth_methods_supported": ["client_secret_post"]}));
        let held = || -> Option<Credentials> { panic!("not asked when pre-registered") };
        let Identity::Known(credentials) =
            choose_identity(&config, REDIRECT.into(), &post_only, held).unwrap()
        else {
            panic!("not registered")
        };
        assert_eq!(credentials.client_id, "pre");
        assert_eq!(credentials.client_secret.as_deref(), Some("s"));
        assert_eq!(credentials.auth_method, TokenAuthMethod::ClientSecretPost);
        let any = metadata(serde_json::json!({}));
        let Identity::Known(credentials) = choose(&config, &any) else {
            panic!("not registered")
        };
        assert_eq!(credentials.auth_method, TokenAuthMethod::ClientSecretBasic);
        let public = OAuthConfig::default().client_id("pre");
        let Identity::Known(credentials) = choose(&public, &any) else {
            panic!("not registered")
        };
        assert_eq!(credentials.auth_method, TokenAuthMethod::None);
    }

    #[test]
    fn held_credentials_come_before_a_metadata_document_or_a_registration() {
        let held = Credentials {
            client_id: "held".into(),
            ..Credentials::default()
        };
        let config = OAuthConfig::default().client_metadata_url(cimd());
        let cimd = metadata(serde_json::json!({"client_id_metadata_document_supported": true}));
        let chosen =
            choose_identity(&config, REDIRECT.into(), &cimd, || Some(held.clone())).unwrap();
        assert_eq!(chosen, Identity::Known(held));
    }

    #[test]
    fn a_metadata_document_url_is_the_client_id_only_where_supported() {
        let config = OAuthConfig::default().client_metadata_url(cimd());
        let cimd = metadata(serde_json::json!({"client_id_metadata_document_supported": true}));
        let Identity::Known(credentials) = choose(&config, &cimd) else {
            panic!("not registered")
        };
        assert_eq!(credentials.client_id, "https://app.example.com/c.json");
        assert_eq!(credentials.auth_method, TokenAuthMethod::None);
        assert!(!credentials.registered);
        let without = metadata(serde_json::json!({}));
        assert!(matches!(
            choose(&config, &without),
            Identity::Register { .. }
        ));
    }

    #[test]
    fn a_registration_sends_name_redirect_application_type_and_method() {
        let native = OAuthConfig::default();
        let public = metadata(serde_json::json!(
            {"token_endpoint_auth_methods_supported": ["client_secret_basic", "none"]}));
        let Identity::Register { endpoint, request } = choose(&native, &public) else {
            panic!("registers")
        };
        assert_eq!(endpoint.as_str(), "https://as.example.com/register");
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::json!({
                "client_name": "actix-mcp",
                "redirect_uris": [REDIRECT],
                "application_type": "native",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            })
        );
        let web = OAuthConfig::default()
            .client_name("service")
            .application_type(ApplicationType::Web);
        let unlisted = metadata(serde_json::json!({}));
        let Identity::Register { request, .. } = choose(&web, &unlisted) else {
            panic!("registers")
        };
        assert_eq!(request.application_type, ApplicationType::Web);
        assert_eq!(request.client_name, "service");
        assert_eq!(
            request.token_endpoint_auth_method,
            TokenAuthMethod::ClientSecretBasic,
            "RFC 8414's default"
        );
    }

    #[test]
    fn without_any_identity_or_a_secure_registration_endpoint_it_fails() {
        let config = OAuthConfig::default();
        let none: AuthorizationServerMetadata =
            serde_json::from_str(r#"{"issuer": "https://as.example.com"}"#).unwrap();
        let kind = |result: Result<Identity, Error>| match result {
            Err(Error::Unauthorized { kind, .. }) => kind,
            other => panic!("{other:?}"),
        };
        let no_identity = choose_identity(&config, REDIRECT.into(), &none, || None);
        assert_eq!(kind(no_identity), AuthErrorKind::NoClientIdentity);
        let plain_http = metadata(serde_json::json!(
            {"registration_endpoint": "http://as.example.com/register"}));
        let insecure = choose_identity(&config, REDIRECT.into(), &plain_http, || None);
        assert_eq!(kind(insecure), AuthErrorKind::InsecureEndpoint);
    }

    #[test]
    fn a_registration_answer_is_kept_with_a_method_this_client_can_use() {
        let any = metadata(serde_json::json!({}));
        let credentials = registered_credentials(
            br#"{"client_id": "dcr", "client_secret": "s", "token_endpoint_auth_method": "client_secret_post"}"#,
            &any,
        )
        .unwrap();
        assert_eq!(credentials.client_id, "dcr");
        assert_eq!(credentials.auth_method, TokenAuthMethod::ClientSecretPost);
        assert!(credentials.registered);
        let defaulted = registered_credentials(br#"{"client_id": "dcr"}"#, &any).unwrap();
        assert_eq!(defaulted.auth_method, TokenAuthMethod::None);
        let unknown = br#"{"client_id": "dcr", "token_endpoint_auth_method": "tls_client_auth"}"#;
        assert!(registered_credentials(unknown, &any).is_err());
        assert!(registered_credentials(b"not json", &any).is_err());
    }
}
