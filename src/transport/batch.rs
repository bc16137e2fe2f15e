//! [`Outbound`]: a batch of frames written back to back.

use crate::RequestId;

/// Newline-terminated frames stored back to back in one buffer, so a stream transport can write
/// the whole batch with one call, and a message transport can still take it apart frame by frame.
#[derive(Debug, Default)]
pub struct Outbound {
    bytes: Vec<u8>,
    frames: Vec<FrameEnd>,
}

#[derive(Debug, Clone, Copy)]
struct FrameEnd {
    end: usize,
    request: Option<RequestId>,
    cancels: Option<RequestId>,
}

/// One frame of a batch.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The frame: compact JSON and its trailing newline.
    pub bytes: &'a [u8],
    /// The request this frame carries, if it is a request.
    pub request: Option<RequestId>,
    /// The request this frame cancels, if it is a `notifications/cancelled` of ours.
    pub cancels: Option<RequestId>,
}

impl Outbound {
    /// All frames, back to back.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn frames(&self) -> impl Iterator<Item = Frame<'_>> + '_ {
        let mut start = 0;
        self.frames.iter().map(move |f| {
            let frame = Frame {
                bytes: &self.bytes[start..f.end],
                request: f.request,
                cancels: f.cancels,
            };
            start = f.end;
            frame
        })
    }

    /// The requests carried by this batch, in order.
    pub fn requests(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.frames.iter().filter_map(|f| f.request)
    }

    /// Appends a frame produced by `write` into the buffer. If `write` fails, nothing is added.
    pub(crate) fn push_with<E>(
        &mut self,
        request: Option<RequestId>,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        write(&mut self.bytes)?;
        self.frames.push(FrameEnd {
            end: self.bytes.len(),
            request,
            cancels: None,
        });
        Ok(())
    }

    /// Appends our `notifications/cancelled` for `request`, written by `write`, tagged so a
    /// transport knows which request it cancels without reading it.
    pub(crate) fn push_cancel(&mut self, request: RequestId, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.bytes);
        self.frames.push(FrameEnd {
            end: self.bytes.len(),
            request: None,
            cancels: Some(request),
        });
    }

    pub(crate) fn push(&mut self, frame: &[u8]) {
        self.bytes.extend_from_slice(frame);
        self.frames.push(FrameEnd {
            end: self.bytes.len(),
            request: None,
            cancels: None,
        });
    }

    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.frames.clear();
    }
}
