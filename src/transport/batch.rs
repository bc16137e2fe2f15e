//! [`Outbound`]: a batch of frames written back to back, each with what a transport needs to know
//! about it (built above the transport, so no transport ever reads the JSON).

use std::borrow::Cow;

use crate::protocol::{jsonrpc::RequestId, lifecycle::HandshakeStep, routing::Routing};

/// Newline-terminated frames stored back to back in one buffer, so a stream transport can write
/// the whole batch with one call, and a message transport can still take it apart frame by frame.
#[derive(Debug, Default)]
pub struct Outbound {
    bytes: Vec<u8>,
    frames: Vec<FrameEnd>,
}

#[derive(Debug)]
struct FrameEnd {
    end: usize,
    kind: FrameKind,
    handshake: Option<HandshakeStep>,
    method: Option<Cow<'static, str>>,
    routing: Option<Box<Routing>>,
}

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameKind {
    /// One of our requests.
    Request(RequestId),
    /// Our `notifications/cancelled` for this request of ours.
    Cancel(RequestId),
    /// Another notification of ours.
    Notification,
    /// Our answer to a request of the server.
    Response,
}

/// One frame of a batch.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The frame: compact JSON and its trailing newline.
    pub bytes: &'a [u8],
    /// What the frame is.
    pub kind: FrameKind,
    /// The method of a request or notification.
    pub method: Option<&'a str>,
    /// What the 2026-07-28 HTTP transport routes this request on (`Mcp-Name`, `Mcp-Param-*`);
    /// `None` if the frame has none.
    pub routing: Option<&'a Routing>,
    /// Which frame of the 2025-11-25 handshake this is, if it is one.
    pub handshake: Option<HandshakeStep>,
}

impl Frame<'_> {
    /// The request this frame carries, if it is a request.
    pub fn request(&self) -> Option<RequestId> {
        match self.kind {
            FrameKind::Request(id) => Some(id),
            _ => None,
        }
    }

    /// The request this frame cancels, if it is our `notifications/cancelled`.
    pub fn cancels(&self) -> Option<RequestId> {
        match self.kind {
            FrameKind::Cancel(id) => Some(id),
            _ => None,
        }
    }
}

impl Outbound {
    /// All frames, back to back.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// True if the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The number of frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// The frames, in write order.
    pub fn frames(&self) -> impl Iterator<Item = Frame<'_>> + '_ {
        let mut start = 0;
        self.frames.iter().map(move |f| {
            let frame = Frame {
                bytes: &self.bytes[start..f.end],
                kind: f.kind,
                method: f.method.as_deref(),
                routing: f.routing.as_deref(),
                handshake: f.handshake,
            };
            start = f.end;
            frame
        })
    }

    /// The requests carried by this batch, in order.
    pub fn requests(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.frames.iter().filter_map(|f| match f.kind {
            FrameKind::Request(id) => Some(id),
            _ => None,
        })
    }

    /// Appends a request frame produced by `write`. If `write` fails, nothing is added.
    pub(crate) fn push_request<E>(
        &mut self,
        id: RequestId,
        method: Cow<'static, str>,
        routing: Option<Box<Routing>>,
        write: impl FnOnce(&mut Vec<u8>, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.bytes.len();
        if let Err(e) = write(&mut self.bytes, &method) {
            self.bytes.truncate(start);
            return Err(e);
        }
        let handshake = HandshakeStep::of_request(&method);
        self.end_frame(FrameKind::Request(id), Some(method), routing, handshake);
        Ok(())
    }

    /// Appends our `notifications/cancelled` for `request`, written by `write`.
    pub(crate) fn push_cancel(&mut self, request: RequestId, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.bytes);
        self.end_frame(FrameKind::Cancel(request), None, None, None);
    }

    /// Appends a serialized notification or response.
    pub(crate) fn push(
        &mut self,
        kind: FrameKind,
        method: Option<Cow<'static, str>>,
        frame: &[u8],
    ) {
        self.bytes.extend_from_slice(frame);
        let handshake = match (kind, &method) {
            (FrameKind::Notification, Some(method)) => HandshakeStep::of_notification(method),
            _ => None,
        };
        self.end_frame(kind, method, None, handshake);
    }

    fn end_frame(
        &mut self,
        kind: FrameKind,
        method: Option<Cow<'static, str>>,
        routing: Option<Box<Routing>>,
        handshake: Option<HandshakeStep>,
    ) {
        self.frames.push(FrameEnd {
            end: self.bytes.len(),
            kind,
            handshake,
            method,
            routing,
        });
    }

    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.frames.clear();
    }
}
