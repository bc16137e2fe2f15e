//! A server's start: the shared connect every caller waits on, and the start slots that bound
//! how many servers connect at once (a config of 1,000 servers must not spawn 1,000 processes
//! or dial 1,000 hosts in the same instant).

use std::{future::Future, sync::Arc};

use futures::{
    future::{BoxFuture, Shared},
    FutureExt,
};
use tokio::sync::{watch, Semaphore};

use crate::{client::Client, error::Error};

/// How many servers connect at once by default (see `Servers::start_parallelism`).
pub const DEFAULT_START_PARALLELISM: usize = 16;

/// One connect of one server, shared by every caller that wants it.
#[derive(Clone)]
pub(super) struct Start {
    done: Shared<BoxFuture<'static, Result<Client, Error>>>,
    slot: watch::Receiver<bool>,
}

impl Start {
    /// The connect `connect` once one of `slots` is free; the slot is held until it ends.
    pub(super) fn new(
        slots: Arc<Semaphore>,
        connect: impl Future<Output = Result<Client, Error>> + Send + 'static,
    ) -> Self {
        let (taken, slot) = watch::channel(false);
        let done = async move {
            // Never closed, so a permit always comes; without one the connect still runs.
            let permit = slots.acquire_owned().await.ok();
            let _ = taken.send(true);
            let outcome = connect.await;
            drop(permit);
            outcome
        }
        .boxed()
        .shared();
        Self { done, slot }
    }

    /// Resolves once this connect has its slot (at once if it had one already): from then on
    /// its time is its own, not other servers' ahead of it.
    pub(super) async fn slot_taken(&self) {
        let mut slot = self.slot.clone();
        // An error means the connect ended, slot and all.
        let _ = slot.wait_for(|taken| *taken).await;
    }

    /// The connect's outcome.
    pub(super) fn done(&self) -> Shared<BoxFuture<'static, Result<Client, Error>>> {
        self.done.clone()
    }
}
