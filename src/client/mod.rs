//! [`Client`]: the everyday handle over a connection's address.

mod call;
mod connect;

use std::sync::Arc;

use actix::Addr;
use serde_json::{json, Value};

pub use call::{Call, CallFuture};
pub use connect::{ConnectOptions, Placement};

use crate::{
    connection::{Close, Connection, ConnectionStats, GetStats, Notify, Request},
    error::Error,
    protocol::{
        lifecycle::{Implementation, InitializeResult},
        tools::{CallToolResult, EmptyResult, ListToolsResult},
    },
    CloseReason,
};

/// A cheap-to-clone handle to one server connection.
///
/// Every clone shares the same connection actor. The connection closes when the last handle
/// (client, `Addr`, or pending request) is dropped, or on [`Client::close`].
#[derive(Clone)]
pub struct Client {
    addr: Addr<Connection>,
    server: Arc<InitializeResult>,
}

impl Client {
    /// Starts a connection actor over `transport` and runs the handshake.
    ///
    /// Inside an actix System (`#[actix::main]`, `#[actix_web::main]`, `#[actix::test]`) the actor
    /// runs on the current arbiter; anywhere else (e.g. `#[tokio::main]`) on a thread of its own.
    pub async fn connect(transport: impl crate::Transport) -> Result<Client, Error> {
        ConnectOptions::default().connect(transport).await
    }

    /// Options for [`connect`](Self::connect): client info, a connect timeout or cancellation,
    /// where the actor runs.
    pub fn builder() -> ConnectOptions {
        ConnectOptions::default()
    }

    pub(crate) fn from_parts(addr: Addr<Connection>, server: InitializeResult) -> Self {
        Self {
            addr,
            server: Arc::new(server),
        }
    }

    /// The connection actor's address, to share or to send [`Request`]/[`Cancel`](crate::Cancel)
    /// messages directly.
    pub fn addr(&self) -> &Addr<Connection> {
        &self.addr
    }

    /// The server's answer to `initialize`.
    pub fn initialize_result(&self) -> &InitializeResult {
        &self.server
    }

    pub fn server_info(&self) -> &Implementation {
        &self.server.server_info
    }

    /// The protocol version the server chose.
    pub fn protocol_version(&self) -> &str {
        &self.server.protocol_version
    }

    pub fn server_capabilities(&self) -> &Value {
        &self.server.capabilities
    }

    pub fn instructions(&self) -> Option<&str> {
        self.server.instructions.as_deref()
    }

    /// Any request, with its result as JSON.
    pub fn request(
        &self,
        method: impl Into<std::borrow::Cow<'static, str>>,
        params: Option<Value>,
    ) -> Call<Value> {
        Call::new(self.addr.clone(), Request::new(method, params))
    }

    pub fn ping(&self) -> Call<EmptyResult> {
        Call::new(self.addr.clone(), Request::new("ping", None))
    }

    /// `tools/list`, one page (`cursor` from the previous page's `next_cursor`).
    pub fn list_tools(&self, cursor: Option<&str>) -> Call<ListToolsResult> {
        let params = cursor.map(|c| json!({ "cursor": c }));
        Call::new(self.addr.clone(), Request::new("tools/list", params))
    }

    /// `tools/call`. A tool's own failure is a successful call with `is_error: true`.
    pub fn call_tool(&self, name: &str, arguments: Value) -> Call<CallToolResult> {
        #[derive(serde::Serialize)]
        struct Params<'a> {
            name: &'a str,
            arguments: &'a Value,
        }
        let params = Params {
            name,
            arguments: &arguments,
        };
        Call::new(
            self.addr.clone(),
            Request::with_params("tools/call", Some(&params)),
        )
    }

    /// Sends a notification (queued in order with requests; resolves once queued).
    pub async fn notify(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<(), Error> {
        let notify = Notify {
            method: method.into(),
            params,
        };
        self.addr.send(notify).await.map_err(|_| actor_stopped())?
    }

    /// The connection's counters.
    pub async fn stats(&self) -> Result<ConnectionStats, Error> {
        self.addr.send(GetStats).await.map_err(|_| actor_stopped())
    }

    /// Closes the connection for every handle: pending requests fail with
    /// [`CloseReason::ClosedByClient`]; the server gets EOF, then SIGTERM and SIGKILL if it lingers.
    pub async fn close(&self) {
        let _ = self.addr.send(Close).await;
    }
}

fn actor_stopped() -> Error {
    Error::Closed {
        reason: CloseReason::ActorStopped,
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server.server_info.name)
            .field("protocol_version", &self.server.protocol_version)
            .finish()
    }
}
