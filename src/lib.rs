//! placeholder
pub mod cancellation;
pub mod client;
pub mod connection;
pub mod error;
pub mod protocol;
pub mod transport;

pub use cancellation::Cancellation;
pub use client::{Call, CallFuture, Client, ConnectOptions, Placement};
pub use connection::{
    Cancel, Close, Connection, ConnectionStats, GetStats, Notify, PendingReply, Request,
    RequestOptions,
};
pub use error::{CloseReason, Error};
pub use protocol::RequestId;
pub use transport::{memory, MemoryPeer, MemoryTransport, StdioTransport, Transport};
