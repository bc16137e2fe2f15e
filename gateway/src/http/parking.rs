//! 2026-07-28 calls answered `input_required`, waiting for their retry by the `requestState`
//! they were given. A call not retried in time is cancelled upstream: nothing is left running
//! for a client that went away between the rounds.

use std::{cell::RefCell, collections::HashMap, rc::Rc, time::Duration};

use serde_json::Value;

use super::session::HttpSession;

/// A call waiting for its retry: its session, and the id the gateway knows it by.
pub struct Parked {
    pub session: Rc<HttpSession>,
    pub id: Value,
}

pub struct Parking {
    waiting: RefCell<HashMap<String, Parked>>,
    /// How long a call waits for the retry that brings its input.
    wait: Duration,
}

impl Parking {
    pub fn new(wait: Duration) -> Self {
        Self {
            waiting: RefCell::default(),
            wait,
        }
    }

    /// Call `id` of `session` waits for a retry with `state`, for `wait` at most.
    pub fn park(self: &Rc<Self>, state: &str, session: Rc<HttpSession>, id: Value) {
        let parked = Parked { session, id };
        self.waiting.borrow_mut().insert(state.to_owned(), parked);
        let (parking, state, wait) = (Rc::downgrade(self), state.to_owned(), self.wait);
        actix_rt::spawn(async move {
            actix_rt::time::sleep(wait).await;
            let Some(parked) = parking.upgrade().and_then(|p| p.take(&state)) else {
                return;
            };
            let reason = "the downstream client did not retry with its input in time";
            parked.session.session.abandoned(&parked.id, reason);
        });
    }

    /// The call a retry's `requestState` names, if it still waits.
    pub fn take(&self, state: &str) -> Option<Parked> {
        self.waiting.borrow_mut().remove(state)
    }
}
