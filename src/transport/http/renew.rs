//! Renewing an expired 2025-11-25 session in place (opt-in:
//! [`HttpTransport::renew_expired_sessions`](super::HttpTransport::renew_expired_sessions)).
//!
//! The handshake's two frames are kept as they pass through `send` (told by the method each
//! frame carries; nothing here reads JSON). At the first `404` of a session ([`expired`]):
//!
//! 1. the session's generation goes up; every request still at the old session (a POST or a
//!    resumption running) is aborted and fails with [`Error::SessionLost`], never to be sent
//!    again; a `notifications/cancelled` for one of them is dropped (the new session never saw
//!    its request);
//! 2. the gate closes: what is sent meanwhile waits there, and each request waiting there is
//!    reported [`TransportEvent::RequestHeld`], so a cancel drops it where it waits;
//! 3. the kept `initialize` is POSTed without session id and version, as the first one was; its
//!    answer is read and dropped, and its `Mcp-Session-Id` becomes the session's; the kept
//!    `notifications/initialized` follows with it;
//! 4. the GET stream opens again if it was open (it opens the gate once answered), else the gate
//!    opens at once: the waiting messages go out, in order, on the new session.
//!
//! A renewal that fails (or takes longer than [`RENEWAL_LIMIT`]) ends the connection with
//! [`CloseReason::SessionExpired`]; nothing is sent after that. A `404` of an older generation, or
//! one that comes while the renewal runs, only loses its request. A renewed session that expires
//! before any of its POSTs was answered is not renewed again: the connection ends.

use std::{collections::HashSet, rc::Rc, time::Duration};

use bytes::Bytes;
use reqwest::{
    header::{ACCEPT, CONTENT_TYPE},
    Method, Response,
};

use super::{
    post::{content_type, read_capped, Shared},
    sse::read_events,
};
use crate::{
    error::{CloseReason, Error},
    protocol::jsonrpc::RequestId,
    transport::{Frame, TransportEvent},
};

/// The longest a renewal (both POSTs, answers read) may take before the connection ends.
const RENEWAL_LIMIT: Duration = Duration::from_secs(30);

/// What renewing needs to remember.
pub(super) struct Renewal {
    /// The user asked for it.
    enabled: bool,
    /// The last `initialize` request frame sent, as sent.
    initialize: Option<Bytes>,
    /// The `notifications/initialized` frame sent, as sent.
    initialized: Option<Bytes>,
    pub state: State,
    /// A POST of the current session was answered with something else than `404` (the first
    /// session counts as answered: its `initialize` was).
    answered: bool,
    /// The requests lost with the last expired session: a cancel of one is never sent.
    pub lost: HashSet<RequestId>,
}

/// Where the renewal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// No renewal runs; messages go out (unless the GET stream's gate holds them).
    Idle,
    /// A renewal runs: messages wait at the gate.
    Running,
    /// A renewal failed: the connection is ending, nothing more goes out.
    Failed,
}

impl Renewal {
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            initialize: None,
            initialized: None,
            state: State::Idle,
            answered: true,
            lost: HashSet::new(),
        }
    }

    /// Keeps `bytes` (the frame without its newline) if `frame` is one of the handshake's.
    pub fn remember(&mut self, frame: &Frame<'_>, bytes: &Bytes) {
        if !self.enabled {
            return;
        }
        match frame.method {
            Some("initialize") if frame.request().is_some() => {
                self.initialize = Some(bytes.clone());
            }
            Some("notifications/initialized") => self.initialized = Some(bytes.clone()),
            _ => {}
        }
    }
}

/// Whether `generation` is still the session's and no renewal runs or failed.
pub(super) fn is_current(shared: &Shared, generation: u64) -> bool {
    shared.renewal.borrow().state == State::Idle && shared.session.borrow().generation == generation
}

/// A POST sent on session `generation` was answered with something else than `404`.
pub(super) fn answered(shared: &Shared, generation: u64) {
    if is_current(shared, generation) {
        shared.renewal.borrow_mut().answered = true;
    }
}

/// What to do with a `404` to a POST that carried the session id.
enum Expiry {
    /// End the connection (no opt-in, or renewing cannot or may not happen).
    Close,
    /// Part of an expiry already handled: only the request is lost.
    Lost,
    /// Renew the session.
    Renew,
}

/// A POST sent on session `generation` with its id was answered `404`: the session is gone.
pub(super) fn expired(shared: &Rc<Shared>, request: Option<RequestId>, generation: u64) {
    let expiry = {
        let renewal = shared.renewal.borrow();
        let current = shared.session.borrow().generation;
        if !renewal.enabled {
            Expiry::Close
        } else if renewal.state != State::Idle || generation != current {
            Expiry::Lost
        } else if !renewal.answered || renewal.initialize.is_none() || renewal.initialized.is_none()
        {
            Expiry::Close
        } else {
            Expiry::Renew
        }
    };
    match expiry {
        Expiry::Close => {
            // The session is gone: every request of this connection is.
            if shared.renewal.borrow().enabled {
                // Nothing more goes out, and a later 404 only loses its request.
                shared.renewal.borrow_mut().state = State::Failed;
                shared.gate.borrow_mut().replace(Vec::new());
            }
            shared.fail(
                request,
                Error::Closed {
                    reason: CloseReason::SessionExpired,
                },
            );
            shared
                .events
                .send(TransportEvent::Closed(CloseReason::SessionExpired));
        }
        Expiry::Lost => shared.fail(request, Error::SessionLost),
        Expiry::Renew => start(shared, request),
    }
}

/// Starts renewing: the old session's requests are lost, later messages wait, the handshake
/// runs again in a task of its own.
fn start(shared: &Rc<Shared>, request: Option<RequestId>) {
    shared.session.borrow_mut().generation += 1;
    // Every later message waits at the gate; what already waits there (the GET stream was
    // opening) waits for the new session too.
    let waiting: Vec<RequestId> = shared
        .gate
        .borrow_mut()
        .get_or_insert_with(Vec::new)
        .iter()
        .filter_map(|outgoing| outgoing.request)
        .collect();
    if let Some(task) = shared.event_task.borrow_mut().take() {
        task.abort(); // the old session's GET stream
    }
    // Every request still at the old session is lost with it (the caller of this one is the
    // task that got the 404: it ends by itself).
    let mut lost: HashSet<RequestId> = request.into_iter().collect();
    for (id, post) in shared.posts.borrow_mut().drain() {
        if Some(id) != request {
            post.abort();
        }
        lost.insert(id);
    }
    {
        let mut renewal = shared.renewal.borrow_mut();
        renewal.state = State::Running;
        renewal.lost.clone_from(&lost);
    }
    for id in lost {
        shared.fail(Some(id), Error::SessionLost);
    }
    for id in waiting {
        shared.events.send(TransportEvent::RequestHeld(id));
    }
    tracing::info!("the MCP HTTP session expired; renewing it");

    let shared = shared.clone();
    actix_rt::spawn(async move {
        let shutdown = shared.shutdown.clone();
        let outcome = tokio::select! {
            _ = shutdown.cancelled() => return,
            outcome = tokio::time::timeout(RENEWAL_LIMIT, handshake(&shared)) => outcome,
        };
        match outcome {
            Ok(Ok(())) => renewed(&shared),
            Ok(Err(why)) => failed(&shared, &why),
            Err(_) => failed(&shared, &format!("no end within {RENEWAL_LIMIT:?}")),
        }
    });
}

/// The handshake again, on a new session; the answers are not delivered.
async fn handshake(shared: &Rc<Shared>) -> Result<(), String> {
    let (initialize, initialized) = {
        let renewal = shared.renewal.borrow();
        (renewal.initialize.clone(), renewal.initialized.clone())
    };
    let (Some(initialize), Some(initialized)) = (initialize, initialized) else {
        return Err("the handshake's frames were not kept".into());
    };

    // As the first `initialize` went out: no session id, no version.
    let response = post_frame(shared, initialize, false, "initialize").await?;
    let Some(id) = response.headers().get("mcp-session-id").cloned() else {
        return Err("the initialize answer carries no Mcp-Session-Id".into());
    };
    // The connection has its `initialize` result already, for an id that is old: dropped.
    drain(shared, response, "initialize").await?;
    shared.session.borrow_mut().id = Some(id);

    let response = post_frame(shared, initialized, true, "notifications/initialized").await?;
    drain(shared, response, "notifications/initialized").await
}

/// POSTs one of the kept frames; anything but a success status fails the renewal.
async fn post_frame(
    shared: &Shared,
    frame: Bytes,
    in_session: bool,
    what: &str,
) -> Result<Response, String> {
    let response = shared
        .request_with(Method::POST, in_session)
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

/// The new session exists: the GET stream opens again if it was open (and opens the gate once
/// answered), else the waiting messages go at once.
fn renewed(shared: &Rc<Shared>) {
    {
        let mut renewal = shared.renewal.borrow_mut();
        renewal.state = State::Idle;
        renewal.answered = false;
    }
    tracing::info!("the MCP HTTP session was renewed");
    let (generation, reopen) = {
        let session = shared.session.borrow();
        (session.generation, session.event_stream_opened)
    };
    if reopen {
        super::spawn_event_stream(shared.clone());
    } else {
        super::open_gate(shared, generation);
    }
}

/// The renewal failed: the connection ends as without renewing; the waiting messages are
/// dropped (the connection fails their requests as it closes).
fn failed(shared: &Shared, why: &str) {
    tracing::warn!(why, "renewing the expired MCP HTTP session failed");
    shared.renewal.borrow_mut().state = State::Failed;
    let held = shared.gate.borrow_mut().replace(Vec::new());
    drop(held);
    shared
        .events
        .send(TransportEvent::Closed(CloseReason::SessionExpired));
}
