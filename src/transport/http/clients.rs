//! The HTTP clients connections share: one per thread and kind, for every connection not given
//! a client of its own. An idle connection then holds no pool of TCP connections, no TLS
//! configuration and no resolver of its own, and thousands of connections to one server reuse
//! a few TCP connections (over HTTP/2, one per thread). Per thread rather than per process: a
//! pooled TCP connection is driven by a task on the thread that opened it, so keeping each
//! arbiter's connections to its own client keeps their I/O on their own thread, and a client
//! never holds connections whose runtime has ended.
//!
//! The user's headers (e.g. one bearer token per user) go on each request, not into the client.

use std::cell::RefCell;

use super::{
    invalid_input,
    post::{same_origin, MAX_REDIRECTS},
};
use crate::error::Error;

thread_local! {
    /// HTTP/1.1, or HTTP/2 where TLS negotiates it.
    static NEGOTIATED: RefCell<Option<reqwest::Client>> = const { RefCell::new(None) };
    /// HTTP/2 over plain `http://` without negotiating (h2c).
    static PRIOR_KNOWLEDGE: RefCell<Option<reqwest::Client>> = const { RefCell::new(None) };
}

/// This thread's client of the kind asked for, made on first use.
pub(super) fn shared(http2_prior_knowledge: bool) -> Result<reqwest::Client, Error> {
    let slot = if http2_prior_knowledge {
        &PRIOR_KNOWLEDGE
    } else {
        &NEGOTIATED
    };
    slot.with(|slot| {
        if let Some(client) = &*slot.borrow() {
            return Ok(client.clone());
        }
        let client = build(http2_prior_knowledge)?;
        *slot.borrow_mut() = Some(client.clone());
        Ok(client)
    })
}

/// A client of its own for a server reached over the Unix socket at `path` (a connection pool
/// belongs to one socket, so it is not shared).
#[cfg(unix)]
pub(super) fn over_unix_socket(
    path: &std::path::Path,
    http2_prior_knowledge: bool,
) -> Result<reqwest::Client, Error> {
    let builder = builder(http2_prior_knowledge).unix_socket(path);
    builder
        .build()
        .map_err(|e| invalid_input(format!("HTTP client over {}: {e}", path.display())))
}

fn build(http2_prior_knowledge: bool) -> Result<reqwest::Client, Error> {
    builder(http2_prior_knowledge)
        .build()
        .map_err(|e| invalid_input(format!("HTTP client: {e}")))
}

fn builder(http2_prior_knowledge: bool) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder()
        .referer(false)
        .redirect(redirect_policy());
    if http2_prior_knowledge {
        builder.http2_prior_knowledge()
    } else {
        builder
    }
}

/// Redirects as the spec and browsers expect: followed only to the origin the request was
/// made to and only when the method and body are kept (307, 308), e.g. Starlette's `/mcp` →
/// `/mcp/`. A redirect to another origin would carry the session id, the MCP headers and a
/// DPoP proof there, and a 301/302/303 would turn a POST into a GET: both end the request with
/// the redirect's status instead. Never a `Referer`. (A POST's redirects are `post.rs`'s: its
/// body is a stream that reqwest cannot send again.)
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_method = matches!(attempt.status().as_u16(), 307 | 308);
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| same_origin(attempt.url(), first));
        if keeps_method && same_origin && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}
