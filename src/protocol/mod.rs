//! The MCP wire: JSON-RPC framing and the message types this crate speaks.

pub mod jsonrpc;
pub mod lifecycle;
pub mod tools;

pub use jsonrpc::{RawResult, RequestId};
