//! What the upstream servers say outside any request, as a session passes it on: list changes,
//! and log messages at the level its client asked for (`logging/setLevel`; 2026-07-28: the
//! request's `_meta` `logLevel`, on that request's stream).

use std::rc::Rc;

use serde_json::{json, Value};

use super::Session;
use crate::replies::{error, result, INVALID_PARAMS};

impl Session {
    /// An upstream list changed: the routes are made anew at the next use, and the downstream
    /// client is told.
    pub fn list_changed(&self, changed: &str) {
        self.state.borrow_mut().routes = None;
        let method = format!("notifications/{changed}/list_changed");
        if !self.modern.get() {
            return self.send(json!({"jsonrpc": "2.0", "method": method}));
        }
        // 2026-07-28: only on a listen stream that asked for it.
        if let Some(listen) = self.listening_to_list(changed) {
            self.tell(&listen, &method, json!({}));
        }
    }

    /// `logging/setLevel`: this session's logs from now on; the upstream servers are asked for
    /// as much (if no session asked for more already) before the answer.
    pub(super) fn set_log_level(self: &Rc<Self>, id: Value, params: &Value) {
        let level = match serde_json::from_value::<actix_mcp::LoggingLevel>(params["level"].clone())
        {
            Ok(level) => level,
            Err(e) => return self.send(error(&id, INVALID_PARAMS, format!("level: {e}"))),
        };
        self.state.borrow_mut().log_level = Some(level);
        let session = self.clone();
        self.spawn(async move {
            session.ask_upstreams_for_logs(level).await;
            session.send(result(&id, json!({}), session.modern.get()));
        });
    }

    /// Asks every upstream server for logs at `level`, if no session asked for as much already.
    /// Only the connected ones: the others are asked as they connect (`changes.rs`), and a
    /// server that is down does not hold the answer back.
    pub(super) async fn ask_upstreams_for_logs(&self, level: actix_mcp::LoggingLevel) {
        if !self.upstream.lower_log_floor(level) {
            return;
        }
        let servers = &self.upstream.servers;
        let ready = servers.status().into_iter();
        let ready = ready.filter(|server| matches!(server.status, actix_mcp::Status::Ready));
        for server in ready {
            if let Ok(client) = servers.client(&server.name).await {
                let _ = client.set_logging_level(level).await;
            }
        }
    }

    /// An upstream server's log message, if this session asked for logs at its level: its
    /// logger named after the server.
    pub(super) fn log(
        &self,
        server: &str,
        message: &actix_mcp::protocol::notifications::LogMessage,
    ) {
        // 2026-07-28: logs belong to the request that asked, on its stream (`logs.rs`). With
        // users, so do 2025-11-25 ones: a message of no call is no user's, and goes to none.
        let wanted = self.state.borrow().log_level;
        if self.modern.get() || wanted.is_none_or(|level| message.level < level) {
            return;
        }
        if self.owner != crate::owner::Owner::Anonymous {
            return;
        }
        let params = log_params(server, message);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params}));
    }

    /// Tells this session what the upstream servers say, for as long as it lives.
    pub fn follow(
        self: &Rc<Self>,
        mut events: tokio::sync::broadcast::Receiver<crate::changes::Event>,
        mut dropped: tokio::sync::oneshot::Receiver<()>,
    ) {
        use crate::changes::Event;
        use tokio::sync::broadcast::error::RecvError;
        let session = Rc::downgrade(self);
        actix_rt::spawn(async move {
            loop {
                let received = tokio::select! {
                    received = events.recv() => received,
                    // The session is gone: nothing is left waiting for an event that may never
                    // come (a stateless call's session lives as long as its POST).
                    _ = &mut dropped => return,
                };
                let event = match received {
                    Ok(event) => event,
                    // Fell behind: every list may have changed (log messages are lost).
                    Err(RecvError::Lagged(_)) => Event::ListChanged("tools"),
                    Err(RecvError::Closed) => return,
                };
                let Some(session) = session.upgrade() else {
                    return;
                };
                match &event {
                    Event::ListChanged(changed) => session.list_changed(changed),
                    Event::Log { server, message } => session.log(server, message),
                    Event::ResourceUpdated { server, uri } => session.resource_updated(server, uri),
                    Event::SignedIn { owner, elicitation } => {
                        session.signed_in(owner, elicitation);
                    }
                }
            }
        });
    }
}

impl Session {
    /// `owner` finished the sign-in of URL elicitation `elicitation`: their sessions are told.
    fn signed_in(&self, owner: &crate::owner::Owner, elicitation: &str) {
        if self.owner == *owner {
            let params = json!({ "elicitationId": elicitation });
            self.send(json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": params}));
        }
    }
}

/// A log message of `server` as the gateway passes it on: its logger named after the server.
pub(super) fn log_params(
    server: &str,
    message: &actix_mcp::protocol::notifications::LogMessage,
) -> Value {
    let logger = match &message.logger {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_owned(),
    };
    json!({"level": message.level, "logger": logger, "data": message.data})
}
