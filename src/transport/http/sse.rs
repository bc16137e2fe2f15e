//! Reading a `text/event-stream` response into frames.
//!
//! Parsing is `eventsource-stream`'s. What is ours: the size cap (an event may not grow past the
//! frame limit, so a server cannot make us buffer without bound), and the bookkeeping resumption
//! needs (the last event id, the server's `retry`).

use std::{cell::Cell, io, rc::Rc, time::Duration};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::{future, stream, FutureExt, Stream, StreamExt};

/// What a finished (or broken) event stream left behind.
#[derive(Debug, Default)]
pub(crate) struct StreamEnd {
    /// The `id` of the last event that had one: resume after it with `Last-Event-ID`.
    pub last_event_id: Option<String>,
    /// The server's `retry` advice.
    pub retry: Option<Duration>,
    /// Why the stream ended early, if it did not end cleanly.
    pub error: Option<String>,
}

/// The body as `eventsource-stream` can take it: without a leading byte order mark (which the
/// SSE rules skip), after a comment line of ours. eventsource-stream 0.2.3 skips a leading mark by
/// slicing one byte off its three, which panics; with the comment first, the parser never sees a
/// mark at the start, and a second mark is read as the spec says (part of the first line).
fn parser_safe<E>(
    body: impl Stream<Item = Result<Bytes, E>>,
) -> impl Stream<Item = Result<Bytes, E>> {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    // The first bytes, held until they show whether the body starts with a mark.
    let mut head: Option<Vec<u8>> = Some(Vec::new());
    let body = body
        .map(Some)
        .chain(stream::once(future::ready(None)))
        .filter_map(move |item| {
            let out = match (item, head.as_mut()) {
                // The usual case: the first chunk shows at once whether a mark starts it, and
                // goes on without being copied.
                (Some(Ok(chunk)), Some(held))
                    if held.is_empty() && !(chunk.len() < BOM.len() && BOM.starts_with(&chunk)) =>
                {
                    head = None;
                    let rest = if chunk.starts_with(BOM) {
                        chunk.slice(BOM.len()..)
                    } else {
                        chunk
                    };
                    Some(Ok(rest))
                }
                (Some(Ok(chunk)), Some(held)) => {
                    held.extend_from_slice(&chunk);
                    if held.len() < BOM.len() && BOM.starts_with(held) {
                        None
                    } else {
                        let held = head.take().unwrap_or_default();
                        let rest = held.strip_prefix(BOM).unwrap_or(&held);
                        Some(Ok(Bytes::copy_from_slice(rest)))
                    }
                }
                // The end (or an error) while holding the start of a mark: not a mark.
                (item, Some(_)) => {
                    let held = head.take().unwrap_or_default();
                    item.or(Some(Ok(Bytes::from(held))))
                }
                (item, None) => item,
            };
            future::ready(out)
        });
    stream::once(future::ready(Ok(Bytes::from_static(b":\n")))).chain(body)
}

/// Reads events from `response`, handing each message's data to `deliver` in order.
pub(super) async fn read_events(
    response: reqwest::Response,
    limit: usize,
    deliver: impl FnMut(Bytes),
) -> StreamEnd {
    read_event_stream(response.bytes_stream(), limit, deliver).await
}

/// [`read_events`] over the body's chunks as they come.
pub(crate) async fn read_event_stream<E>(
    body: impl Stream<Item = Result<Bytes, E>>,
    limit: usize,
    mut deliver: impl FnMut(Bytes),
) -> StreamEnd
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Bytes received since the last complete event: a cap on what the parser may buffer.
    let pending = Rc::new(Cell::new(0usize));
    let counted = pending.clone();
    let bytes = parser_safe(body).map(move |chunk| {
        let chunk = chunk.map_err(io::Error::other)?;
        counted.set(counted.get() + chunk.len());
        if counted.get() > limit {
            return Err(io::Error::other(format!(
                "an event grew past {limit} bytes"
            )));
        }
        Ok(chunk)
    });
    // The parser is handed whole lines: it rescans its whole buffer for each piece it gets and
    // copies what follows each line it takes, so a long event in small chunks (or many events
    // in one chunk) cost it quadratic time.
    let mut events = std::pin::pin!(whole_lines(bytes).eventsource());
    let mut end = StreamEnd::default();
    // The last message, held until the stream shows what follows it (see `next_soon`).
    let mut held: Option<Bytes> = None;
    loop {
        let next = match held.take() {
            None => events.next().await,
            Some(message) => {
                let next = next_soon(&mut events).await;
                deliver(message);
                match next {
                    Some(next) => next,
                    None => events.next().await,
                }
            }
        };
        let Some(event) = next else { break };
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
            held = Some(Bytes::from(event.data));
        }
    }
    if let Some(message) = held {
        deliver(message);
    }
    end
}

/// Turns given to the connection's own task before a held message is handed on.
const END_TURNS: usize = 3;

/// The stream's next item if it comes within a few turns of the runtime, `None` otherwise.
///
/// Why a message is held at all: a server ends a request's stream right after its answer, and
/// over HTTP/1.1 the connection goes back to the pool only once that end is read. A caller handed
/// the answer before the end sends its next request before the connection is back, and the pool
/// opens another connection for it (573 connections for 256 requests in flight, against 263 when
/// the answer waits for the end). A stream that stays open is not waited for beyond these turns.
async fn next_soon<S: Stream + Unpin>(stream: &mut S) -> Option<Option<S::Item>> {
    for _ in 0..END_TURNS {
        if let Some(next) = stream.next().now_or_never() {
            return Some(next);
        }
        // Tokio wakes a yielded task after it has polled for I/O: the end may be read by then.
        tokio::task::yield_now().await;
    }
    stream.next().now_or_never()
}

/// Re-chunks a byte stream into whole lines (ending in LF, CRLF or CR; the rest at the end),
/// each decoded as UTF-8 with replacement, as the event stream format says: a stray byte is one
/// U+FFFD, not the end of the stream. Each byte is scanned and copied once.
fn whole_lines(
    chunks: impl Stream<Item = Result<Bytes, io::Error>>,
) -> impl Stream<Item = Result<Bytes, io::Error>> {
    let mut partial = bytes::BytesMut::new();
    // Bytes of `partial` known to end no line.
    let mut scanned = 0;
    chunks
        .map(Some)
        .chain(futures::stream::iter([None]))
        .flat_map(move |chunk| {
            let mut lines = Vec::new();
            match chunk {
                Some(Ok(chunk)) => {
                    partial.extend_from_slice(&chunk);
                    while let Some(at) = memchr::memchr2(b'\n', b'\r', &partial[scanned..]) {
                        let at = scanned + at;
                        let end = match (partial[at], partial.get(at + 1)) {
                            (b'\r', Some(b'\n')) => at + 2,
                            // A CR last: wait for the next byte, which may be its LF.
                            (b'\r', None) => break,
                            _ => at + 1,
                        };
                        lines.push(Ok(valid_utf8(partial.split_to(end).freeze())));
                        scanned = 0;
                    }
                    scanned = partial.len().saturating_sub(1).max(scanned);
                }
                Some(Err(e)) => lines.push(Err(e)),
                None if !partial.is_empty() => {
                    lines.push(Ok(valid_utf8(partial.split().freeze())));
                }
                None => {}
            }
            futures::stream::iter(lines)
        })
}

fn valid_utf8(line: Bytes) -> Bytes {
    match std::str::from_utf8(&line) {
        Ok(_) => line,
        Err(_) => Bytes::from(String::from_utf8_lossy(&line).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events split anywhere (a CRLF across chunks, a long event in tiny chunks), CR-only
    /// line ends, and a stray byte (one U+FFFD) all come out whole and in order.
    #[test]
    fn lines_are_whole_whatever_the_chunks() {
        let long = "x".repeat(100_000);
        let mut wire = b"data: one\r\n\r\ndata: t\xffo\n\ndata: three\r\r".to_vec();
        wire.extend_from_slice(format!("data: {long}\n\n").as_bytes());
        let mut chunks: Vec<Result<Bytes, io::Error>> = vec![
            Ok(Bytes::copy_from_slice(&wire[..10])),
            Ok(Bytes::copy_from_slice(&wire[10..12])),
        ];
        chunks.extend(wire[12..].chunks(7).map(|c| Ok(Bytes::copy_from_slice(c))));
        let mut got = Vec::new();
        let end = futures::executor::block_on(read_event_stream(
            futures::stream::iter(chunks),
            1 << 20,
            |frame| got.push(String::from_utf8(frame.to_vec()).expect("UTF-8")),
        ));
        assert!(end.error.is_none(), "{:?}", end.error);
        assert_eq!(got, ["one", "t\u{fffd}o", "three", long.as_str()]);
    }

    fn read(chunks: &[&'static [u8]]) -> (Vec<Bytes>, StreamEnd) {
        let body = stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, io::Error>(Bytes::from_static(c))),
        );
        let mut frames = Vec::new();
        let end = futures::executor::block_on(read_event_stream(body, 1024, |f| frames.push(f)));
        (frames, end)
    }

    // Found by the `http_answer` fuzz target: eventsource-stream 0.2.3 panicked on a body that
    // starts with a byte order mark (a server could end the request's task so).
    #[test]
    fn a_byte_order_mark_before_the_first_event_is_skipped_regression() {
        let event = b"\xEF\xBB\xBFid: 1\ndata: {}\n\n";
        let (frames, end) = read(&[event]);
        assert_eq!(frames, [Bytes::from_static(b"{}")]);
        assert_eq!(end.last_event_id.as_deref(), Some("1"));
        assert!(end.error.is_none());
        // Split anywhere inside the mark: the same.
        for at in 1..4 {
            let (frames, _) = read(&[&event[..at], &event[at..]]);
            assert_eq!(frames, [Bytes::from_static(b"{}")], "split at {at}");
        }
        // A second mark belongs to the first line's field name, which is then unknown.
        let (frames, _) = read(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"]);
        assert_eq!(frames, [Bytes::from_static(b"b")]);
        // The start of a mark and nothing more: no event, no panic.
        let (frames, end) = read(&[b"\xEF\xBB"]);
        assert!(frames.is_empty() && end.error.is_none());
    }

    /// Regression (issue 13, HTTP/1.1 memory): a caller handed its answer before its stream's
    /// end was read sent its next request before the connection was back in the pool, which
    /// then opened another (573 connections for 256 requests in flight).
    #[test]
    fn an_answer_is_handed_on_after_the_end_of_its_stream() {
        let ended = std::cell::Cell::new(false);
        let body = stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"data: {}\n\n"))]).chain(
            stream::poll_fn(|_| {
                ended.set(true);
                std::task::Poll::Ready(None)
            }),
        );
        let mut delivered_after_end = Vec::new();
        futures::executor::block_on(read_event_stream(body, 1024, |_| {
            delivered_after_end.push(ended.get())
        }));
        assert_eq!(delivered_after_end, [true]);
    }

    /// A stream that stays open after a message does not keep it: it is handed on after a few
    /// turns of the runtime.
    #[tokio::test]
    async fn a_message_on_a_stream_that_stays_open_is_not_held() {
        let body = stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"data: {}\n\n"))])
            .chain(stream::pending());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let reader = read_event_stream(body, 1024, move |frame| {
            let _ = tx.send(frame);
        });
        let first = async {
            tokio::select! {
                _ = reader => None,
                frame = rx.recv() => frame,
            }
        };
        // Only a bound on a hang, not a timing assertion.
        let frame = tokio::time::timeout(Duration::from_secs(10), first).await;
        assert_eq!(frame.ok().flatten(), Some(Bytes::from_static(b"{}")));
    }
}
