//! The one error type every caller sees.

use std::{fmt, io, process::ExitStatus, sync::Arc, time::Duration};

use serde_json::Value;

use crate::{
    protocol::{elicitation::UrlElicitation, tools::ContentError},
    visible::Visible,
};

/// Why a request did not produce a result.
///
/// A caller can always tell a local cancel ([`Error::Cancelled`]) from a local timeout
/// ([`Error::Timeout`]), from an answer of the server ([`Error::Server`]), from the end of the
/// connection ([`Error::Closed`]), from a peer that broke the protocol ([`Error::Protocol`]),
/// from a mistake of the calling code ([`Error::Misuse`]). The manager's own refusals are
/// [`ServersError`](crate::servers::ServersError), which wraps this type.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request was cancelled by the caller (token, explicit `Cancel`, or a dropped future).
    #[error("request cancelled{}", ReasonSuffix(reason.as_deref()))]
    Cancelled {
        /// The reason given to the first cancel, if any.
        reason: Option<String>,
    },

    /// The request's timeout fired; the request was cancelled on the wire like an explicit cancel.
    #[error("request timed out after {after:?}")]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },

    /// The server answered with a JSON-RPC error.
    #[error("server error {code}: {}", Visible(message))]
    Server {
        /// The JSON-RPC error code.
        code: i64,
        /// The server's error message.
        message: String,
        /// The error's `data` member, if the server sent one.
        data: Option<Value>,
    },

    /// The connection ended (the process exited, its output closed, or the client closed it).
    #[error("connection closed: {reason}")]
    Closed {
        /// Why the connection ended.
        reason: CloseReason,
    },

    /// The transport could not be opened or failed at the I/O level.
    #[error("transport error: {}: {}", Visible(context), Visible(&source.to_string()))]
    Transport {
        /// What failed, in words (e.g. spawning the program, or the HTTP method and URL).
        context: String,
        /// The underlying I/O error.
        #[source]
        source: Arc<io::Error>,
    },

    /// The server answered a request's HTTP POST with an error status and no JSON-RPC error.
    #[error("HTTP {status}: {}", Visible(body))]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (at most 1 KiB), for the log.
        body: String,
        /// The server's `Retry-After` (in seconds; the date form is not read), typically with
        /// `429` or `503`: when trying again may succeed. The request was not sent again.
        retry_after: Option<std::time::Duration>,
    },

    /// The HTTP server ended the session (`404` to its `Mcp-Session-Id`) while this request was
    /// at it, and the transport renewed the session (the default; not with
    /// `HttpTransport::no_session_renewal`):
    /// the request was lost with the old session and was **not** sent again (it may have had
    /// effects there). The connection goes on with a new session; sending the request again is
    /// the caller's decision.
    #[error("the HTTP session expired with this request at the server; it was not sent again")]
    SessionLost,

    /// An all-pages request met more pages than its cap.
    #[error("the server returned more than {limit} pages")]
    TooManyPages {
        /// The page cap that was reached.
        limit: usize,
    },

    /// The peer broke the protocol (bad handshake, unsupported version, malformed result).
    #[error("protocol error: {}", Visible(.0))]
    Protocol(String),

    /// A local mistake, not the peer's: arguments that are not a JSON object, params that do
    /// not serialize, a future polled after it completed, one of our own handlers failing.
    #[error("misuse: {0}")]
    Misuse(String),

    /// A tool's structured result breaks the tool's `outputSchema` (or is missing though the
    /// schema asks for one). `path` is the JSON pointer of the offending value in the structured
    /// content; `problem` the rule it breaks. Only with the `output-schema` feature (on by
    /// default).
    #[error(
        "tool {tool:?} returned structured content that breaks its outputSchema at {path:?}: {}",
        Visible(problem)
    )]
    InvalidOutput {
        /// The tool's name.
        tool: String,
        /// JSON pointer of the offending value; empty when the structured content is missing.
        path: String,
        /// The schema rule broken, in words.
        problem: String,
    },

    /// `-32042`: the server needs the user to complete these URL-mode elicitations (send them
    /// to each `url`) before the request can succeed.
    #[error("the user must first visit {} URL(s): {}", elicitations.len(), Visible(message))]
    UrlElicitationRequired {
        /// The server's error message.
        message: String,
        /// The elicitations.
        elicitations: Vec<UrlElicitation>,
    },

    /// The server wants authorization and it could not be obtained (or it was refused). The
    /// message says what the server or the authorization server said; it never holds a token,
    /// a secret or a code.
    #[error("unauthorized ({kind:?}): {}", Visible(message))]
    Unauthorized {
        /// Which step of authorization failed.
        kind: AuthErrorKind,
        /// What went wrong, for the log (never holds a token, secret or code).
        message: String,
    },
}

/// Why authorization failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthErrorKind {
    /// The server answered `401` and no authorization is configured for it.
    NotConfigured,
    /// No protected resource or authorization server metadata could be found or read.
    Discovery,
    /// The protected resource metadata names another resource than this server.
    ResourceMismatch,
    /// The authorization server metadata names another issuer than the one asked.
    IssuerMismatch,
    /// A metadata or OAuth endpoint is neither `https` nor loopback.
    InsecureEndpoint,
    /// The authorization server does not support PKCE with S256.
    PkceUnsupported,
    /// No way to identify this client (no pre-registration, no CIMD, no registration endpoint).
    NoClientIdentity,
    /// Dynamic client registration failed.
    Registration,
    /// The authorization response was refused, or carried an error.
    Denied,
    /// The authorization response's `state` or `iss` (RFC 9207) was wrong or missing.
    ResponseMismatch,
    /// The token endpoint refused the grant.
    Token,
    /// The server keeps asking for scopes that re-authorizing does not bring.
    InsufficientScope,
    /// The flow needs a user (a web service must run `OAuth::begin`/`complete`).
    InteractionRequired,
    /// The sign-in in the browser did not finish within its bound
    /// ([`OAuthConfig::sign_in_timeout`](crate::auth::OAuthConfig::sign_in_timeout)).
    SignInTimedOut,
    /// The credential store could not be read or written (its message says which and why; a
    /// corrupted file is reported, never taken for an empty one).
    Store,
    /// Another process held the refresh lease and no new token appeared within the wait's
    /// bound.
    RefreshWaitTimedOut,
    /// An authorization server, its metadata or its registration did not answer (its body
    /// included) within [`OAuthConfig::request_timeout`](crate::auth::OAuthConfig::request_timeout).
    TimedOut,
}

impl From<ContentError> for Error {
    fn from(error: ContentError) -> Self {
        Error::Protocol(error.to_string())
    }
}

impl Error {
    pub(crate) fn cancelled(reason: Option<String>) -> Self {
        Error::Cancelled { reason }
    }

    pub(crate) fn transport(context: impl Into<String>, source: io::Error) -> Self {
        Error::Transport {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// True for [`Error::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled { .. })
    }

    /// True for [`Error::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Closed { .. })
    }

    /// The exit status of the server process, when the connection ended because it exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        match self {
            Error::Closed {
                reason: CloseReason::ProcessExited { status },
            } => Some(*status),
            _ => None,
        }
    }
}

/// Why a connection is closed. Carried by [`Error::Closed`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server process exited.
    ProcessExited {
        /// The process's exit status.
        status: ExitStatus,
    },
    /// The server closed its output stream (stdout) while still running.
    EndOfStream,
    /// The server sent a frame larger than the configured cap.
    FrameTooLarge {
        /// The frame size cap, in bytes.
        limit: usize,
    },
    /// Reading from the server failed.
    ReadFailed(Arc<io::Error>),
    /// Writing to the server failed.
    WriteFailed(Arc<io::Error>),
    /// The client closed the connection (explicit close, failed handshake, or cancelled connect).
    ClosedByClient,
    /// The connection actor has stopped (every handle was dropped, or its arbiter ended).
    ActorStopped,
    /// The HTTP server ended our session (404 to a request carrying its `Mcp-Session-Id`).
    SessionExpired,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::ProcessExited { status } => write!(f, "server process exited ({status})"),
            CloseReason::EndOfStream => f.write_str("server closed its output"),
            CloseReason::FrameTooLarge { limit } => {
                write!(
                    f,
                    "server sent a frame larger than {limit} bytes (the cap is the transport's \
                     max_frame_bytes; the CLI's --max-message-size)"
                )
            }
            CloseReason::ReadFailed(e) => write!(f, "read from server failed: {e}"),
            CloseReason::WriteFailed(e) => write!(f, "write to server failed: {e}"),
            CloseReason::ClosedByClient => f.write_str("closed by the client"),
            CloseReason::ActorStopped => f.write_str("connection actor stopped"),
            CloseReason::SessionExpired => f.write_str("the server ended the HTTP session"),
        }
    }
}

struct ReasonSuffix<'a>(Option<&'a str>);

impl fmt::Display for ReasonSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(reason) => write!(f, ": {}", Visible(reason)),
            None => Ok(()),
        }
    }
}

impl Error {
    /// Its `error.type` in the OpenTelemetry conventions for MCP: the JSON-RPC code of the
    /// server's error, `cancelled`, `timeout`, else the kind of error.
    pub(crate) fn error_type(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            Error::Server { code, .. } => return code.to_string().into(),
            Error::Cancelled { .. } => "cancelled",
            Error::Timeout { .. } => "timeout",
            Error::Closed { .. } => "closed",
            Error::Transport { .. } => "transport",
            Error::Http { .. } => "http",
            Error::SessionLost => "session_lost",
            Error::Protocol(_) => "protocol",
            Error::Misuse(_) => "misuse",
            Error::InvalidOutput { .. } => "invalid_output",
            Error::Unauthorized { .. } => "unauthorized",
            Error::UrlElicitationRequired { .. } => "url_elicitation_required",
            Error::TooManyPages { .. } => "too_many_pages",
        })
    }
}

#[cfg(test)]
mod display_tests {
    use super::*;

    /// Issue 20: a server's message with a line break and ANSI escapes printed raw erased the
    /// real error line and printed a fake success.
    #[test]
    fn server_supplied_text_is_shown_with_its_controls_written_out() {
        let hostile = "denied\n\u{1b}[1A\u{1b}[2K\u{1b}[32mok: signed in".to_owned();
        let errors = [
            Error::Server {
                code: -1,
                message: hostile.clone(),
                data: None,
            },
            Error::Http {
                status: 500,
                body: hostile.clone(),
                retry_after: None,
            },
            Error::Protocol(hostile.clone()),
            Error::Unauthorized {
                kind: AuthErrorKind::Denied,
                message: hostile.clone(),
            },
            Error::cancelled(Some(hostile.clone())),
        ];
        for error in errors {
            let shown = error.to_string();
            assert!(!shown.contains(['\n', '\u{1b}']), "{shown:?}");
            assert!(shown.contains("denied\\n\\u{1b}[1A"), "{shown:?}");
            assert!(
                format!("{error:?}").contains("\\u{1b}"),
                "Debug keeps it exact"
            );
        }
    }
}
