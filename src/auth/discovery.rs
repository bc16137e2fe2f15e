//! The MCP discovery rules: where the protected resource metadata (RFC 9728) and the
//! authorization server metadata (RFC 8414, OpenID Connect Discovery) are looked for, in the
//! spec's order, and what they must say to be trusted.

use serde::Deserialize;
use url::Url;

use super::{fetch::Fetcher, AuthErrorKind};
use crate::error::Error;

/// RFC 9728 protected resource metadata (the fields MCP reads).
#[derive(Debug, Clone, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// Kept byte for byte: it is sent back as the RFC 8707 `resource` parameter.
    pub resource: String,
    /// Issuers of this resource's authorization servers; the first is used. Empty if absent.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The scopes this resource accepts; asked for when the challenge names none.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 authorization server metadata (the fields this client uses). An endpoint that is not
/// a URL is left out (as if the server did not offer it).
#[derive(Debug, Clone, Deserialize)]
pub struct AuthorizationServerMetadata {
    /// The authorization server's identifier; must equal the issuer URL it was fetched for.
    pub issuer: String,
    /// Where the user is sent to authorize.
    #[serde(default, deserialize_with = "url_or_none")]
    pub authorization_endpoint: Option<Url>,
    /// Where codes, refresh tokens and other grants are exchanged for tokens.
    #[serde(default, deserialize_with = "url_or_none")]
    pub token_endpoint: Option<Url>,
    /// RFC 7591 dynamic client registration endpoint; `None` if registration is not offered.
    #[serde(default, deserialize_with = "url_or_none")]
    pub registration_endpoint: Option<Url>,
    /// The scopes the server lists (checked for `offline_access`).
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// PKCE methods; must include `S256` for the authorization code flow.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// How clients may authenticate to the token endpoint (`none`, `client_secret_basic`, …).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// `Some(true)` if the server accepts a Client ID Metadata Document URL as client id.
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    /// `Some(true)` if authorization responses carry `iss` (RFC 9207); it is then required.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// The grant types the server offers (`authorization_code`, `client_credentials`, …).
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    /// DPoP (RFC 9449) proof algorithms; DPoP is used when `ES256` is listed.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

/// An absolute URL, else `None` (RFC 8414 §3.2: a client ignores what it cannot use); any other
/// JSON type is still an error.
fn url_or_none<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Url>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    Ok(text.and_then(|text| match Url::parse(&text) {
        Ok(url) => Some(url),
        Err(e) => {
            tracing::debug!(url = %text.escape_debug(), error = %e, "ignoring an endpoint that is not a URL");
            None
        }
    }))
}

impl AuthorizationServerMetadata {
    /// Whether `scope` is in `scopes_supported` (false when that is absent).
    pub fn supports_scope(&self, scope: &str) -> bool {
        self.scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x == scope))
    }
}

/// Where to look for the protected resource metadata of `server`: the challenge's
/// `resource_metadata` if given (on another origin only over https: a server must not send the
/// client to some loopback port of the user's machine), else the path-based well-known URI,
/// then the root one.
pub fn resource_metadata_urls(server: &Url, hint: Option<&str>) -> Vec<String> {
    let mut urls = Vec::new();
    let origin = origin_of(server);
    match hint.map(|hint| (hint, Url::parse(hint))) {
        Some((hint, Ok(url))) if origin_of(&url) == origin || url.scheme() == "https" => {
            urls.push(hint.to_owned());
        }
        Some((hint, _)) => tracing::warn!(
            hint = %crate::visible::Visible(hint),
            "resource_metadata on another origin and not https: ignored"
        ),
        None => {}
    }
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        urls.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls.dedup();
    urls
}

/// Where to look for an issuer's metadata, in the spec's order: for an issuer with a path, RFC
/// 8414 path insertion, OpenID Connect path insertion, OpenID Connect path appending; without a
/// path, the two root forms.
pub fn authorization_server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = origin_of(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// `scheme://host[:port]`, without a trailing slash.
fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Whether the metadata's `resource` names this server: the same origin, and a path that is a
/// prefix of the server's (a root `resource` covers every path of its origin).
pub fn resource_matches(server: &Url, resource: &str) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server.origin() || resource.fragment().is_some() {
        return false;
    }
    let prefix = resource.path().trim_end_matches('/');
    let path = server.path();
    path == prefix
        || path.trim_end_matches('/') == prefix
        || path.starts_with(&format!("{prefix}/"))
}

/// Endpoints must be `https`, except on loopback (a local server or a test).
pub fn check_secure(what: &str, url: &str) -> Result<Url, Error> {
    let parsed = Url::parse(url)
        .map_err(|e| super::failure(AuthErrorKind::Discovery, format!("{what} {url:?}: {e}")))?;
    require_secure(what, &parsed)?;
    Ok(parsed)
}

/// [`check_secure`] for a URL already parsed.
pub fn require_secure(what: &str, parsed: &Url) -> Result<(), Error> {
    let loopback = match parsed.host() {
        Some(url::Host::Domain(host)) => host.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(super::failure(
            AuthErrorKind::InsecureEndpoint,
            format!("{what} {parsed} is neither https nor loopback"),
        )),
    }
}

/// Fetches the protected resource metadata and checks that it is about `server`.
pub async fn protected_resource(
    fetcher: &Fetcher,
    server: &Url,
    hint: Option<&str>,
) -> Result<ProtectedResourceMetadata, Error> {
    for url in resource_metadata_urls(server, hint) {
        let url = check_secure("protected resource metadata", &url)?;
        let Some(metadata) = fetcher.get_json::<ProtectedResourceMetadata>(url).await? else {
            continue;
        };
        if !resource_matches(server, &metadata.resource) {
            return Err(super::failure(
                AuthErrorKind::ResourceMismatch,
                format!(
                    "the protected resource metadata is for {:?}, not {server}",
                    metadata.resource
                ),
            ));
        }
        return Ok(metadata);
    }
    Err(super::failure(
        AuthErrorKind::Discovery,
        format!("no protected resource metadata found for {server}"),
    ))
}

/// Fetches an issuer's metadata; its `issuer` must be exactly the issuer asked about.
pub async fn authorization_server(
    fetcher: &Fetcher,
    issuer: &str,
) -> Result<AuthorizationServerMetadata, Error> {
    let parsed = check_secure("authorization server", issuer)?;
    for url in authorization_server_metadata_urls(&parsed) {
        let url = check_secure("authorization server metadata", &url)?;
        let Some(metadata) = fetcher.get_json::<AuthorizationServerMetadata>(url).await? else {
            continue;
        };
        if metadata.issuer != issuer {
            return Err(super::failure(
                AuthErrorKind::IssuerMismatch,
                format!(
                    "the metadata of {issuer} names the issuer {:?}",
                    metadata.issuer
                ),
            ));
        }
        return Ok(metadata);
    }
    Err(super::failure(
        AuthErrorKind::Discovery,
        format!("no authorization server metadata found for {issuer}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_uris_come_in_the_spec_order() {
        let server = Url::parse("http://localhost:3000/mcp").unwrap();
        assert_eq!(
            resource_metadata_urls(&server, None),
            [
                "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
                "http://localhost:3000/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            resource_metadata_urls(&server, Some("http://localhost:3000/custom.json"))[0],
            "http://localhost:3000/custom.json"
        );
        // Issue 20: a hint could name any loopback URL; on another origin it must be https.
        let elsewhere = resource_metadata_urls(&server, Some("http://127.0.0.1:6379/x"));
        assert!(
            !elsewhere.iter().any(|url| url.contains("6379")),
            "{elsewhere:?}"
        );
        assert_eq!(
            resource_metadata_urls(&server, Some("https://meta.example.com/r.json"))[0],
            "https://meta.example.com/r.json"
        );
        let issuer = Url::parse("http://localhost:4000/tenant1").unwrap();
        assert_eq!(
            authorization_server_metadata_urls(&issuer),
            [
                "http://localhost:4000/.well-known/oauth-authorization-server/tenant1",
                "http://localhost:4000/.well-known/openid-configuration/tenant1",
                "http://localhost:4000/tenant1/.well-known/openid-configuration"
            ]
        );
        let root = Url::parse("http://localhost:4000").unwrap();
        assert_eq!(
            authorization_server_metadata_urls(&root),
            [
                "http://localhost:4000/.well-known/oauth-authorization-server",
                "http://localhost:4000/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn the_resource_must_be_this_server_or_a_prefix_of_it() {
        let server = Url::parse("http://localhost:3000/mcp").unwrap();
        assert!(resource_matches(&server, "http://localhost:3000/mcp"));
        assert!(resource_matches(&server, "http://localhost:3000"));
        assert!(resource_matches(&server, "http://localhost:3000/"));
        assert!(!resource_matches(&server, "https://evil.example.com/mcp"));
        assert!(!resource_matches(&server, "http://localhost:3001/mcp"));
        assert!(!resource_matches(&server, "http://localhost:3000/mc"));
        assert!(!resource_matches(
            &server,
            "http://localhost:3000/mcp/deeper"
        ));
        assert!(!resource_matches(&server, "not a url"));
    }

    #[test]
    fn an_endpoint_that_is_not_a_url_is_left_out() {
        let metadata: AuthorizationServerMetadata = serde_json::from_str(
            r#"{"issuer": "https://as.example.com", "token_endpoint": "not a url",
                "authorization_endpoint": "https://as.example.com/authorize"}"#,
        )
        .unwrap();
        assert_eq!(metadata.token_endpoint, None);
        assert_eq!(
            metadata.authorization_endpoint.as_ref().map(Url::as_str),
            Some("https://as.example.com/authorize")
        );
        assert_eq!(metadata.registration_endpoint, None);
        let wrong_type = r#"{"issuer": "https://as.example.com", "token_endpoint": 7}"#;
        assert!(serde_json::from_str::<AuthorizationServerMetadata>(wrong_type).is_err());
    }

    #[test]
    fn endpoints_are_https_or_loopback() {
        assert!(check_secure("x", "https://as.example.com/token").is_ok());
        assert!(check_secure("x", "http://localhost:8080/token").is_ok());
        assert!(check_secure("x", "http://127.0.0.1/token").is_ok());
        assert!(check_secure("x", "http://[::1]/token").is_ok());
        assert!(check_secure("x", "http://as.example.com/token").is_err());
        assert!(check_secure("x", "ftp://localhost/token").is_err());
    }
}
