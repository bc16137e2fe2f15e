//! [`ServersActor`]: the manager as an actor, for actix services that hold addresses.

use std::time::Duration;

use actix::{Actor, Context, Handler, Message, MessageResult, ResponseFuture};
use serde_json::Value;

use super::ServersError;
use super::{Catalogue, ServerStatus, Servers};
use crate::{cancellation::Cancellation, protocol::tools::CallToolResult};

/// The manager as an actor: every message is answered by the [`Servers`] it wraps, which stays
/// usable directly (from plain tokio too) through [`ServersActor::servers`].
pub struct ServersActor {
    servers: Servers,
}

impl ServersActor {
    /// An actor over `servers`.
    pub fn new(servers: Servers) -> Self {
        Self { servers }
    }

    /// The handle the actor answers with.
    pub fn servers(&self) -> &Servers {
        &self.servers
    }
}

impl Actor for ServersActor {
    type Context = Context<Self>;
}

/// `tools/call` routed by name (`server/tool`, or a bare name one server offers), with the
/// guarantees of a direct call: the token cancels it on the server once sent.
pub struct CallTool {
    /// The tool's name, qualified or bare.
    pub tool: String,
    /// The arguments (a JSON object).
    pub arguments: Value,
    /// Cancels the call.
    pub cancellation: Option<Cancellation>,
    /// The call's timeout (the connection's default when `None`).
    pub timeout: Option<Duration>,
}

impl Message for CallTool {
    type Result = Result<CallToolResult, ServersError>;
}

impl Handler<CallTool> for ServersActor {
    type Result = ResponseFuture<Result<CallToolResult, ServersError>>;

    fn handle(&mut self, message: CallTool, _: &mut Self::Context) -> Self::Result {
        let mut call = self.servers.call(&message.tool, message.arguments);
        if let Some(token) = &message.cancellation {
            call = call.cancellation(token);
        }
        if let Some(after) = message.timeout {
            call = call.timeout(after);
        }
        Box::pin(async move { call.await })
    }
}

/// Every server's lists ([`Servers::catalogue`]).
pub struct GetCatalogue;

impl Message for GetCatalogue {
    type Result = Catalogue;
}

impl Handler<GetCatalogue> for ServersActor {
    type Result = ResponseFuture<Catalogue>;

    fn handle(&mut self, _: GetCatalogue, _: &mut Self::Context) -> Self::Result {
        let servers = self.servers.clone();
        Box::pin(async move { servers.catalogue().await })
    }
}

/// Every server's status ([`Servers::status`]).
pub struct GetStatus;

impl Message for GetStatus {
    type Result = Vec<ServerStatus>;
}

impl Handler<GetStatus> for ServersActor {
    type Result = MessageResult<GetStatus>;

    fn handle(&mut self, _: GetStatus, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.servers.status())
    }
}

/// Stops every server ([`Servers::stop`]) and answers once their processes are gone.
pub struct StopAll;

impl Message for StopAll {
    type Result = ();
}

impl Handler<StopAll> for ServersActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: StopAll, _: &mut Self::Context) -> Self::Result {
        let servers = self.servers.clone();
        Box::pin(async move { servers.stop().await })
    }
}
