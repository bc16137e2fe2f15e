//! [`Call`]: a request builder that is awaited, and the future that runs it.
//!
//! What dropping it means: before the first poll, nothing was sent and nothing happens. After
//! that, dropping the future cancels the request exactly like a cancelled token does (without a
//! reason): a request not yet written is never written, a written one gets
//! `notifications/cancelled` once its write completed.

use std::{
    future::{Future, IntoFuture},
    marker::PhantomData,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use actix::Addr;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use crate::{
    connection::{Cancel, Connection, Request, Submit},
    error::Error,
    protocol::RawResult,
    Cancellation, CloseReason, RequestId,
};

/// A request ready to be sent: set options, then `.await` it.
#[must_use = "a Call does nothing until it is awaited"]
pub struct Call<T> {
    addr: Addr<Connection>,
    request: Request,
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    _result: PhantomData<fn() -> T>,
}

impl<T> Call<T> {
    pub(crate) fn new(addr: Addr<Connection>, request: Request) -> Self {
        Self {
            addr,
            request,
            cancellation: None,
            timeout: None,
            _result: PhantomData,
        }
    }

    /// Cancels the request when `token` is cancelled; fails at once if it already is.
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    pub(crate) fn cancellation_opt(mut self, token: Option<&Cancellation>) -> Self {
        self.cancellation = token.cloned();
        self
    }

    /// Fails with [`Error::Timeout`] after `after`, cancelling the request on the wire.
    pub fn timeout(mut self, after: Duration) -> Self {
        self.timeout = Some(after);
        self
    }

    pub(crate) fn timeout_opt(mut self, after: Option<Duration>) -> Self {
        self.timeout = after;
        self
    }

    /// The id the request will carry (known before anything is sent).
    pub fn id(&self) -> RequestId {
        self.request.id()
    }
}

impl<T: DeserializeOwned> IntoFuture for Call<T> {
    type Output = Result<T, Error>;
    type IntoFuture = CallFuture<T>;

    fn into_future(self) -> CallFuture<T> {
        CallFuture {
            addr: self.addr,
            id: self.request.id(),
            stage: Stage::Start(Some(self.request)),
            token: self.cancellation,
            cancelled: None,
            timeout: self.timeout,
            deadline: None,
            _result: PhantomData,
        }
    }
}

enum Stage {
    /// Not yet polled: nothing sent.
    Start(Option<Request>),
    /// Handed to the actor; the answer comes on this channel.
    Waiting(oneshot::Receiver<Result<RawResult, Error>>),
    Done,
}

/// The future of a [`Call`]. See the module docs for what dropping it means.
#[must_use = "futures do nothing unless polled"]
pub struct CallFuture<T> {
    addr: Addr<Connection>,
    id: RequestId,
    stage: Stage,
    token: Option<Cancellation>,
    cancelled: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    timeout: Option<Duration>,
    // Boxed: only calls with a timeout pay for a timer.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    _result: PhantomData<fn() -> T>,
}

impl<T> CallFuture<T> {
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// Cancels the request (if it was sent) and ends this future with `error`.
    fn abandon(&mut self, reason: Option<String>, error: Error) -> Poll<Result<T, Error>> {
        if matches!(self.stage, Stage::Waiting(_)) {
            // do_send ignores the mailbox bound: a cancel is never lost to a full mailbox, and
            // it queues behind the request it names.
            self.addr.do_send(Cancel {
                id: self.id,
                reason,
            });
        }
        self.stage = Stage::Done;
        Poll::Ready(Err(error))
    }
}

impl<T: DeserializeOwned> Future for CallFuture<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Stage::Start(request) = &mut this.stage {
            let Some(request) = request.take() else {
                return Poll::Ready(Err(Error::Protocol(
                    "CallFuture polled after a panic".into(),
                )));
            };
            if let Some(token) = &this.token {
                if token.is_cancelled() {
                    // Cancelled before sending: nothing reaches the actor or the wire.
                    let reason = token.reason_owned();
                    return this.abandon(None, Error::cancelled(reason));
                }
                this.cancelled = Some(Box::pin(token.cancelled()));
            }
            if let Some(after) = this.timeout {
                this.deadline = Some(Box::pin(tokio::time::sleep(after)));
            }
            let (reply, rx) = oneshot::channel();
            this.addr.do_send(Submit { request, reply });
            this.stage = Stage::Waiting(rx);
        }

        // The caller's cancel and the timeout are answered here, at once, without waiting for
        // the actor or any I/O.
        if let Some(cancelled) = &mut this.cancelled {
            if cancelled.as_mut().poll(cx).is_ready() {
                let reason = this.token.as_ref().and_then(Cancellation::reason_owned);
                return this.abandon(reason.clone(), Error::cancelled(reason));
            }
        }
        if let Some(deadline) = &mut this.deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                let after = this.timeout.unwrap_or_default();
                let reason = format!("timed out after {} ms", after.as_millis());
                return this.abandon(Some(reason), Error::Timeout { after });
            }
        }

        let Stage::Waiting(rx) = &mut this.stage else {
            return Poll::Ready(Err(Error::Protocol(
                "CallFuture polled after completion".into(),
            )));
        };
        let outcome = match Pin::new(rx).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(outcome)) => outcome,
            Poll::Ready(Err(_)) => Err(Error::Closed {
                reason: CloseReason::ActorStopped,
            }),
        };
        this.stage = Stage::Done;
        Poll::Ready(outcome.and_then(|raw| {
            serde_json::from_str(raw.get())
                .map_err(|e| Error::Protocol(format!("unexpected result: {e}")))
        }))
    }
}

impl<T> Drop for CallFuture<T> {
    fn drop(&mut self) {
        if matches!(self.stage, Stage::Waiting(_)) {
            self.addr.do_send(Cancel::new(self.id));
        }
    }
}
