//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9449 §7.1, RFC 9728 §5.1).
//! A response may carry several challenges, in one header value and across several: each is
//! read (the grammar is the `http-auth` crate's), then the OAuth ones (`Bearer`, `DPoP`) are
//! merged into the one [`Challenge`] the flow acts on.

use http::{header::WWW_AUTHENTICATE, HeaderMap, HeaderValue};

/// What a `401`/`403` challenge told us.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `Bearer` or `DPoP` (as sent).
    pub scheme: String,
    /// RFC 9728: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// The scopes the resource asks for (space-separated).
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
    /// The server's human-readable explanation of `error`, if given.
    pub error_description: Option<String>,
}

impl Challenge {
    /// What the flow reads from one `WWW-Authenticate` value: its challenges, merged as
    /// [`from_values`](Self::from_values) does. Never fails: what cannot be read is left out.
    pub fn parse(header: &str) -> Self {
        Self::merge(Self::list(header))
    }

    /// Every challenge of one `WWW-Authenticate` value, in order. The grammar is strict (RFC
    /// 9110): at the first syntax error the rest of the value is left out, the challenges
    /// before it are kept.
    pub fn list(header: &str) -> Vec<Challenge> {
        http_auth::parser::ChallengeParser::new(header)
            .map_while(Result::ok)
            .map(|parsed| Self::from_parsed(&parsed))
            .collect()
    }

    /// What the flow reads from all the `WWW-Authenticate` values of a response.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        Self::from_values(headers.get_all(WWW_AUTHENTICATE))
    }

    /// The challenges of every value (a value that is not text is skipped), merged: the scheme
    /// of the first OAuth challenge (`Bearer` or `DPoP`), and each parameter from the first
    /// OAuth challenge carrying it (`error_description` from the one with the `error`, else the
    /// first's). Without an OAuth challenge, the first challenge as it is.
    pub fn from_values<'a>(values: impl IntoIterator<Item = &'a HeaderValue>) -> Self {
        Self::merge(
            values
                .into_iter()
                .filter_map(|value| value.to_str().ok())
                .flat_map(Self::list),
        )
    }

    fn from_parsed(parsed: &http_auth::ChallengeRef<'_>) -> Self {
        let mut challenge = Challenge {
            scheme: parsed.scheme.to_owned(),
            ..Challenge::default()
        };
        for (name, value) in &parsed.params {
            let slot = match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => &mut challenge.resource_metadata,
                "scope" => &mut challenge.scope,
                "error" => &mut challenge.error,
                "error_description" => &mut challenge.error_description,
                _ => continue,
            };
            slot.get_or_insert_with(|| value.to_unescaped());
        }
        challenge
    }

    fn merge(challenges: impl IntoIterator<Item = Challenge>) -> Self {
        let mut first = None;
        let mut merged: Option<Challenge> = None;
        for challenge in challenges {
            if !challenge.is_oauth() {
                first.get_or_insert(challenge);
                continue;
            }
            let Some(into) = merged.as_mut() else {
                merged = Some(challenge);
                continue;
            };
            if into.resource_metadata.is_none() {
                into.resource_metadata = challenge.resource_metadata;
            }
            if into.scope.is_none() {
                into.scope = challenge.scope;
            }
            // A description explains its own challenge's error, never another's.
            if into.error.is_none() && challenge.error.is_some() {
                into.error = challenge.error;
                into.error_description = challenge.error_description;
            }
        }
        merged.or(first).unwrap_or_default()
    }

    fn is_oauth(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("bearer") || self.scheme.eq_ignore_ascii_case("dpop")
    }

    /// `403` with `error="insufficient_scope"`: the token lacks scopes.
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The challenged scopes, one by one.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref())
    }
}

pub(crate) fn split_scopes(scopes: Option<&str>) -> Vec<String> {
    scopes
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_in_any_order_quoted_or_not() {
        let c = Challenge::parse(
            r#"Bearer error="invalid_token", error_description="Missing \"Authorization\" header", scope="mcp:basic mcp:read", resource_metadata="http://localhost:3000/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.scheme, "Bearer");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            c.error_description.as_deref(),
            Some(r#"Missing "Authorization" header"#)
        );
        assert_eq!(c.scopes(), ["mcp:basic", "mcp:read"]);
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:3000/.well-known/oauth-protected-resource/mcp")
        );
        let c = Challenge::parse(
            r#"Bearer scope="mcp:write", resource_metadata="x", error="insufficient_scope""#,
        );
        assert!(c.is_insufficient_scope());
        let c = Challenge::parse("DPoP resource_metadata=\"m\"");
        assert_eq!(c.scheme, "DPoP");
        assert_eq!(c.resource_metadata.as_deref(), Some("m"));
        assert_eq!(Challenge::parse("Bearer ").scheme, "Bearer");
        let c = Challenge::parse("Bearer realm=example, ERROR=invalid_token");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
    }

    #[test]
    fn what_does_not_parse_is_left_out() {
        for garbage in ["", "Bearer =", "Bearer a=\"unterminated", ",,,", "\"x\""] {
            assert_eq!(Challenge::parse(garbage).resource_metadata, None);
        }
        let c = Challenge::parse(r#"Bearer scope="a", Basic realm="r" junk junk"#);
        assert_eq!(
            c.scope.as_deref(),
            Some("a"),
            "the challenge before the error"
        );
    }

    #[test]
    fn a_bearer_challenge_after_a_dpop_one_keeps_its_parameters() {
        let c = Challenge::parse(
            r#"DPoP algs="ES256", Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read""#,
        );
        assert_eq!(c.scheme, "DPoP");
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scopes(), ["files:read"]);
        assert_eq!(Challenge::list(r#"DPoP algs="ES256", Bearer"#).len(), 2);
    }

    #[test]
    fn every_header_value_is_read() {
        let mut headers = HeaderMap::new();
        headers.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Basic realm="legacy""#),
        );
        headers.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"DPoP error="use_dpop_nonce", algs="ES256""#),
        );
        headers.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(
                r#"Bearer resource_metadata="https://m", error="invalid_token", scope="a b""#,
            ),
        );
        let c = Challenge::from_headers(&headers);
        assert_eq!(c.scheme, "DPoP", "the first OAuth challenge");
        assert_eq!(c.error.as_deref(), Some("use_dpop_nonce"));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://m"));
        assert_eq!(c.scopes(), ["a", "b"]);
        assert_eq!(
            Challenge::from_headers(&HeaderMap::new()),
            Challenge::default()
        );
    }

    /// A challenge as a server may write it: each parameter quoted (with escapes) or bare.
    fn written(challenge: &Challenge, bare: bool) -> String {
        let params = [
            ("resource_metadata", &challenge.resource_metadata),
            ("scope", &challenge.scope),
            ("error", &challenge.error),
            ("error_description", &challenge.error_description),
        ];
        let params: Vec<String> = params
            .into_iter()
            .filter_map(|(name, value)| {
                let value = value.as_ref()?;
                let token = !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric());
                if bare && token {
                    return Some(format!("{name}={value}"));
                }
                let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
                Some(format!("{name}=\"{escaped}\""))
            })
            .collect();
        format!("{} {}", challenge.scheme, params.join(", "))
    }

    fn challenge() -> impl proptest::strategy::Strategy<Value = Challenge> {
        use proptest::prelude::*;
        let value = || proptest::option::of("[ -~]{0,12}");
        (
            prop::sample::select(vec!["Bearer", "DPoP", "bearer", "Basic", "Negotiate"]),
            value(),
            value(),
            value(),
            value(),
        )
            .prop_map(
                |(scheme, resource_metadata, scope, error, error_description)| Challenge {
                    scheme: scheme.to_owned(),
                    resource_metadata,
                    scope,
                    error,
                    error_description,
                },
            )
    }

    /// The model of the merge: the first OAuth challenge's scheme, each parameter from the first
    /// OAuth challenge carrying it, the description with its error; without one, the first
    /// challenge.
    fn merged(challenges: &[Challenge]) -> Challenge {
        let oauth: Vec<&Challenge> = challenges.iter().filter(|c| c.is_oauth()).collect();
        let Some(first) = oauth.first() else {
            return challenges.first().cloned().unwrap_or_default();
        };
        let find =
            |get: fn(&Challenge) -> &Option<String>| oauth.iter().find_map(|c| get(c).clone());
        let with_error = oauth.iter().find(|c| c.error.is_some()).unwrap_or(first);
        Challenge {
            scheme: first.scheme.clone(),
            resource_metadata: find(|c| &c.resource_metadata),
            scope: find(|c| &c.scope),
            error: with_error.error.clone(),
            error_description: with_error.error_description.clone(),
        }
    }

    proptest::proptest! {
        #[test]
        fn challenges_in_any_values_merge_as_the_model_says(
            challenges in proptest::collection::vec(challenge(), 1..5),
            cuts in proptest::collection::vec(proptest::bool::ANY, 5),
            bare: bool,
        ) {
            let mut values = vec![String::new()];
            for (i, challenge) in challenges.iter().enumerate() {
                let last = values.last_mut().unwrap();
                if !last.is_empty() {
                    last.push_str(", ");
                }
                last.push_str(&written(challenge, bare));
                if cuts[i] {
                    values.push(String::new());
                }
            }
            let mut headers = HeaderMap::new();
            for value in values.iter().filter(|v| !v.is_empty()) {
                headers.append(WWW_AUTHENTICATE, HeaderValue::from_str(value).unwrap());
            }
            proptest::prop_assert_eq!(Challenge::from_headers(&headers), merged(&challenges));
        }
    }

    #[test]
    fn without_an_oauth_challenge_the_first_one_is_reported() {
        let c = Challenge::parse(r#"Basic realm="r", Negotiate"#);
        assert_eq!(c.scheme, "Basic");
        assert!(!c.is_insufficient_scope());
    }
}
