//! [`ServersError`]: what the manager refuses, beside the errors of the calls it routes.

use std::time::Duration;

use crate::error::Error;

/// Why [`Servers`](super::Servers) could not do what was asked: its own refusals (no such
/// server, stopped, given up, no or several tools by a name), or the error of the server's
/// connection or of the routed call itself ([`ServersError::Client`], the error a direct call
/// gives). `?` turns an [`Error`] into one.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ServersError {
    /// No server by this name.
    #[error("no MCP server named {0:?}")]
    UnknownServer(String),

    /// The server was stopped ([`Servers::stop`](super::Servers::stop)); it is not started for
    /// a call until [`Servers::restart`](super::Servers::restart) or
    /// [`Servers::start_all`](super::Servers::start_all).
    #[error("MCP server {0:?} is stopped")]
    Stopped(String),

    /// The server is disabled in its configuration; it is never started.
    #[error("MCP server {0:?} is disabled")]
    Disabled(String),

    /// The server failed (or its connection ended) `restarts` times within `window`;
    /// supervision stopped restarting it until [`Servers::restart`](super::Servers::restart).
    #[error("MCP server {server:?} failed {restarts} times within {window:?}; not restarted again (last error: {last})")]
    GaveUp {
        /// The server's name.
        server: String,
        /// How many starts failed or ended within the window.
        restarts: u32,
        /// The window of the restart cap.
        window: Duration,
        /// The last failure.
        last: Error,
    },

    /// Several servers offer a tool by this name; call it by one of its qualified names
    /// (`server/tool`).
    #[error("tool {name:?} is offered by several servers; call one of {candidates:?}")]
    AmbiguousTool {
        /// The name asked for.
        name: String,
        /// Its qualified names, one per server offering it.
        candidates: Vec<String>,
    },

    /// No ready server offers a tool by this name.
    #[error("no MCP server offers a tool named {0:?}")]
    UnknownTool(String),

    /// The server's connection, or the routed request, failed: the error a direct call on its
    /// [`Client`](crate::Client) gives.
    #[error(transparent)]
    Client(#[from] Error),
}

impl ServersError {
    /// The connection's or the call's own error, when that is what this is.
    pub fn client_error(&self) -> Option<&Error> {
        match self {
            ServersError::Client(error) => Some(error),
            _ => None,
        }
    }

    /// Whether the routed call was cancelled by its caller ([`Error::Cancelled`]).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ServersError::Client(error) if error.is_cancelled())
    }
}
