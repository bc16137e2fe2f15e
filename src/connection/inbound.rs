//! Routing of incoming frames: one place reads every frame and sends it where its id says.
//!
//! Responses go to the request states. Requests from the server have ids of the *server's*
//! numbering and live in [`ServerRequests`], a separate table: a server's
//! `notifications/cancelled` is looked up there only, so it can never cancel one of our requests
//! that happens to share the id (rmcp #1251).

use std::collections::HashMap;

use futures::FutureExt as _;
use serde::Deserialize as _;
use serde_json::{json, value::RawValue, Value};

use super::{
    handlers::{BoxedHandler, HandlerError, ELICITATION, SAMPLING},
    server_tasks::TaskRequest,
    Connection, ServerRequestDone, ServerTaskDone,
};
use crate::{
    cancellation::Cancellation,
    error::Error,
    protocol::{
        elicitation::{UrlElicitation, URL_ELICITATION_REQUIRED},
        jsonrpc::{
            response_frame, ErrorObject, FrameProblem, Incoming, IncomingFrame, Messages,
            RequestId, WireId, METHOD_NOT_FOUND,
        },
        notifications::{Progress, ServerNotification},
    },
    transport::FrameKind,
};

/// How much of an error answer's body is kept for [`Error::Http`].
const ERROR_BODY_LIMIT: usize = 1024;

/// The server's requests we hold at most: those whose handler runs (or that wait, like a
/// `tasks/result`), and, apart, our answers queued unwritten. Past it a new request is refused
/// with [`TOO_MANY_REQUESTS`], or, while the answers pile up (the server does not read what we
/// write), dropped unanswered; both are counted (`server_requests_refused`).
pub(super) const MAX_SERVER_REQUESTS: usize = 1024;

/// The error a server request gets past [`MAX_SERVER_REQUESTS`] (or when [`MAX_TASKS`] of the
/// server's tasks still run): internal error.
///
/// [`MAX_TASKS`]: super::server_tasks::MAX_TASKS
const TOO_MANY_REQUESTS: i64 = -32603;

/// What the router has counted. Counters only grow.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct InboundCounters {
    pub invalid_frames: u64,
    pub server_requests: u64,
    pub notifications: u64,
    pub notifications_dropped: u64,
    pub server_requests_cancelled: u64,
    pub server_requests_refused: u64,
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
        // A batch's elements are routed one by one, never split again: an element that is an
        // array is not a message (routing it as a batch again let a deeply nested array, which
        // serde_json reads as one raw value without a depth limit, overflow the stack).
        match Messages::of(bytes) {
            Ok(Messages::One(message)) => self.on_message(message),
            Ok(Messages::Batch(items)) => {
                for item in items {
                    self.on_message(item.get().as_bytes());
                }
                true
            }
            Err(problem) => self.skip_frame(bytes, problem),
        }
    }

    /// Routes one message; `false` if it is not JSON-RPC (skipped and counted).
    fn on_message(&mut self, bytes: &[u8]) -> bool {
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
    pub(super) fn on_refused(
        &mut self,
        request: RequestId,
        status: u16,
        body: &[u8],
        retry_after: Option<std::time::Duration>,
    ) {
        let answer = IncomingFrame::parse(body).and_then(IncomingFrame::classify);
        if let Ok(Incoming::Response { id, outcome }) = answer {
            if id.as_request_id() == Some(request) {
                return self.on_response(&id, outcome);
            }
        }
        let end = body.len().min(ERROR_BODY_LIMIT);
        let body = String::from_utf8_lossy(&body[..end]).into_owned();
        self.requests.get().failed(
            request,
            Error::Http {
                status,
                body,
                retry_after,
            },
        );
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
        let Some(token) = self.admit_server_request(&id, method) else {
            return;
        };
        if method == "ping" {
            return self.answer_server_request(id, Ok(json!({})));
        }
        let params = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .unwrap_or_else(|| json!({}));
        if let Some(request) = TaskRequest::of(method) {
            let now = time::OffsetDateTime::now_utc();
            for (to, answer) in self.server_tasks.request(id, request, &params, now) {
                self.answer_server_request(to, answer);
            }
            return;
        }
        let Some(handler) = self.handlers.get(method, Some(&params)).cloned() else {
            let refusal = ErrorObject {
                code: METHOD_NOT_FOUND,
                message: format!("method not found: {method}"),
                data: None,
            };
            return self.answer_server_request(id, Err(refusal));
        };
        // Task-augmented (2025-11-25): answered at once with the task made of it.
        let task = params.get("task").filter(|t| t.is_object()).cloned();
        match (task, method) {
            (Some(task), SAMPLING | ELICITATION) => {
                self.run_as_task(id, &handler, method, params, task.get("ttl"));
            }
            _ => self.run_handler(&handler, method, params, token, HandlerReport::Request(id)),
        }
    }

    /// Takes a server request into the table of running ones: its handler's token, or `None`
    /// when it is dropped (a reused id, our answers unread) or refused (too many running).
    fn admit_server_request(&mut self, id: &WireId, method: &str) -> Option<Cancellation> {
        if self.server_requests.running.contains_key(id) {
            tracing::debug!(
                ?id,
                "server reused the id of a request still being answered"
            );
            return None;
        }
        if self.requests.peek().queued_answers() >= MAX_SERVER_REQUESTS {
            // The server does not read what we write: one more answer would only queue.
            self.counters.server_requests_refused += 1;
            tracing::debug!(
                ?id,
                method,
                "server request dropped: our answers are not read"
            );
            return None;
        }
        let token = Cancellation::new();
        self.server_requests
            .running
            .insert(id.clone(), token.clone());
        // A ping holds nothing: it is answered whatever else runs.
        if method != "ping" && self.server_requests.running.len() > MAX_SERVER_REQUESTS {
            self.counters.server_requests_refused += 1;
            let busy = format!("too many requests in flight (at most {MAX_SERVER_REQUESTS})");
            self.answer_server_request(id.clone(), Err(too_many(busy)));
            return None;
        }
        Some(token)
    }

    /// Answers request `id` with a task and runs its handler under the task's own token; the
    /// handler's end answers the task's `tasks/result`.
    fn run_as_task(
        &mut self,
        id: WireId,
        handler: &BoxedHandler,
        method: &str,
        params: Value,
        ttl: Option<&Value>,
    ) {
        let token = Cancellation::new();
        let now = time::OffsetDateTime::now_utc();
        let Some((created, task_id)) = self.server_tasks.create(ttl, token.clone(), now) else {
            self.counters.server_requests_refused += 1;
            let busy = format!(
                "too many tasks running (at most {})",
                super::server_tasks::MAX_TASKS
            );
            return self.answer_server_request(id, Err(too_many(busy)));
        };
        self.run_handler(handler, method, params, token, HandlerReport::Task(task_id));
        self.answer_server_request(id, created);
    }

    /// Runs a handler off the actor, so a slow one never delays response routing. Its answer
    /// comes back as a message; a panic becomes an internal error instead of silence.
    fn run_handler(
        &self,
        handler: &BoxedHandler,
        method: &str,
        params: Value,
        token: Cancellation,
        report: HandlerReport,
    ) {
        use tracing::Instrument;
        let span = super::handler_span::open(method, &params);
        let work =
            std::panic::AssertUnwindSafe(handler(params, token).instrument(span)).catch_unwind();
        let connection = self.myself.clone();
        actix_rt::spawn(async move {
            let outcome = work
                .await
                .unwrap_or_else(|_| Err(HandlerError::internal("handler panicked")));
            let Some(addr) = connection.and_then(|c| c.upgrade()) else {
                return;
            };
            match report {
                HandlerReport::Request(id) => addr.do_send(ServerRequestDone { id, outcome }),
                HandlerReport::Task(task_id) => addr.do_send(ServerTaskDone { task_id, outcome }),
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
            return self.on_cancelled(params);
        }
        if method == "notifications/progress" {
            return self.on_progress(params);
        }
        let params = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
        if let Some(notification) = ServerNotification::from_wire(method, params) {
            self.publish(notification);
        }
    }

    /// The server gives up on one of *its* requests: look in its table, never in ours.
    fn on_cancelled(&mut self, params: Option<&RawValue>) {
        let Some(params) = params.and_then(|p| serde_json::from_str::<Cancelled>(p.get()).ok())
        else {
            self.counters.invalid_frames += 1;
            return;
        };
        match self.server_requests.running.remove(&params.request_id) {
            Some(token) => {
                tracing::debug!("server cancelled its request");
                token.cancel_with_reason("cancelled by the server");
            }
            None => tracing::debug!("server cancelled an unknown request"),
        }
    }

    /// Hands a notification to every subscriber without ever waiting on one.
    fn publish(&mut self, notification: ServerNotification) {
        if let Some(observer) = &self.observer {
            observer(&notification);
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
        if let Some(sender) = self.notifications.as_ref().and_then(|p| p.get()) {
            // Err only means nobody subscribed right now.
            let _ = sender.send(notification);
        }
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

/// Where a handler's end is reported: the request it answers, or the task it runs as.
enum HandlerReport {
    Request(WireId),
    Task(String),
}

/// The params of `notifications/cancelled` (its `reason` is only logged by the server).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cancelled {
    request_id: WireId,
}

fn too_many(message: String) -> ErrorObject {
    ErrorObject {
        code: TOO_MANY_REQUESTS,
        message,
        data: None,
    }
}

/// The server's error answer; `-32042` (URL elicitation required) becomes a typed error listing
/// the elicitations the user must complete (when its `data` lists them as the spec says).
fn server_error(e: ErrorObject) -> Error {
    #[derive(serde::Deserialize)]
    struct Required {
        elicitations: Vec<UrlElicitation>,
    }
    if e.code == URL_ELICITATION_REQUIRED {
        if let Some(Ok(required)) = e.data.as_ref().map(Required::deserialize) {
            return Error::UrlElicitationRequired {
                elicitations: required.elicitations,
                message: e.message,
            };
        }
    }
    Error::Server {
        code: e.code,
        message: e.message,
        data: e.data,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::{
        transport::memory::{self, MemoryPeer},
        Client, ConnectOptions,
    };

    async fn connected(options: ConnectOptions) -> (Client, MemoryPeer) {
        let (transport, mut peer) = memory::pair();
        let server = async move {
            peer.accept_handshake("2025-11-25")
                .await
                .expect("handshake");
            peer
        };
        let (client, peer) = futures::join!(options.connect(transport), server);
        (client.expect("connect"), peer)
    }

    async fn next_frame(peer: &mut MemoryPeer) -> serde_json::Value {
        tokio::time::timeout(Duration::from_secs(10), peer.recv())
            .await
            .expect("a frame within 10 s")
            .expect("transport open")
    }

    /// The server cancels its own requests by integer or string id; a cancel whose `requestId`
    /// is neither is counted as invalid and cancels nothing.
    #[actix::test]
    async fn a_server_cancel_names_its_request_by_integer_or_string_id() {
        let (told, mut cancelled) = tokio::sync::mpsc::unbounded_channel();
        let options = Client::builder().on_request_raw("x/wait", move |params, token| {
            let told = told.clone();
            async move {
                token.cancelled().await;
                let _ = told.send(params["tag"].clone());
                Ok(json!({}))
            }
        });
        let (client, mut peer) = connected(options).await;
        for (id, tag) in [(json!(7), "integer"), (json!("7"), "string")] {
            peer.send(&json!({"jsonrpc": "2.0", "id": id, "method": "x/wait",
                "params": {"tag": tag}}));
        }
        let cancel = |id: serde_json::Value| {
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "gave up"}})
        };
        peer.send(&cancel(json!("7")));
        assert_eq!(cancelled.recv().await.unwrap(), "string", "\"7\" is not 7");
        peer.send(&cancel(json!(7)));
        assert_eq!(cancelled.recv().await.unwrap(), "integer");

        peer.send(&cancel(json!({"id": 7})));
        // A ping after it: its answer means the cancel before it was read.
        peer.send(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
        assert_eq!(next_frame(&mut peer).await["id"], "p");
        assert_eq!(client.stats().await.unwrap().invalid_frames, 1);
    }

    // Found while building the fuzz targets (the batch splitter is now `jsonrpc::Messages`): a
    // batch's elements were routed as frames again, so a server's array nested as deep as a
    // frame allows recursed once per level and overflowed the actor's stack.
    #[actix::test]
    async fn a_deeply_nested_batch_is_one_invalid_message_regression() {
        let (client, mut peer) = connected(Client::builder()).await;
        let depth = 200_000;
        peer.send_raw(format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
        let call = client.request::<serde_json::Value>("still/alive", ());
        let call = actix_rt::spawn(async move { call.await });
        let request = next_frame(&mut peer).await;
        assert_eq!(request["method"], "still/alive");
        peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": true}}));
        assert_eq!(call.await.unwrap().unwrap(), json!({"ok": true}));
        assert_eq!(client.stats().await.unwrap().invalid_frames, 1);
    }
}
