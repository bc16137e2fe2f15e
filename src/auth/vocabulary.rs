//! What every step of authorization speaks of, and nothing that does I/O: what discovery found,
//! a token endpoint's answer and how it is kept in credentials, when credentials need a refresh,
//! the key they are stored under, the scopes asked for. Every other file of `auth/` may use it;
//! it uses none of them but the plain ones (`challenge`, `discovery`'s documents, `store`'s
//! types), so the files of the flow do not import each other for it.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::{challenge::split_scopes, discovery::AuthorizationServerMetadata, Credentials};

/// Refresh a token at most this long before it expires (and at most half its lifetime before).
const REFRESH_MARGIN_SECS: u64 = 30;

/// What discovery found.
pub(super) struct Found {
    pub issuer: String,
    /// The protected resource metadata's `resource`, byte for byte.
    pub resource: String,
    pub scopes_supported: Option<Vec<String>>,
    pub metadata: AuthorizationServerMetadata,
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

/// Whether `credentials` are due for a refresh at `now` (and can have one): within the margin
/// before expiry, which is 30 s but at most half the token's lifetime, so a short-lived token is
/// refreshed once, not on every request (each refresh rotates the refresh token).
pub(super) fn needs_refresh(credentials: &Credentials, now: u64) -> bool {
    let Some(expires_at) = credentials.expires_at else {
        return false;
    };
    let lifetime = credentials
        .issued_at
        .map_or(u64::MAX, |issued| expires_at.saturating_sub(issued));
    let margin = REFRESH_MARGIN_SECS.min(lifetime / 2);
    credentials.refresh_token.is_some() && expires_at <= now.saturating_add(margin)
}

/// The challenge's scopes, else the resource's `scopes_supported`, else none (or the scopes a
/// step-up asks for); `offline_access` when the authorization server lists it.
pub(super) fn choose_scopes(
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

/// Keeps a token answer in `credentials`; the scopes held are the granted ones and those asked.
pub(super) fn apply_answer(
    credentials: &mut Credentials,
    answer: TokenAnswer,
    requested: Vec<String>,
    now: u64,
) {
    credentials.access_token = Some(answer.access_token);
    credentials.token_type = answer.token_type;
    credentials.expires_at = answer.expires_in.map(|secs| now.saturating_add(secs));
    credentials.issued_at = Some(now);
    if let Some(refresh) = answer.refresh_token {
        credentials.refresh_token = Some(refresh);
    }
    let mut scopes = split_scopes(answer.scope.as_deref());
    for scope in requested {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    credentials.scopes = scopes;
}

/// Where the credentials for `issuer` and `resource` are kept in the store.
pub(super) fn store_key(issuer: &str, resource: &str) -> String {
    format!("{issuer} {resource}")
}

/// Whether the token is a DPoP-bound one (RFC 9449 `token_type`).
pub(super) fn is_dpop(credentials: &Credentials) -> bool {
    credentials
        .token_type
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case("dpop"))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(extra: serde_json::Value) -> AuthorizationServerMetadata {
        let mut document = serde_json::json!({"issuer": "https://as.example.com"});
        if let (Some(into), Some(extra)) = (document.as_object_mut(), extra.as_object()) {
            into.extend(extra.clone());
        }
        serde_json::from_value(document).unwrap()
    }

    #[test]
    fn only_a_refreshable_token_near_its_expiry_is_refreshed() {
        let now = 1_000_000;
        let credentials = |expires_at, refresh: bool| Credentials {
            expires_at,
            refresh_token: refresh.then(|| "r".to_owned()),
            ..Credentials::default()
        };
        assert!(
            needs_refresh(&credentials(Some(now - 1), true), now),
            "expired"
        );
        assert!(needs_refresh(
            &credentials(Some(now + REFRESH_MARGIN_SECS), true),
            now
        ));
        assert!(!needs_refresh(
            &credentials(Some(now + REFRESH_MARGIN_SECS + 1), true),
            now
        ));
        assert!(
            !needs_refresh(&credentials(None, true), now),
            "no expiry known"
        );
        // Issue 20: a 10 s token was refreshed on every request (30 s margin), rotating the
        // refresh token each time; its margin is half its lifetime.
        let short = |issued_at: u64| Credentials {
            issued_at: Some(issued_at),
            ..credentials(Some(issued_at + 10), true)
        };
        assert!(!needs_refresh(&short(now), now), "just granted");
        assert!(!needs_refresh(&short(now), now + 4));
        assert!(needs_refresh(&short(now), now + 5), "half its life gone");
        let long = Credentials {
            issued_at: Some(now),
            ..credentials(Some(now + 3600), true)
        };
        assert!(!needs_refresh(&long, now + 3569));
        assert!(needs_refresh(&long, now + 3570), "30 s before");
        assert!(
            !needs_refresh(&credentials(Some(now - 1), false), now),
            "nothing to refresh with"
        );
    }

    #[test]
    fn scopes_come_from_the_challenge_else_the_resource_with_offline_access_if_listed() {
        let found = |listed: &[&str]| Found {
            issuer: "https://as.example.com".into(),
            resource: "https://mcp.example.com".into(),
            scopes_supported: Some(vec!["files".into()]),
            metadata: metadata(serde_json::json!({"scopes_supported": listed})),
        };
        let plain = found(&["files"]);
        assert_eq!(choose_scopes(&plain, vec!["mail".into()], None), ["mail"]);
        assert_eq!(choose_scopes(&plain, Vec::new(), None), ["files"]);
        let offline = found(&["files", "offline_access"]);
        assert_eq!(
            choose_scopes(&offline, Vec::new(), None),
            ["files", "offline_access"]
        );
        assert_eq!(
            choose_scopes(&offline, vec!["a".into()], Some(vec!["b".into()])),
            ["b", "offline_access"],
            "a step-up's scopes win"
        );
    }
}
