//! An MCP (Model Context Protocol) client for actix.
//!
//! One [`Connection`] actor per server owns the transport and the table of in-flight requests;
//! any number of callers multiplex requests over it and can cancel any of them, correctly (the
//! wire obeys the protocol) and fast (a cancel never waits for I/O).
//!
//! ```no_run
//! use actix_mcp::{Cancellation, Client, StdioTransport};
//! use serde_json::json;
//!
//! #[actix::main]
//! async fn main() -> Result<(), actix_mcp::Error> {
//!     let client = Client::connect(StdioTransport::new("my-mcp-server")).await?;
//!     let token = Cancellation::new();
//!     let call = client.call_tool("slow_tool", json!({})).cancellation(&token);
//!     // Elsewhere, later: token.cancel_with_reason("user pressed cancel");
//!     match call.await {
//!         Ok(result) => println!("{}", result.text()),
//!         Err(e) if e.is_cancelled() => println!("cancelled"),
//!         Err(e) => return Err(e),
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # What cancelling does on the wire
//!
//! - A request whose token is already cancelled fails with [`Error::Cancelled`] and nothing is sent.
//! - Cancelling wakes the caller at once with [`Error::Cancelled`] carrying the first reason.
//! - A request still queued in the connection is removed: neither it nor a cancel is ever written.
//! - A request being written gets `notifications/cancelled` only after the transport reports its
//!   write complete, so the cancel always follows the complete request frame.
//! - A written request gets `notifications/cancelled {requestId, reason?}` at once; on
//!   Streamable HTTP in the 2026-07-28 era its POST is aborted instead (no notification exists
//!   there), which over HTTP/2 resets just its stream.
//! - A cancel after the response arrived sends nothing; a second cancel sends nothing more.
//! - A response arriving after its cancel is dropped (counted in [`ConnectionStats`]).
//! - `initialize` is never cancelled on the wire; cancelling `connect` closes the connection.
//!
//! # What dropping each future means
//!
//! - A [`Call`] that was never polled: nothing was sent, nothing happens.
//! - A polled [`CallFuture`], or a [`PendingReply`] from [`Request`]: dropping it **cancels the
//!   request** exactly as a cancel without a reason does (see above).
//! - The future of `addr.send(Request)` dropped before the actor handled it: the actor skips the
//!   request, nothing is written. Dropped after: the [`PendingReply`] it carried is dropped, which
//!   cancels.
//! - The last handle to a connection ([`Client`], `Addr<Connection>`, [`PendingReply`]): the actor
//!   stops and the server process is shut down (EOF, SIGTERM, SIGKILL).
//!
//! # Transports and eras
//!
//! [`StdioTransport`] spawns the server; [`HttpTransport`] (feature `http`, on by default) speaks
//! Streamable HTTP. Both eras are spoken: the 2025-11-25 handshake and the 2026-07-28 stateless
//! protocol ([`ProtocolEra`]). [`Servers`] manages many connections by name.
//!
//! # Where the actor runs
//!
//! Inside an actix System (`#[actix::main]`, `#[actix_web::main]`, `#[actix::test]`),
//! [`Client::connect`] starts the actor on the current arbiter. Anywhere else (plain
//! `#[tokio::main]`) it starts it on the process's pool of arbiters (one thread per core, made
//! once, see [`set_pool_size`]), on the one running the fewest connections. [`Placement`]
//! chooses explicitly; [`Servers`] uses the pool by default.
//!
//! # Typed use
//!
//! Every MCP type a client meets is a Rust type ([`Tool`], [`ContentBlock`], [`Resource`],
//! [`ServerCapabilities`], ...); fields this crate does not know are kept in `extra`, so
//! nothing a newer server sends is lost. Tool arguments go in as any `Serialize`
//! ([`Client::call_tool_with`]) and structured results come out as any `Deserialize`
//! ([`CallToolResult::structured`]); a structured result that breaks its tool's
//! `outputSchema` fails with [`Error::InvalidOutput`]. The server's requests are answered by
//! typed handlers ([`ConnectOptions::on_sampling`], [`ConnectOptions::on_form_elicitation`],
//! [`ConnectOptions::on_url_elicitation`], [`ConnectOptions::on_roots`]; any other method:
//! [`ConnectOptions::on_request_raw`]). See
//! `examples/typed.rs` (`cargo run --example typed`).
//!
//! In the 2026-07-28 era, list pages the server marks cacheable (`ttlMs`) are answered from a
//! per-connection cache until they expire or the list's `notifications/*/list_changed`
//! arrives ([`Call::refetch`] asks anyway), and logs are asked for per request
//! ([`Call::log_level`], [`Client::set_logging_level`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "auth")]
pub mod auth;
mod cancellation;
pub mod client;
pub mod config;
pub mod connection;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "actix-web")]
pub mod inspector;
mod pool;
pub mod protocol;
pub mod servers;
mod timeout;
pub mod transport;
pub mod visible;
#[cfg(feature = "actix-web")]
pub mod web;

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// The names most programs use; the rest live in their modules (`protocol::*`, `client`,
// `servers`, `config`, `transport`).
pub use cancellation::Cancellation;
pub use client::{
    AllPages, Call, CallFuture, Client, ConnectOptions, HandlerError, Placement, ProtocolEra,
    TaskHandle,
};
pub use config::{Config, ConfigError, ServerConfig};
pub use connection::{
    Cancel, Close, Connection, ConnectionStats, GetStats, Notify, PendingReply, Request,
    RequestOptions, Subscribe,
};
pub use error::{AuthErrorKind, CloseReason, Error};
pub use pool::{pool_load, set_pool_size};
pub use protocol::{
    completion::CompletionReference,
    content::ContentBlock,
    elicitation::{ElicitResult, FormElicitation, UrlElicitation},
    lifecycle::{ClientCapabilities, Implementation, InitializeResult, ServerCapabilities},
    logging::LoggingLevel,
    notifications::{ListenFilter, Progress, ServerNotification},
    prompts::{GetPromptResult, Prompt},
    resources::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate},
    roots::Root,
    sampling::{CreateMessageRequest, CreateMessageResult},
    tasks::{Task, TaskStatus},
    tools::{CallToolResult, Tool},
    RequestId,
};
pub use servers::{
    Catalogue, HealthProbe, RestartPolicy, RoutedCall, ServerStatus, Servers, ServersActor,
    ServersError, Status,
};
#[cfg(feature = "http")]
pub use transport::HttpTransport;
pub use transport::{StdioTransport, Transport};
