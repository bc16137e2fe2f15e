//! What telemetry says of a client's session, shared by its calls and its session span: the peer
//! the transport reaches, the protocol version settled on, and the session id the server gave
//! (a renewed session's too). Read only when a span or a meter observes a call.

use std::sync::{Arc, Mutex, PoisonError};

use crate::transport::Peer;

pub(crate) struct SessionFacts {
    peer: Peer,
    known: Mutex<Known>,
    /// The session's span (`mcp.connection`): told each fact as it becomes known.
    span: tracing::Span,
}

/// The facts learned after the connection was made.
#[derive(Clone, Default)]
pub(crate) struct Known {
    pub protocol_version: Option<Arc<str>>,
    pub session_id: Option<Arc<str>>,
}

impl SessionFacts {
    pub fn new(peer: Peer, span: tracing::Span) -> Self {
        let facts = Self {
            peer,
            known: Mutex::default(),
            span,
        };
        let peer = &facts.peer;
        let span = &facts.span;
        if let Some(transport) = peer.network_transport {
            span.record("network.transport", transport);
        }
        if let Some(protocol) = peer.network_protocol {
            span.record("network.protocol.name", protocol);
        }
        if let Some(address) = &peer.server_address {
            span.record("server.address", address.as_str());
        }
        if let Some(port) = peer.server_port {
            span.record("server.port", port);
        }
        facts
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    pub fn known(&self) -> Known {
        self.lock().clone()
    }

    pub fn set_protocol_version(&self, version: &str) {
        self.lock().protocol_version = Some(version.into());
        self.span.record("mcp.protocol.version", version);
    }

    pub fn set_session_id(&self, id: &str) {
        self.lock().session_id = Some(id.into());
        self.span.record("mcp.session.id", id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
