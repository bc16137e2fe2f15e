//! How a connection starts: the 2025-11-25 handshake, or the 2026-07-28 era's discovery, and
//! which one to try first.
//!
//! - Legacy (`initialize`, then `notifications/initialized`): the server answers with its version,
//!   capabilities and info.
//! - Modern (2026-07-28, stateless): nothing is set up. The actor is told the version and the
//!   `_meta` entries (version, capabilities, client info) it splices into every request; then
//!   `server/discover` asks what the server is. A `-32022` answer names the versions the server
//!   speaks: the client retries with one it shares.

use std::{sync::Arc, time::Duration};

use super::{connect::ConnectOptions, shared::Shared, Call};
use crate::{
    connection::{Notify, Request, RequestOptions, UseProtocol},
    error::{CloseReason, Error},
    protocol::{
        discover::{
            is_modern_error, request_meta, DiscoverResult, MODERN_PROTOCOL_VERSION,
            MODERN_PROTOCOL_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
        },
        jsonrpc::METHOD_NOT_FOUND,
        lifecycle::{
            InitializeParams, InitializeResult, LATEST_PROTOCOL_VERSION,
            SUPPORTED_PROTOCOL_VERSIONS,
        },
    },
};

/// How long `server/discover` may stay unanswered before a server is taken for a legacy one
/// ([`ProtocolEra::PreferModern`]): some legacy servers say nothing to a request before
/// `initialize`.
pub const DISCOVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which protocol era a connection speaks. Read from text (an `mcp.json`'s `era`) as `"auto"`,
/// `"prefer-modern"`, `"legacy"` or `"modern"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProtocolEra {
    /// The 2025-11-25 handshake first; if the server refuses `initialize` the way a
    /// 2026-07-28-only server does (method not found, or an error code only modern servers
    /// send), the 2026-07-28 era. Today's servers cost no extra round trip, and a legacy server
    /// never sees a request before `initialize` (some fail on one).
    #[default]
    Auto,
    /// `server/discover` first (the probe the 2026-07-28 spec recommends); the handshake when the
    /// server turns out not to be modern (an error, or no answer within
    /// [`DISCOVER_PROBE_TIMEOUT`]).
    PreferModern,
    /// Only the handshake (2025-11-25 and the versions before it).
    Legacy,
    /// Only the 2026-07-28 era.
    Modern,
}

impl ConnectOptions {
    /// Settles the era and learns what the server is.
    pub(super) async fn negotiate(&self, link: &Arc<Shared>) -> Result<InitializeResult, Error> {
        match self.era {
            ProtocolEra::Legacy => self.handshake(link).await,
            ProtocolEra::Modern => self.discover(link, self.connect_timeout).await,
            ProtocolEra::PreferModern => {
                let probe = self
                    .connect_timeout
                    .map_or(DISCOVER_PROBE_TIMEOUT, |t| t.min(DISCOVER_PROBE_TIMEOUT));
                match self.discover(link, Some(probe)).await {
                    Err(e) if not_modern(&e) => {
                        // Back to "not settled": the handshake settles it.
                        use_protocol(link, None, None).await?;
                        self.handshake(link).await
                    }
                    outcome => outcome,
                }
            }
            ProtocolEra::Auto => match self.handshake(link).await {
                Err(refused) if refused_by_modern_server(&refused) => {
                    // If discovery fails too, the handshake's error says more.
                    self.discover(link, self.connect_timeout)
                        .await
                        .map_err(|_| refused)
                }
                outcome => outcome,
            },
        }
    }

    /// The 2026-07-28 era: every request carries our `_meta`; `server/discover` says what the
    /// server is, or (`-32022`) which versions it speaks.
    async fn discover(
        &self,
        link: &Arc<Shared>,
        timeout: Option<Duration>,
    ) -> Result<InitializeResult, Error> {
        let capabilities = self.handlers.capabilities_for_discover();
        let mut version = MODERN_PROTOCOL_VERSION.to_owned();
        for _ in 0..2 {
            let meta = request_meta(&version, &capabilities, &self.client_info);
            use_protocol(link, Some(&version), Some(meta)).await?;
            let request = Request::new("server/discover", None).with_options(RequestOptions {
                cancel_on_wire: false,
                ..RequestOptions::default()
            });
            let answer: Result<DiscoverResult, Error> = Call::new(link.clone(), request)
                .cancellation_opt(self.cancellation.as_ref())
                .timeout_opt(timeout)
                .await;
            match answer {
                Ok(result) => {
                    let speaks = |v: &str| result.supported_versions.iter().any(|s| s == v);
                    if !result.supported_versions.is_empty() && !speaks(&version) {
                        return Err(Error::Protocol(format!(
                            "server speaks {:?}, not {version}",
                            result.supported_versions
                        )));
                    }
                    link.set_modern();
                    return Ok(result.into_description(&version));
                }
                Err(Error::Server {
                    code: UNSUPPORTED_PROTOCOL_VERSION,
                    data,
                    message,
                }) => {
                    let supported = data
                        .as_ref()
                        .and_then(|d| d.get("supported"))
                        .and_then(|s| s.as_array())
                        .cloned()
                        .unwrap_or_default();
                    let shared = MODERN_PROTOCOL_VERSIONS
                        .iter()
                        .find(|ours| supported.iter().any(|s| s.as_str() == Some(ours)));
                    match shared {
                        // Retried once (the loop's bound), even with the version we asked for:
                        // a server may refuse a first request for reasons it fixes by itself.
                        Some(shared) => version = (*shared).to_owned(),
                        None => {
                            return Err(Error::Server {
                                code: UNSUPPORTED_PROTOCOL_VERSION,
                                message,
                                data,
                            })
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Protocol(
            "server/discover: no protocol version both sides speak".into(),
        ))
    }

    async fn handshake(&self, link: &Arc<Shared>) -> Result<InitializeResult, Error> {
        let capabilities = self.handlers.capabilities_for_initialize();
        let params = InitializeParams {
            protocol_version: LATEST_PROTOCOL_VERSION,
            capabilities: &capabilities,
            client_info: &self.client_info,
        };
        let params = serde_json::to_value(params)
            .map_err(|e| Error::Misuse(format!("cannot serialize initialize: {e}")))?;
        // The protocol forbids cancelling `initialize`: a cancel only wakes us up.
        let request = Request::new("initialize", Some(params)).with_options(RequestOptions {
            cancel_on_wire: false,
            ..RequestOptions::default()
        });
        let result: InitializeResult = Call::new(link.clone(), request)
            .cancellation_opt(self.cancellation.as_ref())
            .timeout_opt(self.connect_timeout)
            .await?;
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&result.protocol_version.as_str()) {
            return Err(Error::Protocol(format!(
                "server chose protocol version {:?}; this client supports {}",
                result.protocol_version,
                SUPPORTED_PROTOCOL_VERSIONS.join(", ")
            )));
        }
        // The version reaches the transport (e.g. HTTP's `MCP-Protocol-Version`) before any
        // later frame, `notifications/initialized` included.
        use_protocol(link, Some(&result.protocol_version), None).await?;
        let initialized = Notify {
            method: "notifications/initialized".into(),
            params: None,
        };
        link.addr()
            .send(initialized)
            .await
            .map_err(|_| Error::Closed {
                reason: CloseReason::ActorStopped,
            })??;
        Ok(result)
    }
}

/// Tells the actor (and through it the transport) which version it speaks from now on.
async fn use_protocol(
    link: &Shared,
    version: Option<&str>,
    request_meta: Option<Box<str>>,
) -> Result<(), Error> {
    if let Some(version) = version {
        link.facts.set_protocol_version(version);
    }
    link.addr()
        .send(UseProtocol {
            version: version.map(str::to_owned),
            request_meta,
        })
        .await
        .map_err(|_| Error::Closed {
            reason: CloseReason::ActorStopped,
        })
}

/// `initialize` refused the way a 2026-07-28-only server refuses it.
fn refused_by_modern_server(error: &Error) -> bool {
    match error {
        Error::Server { code, .. } => *code == METHOD_NOT_FOUND || is_modern_error(*code),
        Error::Http { status, .. } => matches!(status, 400 | 404 | 405),
        _ => false,
    }
}

/// `server/discover` failed the way a legacy server fails it: any answer but a modern one, or
/// none at all. A cancel or a dead connection is not an answer.
fn not_modern(error: &Error) -> bool {
    match error {
        Error::Server { code, .. } => !is_modern_error(*code),
        Error::Http { .. } | Error::Timeout { .. } | Error::Protocol(_) => true,
        _ => false,
    }
}
