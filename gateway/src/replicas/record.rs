//! What replicas keep of a 2025-11-25 session, and of a call they owe an upstream server, in
//! the shared store: typed, sealed before it is written (`seal.rs`).

use actix_mcp::{protocol::lifecycle::ClientCapabilities, LoggingLevel};
use serde::{Deserialize, Serialize};

use crate::owner::Owner;

/// A session, as any replica needs it to serve the session's next request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub owner: OwnerRecord,
    /// The version the client asked for at `initialize`.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
    /// What the client declared at `initialize`.
    pub capabilities: ClientCapabilities,
    /// The level it asked for logs at (`logging/setLevel`); none: no logs.
    #[serde(rename = "logLevel", default)]
    pub log_level: Option<LoggingLevel>,
    /// The resources it subscribed to (`resources/subscribe`), by URI.
    #[serde(default)]
    pub subscriptions: std::collections::BTreeSet<String>,
}

/// [`Owner`], as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OwnerRecord {
    Anonymous,
    User { issuer: String, subject: String },
}

impl From<&Owner> for OwnerRecord {
    fn from(owner: &Owner) -> Self {
        match owner {
            Owner::Anonymous => Self::Anonymous,
            Owner::User { issuer, subject } => Self::User {
                issuer: issuer.to_string(),
                subject: subject.to_string(),
            },
        }
    }
}

impl OwnerRecord {
    pub fn is(&self, owner: &Owner) -> bool {
        *self == Self::from(owner)
    }

    pub fn owner(&self) -> Owner {
        match self {
            Self::Anonymous => Owner::Anonymous,
            Self::User { issuer, subject } => Owner::user(issuer, subject),
        }
    }
}

/// A call a replica is about to write to an HTTP upstream server that keeps sessions: what a
/// survivor needs to cancel it there if the replica dies first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwedCall {
    /// The server's name in the config (every replica has the same config).
    pub server: String,
    /// The upstream session the call is made in.
    pub session: String,
    /// The version that session speaks (its `MCP-Protocol-Version`).
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
    /// The upstream request's id, as written on the wire.
    pub request: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_owner_and_keeps_what_the_client_declared() {
        let alice = Owner::user("https://issuer", "alice");
        let capabilities: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"elicitation": {"url": {}}, "x-new": 1}))
                .unwrap();
        let record = SessionRecord {
            owner: (&alice).into(),
            protocol_version: "2025-11-25".into(),
            capabilities,
            log_level: Some(LoggingLevel::Debug),
            subscriptions: ["file:///a".to_owned()].into(),
        };
        let text = serde_json::to_string(&record).unwrap();
        let back: SessionRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
        assert!(back.owner.is(&alice));
        assert!(!back.owner.is(&Owner::user("https://issuer", "bob")));
        assert!(!back.owner.is(&Owner::Anonymous));
        let declared = serde_json::to_value(&back.capabilities).unwrap();
        assert_eq!(
            declared["x-new"], 1,
            "a capability this crate does not know is kept"
        );
    }
}
