//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9728 §5.1): the scheme and
//! its parameters, in any order, quoted or not.

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
    /// Parses the first challenge of a `WWW-Authenticate` value. Never fails: what cannot be read
    /// is left out.
    pub fn parse(header: &str) -> Self {
        let header = header.trim();
        let (scheme, mut rest) = match header.find(char::is_whitespace) {
            Some(at) => (&header[..at], header[at..].trim_start()),
            None => (header, ""),
        };
        let mut challenge = Challenge {
            scheme: scheme.to_owned(),
            ..Challenge::default()
        };
        while !rest.is_empty() {
            let Some(eq) = rest.find('=') else { break };
            let name = rest[..eq]
                .trim()
                .trim_start_matches(',')
                .trim()
                .to_ascii_lowercase();
            rest = rest[eq + 1..].trim_start();
            let value;
            if let Some(quoted) = rest.strip_prefix('"') {
                let mut out = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                out.push(escaped);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => out.push(c),
                    }
                }
                value = out;
                rest = quoted.get(end..).unwrap_or("");
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                value = rest[..end].trim().to_owned();
                rest = &rest[end..];
            }
            rest = rest.trim_start().trim_start_matches(',').trim_start();
            match name.as_str() {
                "resource_metadata" => challenge.resource_metadata = Some(value),
                "scope" => challenge.scope = Some(value),
                "error" => challenge.error = Some(value),
                "error_description" => challenge.error_description = Some(value),
                _ => {}
            }
        }
        challenge
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
        let c = Challenge::parse("Bearer realm=example, error=invalid_token");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        for garbage in [
            "",
            "Bearer",
            "Bearer =",
            "Bearer a=\"unterminated",
            "Bearer ,,,",
        ] {
            let _ = Challenge::parse(garbage);
        }
    }
}
