//! Starting a connection and the 2025-11-25 handshake.

use std::time::Duration;

use actix::{Actor, Addr};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::{Call, Client};
use crate::{
    connection::{Close, Connection, Notify, Request, RequestOptions, DEFAULT_MAILBOX_CAPACITY},
    error::Error,
    protocol::lifecycle::{
        Implementation, InitializeParams, InitializeResult, LATEST_PROTOCOL_VERSION,
        SUPPORTED_PROTOCOL_VERSIONS,
    },
    transport::Transport,
    Cancellation, CloseReason,
};

/// Where the connection actor runs.
#[derive(Debug, Clone, Default)]
pub enum Placement {
    /// The current arbiter inside an actix System; a thread of its own anywhere else.
    #[default]
    Auto,
    /// This arbiter (e.g. one made for MCP connections in an actix-web service).
    Arbiter(actix_rt::ArbiterHandle),
    /// A new thread running its own actix System, stopped when the connection ends.
    OwnThread,
}

/// How to connect. Built by [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    client_info: Implementation,
    capabilities: Value,
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    placement: Placement,
    mailbox_capacity: usize,
}

/// Default bound on the handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            client_info: Implementation::new("actix-mcp", env!("CARGO_PKG_VERSION")),
            capabilities: json!({}),
            cancellation: None,
            timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            placement: Placement::Auto,
            mailbox_capacity: DEFAULT_MAILBOX_CAPACITY,
        }
    }
}

impl ConnectOptions {
    pub fn client_info(mut self, info: Implementation) -> Self {
        self.client_info = info;
        self
    }

    /// Cancelling this token during the handshake fails `connect` with
    /// [`Error::Cancelled`] and closes the connection (`initialize` itself is never cancelled on
    /// the wire).
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    /// Bound on the handshake (default 30 s); `None` waits forever.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// The actor's mailbox bound (default [`DEFAULT_MAILBOX_CAPACITY`]).
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity;
        self
    }

    /// Starts the actor and runs the handshake. On any failure the connection is closed.
    pub async fn connect(self, transport: impl Transport) -> Result<Client, Error> {
        let addr = self.start(Box::new(transport)).await?;
        match self.handshake(&addr).await {
            Ok(result) => Ok(Client::from_parts(addr, result)),
            Err(e) => {
                addr.do_send(Close);
                Err(e)
            }
        }
    }

    async fn start(&self, transport: Box<dyn Transport>) -> Result<Addr<Connection>, Error> {
        let capacity = self.mailbox_capacity;
        let connection = move || Connection::from_boxed(transport).mailbox_capacity(capacity);
        match &self.placement {
            Placement::Auto if actix_rt::Arbiter::try_current().is_some() => {
                Ok(connection().start())
            }
            Placement::Arbiter(arbiter) => {
                Ok(Connection::start_in_arbiter(arbiter, move |_| connection()))
            }
            Placement::Auto | Placement::OwnThread => {
                let (tx, rx) = oneshot::channel();
                std::thread::Builder::new()
                    .name("actix-mcp-connection".into())
                    .spawn(move || {
                        let system = actix_rt::System::new();
                        let addr =
                            system.block_on(async move { connection().owning_system().start() });
                        // If the caller is gone, dropping the address stops the actor and the System.
                        let _ = tx.send(addr);
                        let _ = system.run();
                    })
                    .map_err(|e| Error::transport("cannot start the connection thread", e))?;
                rx.await.map_err(|_| Error::Closed {
                    reason: CloseReason::ActorStopped,
                })
            }
        }
    }

    async fn handshake(&self, addr: &Addr<Connection>) -> Result<InitializeResult, Error> {
        let params = InitializeParams {
            protocol_version: LATEST_PROTOCOL_VERSION,
            capabilities: &self.capabilities,
            client_info: &self.client_info,
        };
        let params = serde_json::to_value(params)
            .map_err(|e| Error::Protocol(format!("cannot serialize initialize: {e}")))?;
        // The protocol forbids cancelling `initialize`: a cancel only wakes us up.
        let request = Request::new("initialize", Some(params)).with_options(RequestOptions {
            cancel_on_wire: false,
        });
        let result: InitializeResult = Call::new(addr.clone(), request)
            .cancellation_opt(self.cancellation.as_ref())
            .timeout_opt(self.timeout)
            .await?;
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&result.protocol_version.as_str()) {
            return Err(Error::Protocol(format!(
                "server chose protocol version {:?}; this client supports {}",
                result.protocol_version,
                SUPPORTED_PROTOCOL_VERSIONS.join(", ")
            )));
        }
        let initialized = Notify {
            method: "notifications/initialized".into(),
            params: None,
        };
        addr.send(initialized).await.map_err(|_| Error::Closed {
            reason: CloseReason::ActorStopped,
        })??;
        Ok(result)
    }
}
