//! The stdio loop's two threads: the sole writer of stdout, and the blocking stdin reads, split
//! into lines on the runtime.

use std::io::{self, Read as _, Write as _};

use tokio::sync::{mpsc, oneshot};

use crate::SERVER_NAME;

/// Size of one raw stdin read.
pub(crate) const STDIN_CHUNK: usize = 64 * 1024;
/// Raw stdin chunks allowed in flight between the stdin thread and the reader task.
pub(crate) const STDIN_CHUNKS_IN_FLIGHT: usize = 2;

pub(crate) enum Outgoing {
    /// One or more complete, newline-terminated JSON lines.
    Line(Vec<u8>),
    /// Acknowledged once everything queued before it has been flushed to stdout.
    Flush(oneshot::Sender<()>),
    /// Flush everything queued before it, then exit the process (the `crash` tool).
    Exit(i32),
}

pub(crate) fn spawn_thread(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map(drop)
}

/// Sole owner of stdout (runs on its own thread): drains whatever is queued into one
/// buffer and writes it with a single `write_all` + `flush`, so a burst of responses
/// costs one write.
pub(crate) fn write_loop(mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    let mut stdout = io::stdout().lock();
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut acks = Vec::new();
    // After a write error (client closed its end) output is discarded, but Flush and
    // Exit are still honoured so nobody waits forever.
    let mut broken = false;

    while let Some(first) = rx.blocking_recv() {
        let mut exit = None;
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outgoing::Line(line) => batch.extend_from_slice(&line),
                Outgoing::Flush(ack) => acks.push(ack),
                Outgoing::Exit(code) => {
                    exit = Some(code);
                    break;
                }
            }
            next = rx.try_recv().ok();
        }

        if !broken && !batch.is_empty() {
            if let Err(err) = stdout.write_all(&batch).and_then(|()| stdout.flush()) {
                eprintln!("{SERVER_NAME}: stdout write failed, discarding output: {err}");
                broken = true;
            }
        }
        batch.clear();
        if batch.capacity() > 8 * 1024 * 1024 {
            // Do not keep a `big`/`flood`-sized buffer around for the rest of the run.
            batch.shrink_to(64 * 1024);
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        if let Some(code) = exit {
            std::process::exit(code);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

pub(crate) type StdinChunk = io::Result<Vec<u8>>;

/// Starts the thread doing the blocking stdin reads. The channel closes at EOF; a read
/// error is forwarded and ends the stream.
pub(crate) fn spawn_stdin_reader() -> io::Result<mpsc::Receiver<StdinChunk>> {
    let (tx, rx) = mpsc::channel(STDIN_CHUNKS_IN_FLIGHT);
    spawn_thread("mcp-demo-stdin", move || {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0; STDIN_CHUNK];
        loop {
            let chunk = match stdin.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => Ok(buf[..n].to_vec()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => Err(err),
            };
            let failed = chunk.is_err();
            // Blocks while the reader task is behind (e.g. `pause_reading`).
            if tx.blocking_send(chunk).is_err() || failed {
                return;
            }
        }
    })?;
    Ok(rx)
}

/// Splits the raw stdin chunks into lines.
pub(crate) struct StdinLines {
    chunks: mpsc::Receiver<StdinChunk>,
    buf: Vec<u8>,
    /// Start of the not yet returned part of `buf`.
    pos: usize,
    /// `buf[pos..scanned]` is known to hold no newline.
    scanned: usize,
    eof: bool,
}

impl StdinLines {
    pub(crate) fn new(chunks: mpsc::Receiver<StdinChunk>) -> Self {
        Self {
            chunks,
            buf: Vec::with_capacity(STDIN_CHUNK),
            pos: 0,
            scanned: 0,
            eof: false,
        }
    }

    /// The next line without its `\n` (a final unterminated line is returned too), or
    /// `None` at EOF.
    pub(crate) async fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if let Some(offset) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let (start, end) = (self.pos, self.scanned + offset);
                self.pos = end + 1;
                self.scanned = self.pos;
                return Ok(Some(&self.buf[start..end]));
            }
            if self.eof {
                if self.pos == self.buf.len() {
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.buf.len();
                self.scanned = self.pos;
                return Ok(Some(&self.buf[start..]));
            }
            // Need more input: drop the consumed prefix, then append the next chunk.
            self.buf.drain(..self.pos);
            self.pos = 0;
            self.scanned = self.buf.len();
            match self.chunks.recv().await {
                Some(Ok(chunk)) if self.buf.is_empty() => self.buf = chunk,
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(err)) => return Err(err),
                None => self.eof = true,
            }
        }
    }
}
