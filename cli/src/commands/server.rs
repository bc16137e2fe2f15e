//! The server itself: `ping` (is it there, how far) and `set-level` (its log messages).

use std::time::Instant;

use super::Session;
use crate::{parse, Failure};

/// `ping`: the round trip, in milliseconds.
pub async fn ping(session: &Session<'_>) -> Result<(), Failure> {
    let start = Instant::now();
    session
        .client
        .ping()
        .cancellation(session.interrupt)
        .await?;
    session.out.pong(start.elapsed())
}

/// `set-level LEVEL`: asks for log messages at `level` and above.
pub async fn set_level(session: &Session<'_>, level: &str) -> Result<(), Failure> {
    let level = parse::level(level)?;
    // `set_logging_level` takes no cancellation token: Ctrl-C is raced here.
    tokio::select! {
        result = session.client.set_logging_level(level) => result?,
        () = session.interrupt.cancelled() => return Err(session.interrupted()),
    }
    session.out.level_set(level)
}
