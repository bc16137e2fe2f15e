//! Who a downstream session belongs to: the issuer and subject of the token that opened it, or
//! the one anonymous owner when the gateway takes no tokens. A request of another owner is
//! answered as if the session did not exist.

use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The gateway requires no token: every client is the same one.
    Anonymous,
    /// The token's `iss` and `sub`.
    User { issuer: Arc<str>, subject: Arc<str> },
}

impl Owner {
    /// A user of the gateway's issuer.
    pub fn user(issuer: &str, subject: &str) -> Self {
        Self::User {
            issuer: issuer.into(),
            subject: subject.into(),
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anonymous => f.write_str("anonymous"),
            Self::User { issuer, subject } => write!(f, "{subject} of {issuer}"),
        }
    }
}

/// Who sent a request, with what their token grants: what an access rule of the config looks
/// at (`actix_mcp::config::Access`). Each request brings its own: a token stepped up to more
/// scopes opens more at once, in the same session.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    pub owner: Owner,
    /// The scopes its token grants (its `scope` claim).
    pub scopes: Vec<String>,
    /// Its token's claims.
    pub claims: serde_json::Map<String, serde_json::Value>,
    /// The token itself: exchanged (RFC 8693) for the user's token at an upstream server that
    /// asks for that (`tokenExchange`), never sent anywhere else, never shown.
    pub token: Option<Bearer>,
}

/// A caller's access token, kept only to be exchanged.
#[derive(Clone, PartialEq)]
pub struct Bearer(pub Arc<str>);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Caller {
    /// A client of a gateway that takes no tokens: no scopes, no claims.
    pub fn anonymous() -> Arc<Self> {
        static ANONYMOUS: std::sync::LazyLock<Arc<Caller>> = std::sync::LazyLock::new(|| {
            Arc::new(Caller {
                owner: Owner::Anonymous,
                scopes: Vec::new(),
                claims: serde_json::Map::new(),
                token: None,
            })
        });
        ANONYMOUS.clone()
    }

    /// The caller as access rules read it.
    pub fn as_access(&self) -> actix_mcp::config::Caller<'_> {
        actix_mcp::config::Caller {
            scopes: &self.scopes,
            claims: &self.claims,
        }
    }
}
