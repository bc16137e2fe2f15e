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
