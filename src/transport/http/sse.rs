//! Reading a `text/event-stream` response into frames.
//!
//! Parsing is `eventsource-stream`'s. What is ours: the size cap (an event may not grow past the
//! frame limit, so a server cannot make us buffer without bound), and the bookkeeping resumption
//! needs (the last event id, the server's `retry`).

use std::{cell::Cell, io, rc::Rc, time::Duration};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::StreamExt;

/// What a finished (or broken) event stream left behind.
#[derive(Debug, Default)]
pub(super) struct StreamEnd {
    /// The `id` of the last event that had one: resume after it with `Last-Event-ID`.
    pub last_event_id: Option<String>,
    /// The server's `retry` advice.
    pub retry: Option<Duration>,
    /// Why the stream ended early, if it did not end cleanly.
    pub error: Option<String>,
}

/// Reads events from `response`, handing each message's data to `deliver` in order.
pub(super) async fn read_events(
    response: reqwest::Response,
    limit: usize,
    mut deliver: impl FnMut(Bytes),
) -> StreamEnd {
    // Bytes received since the last complete event: a cap on what the parser may buffer.
    let pending = Rc::new(Cell::new(0usize));
    let counted = pending.clone();
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(io::Error::other)?;
        counted.set(counted.get() + chunk.len());
        if counted.get() > limit {
            return Err(io::Error::other(format!(
                "an event grew past {limit} bytes"
            )));
        }
        Ok(chunk)
    });
    let mut events = std::pin::pin!(bytes.eventsource());
    let mut end = StreamEnd::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                end.error = Some(e.to_string());
                break;
            }
        };
        pending.set(0);
        if !event.id.is_empty() {
            end.last_event_id = Some(event.id);
        }
        if let Some(retry) = event.retry {
            end.retry = Some(retry);
        }
        // A priming event (an id and no data) and other event types carry no message.
        let is_message = event.event.is_empty() || event.event == "message";
        if is_message && !event.data.trim().is_empty() {
            deliver(Bytes::from(event.data));
        }
    }
    end
}
