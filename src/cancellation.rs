//! [`Cancellation`]: a clonable token that cancels the requests it is attached to.

use std::{
    future::Future,
    sync::{Arc, OnceLock},
};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

pub(crate) type WhenCancelled = WaitForCancellationFutureOwned;

/// A clonable cancellation token. One token may cover several requests.
///
/// The first `cancel` wins: its reason is kept, later cancels change nothing. Cancelling only
/// flips the token and wakes the futures waiting on it; it never does I/O on the caller.
///
/// ```
/// let token = actix_mcp::Cancellation::new();
/// assert!(!token.is_cancelled());
/// token.cancel_with_reason("user pressed stop");
/// token.cancel_with_reason("ignored: the first reason wins");
/// assert_eq!(token.reason(), Some("user pressed stop"));
/// ```
#[derive(Clone, Default, Debug)]
pub struct Cancellation {
    inner: Arc<Inner>,
}

#[derive(Default, Debug)]
struct Inner {
    // Set exactly once, before `token` fires, so a woken waiter always sees the reason.
    reason: OnceLock<Option<String>>,
    token: CancellationToken,
}

impl Cancellation {
    /// A new, not yet cancelled token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels without a reason. Returns `true` if this call cancelled the token.
    pub fn cancel(&self) -> bool {
        self.cancel_inner(None)
    }

    /// Cancels with a reason. Returns `true` if this call cancelled the token.
    pub fn cancel_with_reason(&self, reason: impl Into<String>) -> bool {
        self.cancel_inner(Some(reason.into()))
    }

    pub(crate) fn cancel_inner_with(&self, reason: Option<String>) -> bool {
        self.cancel_inner(reason)
    }

    fn cancel_inner(&self, reason: Option<String>) -> bool {
        if self.inner.reason.set(reason).is_ok() {
            self.inner.token.cancel();
            true
        } else {
            false
        }
    }

    /// True once any clone of the token has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.token.is_cancelled()
    }

    /// The reason of the first cancel, if it gave one.
    pub fn reason(&self) -> Option<&str> {
        self.inner.reason.get().and_then(|r| r.as_deref())
    }

    pub(crate) fn reason_owned(&self) -> Option<String> {
        self.reason().map(str::to_owned)
    }

    /// Resolves once the token is cancelled.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        self.when_cancelled()
    }

    /// [`Self::cancelled`] as a named type, so a call future can hold it behind a thin pointer.
    pub(crate) fn when_cancelled(&self) -> WhenCancelled {
        self.inner.token.clone().cancelled_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_uncancelled_without_reason() {
        let token = Cancellation::new();
        assert!(!token.is_cancelled());
        assert_eq!(token.reason(), None);
    }

    #[test]
    fn the_first_cancel_wins_and_later_ones_change_nothing() {
        let token = Cancellation::new();
        let clone = token.clone();
        assert!(clone.cancel_with_reason("first"));
        assert!(!token.cancel_with_reason("second"));
        assert!(!token.cancel());
        assert!(token.is_cancelled());
        assert_eq!(token.reason(), Some("first"));
    }

    #[test]
    fn a_cancel_without_reason_keeps_none() {
        let token = Cancellation::new();
        assert!(token.cancel());
        assert!(!token.cancel_with_reason("late"));
        assert_eq!(token.reason(), None);
    }

    #[tokio::test]
    async fn cancelled_resolves_for_waiters_before_and_after_the_cancel() {
        // A bound, so that a regression fails the test instead of hanging the suite.
        let bound = std::time::Duration::from_secs(10);
        let token = Cancellation::new();
        let before = tokio::spawn(token.cancelled());
        tokio::task::yield_now().await;
        assert!(!before.is_finished(), "no wake-up before the cancel");
        token.cancel_with_reason("go");
        tokio::time::timeout(bound, before)
            .await
            .expect("a waiter from before the cancel wakes")
            .unwrap();
        tokio::time::timeout(bound, token.cancelled())
            .await
            .expect("a waiter after the cancel resolves at once");
    }

    #[test]
    fn cancelling_from_many_threads_keeps_exactly_one_reason() {
        let token = Cancellation::new();
        let winners: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let token = token.clone();
                    s.spawn(move || token.cancel_with_reason(format!("t{i}")) as usize)
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(winners, 1);
        assert!(token.reason().is_some_and(|r| r.starts_with('t')));
    }
}
