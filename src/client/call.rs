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
use pin_project_lite::pin_project;
use serde::de::DeserializeOwned;

use crate::{
    connection::{Cancel, Connection, PendingReply, Request},
    error::Error,
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
            stage: Stage::Start {
                request: Some(self.request),
            },
            token: self.cancellation,
            cancelled: None,
            timeout: self.timeout,
            deadline: None,
            finished: false,
            _result: PhantomData,
        }
    }
}

type ActixSend = actix::dev::Request<Connection, Request>;

pin_project! {
    #[project = StageProj]
    enum Stage {
        // Not yet polled: nothing sent.
        Start { request: Option<Request> },
        // In the actor's mailbox.
        Sending { #[pin] send: ActixSend },
        // Accepted by the actor.
        Waiting { reply: PendingReply },
        Done,
    }
}

pin_project! {
    /// The future of a [`Call`]. See the module docs for what dropping it means.
    #[must_use = "futures do nothing unless polled"]
    pub struct CallFuture<T> {
        addr: Addr<Connection>,
        id: RequestId,
        #[pin]
        stage: Stage,
        token: Option<Cancellation>,
        cancelled: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        timeout: Option<Duration>,
        #[pin]
        deadline: Option<tokio::time::Sleep>,
        finished: bool,
        _result: PhantomData<fn() -> T>,
    }

    impl<T> PinnedDrop for CallFuture<T> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if !*this.finished {
                if let StageProj::Sending { .. } = this.stage.project() {
                    // The actor may be handling it right now; make sure it is cancelled.
                    this.addr.do_send(Cancel::new(*this.id));
                }
                // `Waiting`: the PendingReply's own drop cancels.
            }
        }
    }
}

impl<T> CallFuture<T> {
    pub fn id(&self) -> RequestId {
        self.id
    }
}

impl<T: DeserializeOwned> Future for CallFuture<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if *this.finished {
            return Poll::Ready(Err(Error::Protocol(
                "CallFuture polled after completion".into(),
            )));
        }

        if let StageProj::Start { request } = this.stage.as_mut().project() {
            let Some(request) = request.take() else {
                return Poll::Pending;
            };
            if let Some(token) = this.token.as_ref() {
                if token.is_cancelled() {
                    // Cancelled before sending: nothing reaches the actor or the wire.
                    *this.finished = true;
                    this.stage.set(Stage::Done);
                    return Poll::Ready(Err(Error::cancelled(token.reason_owned())));
                }
                *this.cancelled = Some(Box::pin(token.cancelled()));
            }
            if let Some(after) = *this.timeout {
                this.deadline.set(Some(tokio::time::sleep(after)));
            }
            let send = this.addr.send(request);
            this.stage.set(Stage::Sending { send });
        }

        // The caller's cancel and the timeout win over anything still in flight, and are
        // answered here, without waiting for the actor or any I/O.
        if let Some(cancelled) = this.cancelled.as_mut() {
            if cancelled.as_mut().poll(cx).is_ready() {
                let reason = this.token.as_ref().and_then(Cancellation::reason_owned);
                abandon(this.stage.as_mut(), this.addr, *this.id, reason.clone());
                *this.finished = true;
                return Poll::Ready(Err(Error::cancelled(reason)));
            }
        }
        if let Some(deadline) = this.deadline.as_mut().as_pin_mut() {
            if deadline.poll(cx).is_ready() {
                let after = this.timeout.unwrap_or_default();
                let reason = format!("timed out after {} ms", after.as_millis());
                abandon(this.stage.as_mut(), this.addr, *this.id, Some(reason));
                *this.finished = true;
                return Poll::Ready(Err(Error::Timeout { after }));
            }
        }

        loop {
            match this.stage.as_mut().project() {
                StageProj::Sending { send } => match send.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(reply)) => this.stage.set(Stage::Waiting { reply }),
                    Poll::Ready(Err(_)) => {
                        *this.finished = true;
                        this.stage.set(Stage::Done);
                        return Poll::Ready(Err(Error::Closed {
                            reason: CloseReason::ActorStopped,
                        }));
                    }
                },
                StageProj::Waiting { reply } => {
                    let outcome = match Pin::new(reply).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(outcome) => outcome,
                    };
                    *this.finished = true;
                    this.stage.set(Stage::Done);
                    return Poll::Ready(outcome.and_then(|raw| {
                        serde_json::from_str(raw.get())
                            .map_err(|e| Error::Protocol(format!("unexpected result: {e}")))
                    }));
                }
                StageProj::Start { .. } | StageProj::Done => return Poll::Pending,
            }
        }
    }
}

/// Cancels whatever stage the call is in, carrying `reason`.
fn abandon(stage: Pin<&mut Stage>, addr: &Addr<Connection>, id: RequestId, reason: Option<String>) {
    match stage.project() {
        StageProj::Waiting { reply } => reply.cancel_in_place(reason),
        // Sent first, so it reaches the actor ahead of the cancel that dropping the mailbox
        // request may trigger; the second one finds nothing to do.
        StageProj::Sending { .. } => addr.do_send(Cancel { id, reason }),
        StageProj::Start { .. } | StageProj::Done => {}
    }
}
