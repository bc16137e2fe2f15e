//! The messages a caller sends to a [`Connection`], named for the caller's intent.

use std::{
    borrow::Cow,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use actix::Message;

use serde::Serialize;
use serde_json::{value::RawValue, Value};

use super::{handlers::HandlerError, in_flight::Outcome, inbox::Link};
use crate::{
    error::{CloseReason, Error},
    protocol::{
        jsonrpc::{RawResult, RequestId},
        notifications::{ProgressCallback, ServerNotification},
        routing::Routing,
    },
    timeout::Timeout,
};

/// Send a request to the server.
///
/// The actor replies at once with a [`PendingReply`]: the request's id, and a future of its
/// result. The id is also known before sending, from [`Request::id`], so a [`Cancel`] can be sent
/// at any time.
#[derive(Debug)]
pub struct Request {
    pub(crate) id: RequestId,
    pub(crate) method: Cow<'static, str>,
    /// Serialized by the caller, so the actor only copies bytes, and a caller's JSON tree is
    /// freed before the request waits in the queue. `Err` holds why serialization failed.
    pub(crate) params: Result<Option<Box<RawValue>>, String>,
    pub(crate) options: PackedOptions,
}

/// [`RequestOptions`] as a request carries them to the actor: 16 bytes instead of 40, since
/// every request in flight pays for them while it waits in the queue.
pub(crate) struct PackedOptions {
    /// What few requests have, in one box: most requests carry a null pointer here.
    extras: Option<Box<RequestExtras>>,
    pub timeout: Option<Timeout>,
    pub cancel_on_wire: bool,
}

#[derive(Default)]
struct RequestExtras {
    progress: Option<ProgressCallback>,
    /// What the 2026-07-28 HTTP transport routes on besides the method (`Mcp-Name`,
    /// `Mcp-Param-*`).
    routing: Option<Routing>,
}

impl PackedOptions {
    fn extras(&mut self) -> &mut RequestExtras {
        self.extras.get_or_insert_with(Box::default)
    }

    pub fn set_progress(&mut self, progress: Option<ProgressCallback>) {
        match progress {
            Some(progress) => self.extras().progress = Some(progress),
            None => {
                if let Some(extras) = &mut self.extras {
                    extras.progress = None;
                }
            }
        }
    }

    pub fn take_progress(&mut self) -> Option<ProgressCallback> {
        self.extras.as_mut()?.progress.take()
    }

    pub fn has_progress(&self) -> bool {
        self.extras.as_ref().is_some_and(|e| e.progress.is_some())
    }

    pub fn set_routing(&mut self, routing: Option<Routing>) {
        match routing {
            Some(routing) => self.extras().routing = Some(routing),
            None => {
                if let Some(extras) = &mut self.extras {
                    extras.routing = None;
                }
            }
        }
    }

    pub fn routing(&self) -> Option<&Routing> {
        self.extras.as_ref()?.routing.as_ref()
    }

    pub fn take_routing(&mut self) -> Option<Routing> {
        self.extras.as_mut()?.routing.take()
    }
}

// Every request waiting to be written pays for its box; keep it where it was (72 bytes).
const _: () = assert!(std::mem::size_of::<Request>() == 72);

impl std::fmt::Debug for PackedOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestOptions")
            .field("cancel_on_wire", &self.cancel_on_wire)
            .field("progress", &self.has_progress())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl From<RequestOptions> for PackedOptions {
    fn from(options: RequestOptions) -> Self {
        let mut packed = Self {
            extras: None,
            timeout: options.timeout.map(Timeout::new),
            cancel_on_wire: options.cancel_on_wire,
        };
        packed.set_progress(options.progress);
        packed
    }
}

/// Per-request options the actor acts on.
#[non_exhaustive]
pub struct RequestOptions {
    /// Whether a cancel of this request, once written, is sent to the server. `false` for
    /// `initialize`, which the protocol forbids cancelling; the caller is still woken.
    pub cancel_on_wire: bool,
    /// Receives this request's `notifications/progress` while it is in flight. The request's
    /// params must carry `_meta.progressToken` equal to its id (the `Client` does this).
    pub progress: Option<ProgressCallback>,
    /// When this passes before the answer, the actor fails the request with
    /// [`Error::Timeout`] and cancels it on the wire like an explicit cancel. Kept in whole
    /// milliseconds (rounded up), up to about 49 days.
    pub timeout: Option<std::time::Duration>,
}

impl Default for RequestOptions {
    fn default() -> Self {
        Self {
            cancel_on_wire: true,
            progress: None,
            timeout: None,
        }
    }
}

impl std::fmt::Debug for RequestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestOptions")
            .field("cancel_on_wire", &self.cancel_on_wire)
            .field("progress", &self.progress.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Request {
    /// A request with a freshly allocated id. `params` must be a JSON object or absent.
    pub fn new(method: impl Into<Cow<'static, str>>, params: Option<Value>) -> Self {
        Self::with_params(method, params.as_ref())
    }

    /// A request whose params are any serializable value (serialized now, once).
    /// A value that fails to serialize fails the request with [`Error::Protocol`].
    pub fn with_params<P: Serialize + ?Sized>(
        method: impl Into<Cow<'static, str>>,
        params: Option<&P>,
    ) -> Self {
        let params = match params {
            None => Ok(None),
            Some(p) => serde_json::value::to_raw_value(p)
                .map(Some)
                .map_err(|e| e.to_string()),
        };
        Self {
            id: RequestId::next(),
            method: method.into(),
            params,
            options: RequestOptions::default().into(),
        }
    }

    /// A request that fails as soon as it is submitted, with `why`: nothing is sent.
    pub(crate) fn refused(method: impl Into<Cow<'static, str>>, why: String) -> Self {
        Self {
            id: RequestId::next(),
            method: method.into(),
            params: Err(why),
            options: RequestOptions::default().into(),
        }
    }

    /// A retry of a request under a fresh id (2026-07-28 `input_required` rounds).
    pub(crate) fn retry(
        id: RequestId,
        method: Cow<'static, str>,
        params: Box<RawValue>,
        timeout: Option<Timeout>,
        progress: Option<ProgressCallback>,
        routing: Option<Routing>,
    ) -> Self {
        let mut options = PackedOptions::from(RequestOptions::default());
        options.timeout = timeout;
        options.set_progress(progress);
        options.set_routing(routing);
        Self {
            id,
            method,
            params: Ok(Some(params)),
            options,
        }
    }

    /// Sets what the 2026-07-28 HTTP transport routes on.
    pub(crate) fn with_routing(mut self, routing: Option<Routing>) -> Self {
        self.options.set_routing(routing);
        self
    }

    /// Replaces the request's options (timeout, progress, wire cancel).
    pub fn with_options(mut self, options: RequestOptions) -> Self {
        self.options = options.into();
        self
    }

    /// Merges `meta` into `params._meta` (creating both if needed). Params that are not an
    /// object make the request fail with [`Error::Protocol`].
    pub(crate) fn merge_meta(&mut self, meta: serde_json::Map<String, Value>) {
        let merged = match &self.params {
            Err(e) => Err(e.clone()),
            Ok(raw) => {
                let params = match raw {
                    None => Ok(serde_json::Map::new()),
                    Some(raw) => serde_json::from_str::<serde_json::Map<String, Value>>(raw.get())
                        .map_err(|_| "params must be a JSON object to carry _meta".to_owned()),
                };
                params.and_then(|mut params| {
                    let slot = params
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(Default::default()));
                    match slot {
                        Value::Object(existing) => existing.extend(meta),
                        _ => return Err("params._meta must be an object".to_owned()),
                    }
                    serde_json::value::to_raw_value(&params)
                        .map(Some)
                        .map_err(|e| e.to_string())
                })
            }
        };
        self.params = merged;
    }

    /// The id this request will carry, internally and on the wire.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The JSON-RPC method name.
    pub fn method(&self) -> &str {
        &self.method
    }
}

impl Message for Request {
    type Result = PendingReply;
}

/// The protocol the connection speaks from now on: its version (`None`: not settled), and for the
/// 2026-07-28 era the `_meta` entries every request carries (see `protocol::discover::request_meta`).
/// Sent by the `Client` before the first frame of that version.
pub(crate) struct UseProtocol {
    pub version: Option<String>,
    pub request_meta: Option<Box<str>>,
}

impl Message for UseProtocol {
    type Result = ();
}

/// Deliver the server's notifications to this recipient too.
pub struct Subscribe(pub actix::Recipient<ServerNotification>);

impl Message for Subscribe {
    type Result = ();
}

/// A handler for a server request finished.
pub(crate) struct ServerRequestDone {
    pub id: crate::protocol::jsonrpc::WireId,
    pub outcome: Result<Value, HandlerError>,
}

impl Message for ServerRequestDone {
    type Result = ();
}

/// The handler of a task the server asked of us ended.
pub(crate) struct ServerTaskDone {
    pub task_id: String,
    pub outcome: Result<Value, HandlerError>,
}

impl Message for ServerTaskDone {
    type Result = ();
}

/// Cancel a request made on this connection. Does nothing if it already finished.
#[derive(Debug, Clone)]
pub struct Cancel {
    /// The request to cancel (from [`Request::id`] or [`PendingReply::id`]).
    pub id: RequestId,
    /// Sent in `notifications/cancelled` and given to the caller's [`Error::Cancelled`].
    pub reason: Option<String>,
}

impl Cancel {
    /// Cancels request `id` without a reason.
    pub fn new(id: RequestId) -> Self {
        Self { id, reason: None }
    }

    /// Cancels request `id` with `reason`.
    pub fn with_reason(id: RequestId, reason: impl Into<String>) -> Self {
        Self {
            id,
            reason: Some(reason.into()),
        }
    }
}

impl Message for Cancel {
    type Result = ();
}

/// Send a notification to the server. Replies once it is queued (not written).
#[derive(Debug, Clone)]
pub struct Notify {
    /// The notification's method name.
    pub method: String,
    /// The notification's params; `None` omits them.
    pub params: Option<Value>,
}

impl Message for Notify {
    type Result = Result<(), Error>;
}

/// Close the connection: pending requests fail with [`CloseReason::ClosedByClient`], the server
/// process gets EOF, then SIGTERM and SIGKILL if it lingers.
#[derive(Debug, Clone, Copy)]
pub struct Close;

impl Message for Close {
    type Result = ();
}

/// Get a watch that turns `true` once the transport released everything (for stdio: the
/// server process was reaped). Used to shut down gracefully before a program exits.
#[derive(Debug, Clone, Copy)]
pub struct WaitReleased;

impl Message for WaitReleased {
    type Result = tokio::sync::watch::Receiver<bool>;
}

/// Read the connection's counters.
#[derive(Debug, Clone, Copy)]
pub struct GetStats;

impl Message for GetStats {
    type Result = ConnectionStats;
}

/// What a connection has seen. Counters only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Requests currently in the in-flight table.
    pub in_flight: usize,
    /// Request frames handed to the transport.
    pub requests_written: u64,
    /// Responses delivered to a waiting caller.
    pub responses_delivered: u64,
    /// Requests cancelled before they were written: nothing went on the wire for them.
    pub cancelled_before_write: u64,
    /// Of `requests_written`, those the transport held before the server read them (HTTP: a
    /// `401` waiting for authorization) and that were cancelled there; also counted in
    /// `cancelled_before_write`.
    pub cancelled_while_held: u64,
    /// `notifications/cancelled` frames handed to the transport.
    pub cancels_sent: u64,
    /// Written requests cancelled by aborting them on the transport instead of
    /// `notifications/cancelled` (the 2026-07-28 era over HTTP: the request's POST is aborted).
    pub requests_aborted: u64,
    /// Responses dropped because nobody waits for them (cancelled, or an unknown id).
    pub late_responses: u64,
    /// Incoming frames skipped as invalid JSON or not JSON-RPC.
    pub invalid_frames: u64,
    /// Requests the server sent us.
    pub server_requests: u64,
    /// Notifications the server sent us.
    pub notifications: u64,
    /// Progress notifications for no request with a listener (finished, cancelled, unknown).
    pub progress_dropped: u64,
    /// Notifications dropped for an actor subscriber whose mailbox was full.
    pub notifications_dropped: u64,
    /// Handler answers not sent because the server had cancelled its request.
    pub server_requests_cancelled: u64,
    /// Server requests refused because too many were held: answered with an error past 1024
    /// running (or 1024 of its tasks running), dropped unanswered while 1024 of our answers wait
    /// to be written (the server does not read them).
    pub server_requests_refused: u64,
}

/// The actor's reply to [`Request`]: a future of the request's result.
///
/// **Dropping it before it resolves cancels the request**, exactly like [`Cancel`] without a
/// reason: a request not yet written is never written, a written one gets
/// `notifications/cancelled`.
#[must_use = "dropping a PendingReply cancels the request"]
pub struct PendingReply {
    id: RequestId,
    rx: oneshot::Receiver<Outcome>,
    /// Present while a drop must cancel.
    connection: Option<Link>,
}

impl PendingReply {
    pub(crate) fn new(id: RequestId, rx: oneshot::Receiver<Outcome>, connection: Link) -> Self {
        Self {
            id,
            rx,
            connection: Some(connection),
        }
    }

    /// The id of the request this reply is for.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// Cancels the request and returns the error its caller sees.
    pub fn cancel(mut self, reason: Option<String>) -> Error {
        self.cancel_in_place(reason.clone());
        Error::cancelled(reason)
    }

    /// Cancels the request; the reply stays pending (resolves with the cancel error or not at all).
    pub(crate) fn cancel_in_place(&mut self, reason: Option<String>) {
        if let Some(link) = self.connection.take() {
            link.cancel(self.id, reason);
        }
    }

    /// Forgets the request without cancelling it (its response will be dropped when it comes).
    pub fn detach(mut self) {
        self.connection = None;
    }
}

impl Future for PendingReply {
    type Output = Result<RawResult, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let outcome = match Pin::new(&mut self.rx).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(outcome)) => outcome.map_err(|e| *e),
            Poll::Ready(Err(_)) => Err(Error::Closed {
                reason: CloseReason::ActorStopped,
            }),
        };
        self.connection = None;
        Poll::Ready(outcome)
    }
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        self.cancel_in_place(None);
    }
}

impl std::fmt::Debug for PendingReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingReply")
            .field("id", &self.id)
            .finish()
    }
}
