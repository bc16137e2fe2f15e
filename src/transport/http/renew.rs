//! Renewing an expired 2025-11-25 session in place (the default; [`HttpTransport::no_session_renewal`](super::HttpTransport::no_session_renewal)
//! turns it off).
//!
//! The handshake's two frames are kept as they pass through `send` (told by the method each
//! frame carries; nothing here reads JSON). At the first `404` of a session (the request states
//! decide, `states.rs`; this file only runs the handshake again):
//!
//! 1. the session's generation goes up; the request answered `404` waits to go again first on
//!    the new session (the server never processed it); every other request still at the old
//!    session (a POST or a resumption running) is aborted and fails with [`Error::SessionLost`](crate::Error::SessionLost), never to be sent
//!    again; a `notifications/cancelled` for one of them is dropped (the new session never saw
//!    its request);
//! 2. the gate closes: what is sent meanwhile waits there, and each request waiting there is
//!    reported [`TransportEvent::RequestHeld`](crate::transport::TransportEvent::RequestHeld), so a cancel drops it where it waits;
//! 3. the kept `initialize` is POSTed without session id and version, as the first one was; its
//!    answer is read and dropped, and its `Mcp-Session-Id` becomes the session's; the kept
//!    `notifications/initialized` follows with it;
//! 4. the GET stream opens again if it was open (it opens the gate once answered), else the gate
//!    opens at once: the waiting messages go out, in order, on the new session.
//!
//! A renewal that fails (or takes longer than [`RENEWAL_LIMIT`]) ends the connection with
//! [`CloseReason::SessionExpired`](crate::error::CloseReason::SessionExpired); nothing is sent
//! after that. A `404` of an older generation, or one that comes while the renewal runs, only
//! loses its request. A renewed session that expires before any of its POSTs was answered is
//! not renewed again: the connection ends.

use std::{rc::Rc, time::Duration};

use bytes::Bytes;
use reqwest::{
    header::{HeaderValue, ACCEPT, CONTENT_TYPE},
    Method, Response,
};

use super::{
    driver::{now, Shared},
    post::{content_type, read_capped},
    sse::read_events,
};

/// The longest a renewal (both POSTs, answers read) may take before the connection ends.
const RENEWAL_LIMIT: Duration = Duration::from_secs(30);

/// Runs the kept handshake again in a task of its own, and reports how it went.
pub(super) fn start(shared: &Rc<Shared>, initialize: Bytes, initialized: Bytes) {
    tracing::info!("the MCP HTTP session expired; renewing it");
    let shared = shared.clone();
    actix_rt::spawn(async move {
        let handshake = handshake(&shared, initialize, initialized);
        let outcome = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            outcome = tokio::time::timeout(RENEWAL_LIMIT, handshake) => outcome,
        };
        let why = match outcome {
            Ok(Ok(id)) => {
                tracing::info!("the MCP HTTP session was renewed");
                return shared.event(|requests| requests.renewed(id, now()));
            }
            Ok(Err(why)) => why,
            Err(_) => format!("no end within {RENEWAL_LIMIT:?}"),
        };
        tracing::warn!(why, "renewing the expired MCP HTTP session failed");
        shared.event(|requests| requests.renewal_failed());
    });
}

/// The handshake again, on a new session (its id comes back); the answers are not delivered.
async fn handshake(
    shared: &Shared,
    initialize: Bytes,
    initialized: Bytes,
) -> Result<HeaderValue, String> {
    // As the first `initialize` went out: no session id, no version.
    let response = post_frame(shared, initialize, None, "initialize").await?;
    let Some(id) = response.headers().get("mcp-session-id").cloned() else {
        return Err("the initialize answer carries no Mcp-Session-Id".into());
    };
    // The connection has its `initialize` result already, for an id that is old: dropped.
    drain(shared, response, "initialize").await?;

    let what = "notifications/initialized";
    let response = post_frame(shared, initialized, Some(&id), what).await?;
    drain(shared, response, what).await?;
    Ok(id)
}

/// POSTs one of the kept frames (`session`: with that id and the settled version); anything
/// but a success status fails the renewal.
async fn post_frame(
    shared: &Shared,
    frame: Bytes,
    session: Option<&HeaderValue>,
    what: &str,
) -> Result<Response, String> {
    let version = session.and_then(|_| shared.session(|s| s.protocol_version.clone()));
    let response = shared
        .request(Method::POST, session, version.as_ref())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(frame)
        .send()
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{what} answered HTTP {}", response.status()));
    }
    Ok(response)
}

/// Reads an answer to its end without delivering it.
async fn drain(shared: &Shared, response: Response, what: &str) -> Result<(), String> {
    if content_type(&response) == "text/event-stream" {
        let end = read_events(response, shared.max_frame, |_| {}).await;
        match end.error {
            Some(error) => Err(format!("{what}: the answer broke: {error}")),
            None => Ok(()),
        }
    } else {
        read_capped(response, shared.max_frame)
            .await
            .map(drop)
            .map_err(|e| format!("{what}: {e}"))
    }
}
