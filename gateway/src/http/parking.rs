//! 2026-07-28 calls answered `input_required`, waiting for their retry by the `requestState`
//! they were given, shared by every worker (the retry may reach any). A call not retried in
//! time is cancelled upstream: nothing is left running for a client that went away between the
//! rounds. At shutdown every waiting call is cancelled.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use serde_json::Value;

use super::session::SessionHandle;
use crate::owner::Owner;

/// A call waiting for its retry: its session, and the id the gateway knows it by.
pub struct Parked {
    pub session: SessionHandle,
    pub id: Value,
}

/// A parked call and whose it is.
struct Waiting {
    parked: Parked,
    owner: Owner,
}

#[derive(Clone)]
pub struct Parking(Arc<Shared>);

struct Shared {
    waiting: Mutex<HashMap<String, Waiting>>,
    /// How long a call waits for the retry that brings its input.
    wait: Duration,
}

impl Parking {
    pub fn new(wait: Duration) -> Self {
        Self(Arc::new(Shared {
            waiting: Mutex::default(),
            wait,
        }))
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Call `id` of `owner`'s `session` waits for a retry with `state`, for `wait` at most.
    pub fn park(&self, state: &str, session: SessionHandle, id: Value, owner: Owner) {
        let parked = Parked { session, id };
        self.waiting()
            .insert(state.to_owned(), Waiting { parked, owner });
        let (parking, state, wait) = (Arc::downgrade(&self.0), state.to_owned(), self.0.wait);
        actix_rt::spawn(async move {
            actix_rt::time::sleep(wait).await;
            let Some(parking) = parking.upgrade().map(Parking) else {
                return;
            };
            let Some(Waiting { parked, .. }) = parking.waiting().remove(&state) else {
                return;
            };
            let reason = "the downstream client did not retry with its input in time";
            parked.session.abandon(parked.id, reason);
        });
    }

    /// The call a retry's `requestState` names, if it still waits and is `owner`'s (another
    /// user's retry finds nothing, and leaves it waiting).
    pub fn take(&self, state: &str, owner: &Owner) -> Option<Parked> {
        let mut waiting = self.waiting();
        if waiting.get(state)?.owner != *owner {
            return None;
        }
        waiting.remove(state).map(|w| w.parked)
    }

    /// The gateway stops: every waiting call is cancelled upstream.
    pub fn stop(&self) {
        let parked: Vec<Parked> = self.waiting().drain().map(|(_, w)| w.parked).collect();
        for parked in parked {
            parked.session.abandon(parked.id, "the gateway is stopping");
        }
    }
}
