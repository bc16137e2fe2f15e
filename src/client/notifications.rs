//! Subscribing to the server's notifications.
//!
//! Policy for slow subscribers: a [`NotificationStream`] is a bounded buffer
//! ([`NOTIFICATION_BUFFER`] entries); when a subscriber falls behind, the **oldest** entries are
//! dropped and counted ([`NotificationStream::dropped`]). An actix `Recipient` gets each
//! notification with `try_send`: when its mailbox is full the notification is dropped for it and
//! counted in [`ConnectionStats::notifications_dropped`](crate::ConnectionStats). Memory never
//! grows without bound because a subscriber is slow.

use tokio::sync::broadcast;

use crate::protocol::notifications::ServerNotification;

/// Entries a [`NotificationStream`] holds before the oldest are dropped.
pub const NOTIFICATION_BUFFER: usize = 1024;

/// The server's notifications, in order, for one subscriber.
pub struct NotificationStream {
    rx: broadcast::Receiver<ServerNotification>,
    dropped: u64,
}

impl NotificationStream {
    pub(crate) fn new(rx: broadcast::Receiver<ServerNotification>) -> Self {
        Self { rx, dropped: 0 }
    }

    /// The next notification; `None` once the connection is gone.
    pub async fn next(&mut self) -> Option<ServerNotification> {
        loop {
            match self.rx.recv().await {
                Ok(n) => return Some(n),
                Err(broadcast::error::RecvError::Lagged(n)) => self.dropped += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Notifications dropped because this subscriber fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// As a `Stream`.
    pub fn into_stream(self) -> impl futures::Stream<Item = ServerNotification> {
        futures::stream::unfold(self, |mut s| async move { s.next().await.map(|n| (n, s)) })
    }
}
