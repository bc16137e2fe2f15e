//! Routing of incoming frames: one place reads every frame and sends it where its id says.
//!
//! Responses go to our in-flight table. Requests from the server have ids of the *server's*
//! numbering and live in [`ServerRequests`], a separate table: a server's
//! `notifications/cancelled` is looked up there only, so it can never cancel one of our requests
//! that happens to share the id (rmcp #1251).

use std::collections::HashSet;

use serde_json::{json, value::RawValue};

use super::{outbox::Outgoing, Connection};
use crate::{
    error::Error,
    protocol::jsonrpc::{
        response_frame, ErrorObject, FrameProblem, Incoming, IncomingFrame, WireId,
        METHOD_NOT_FOUND,
    },
};

/// Requests the server sent us that are being answered.
#[derive(Default)]
pub(crate) struct ServerRequests {
    running: HashSet<WireId>,
}

impl Connection {
    pub(super) fn on_frame(&mut self, bytes: &[u8]) {
        // A JSON array is a batch (allowed by the 2025-03-26 revision only): route each element.
        if bytes.first() == Some(&b'[') {
            match serde_json::from_slice::<Vec<&RawValue>>(bytes) {
                Ok(items) => items
                    .into_iter()
                    .for_each(|item| self.on_frame(item.get().as_bytes())),
                Err(e) => self.skip_frame(bytes, FrameProblem::NotJson(e)),
            }
            return;
        }
        let incoming = match IncomingFrame::parse(bytes).and_then(IncomingFrame::classify) {
            Ok(incoming) => incoming,
            Err(problem) => return self.skip_frame(bytes, problem),
        };
        match incoming {
            Incoming::Response { id, outcome } => self.on_response(&id, outcome),
            Incoming::ServerRequest { id, method, params } => {
                self.on_server_request(id, &method, params)
            }
            Incoming::Notification { method, params } => self.on_notification(&method, params),
        }
    }

    fn skip_frame(&mut self, bytes: &[u8], problem: FrameProblem) {
        self.stats.invalid_frames += 1;
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
        tracing::debug!(%problem, frame = %shown, "skipping invalid frame from server");
    }

    fn on_response(&mut self, id: &WireId, outcome: Result<&RawValue, ErrorObject>) {
        let entry = id.as_request_id().and_then(|id| self.in_flight.remove(&id));
        match entry {
            Some(mut entry) if entry.reply.is_some() => {
                self.stats.responses_delivered += 1;
                entry.answer(match outcome {
                    Ok(result) => Ok(result.to_owned()),
                    Err(e) => Err(Error::Server {
                        code: e.code,
                        message: e.message,
                        data: e.data,
                    }),
                });
            }
            // Cancelled (possibly with its cancel still waiting for the write-complete event:
            // removing the entry drops that cancel, which is moot now), or never ours.
            _ => {
                self.stats.late_responses += 1;
                tracing::debug!(?id, "dropping response nobody waits for");
            }
        }
    }

    fn on_server_request(&mut self, id: WireId, method: &str, _params: Option<&RawValue>) {
        self.stats.server_requests += 1;
        if !self.server_requests.running.insert(id.clone()) {
            tracing::debug!(
                ?id,
                "server reused the id of a request still being answered"
            );
            return;
        }
        // Answered inline for now; handlers that run off the actor keep their entry until done.
        let outcome = match method {
            "ping" => Ok(json!({})),
            _ => Err(ErrorObject {
                code: METHOD_NOT_FOUND,
                message: format!("method not found: {method}"),
                data: None,
            }),
        };
        self.answer_server_request(id, outcome);
    }

    fn answer_server_request(
        &mut self,
        id: WireId,
        outcome: Result<serde_json::Value, ErrorObject>,
    ) {
        if !self.server_requests.running.remove(&id) {
            return; // cancelled by the server: its answer is not sent
        }
        match response_frame(&id, outcome) {
            Ok(frame) => self.outbox.push(Outgoing::Frame(frame)),
            Err(e) => tracing::warn!(error = %e, "cannot serialize a response to the server"),
        }
    }

    fn on_notification(&mut self, method: &str, params: Option<&RawValue>) {
        self.stats.notifications += 1;
        if method == "notifications/cancelled" {
            // The server gives up on one of *its* requests: look in its table, never in ours.
            let id = params
                .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
                .and_then(|p| serde_json::from_value::<WireId>(p.get("requestId")?.clone()).ok());
            match id {
                Some(id) if self.server_requests.running.remove(&id) => {
                    tracing::debug!(?id, "server cancelled its request");
                }
                other => tracing::debug!(id = ?other, "server cancelled an unknown request"),
            }
            return;
        }
        tracing::debug!(method, "notification from server");
    }
}
