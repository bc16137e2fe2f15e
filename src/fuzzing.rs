//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`), and for nothing else: not
//! part of the API, no stability promised.
//!
//! Each function is a thin wrapper that drives the crate's own parsing code (the code the
//! transports and the connection run) from plain bytes, so a fuzz target needs neither a
//! process, a socket nor the actor. Configuration (`Config::parse`) and the authorization types
//! (`auth::Challenge`, the metadata documents) are public already and are fuzzed directly.

use std::{
    collections::VecDeque,
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use bytes::Bytes;
use tokio::io::{AsyncRead, ReadBuf};

use crate::{
    protocol::jsonrpc::{self, ErrorObject, Incoming, IncomingFrame, Messages, WireId},
    transport::{stdio::ReadEnd, EventSender, EventSink, TransportEvent},
};

/// How the stdio frame splitter stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramesEnd {
    /// The input ended.
    Eof,
    /// A line grew past the cap.
    TooLarge,
    /// Reading failed (never, from [`split_frames`]'s reader).
    Failed,
    /// The receiver of the frames was gone.
    ConnectionGone,
}

/// Collects the frames the splitter delivers.
#[derive(Default)]
struct Collect(Mutex<Vec<Bytes>>);

struct CollectSink(Arc<Collect>);

impl EventSink for CollectSink {
    fn deliver(&self, event: TransportEvent) -> bool {
        if let TransportEvent::Received(frames) = event {
            if let Ok(mut all) = self.0 .0.lock() {
                all.extend(frames);
            }
        }
        true
    }

    fn is_listening(&self) -> bool {
        true
    }
}

/// A reader that hands out `chunks` one read at a time (a read never spans two chunks), like a
/// pipe the writer filled in bursts.
struct ChunkedReader(VecDeque<Vec<u8>>);

impl AsyncRead for ChunkedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        while let Some(front) = self.0.front_mut() {
            if front.is_empty() {
                self.0.pop_front();
                continue;
            }
            let n = front.len().min(buf.remaining());
            buf.put_slice(&front[..n]);
            front.drain(..n);
            break;
        }
        Poll::Ready(Ok(()))
    }
}

/// Runs the stdio frame splitter (`transport::stdio::read_frames`) over `chunks`, read one by
/// one: the frames it delivered, in order, and why it stopped.
pub fn split_frames(chunks: Vec<Vec<u8>>, max_frame: usize) -> (Vec<Bytes>, FramesEnd) {
    let collected = Arc::new(Collect::default());
    let events = EventSender::new(CollectSink(collected.clone()));
    let reader = ChunkedReader(chunks.into());
    let end = futures::executor::block_on(crate::transport::stdio::read_frames(
        reader, max_frame, &events,
    ));
    let end = match end {
        ReadEnd::Eof => FramesEnd::Eof,
        ReadEnd::TooLarge { .. } => FramesEnd::TooLarge,
        ReadEnd::Failed(_) => FramesEnd::Failed,
        ReadEnd::ConnectionGone => FramesEnd::ConnectionGone,
    };
    let frames = match collected.0.lock() {
        Ok(mut frames) => std::mem::take(&mut *frames),
        Err(_) => Vec::new(),
    };
    (frames, end)
}

/// What the connection makes of one incoming message (`IncomingFrame::parse` then `classify`),
/// owned.
#[derive(Debug, Clone)]
pub enum Classified {
    /// A response to one of our requests.
    Response {
        /// Its id.
        id: WireId,
        /// The raw result, or the error.
        outcome: Result<String, ErrorObject>,
    },
    /// A request from the server.
    ServerRequest {
        /// Its id (the server's numbering).
        id: WireId,
        /// Its method.
        method: String,
        /// Its raw params.
        params: Option<String>,
    },
    /// A notification.
    Notification {
        /// Its method.
        method: String,
        /// Its raw params.
        params: Option<String>,
    },
}

/// Classifies one message as the connection does; `Err` with the reason it would be skipped.
pub fn classify(message: &[u8]) -> Result<Classified, String> {
    let incoming = IncomingFrame::parse(message)
        .and_then(IncomingFrame::classify)
        .map_err(|problem| problem.to_string())?;
    let raw = |raw: Option<&serde_json::value::RawValue>| raw.map(|r| r.get().to_owned());
    Ok(match incoming {
        Incoming::Response { id, outcome } => Classified::Response {
            id,
            outcome: outcome.map(|r| r.get().to_owned()),
        },
        Incoming::ServerRequest { id, method, params } => Classified::ServerRequest {
            id,
            method: method.into_owned(),
            params: raw(params),
        },
        Incoming::Notification { method, params } => Classified::Notification {
            method: method.into_owned(),
            params: raw(params),
        },
    })
}

/// One message of a body: its bytes, and what it was classified as.
pub type BodyMessage<'a> = (&'a [u8], Result<Classified, String>);

/// The messages of one incoming frame or HTTP JSON body, as the connection routes them
/// (a batch split into its elements), each with its bytes and classified; `Err` if the whole is
/// skipped.
pub fn body_messages(body: &[u8]) -> Result<Vec<BodyMessage<'_>>, String> {
    let messages = match Messages::of(body).map_err(|problem| problem.to_string())? {
        Messages::One(message) => vec![message],
        Messages::Batch(items) => items.into_iter().map(|i| i.get().as_bytes()).collect(),
    };
    Ok(messages
        .into_iter()
        .map(|message| (message, classify(message)))
        .collect())
}

/// The request frame the connection writes for request `id` (newline included).
pub fn request_frame(
    id: u64,
    method: &str,
    params: Option<&serde_json::value::RawValue>,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    jsonrpc::write_request(
        &mut out,
        jsonrpc::RequestId::from_u64(id),
        method,
        params,
        None,
    )?;
    Ok(out)
}

/// The response frame the connection writes for a server request (newline included).
pub fn response_frame(
    id: &WireId,
    outcome: Result<serde_json::Value, ErrorObject>,
) -> serde_json::Result<Vec<u8>> {
    jsonrpc::response_frame(id, outcome)
}

/// The notification frame the connection writes (newline included).
pub fn notification_frame(
    method: &str,
    params: Option<&serde_json::Value>,
) -> serde_json::Result<Vec<u8>> {
    jsonrpc::notification_frame(method, params)
}

/// What the event-stream reader delivered and where it stopped.
#[cfg(feature = "http")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Events {
    /// Each message's data, in order.
    pub frames: Vec<Bytes>,
    /// The `id` of the last event that had one.
    pub last_event_id: Option<String>,
    /// The server's last `retry`, in milliseconds.
    pub retry_ms: Option<u128>,
    /// Why the stream broke, if it did.
    pub error: Option<String>,
}

/// Reads a `text/event-stream` body arriving in `chunks` with the HTTP transport's reader
/// (`transport::http::sse`), capping events at `limit` bytes.
#[cfg(feature = "http")]
pub fn read_event_stream(chunks: Vec<Vec<u8>>, limit: usize) -> Events {
    let body = futures::stream::iter(
        chunks
            .into_iter()
            .map(|chunk| Ok::<_, io::Error>(Bytes::from(chunk))),
    );
    let mut frames = Vec::new();
    let end = futures::executor::block_on(crate::transport::http::sse::read_event_stream(
        body,
        limit,
        |frame| frames.push(frame),
    ));
    Events {
        frames,
        last_event_id: end.last_event_id,
        retry_ms: end.retry.map(|retry| retry.as_millis()),
        error: end.error,
    }
}

/// The media type the HTTP transport reads from a `Content-Type` value (`None`: not a valid
/// header value, so no response could carry it).
#[cfg(feature = "http")]
pub fn media_type(content_type: &[u8]) -> Option<String> {
    use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
    let value = HeaderValue::from_bytes(content_type).ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, value);
    Some(crate::transport::http::post::media_type(&headers))
}

#[cfg(feature = "auth")]
pub use crate::auth::discovery::{
    authorization_server_metadata_urls, check_secure, resource_matches, resource_metadata_urls,
};
