//! [`StdioTransport`]: spawn the server program and speak newline-delimited JSON on its pipes.
//!
//! Four tasks run on the connection actor's thread, so the actor itself never touches a pipe:
//! - the **writer** owns the child's stdin and writes one batch at a time, reporting each batch
//!   written once `write_all` returned (tokio's pipe has no user-space buffer, so the bytes are in
//!   the kernel pipe, which is FIFO: the server reads them before anything written later);
//! - the **reader** owns stdout and splits it into frames, independently of the writer, so a server
//!   that writes a lot while we write a lot cannot deadlock us;
//! - the **stderr logger** forwards the server's stderr lines to `tracing`, so that pipe never fills;
//! - the **supervisor** owns the child, turns its exit (or the end of stdout) into one
//!   [`TransportEvent::Closed`], and runs the shutdown: close stdin, wait, SIGTERM, wait, SIGKILL.
//!
//! On unix the server is started in a process group of its own, and the signals go to the whole
//! group: a server behind a wrapper (`npx`, `uvx`, `sh -c`) does not leave its real process
//! running, and the shutdown waits for every process of the group, not just the direct child.

use std::{
    ffi::{OsStr, OsString},
    future::Future,
    io,
    path::PathBuf,
    pin::Pin,
    time::Duration,
};

use bytes::BytesMut;
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStderr, ChildStdin, Command},
    sync::{mpsc, oneshot},
    time::timeout,
};
use tracing::Instrument as _;

use super::{
    EventSender, Outbound, Sent, Transport, TransportEvent, TransportIo, DEFAULT_MAX_FRAME_BYTES,
};
use crate::error::{CloseReason, Error};

/// How long to wait after closing stdin, and again after SIGTERM, before escalating.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Once the process is gone, how long to let the reader drain what it wrote before reporting.
const EXIT_DRAIN: Duration = Duration::from_millis(200);

/// Spawns a server program (never through a shell) and talks to it over stdin/stdout.
///
/// ```no_run
/// # async fn f() -> Result<(), actix_mcp::Error> {
/// let transport = actix_mcp::StdioTransport::new("npx")
///     .args(["-y", "@modelcontextprotocol/server-everything"])
///     .env("LOG_LEVEL", "debug");
/// let client = actix_mcp::Client::connect(transport).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StdioTransport {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_clear: bool,
    current_dir: Option<PathBuf>,
    max_frame_bytes: usize,
    shutdown_grace: Duration,
}

impl StdioTransport {
    /// Runs `program` (a path, or a name looked up in `PATH`) with no arguments.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            current_dir: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends several arguments, in order.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets one environment variable for the server (on top of the inherited environment).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Starts the server with an empty environment (plus what [`env`](Self::env) sets).
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// The server's working directory (default: this process's).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Caps one incoming frame (a line of the server's stdout, and so the reader's buffer); a
    /// larger frame closes the connection with [`CloseReason::FrameTooLarge`]. Default 32 MiB
    /// ([`DEFAULT_MAX_FRAME_BYTES`]). It also bounds each entry of every other buffer a server
    /// can fill (see ARCHITECTURE.md, "Caps on what a server can make us hold"); the server's
    /// stderr is logged in lines of at most 16 KiB.
    pub fn max_frame_bytes(mut self, limit: usize) -> Self {
        self.max_frame_bytes = limit.max(1);
        self
    }

    /// The wait after closing stdin, and again after SIGTERM (for the server's whole process
    /// group, on unix). Default 2 s.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    fn spawn(&self) -> Result<Child, Error> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // The last line of defence: if our tasks are dropped without a shutdown (the runtime
            // ended), the child is killed rather than left running.
            .kill_on_drop(true);
        // Its own process group (pgid = its pid), so the shutdown can signal everything it started.
        #[cfg(unix)]
        cmd.process_group(0);
        if self.env_clear {
            cmd.env_clear();
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.current_dir {
            cmd.current_dir(dir);
        }
        cmd.spawn()
            .map_err(|e| Error::transport(format!("cannot spawn {:?}", self.program), e))
    }
}

impl Transport for StdioTransport {
    fn peer(&self) -> super::Peer {
        super::Peer::pipe()
    }

    fn open(self: Box<Self>, events: EventSender) -> Result<Box<dyn TransportIo>, Error> {
        let mut child = self.spawn()?;
        let missing = || Error::transport("child pipes", io::Error::other("pipe not captured"));
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr = child.stderr.take().ok_or_else(missing)?;
        let child_pid = child.id();
        let pid = child_pid.unwrap_or(0);
        tracing::debug!(pid, program = ?self.program, "spawned MCP server");

        let (batches_tx, batches_rx) = mpsc::unbounded_channel();
        let (write_failed_tx, write_failed_rx) = oneshot::channel();
        let (read_end_tx, read_end_rx) = oneshot::channel();
        let (close_tx, close_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();

        actix_rt::spawn(write_batches(
            stdin,
            batches_rx,
            events.clone(),
            write_failed_tx,
        ));
        let reader_events = events.clone();
        let max_frame = self.max_frame_bytes;
        actix_rt::spawn(async move {
            let end = read_frames(stdout, max_frame, &reader_events).await;
            let _ = read_end_tx.send(end);
        });
        // The server's stderr and its exit are logged in the connection's span (server name).
        let span = tracing::Span::current();
        actix_rt::spawn(log_stderr(stderr, pid).instrument(span.clone()));
        actix_rt::spawn(
            supervise(
                child,
                child_pid,
                Signals {
                    read_end: read_end_rx,
                    write_failed: write_failed_rx,
                    close: close_rx,
                },
                events,
                self.shutdown_grace,
                done_tx,
            )
            .instrument(span),
        );

        Ok(Box::new(StdioIo {
            batches: Some(batches_tx),
            close: Some(close_tx),
            done: Some(done_rx),
        }))
    }
}

struct StdioIo {
    batches: Option<mpsc::UnboundedSender<Outbound>>,
    close: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
}

impl TransportIo for StdioIo {
    fn send(&mut self, batch: Outbound) -> Sent {
        if let Some(tx) = &self.batches {
            // If the writer is gone the supervisor is already reporting why; the batch is moot.
            let _ = tx.send(batch);
        }
        Sent::Writing
    }

    fn close(&mut self) -> Pin<Box<dyn Future<Output = ()>>> {
        // Dropping the batch sender ends the writer, which drops stdin: the server sees EOF.
        self.batches = None;
        if let Some(close) = self.close.take() {
            let _ = close.send(());
        }
        let done = self.done.take();
        Box::pin(async move {
            if let Some(done) = done {
                let _ = done.await;
            }
        })
    }
}

async fn write_batches(
    mut stdin: ChildStdin,
    mut batches: mpsc::UnboundedReceiver<Outbound>,
    events: EventSender,
    failed: oneshot::Sender<io::Error>,
) {
    while let Some(batch) = batches.recv().await {
        let written = match stdin.write_all(batch.bytes()).await {
            Ok(()) => stdin.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let _ = failed.send(e);
            return;
        }
        if !events.send(TransportEvent::Written(batch)) {
            return;
        }
    }
    // Channel closed: the connection is closing. Dropping stdin sends EOF to the server.
}

/// Why the reader stopped.
#[derive(Debug)]
pub(crate) enum ReadEnd {
    Eof,
    TooLarge { limit: usize },
    Failed(io::Error),
    ConnectionGone,
}

/// Splits a byte stream into newline-delimited frames and delivers them in order.
/// Shared by every stream transport.
pub(crate) async fn read_frames<R: AsyncRead + Unpin>(
    mut input: R,
    max_frame: usize,
    events: &EventSender,
) -> ReadEnd {
    const READ_CHUNK: usize = 64 * 1024;
    // With nothing buffered the reader waits on this small array and holds no buffer: an idle
    // connection costs its size, not a chunk. A read that fills it goes on in a chunk.
    const FIRST_READ: usize = 512;
    let mut first = [0u8; FIRST_READ];
    let mut buf = BytesMut::new();
    // Bytes of `buf` already known to hold no newline.
    let mut scanned = 0;
    loop {
        let read = if buf.is_empty() {
            buf = BytesMut::new();
            input.read(&mut first).await.inspect(|&n| {
                if n == FIRST_READ {
                    buf.reserve(READ_CHUNK);
                }
                buf.extend_from_slice(&first[..n]);
            })
        } else {
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            input.read_buf(&mut buf).await
        };
        match read {
            Ok(0) => return ReadEnd::Eof,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return ReadEnd::Failed(e),
        }
        let mut frames = Vec::new();
        let mut too_large = false;
        while let Some(pos) = memchr::memchr(b'\n', &buf[scanned..]) {
            let line = buf.split_to(scanned + pos + 1).freeze();
            scanned = 0;
            let mut end = line.len() - 1;
            if end > 0 && line[end - 1] == b'\r' {
                end -= 1;
            }
            if end > max_frame {
                too_large = true;
                break;
            }
            if line[..end].iter().any(|b| !b.is_ascii_whitespace()) {
                frames.push(line.slice(..end));
            }
        }
        scanned = buf.len();
        if !frames.is_empty() && !events.send(TransportEvent::Received(frames)) {
            return ReadEnd::ConnectionGone;
        }
        // An unfinished line over the cap by just a trailing `\r` may still end at the cap: its
        // `\n` may come with the next read.
        let unfinished = buf.len() - usize::from(buf.last() == Some(&b'\r'));
        if too_large || unfinished > max_frame {
            return ReadEnd::TooLarge { limit: max_frame };
        }
    }
}

async fn log_stderr(stderr: ChildStderr, pid: u32) {
    // Long lines are logged in pieces rather than buffered without bound.
    const MAX_LINE: u64 = 16 * 1024;
    // Small buffers: stderr is for the odd log line, and an idle connection keeps them.
    let mut reader = BufReader::with_capacity(256, stderr);
    let mut line = Vec::new();
    loop {
        if line.capacity() > 1024 {
            line = Vec::new();
        }
        line.clear();
        match (&mut reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                tracing::info!(target: "actix_mcp::server_stderr", pid, "{}", text.trim_end());
            }
        }
    }
}

struct Signals {
    read_end: oneshot::Receiver<ReadEnd>,
    write_failed: oneshot::Receiver<io::Error>,
    close: oneshot::Receiver<()>,
}

async fn supervise(
    mut child: Child,
    group: Option<u32>,
    mut signals: Signals,
    events: EventSender,
    grace: Duration,
    done: oneshot::Sender<()>,
) {
    #[cfg(unix)]
    let mut last_resort =
        KillGroupOnDrop(group.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 0));
    let reason = tokio::select! {
        status = child.wait() => {
            // Let the reader deliver what the process wrote before it exited.
            let _ = timeout(EXIT_DRAIN, &mut signals.read_end).await;
            match status {
                Ok(status) => CloseReason::ProcessExited { status },
                Err(e) => CloseReason::ReadFailed(e.into()),
            }
        }
        end = &mut signals.read_end => {
            let reason = match end {
                Ok(ReadEnd::TooLarge { limit }) => CloseReason::FrameTooLarge { limit },
                Ok(ReadEnd::Failed(e)) => CloseReason::ReadFailed(e.into()),
                Ok(ReadEnd::Eof) | Ok(ReadEnd::ConnectionGone) | Err(_) => CloseReason::EndOfStream,
            };
            // The end of stdout usually means the process is exiting: report its status if it
            // comes promptly.
            match (&reason, timeout(EXIT_DRAIN, child.wait()).await) {
                (CloseReason::EndOfStream, Ok(Ok(status))) => CloseReason::ProcessExited { status },
                _ => reason,
            }
        }
        Ok(e) = &mut signals.write_failed => {
            match timeout(EXIT_DRAIN, child.wait()).await {
                Ok(Ok(status)) => CloseReason::ProcessExited { status },
                _ => CloseReason::WriteFailed(e.into()),
            }
        }
        _ = &mut signals.close => CloseReason::ClosedByClient,
    };
    tracing::debug!(%reason, "MCP server connection closed");
    events.send(TransportEvent::Closed(reason));
    shut_down(&mut child, group, grace).await;
    #[cfg(unix)]
    {
        last_resort.0 = None;
    }
    let _ = done.send(());
}

/// The last resort when the supervisor is dropped before its shutdown ran to the end (the
/// runtime ended: say, a program that exits right after a failed connect): SIGKILL to the
/// server's whole group. `kill_on_drop` reaches only the direct child, and a wrapper's child
/// (`npx`, `uvx`, `sh -c`) would live on.
#[cfg(unix)]
struct KillGroupOnDrop(Option<i32>);

#[cfg(unix)]
impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let group = nix::unistd::Pid::from_raw(group);
            signal_group(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Close stdin (already done by the writer once its channel closed), wait, SIGTERM, wait, SIGKILL.
/// On unix each wait lasts until the child exited *and* its process group is empty, and the
/// signals go to the whole group, so survivors of an exited child are stopped too.
#[cfg(unix)]
async fn shut_down(child: &mut Child, group: Option<u32>, grace: Duration) {
    use nix::sys::signal::Signal;

    // The group's id is the child's pid (`process_group(0)`), recorded at spawn: the child may be
    // reaped already (it exited first) while processes it started live on in its group.
    let Some(group) = group.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 0) else {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return;
    };
    let group = nix::unistd::Pid::from_raw(group);
    if timeout(grace, all_gone(child, group)).await.is_ok() {
        return;
    }
    tracing::debug!(%group, "MCP server ignored EOF on stdin; sending SIGTERM to its group");
    signal_group(group, Signal::SIGTERM);
    if timeout(grace, all_gone(child, group)).await.is_ok() {
        return;
    }
    tracing::debug!(%group, "MCP server ignored SIGTERM; sending SIGKILL to its group");
    signal_group(group, Signal::SIGKILL);
    // In case the child left the group (setsid), it is still ours to kill.
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// Resolves once the child exited (and was reaped) and no process is left in its group.
#[cfg(unix)]
async fn all_gone(child: &mut Child, group: nix::unistd::Pid) {
    const POLL: Duration = Duration::from_millis(20);
    let _ = child.wait().await;
    // No notification exists for "the group is empty": poll it. The group id cannot be given to
    // another process while the child is unreaped or any member of the group lives.
    while nix::sys::signal::killpg(group, None).is_ok() {
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(unix)]
fn signal_group(group: nix::unistd::Pid, signal: nix::sys::signal::Signal) {
    if let Err(error) = nix::sys::signal::killpg(group, signal) {
        // ESRCH: the group ended meanwhile.
        tracing::debug!(%group, %error, ?signal, "cannot signal the MCP server's process group");
    }
}

/// Close stdin (already done by the writer once its channel closed), wait, then kill.
#[cfg(not(unix))]
async fn shut_down(child: &mut Child, _group: Option<u32>, grace: Duration) {
    if let Ok(Ok(_)) = timeout(grace, child.wait()).await {
        return;
    }
    tracing::debug!("MCP server ignored EOF on stdin; killing it");
    let _ = child.start_kill();
    let _ = child.wait().await;
}

#[cfg(test)]
mod tests {
    use std::{
        collections::VecDeque,
        sync::{Arc, Mutex},
        task::{Context, Poll},
    };

    use bytes::Bytes;
    use proptest::prelude::*;
    use tokio::io::ReadBuf;

    use super::*;
    use crate::transport::EventSink;

    /// Hands out one chunk per read, like a pipe written in bursts.
    struct Chunks(VecDeque<Vec<u8>>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(mut chunk) = self.0.pop_front() {
                let n = chunk.len().min(buf.remaining());
                buf.put_slice(&chunk[..n]);
                if n < chunk.len() {
                    self.0.push_front(chunk.split_off(n));
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    struct Collect(Arc<Mutex<Vec<Bytes>>>);

    impl EventSink for Collect {
        fn deliver(&self, event: TransportEvent) -> bool {
            if let TransportEvent::Received(frames) = event {
                self.0.lock().unwrap().extend(frames);
            }
            true
        }

        fn is_listening(&self) -> bool {
            true
        }
    }

    /// The frames and the end of reading `chunks` (empty chunks are dropped: an empty read is
    /// the end of the input).
    fn split(chunks: Vec<Vec<u8>>, max_frame: usize) -> (Vec<Bytes>, ReadEnd) {
        let frames = Arc::new(Mutex::new(Vec::new()));
        let events = EventSender::new(Collect(frames.clone()));
        let reader = Chunks(chunks.into_iter().filter(|c| !c.is_empty()).collect());
        let end = futures::executor::block_on(read_frames(reader, max_frame, &events));
        let frames = std::mem::take(&mut *frames.lock().unwrap());
        (frames, end)
    }

    // Found while writing the `stdio_frames` fuzz target's rule (which checks it): a line of
    // exactly the cap whose `\r` came in one read and its `\n` in the next ended the connection
    // as too large.
    #[test]
    fn a_line_at_the_cap_whose_cr_and_newline_arrive_apart_is_a_frame_regression() {
        let (frames, end) = split(vec![b"0123456789\r".to_vec(), b"\n".to_vec()], 10);
        assert_eq!(frames, [Bytes::from_static(b"0123456789")]);
        assert!(matches!(end, ReadEnd::Eof), "{end:?}");
        // One byte more is over the cap, however it arrives.
        let (frames, end) = split(vec![b"0123456789x\r".to_vec(), b"\n".to_vec()], 10);
        assert!(frames.is_empty());
        assert!(matches!(end, ReadEnd::TooLarge { limit: 10 }), "{end:?}");
        let (_, end) = split(vec![b"0123456789x".to_vec()], 10);
        assert!(matches!(end, ReadEnd::TooLarge { limit: 10 }), "{end:?}");
    }

    #[test]
    fn blank_lines_and_a_trailing_cr_are_not_part_of_frames() {
        let (frames, end) = split(vec![b"\r\n \t\n{\"a\":1}\r\n\r\r\n{}".to_vec()], 64);
        // `\r` alone is blank; the unfinished `{}` is dropped at the end of the input.
        assert_eq!(frames, [Bytes::from_static(b"{\"a\":1}")]);
        assert!(matches!(end, ReadEnd::Eof), "{end:?}");
    }

    proptest! {
        /// However the input is cut into reads, the frames and the end are those of reading it
        /// in one piece.
        #[test]
        fn random_chunking_splits_like_the_whole_input(
            lines in prop::collection::vec(
                (prop::collection::vec(prop::sample::select(b"ab \r{}".to_vec()), 0..14),
                 any::<bool>()),
                0..8,
            ),
            cuts in prop::collection::vec(0usize..20, 0..20),
            max_frame in 1usize..12,
        ) {
            let mut input = Vec::new();
            for (line, crlf) in &lines {
                input.extend_from_slice(line);
                input.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
            let mut chunks = Vec::new();
            let mut rest = &input[..];
            for cut in cuts {
                let n = cut.min(rest.len());
                chunks.push(rest[..n].to_vec());
                rest = &rest[n..];
            }
            chunks.push(rest.to_vec());
            let (whole_frames, whole_end) = split(vec![input.clone()], max_frame);
            let (frames, end) = split(chunks, max_frame);
            prop_assert_eq!(frames, whole_frames);
            prop_assert_eq!(format!("{end:?}"), format!("{whole_end:?}"));
        }
    }
}
