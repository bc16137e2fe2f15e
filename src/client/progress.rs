//! Progress for one request: a callback or a stream, and the clock a progress-reset timeout reads.

use std::{
    pin::Pin,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Instant,
};

use futures::Stream;
use tokio::sync::mpsc;

use crate::protocol::notifications::Progress;
pub use crate::protocol::notifications::ProgressCallback;

/// How many progress updates a [`ProgressStream`] holds; newer ones are dropped (and counted)
/// while it is full, so a stream nobody reads cannot grow without bound.
pub const PROGRESS_BUFFER: usize = 64;

/// The progress of one request, as a stream. It ends when the request ends.
pub struct ProgressStream {
    rx: mpsc::Receiver<Progress>,
    dropped: Arc<AtomicU64>,
}

impl ProgressStream {
    pub(crate) fn new() -> (ProgressCallback, Self) {
        let (tx, rx) = mpsc::channel(PROGRESS_BUFFER);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        let callback: ProgressCallback = Box::new(move |p| {
            if tx.try_send(p).is_err() {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        (callback, Self { rx, dropped })
    }

    /// Updates dropped because the stream was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Stream for ProgressStream {
    type Item = Progress;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Progress>> {
        self.rx.poll_recv(cx)
    }
}

/// When the last progress arrived, for a timeout that restarts on progress.
pub(crate) struct ProgressClock {
    start: Instant,
    /// Microseconds after `start`, plus one (0 = no progress yet).
    last: AtomicU64,
}

impl ProgressClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    pub fn tick(&self) {
        let micros = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX - 1);
        self.last.store(micros + 1, Ordering::Relaxed);
    }

    pub fn last(&self) -> Option<Instant> {
        match self.last.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.start + std::time::Duration::from_micros(n - 1)),
        }
    }
}
