//! Routing of incoming frames: one place reads every frame and sends it where its id says.
//!
//! Responses go to the request states. Requests from the server have ids of the *server's*
//! numbering and live in [`ServerRequests`], a separate table: a server's
//! `notifications/cancelled` is looked up there only, so it can never cancel one of our requests
//! that happens to share the id (rmcp #1251).

use std::collections::HashMap;

use futures::FutureExt as _;
use serde_json::{json, value::RawValue, Value};

use super::{
    handlers::{HandlerError, ELICITATION, SAMPLING},
    Connection, ServerRequestDone, ServerTaskDone,
};
use crate::{
    cancellation::Cancellation,
    error::Error,
    protocol::{
        elicitation::{UrlElicitation, URL_ELICITATION_REQUIRED},
        jsonrpc::{
            response_frame, ErrorObject, FrameProblem, Incoming, IncomingFrame, RequestId, WireId,
            METHOD_NOT_FOUND,
        },
        notifications::{Progress, ServerNotification},
    },
    transport::FrameKind,
};

/// How much of an error answer's body is kept for [`Error::Http`].
const ERROR_BODY_LIMIT: usize = 1024;

/// What the router has counted. Counters only grow.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct InboundCounters {
    pub invalid_frames: u64,
    pub server_requests: u64,
    pub notifications: u64,
    pub notifications_dropped: u64,
    pub server_requests_cancelled: u64,
}

/// Requests the server sent us that are being answered, each with the token its handler
/// watches.
#[derive(Default)]
pub(super) struct ServerRequests {
    running: HashMap<WireId, Cancellation>,
}

impl ServerRequests {
    /// The connection ended: tell every running handler.
    pub fn cancel_all(&mut self) {
        for (_, token) in self.running.drain() {
            token.cancel_with_reason("connection closed");
        }
    }
}

impl Connection {
    /// Routes one frame; `false` if it is not JSON-RPC (skipped and counted).
    pub(super) fn on_frame(&mut self, bytes: &[u8]) -> bool {
        // A JSON array is a batch (allowed by the 2025-03-26 revision only): route each element.
        if bytes.first() == Some(&b'[') {
            return match serde_json::from_slice::<Vec<&RawValue>>(bytes) {
                Ok(items) => {
                    for item in items {
                        self.on_frame(item.get().as_bytes());
                    }
                    true
                }
                Err(e) => self.skip_frame(bytes, FrameProblem::NotJson(e)),
            };
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
        true
    }

    /// The body of a message transport's answer to `request`: if it is not JSON-RPC, the request
    /// fails rather than wait for an answer that will not come on this stream.
    pub(super) fn on_reply(&mut self, request: RequestId, body: &[u8]) {
        let body = body.trim_ascii_start();
        if body.is_empty() {
            return;
        }
        if !self.on_frame(body) {
            let error = Error::Protocol("the server's answer is not JSON-RPC".into());
            self.requests.get().failed(request, error);
        }
    }

    /// A message transport's request refused with an HTTP error status: its JSON-RPC error if
    /// the body holds one, else [`Error::Http`].
    pub(super) fn on_refused(&mut self, request: RequestId, status: u16, body: &[u8]) {
        let answer = IncomingFrame::parse(body).and_then(IncomingFrame::classify);
        if let Ok(Incoming::Response { id, outcome }) = answer {
            if id.as_request_id() == Some(request) {
                return self.on_response(&id, outcome);
            }
        }
        let end = body.len().min(ERROR_BODY_LIMIT);
        let body = String::from_utf8_lossy(&body[..end]).into_owned();
        self.requests
            .get()
            .failed(request, Error::Http { status, body });
    }

    fn skip_frame(&mut self, bytes: &[u8], problem: FrameProblem) -> bool {
        self.counters.invalid_frames += 1;
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
        tracing::debug!(%problem, frame = %shown, "skipping invalid frame from server");
        false
    }

    fn on_response(&mut self, id: &WireId, outcome: Result<&RawValue, ErrorObject>) {
        let outcome = match outcome {
            Ok(result) => Ok(result.to_owned()),
            Err(e) => Err(server_error(e)),
        };
        if !self.requests.get().answered(id.as_request_id(), outcome) {
            // Cancelled (possibly with its cancel still waiting for the write-complete event,
            // which the answer made moot), or never ours.
            tracing::debug!(?id, "dropping response nobody waits for");
        }
    }

    fn on_server_request(&mut self, id: WireId, method: &str, params: Option<&RawValue>) {
        self.counters.server_requests += 1;
        if self.server_requests.running.contains_key(&id) {
            tracing::debug!(
                ?id,
                "server reused the id of a request still being answered"
            );
            return;
        }
        let token = Cancellation::new();
        self.server_requests
            .running
            .insert(id.clone(), token.clone());
        if method == "ping" {
            return self.answer_server_request(id, Ok(json!({})));
        }
        let params = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .unwrap_or_else(|| json!({}));
        if matches!(
            method,
            "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list"
        ) {
            for (to, answer) in self.server_tasks.request(id, method, &params) {
                self.answer_server_request(to, answer);
            }
            return;
        }
        let Some(handler) = self.handlers.get(method, Some(&params)) else {
            let refusal = ErrorObject {
                code: METHOD_NOT_FOUND,
                message: format!("method not found: {method}"),
                data: None,
            };
            return self.answer_server_request(id, Err(refusal));
        };
        // Task-augmented (2025-11-25): answered at once with the task made of it; the handler
        // runs on under the task's own token, and its end answers `tasks/result`.
        let task = params.get("task").filter(|t| t.is_object()).cloned();
        if let (Some(task), SAMPLING | ELICITATION) = (task, method) {
            let token = Cancellation::new();
            let (created, task_id) = self.server_tasks.create(task.get("ttl"), token.clone());
            let work = std::panic::AssertUnwindSafe(handler(params, token)).catch_unwind();
            let connection = self.myself.clone();
            actix_rt::spawn(async move {
                let outcome = work
                    .await
                    .unwrap_or_else(|_| Err(HandlerError::internal("handler panicked")));
                if let Some(addr) = connection.and_then(|c| c.upgrade()) {
                    addr.do_send(ServerTaskDone { task_id, outcome });
                }
            });
            return self.answer_server_request(id, Ok(created));
        }
        // Off the actor: a slow handler never delays response routing. Its answer comes back as
        // a message; a panic becomes an internal error instead of silence.
        let work = std::panic::AssertUnwindSafe(handler(params, token)).catch_unwind();
        let connection = self.myself.clone();
        actix_rt::spawn(async move {
            let outcome = work
                .await
                .unwrap_or_else(|_| Err(HandlerError::internal("handler panicked")));
            if let Some(addr) = connection.and_then(|c| c.upgrade()) {
                addr.do_send(ServerRequestDone { id, outcome });
            }
        });
    }

    pub(super) fn answer_server_request(
        &mut self,
        id: WireId,
        outcome: Result<Value, ErrorObject>,
    ) {
        if self.server_requests.running.remove(&id).is_none() {
            // Cancelled by the server (or the connection closed): its answer is not sent.
            self.counters.server_requests_cancelled += 1;
            return;
        }
        match response_frame(&id, outcome) {
            Ok(frame) => {
                // Refused only once the connection ended: nobody is there to answer.
                let _ = self
                    .requests
                    .get()
                    .send_frame(FrameKind::Response, None, frame);
            }
            Err(e) => tracing::warn!(error = %e, "cannot serialize a response to the server"),
        }
    }

    fn on_notification(&mut self, method: &str, params: Option<&RawValue>) {
        self.counters.notifications += 1;
        if method == "notifications/cancelled" {
            // The server gives up on one of *its* requests: look in its table, never in ours.
            let id = params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|p| serde_json::from_value::<WireId>(p.get("requestId")?.clone()).ok());
            match id.and_then(|id| self.server_requests.running.remove(&id)) {
                Some(token) => {
                    tracing::debug!("server cancelled its request");
                    token.cancel_with_reason("cancelled by the server");
                }
                None => tracing::debug!("server cancelled an unknown request"),
            }
            return;
        }
        if method == "notifications/progress" {
            return self.on_progress(params);
        }
        let params = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
        if let Some(notification) = ServerNotification::from_wire(method, params) {
            self.publish(notification);
        }
    }

    /// Hands a notification to every subscriber without ever waiting on one.
    fn publish(&mut self, notification: ServerNotification) {
        if let Some(observer) = &self.observer {
            observer(&notification);
        }
        if let Some(sender) = &self.notifications {
            // Err only means nobody subscribed right now.
            let _ = sender.send(notification.clone());
        }
        let counters = &mut self.counters;
        self.subscribers
            .retain(|recipient| match recipient.try_send(notification.clone()) {
                Ok(()) => true,
                Err(actix::prelude::SendError::Full(_)) => {
                    counters.notifications_dropped += 1;
                    true
                }
                Err(actix::prelude::SendError::Closed(_)) => false,
            });
    }

    /// Progress goes to its request's listener while the request is in flight; progress for a
    /// finished, cancelled or unknown request is dropped.
    fn on_progress(&mut self, params: Option<&RawValue>) {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Params {
            progress_token: WireId,
            #[serde(flatten)]
            progress: Progress,
        }
        let Some(params) = params.and_then(|p| serde_json::from_str::<Params>(p.get()).ok()) else {
            self.counters.invalid_frames += 1;
            return;
        };
        let token = params.progress_token.as_request_id();
        // Progress for a request already answered (a task's creating call: its task runs on)
        // may still be wanted above.
        if let (Some(id), Some(observer)) = (token, &self.progress_observer) {
            if !self.requests.get().listens_to_progress(id) && observer(id, &params.progress) {
                return;
            }
        }
        self.requests.get().progress(token, params.progress);
    }
}

/// The server's error answer; `-32042` (URL elicitation required) becomes a typed error listing
/// the elicitations the user must complete.
fn server_error(e: ErrorObject) -> Error {
    if e.code == URL_ELICITATION_REQUIRED {
        let elicitations = e
            .data
            .as_ref()
            .and_then(|d| d.get("elicitations"))
            .and_then(Value::as_array)
            .filter(|list| {
                list.iter()
                    .all(|item| serde_json::from_value::<UrlElicitation>(item.clone()).is_ok())
            });
        if let Some(elicitations) = elicitations {
            return Error::UrlElicitationRequired {
                message: e.message,
                elicitations: elicitations.clone(),
            };
        }
    }
    Error::Server {
        code: e.code,
        message: e.message,
        data: e.data,
    }
}
