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

#[cfg(test)]
mod tests {
    use super::*;

    /// A connect that ends when `go` is sent, failing (no client is needed to test the slots).
    async fn held(go: tokio::sync::oneshot::Receiver<()>) -> Result<Client, Error> {
        let _ = go.await;
        Err(Error::Misuse("no server here".into()))
    }

    #[tokio::test]
    async fn a_start_waits_for_a_free_slot_and_holds_it_until_its_connect_ends() {
        let slots = Arc::new(Semaphore::new(1));
        let (first_go, first_wait) = tokio::sync::oneshot::channel();
        let (second_go, second_wait) = tokio::sync::oneshot::channel();
        let first = Start::new(slots.clone(), held(first_wait));
        let second = Start::new(slots.clone(), held(second_wait));
        let first_done = tokio::spawn(first.done());
        let second_done = tokio::spawn(second.done());
        first.slot_taken().await;
        assert_eq!(slots.available_permits(), 0, "the first holds the one slot");
        let second_slot = second.slot_taken();
        tokio::pin!(second_slot);
        assert!(
            futures::poll!(second_slot.as_mut()).is_pending(),
            "the second waits for it"
        );
        let _ = first_go.send(());
        assert!(first_done.await.unwrap().is_err());
        second_slot.await;
        let _ = second_go.send(());
        assert!(second_done.await.unwrap().is_err());
        assert_eq!(slots.available_permits(), 1, "every slot given back");
    }

    #[tokio::test]
    async fn every_caller_shares_the_one_connect() {
        let slots = Arc::new(Semaphore::new(1));
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let start = Start::new(slots, async move {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(Error::Misuse("no server here".into()))
        });
        let (a, b) = futures::join!(start.done(), start.clone().done());
        assert!(a.is_err() && b.is_err());
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
