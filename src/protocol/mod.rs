//! The MCP wire: JSON-RPC framing and the message types this crate speaks.

pub mod completion;
pub mod content;
pub mod discover;
pub mod elicitation;
pub mod form_schema;
pub mod jsonrpc;
pub mod lifecycle;
pub mod logging;
pub mod notifications;
pub mod prompts;
pub mod resources;
pub mod results;
pub mod roots;
pub mod routing;
pub mod sampling;
pub mod tasks;
pub mod tools;

pub use jsonrpc::{RawResult, RequestId};
