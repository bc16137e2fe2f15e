//! The raw ceiling: no SDK. One writer task batches lines into the child's stdin, one reader
//! task routes responses through a `HashMap<id, oneshot::Sender>`; dropping a call queues
//! `notifications/cancelled` on the same FIFO writer.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    process::Stdio,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll},
    time::Instant,
};

use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, Command},
    sync::{mpsc, oneshot},
};

use super::{Driver, ServerCmd, SleepOutcome};

type Reply = oneshot::Sender<Result<Value, String>>;

struct Inner {
    writer: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<u64, Reply>>,
    next_id: AtomicU64,
    _child: Mutex<Child>,
}

pub struct Raw {
    inner: Arc<Inner>,
}

impl Inner {
    fn start(self: &Arc<Self>, method: &str, params: Value) -> RawCall {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        let _ = self.writer.send(line);
        RawCall {
            inner: self.clone(),
            id,
            rx,
            done: false,
        }
    }

    /// Explicit cancel: forget the entry (waking its caller) and queue the notification.
    fn cancel(&self, id: u64) {
        if let Some(tx) = self.pending.lock().unwrap().remove(&id) {
            let _ = tx.send(Err("cancelled".into()));
            let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0",
                "method": "notifications/cancelled", "params": {"requestId": id}}))
            .unwrap();
            line.push(b'\n');
            let _ = self.writer.send(line);
        }
    }
}

pub struct RawCall {
    inner: Arc<Inner>,
    id: u64,
    rx: oneshot::Receiver<Result<Value, String>>,
    done: bool,
}

impl Future for RawCall {
    type Output = Result<Value, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                self.done = true;
                Poll::Ready(r.unwrap_or_else(|_| Err("closed".into())))
            }
        }
    }
}

impl Drop for RawCall {
    fn drop(&mut self) {
        if !self.done {
            self.inner.cancel(self.id);
        }
    }
}

async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
    while let Some(line) = rx.recv().await {
        buf.extend_from_slice(&line);
        while let Ok(line) = rx.try_recv() {
            buf.extend_from_slice(&line);
        }
        if stdin.write_all(&buf).await.is_err() {
            return;
        }
        buf.clear();
    }
}

async fn read_loop(stdout: tokio::process::ChildStdout, inner: Arc<Inner>) {
    let mut lines = BufReader::with_capacity(64 * 1024, stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if msg.get("method").is_some() {
            continue;
        }
        let tx = inner.pending.lock().unwrap().remove(&id);
        if let Some(tx) = tx {
            let outcome = match msg.get("result") {
                Some(r) => Ok(r.clone()),
                None => Err(msg["error"].to_string()),
            };
            let _ = tx.send(outcome);
        }
    }
}

impl Driver for Raw {
    type Cancel = u64;

    async fn connect(server: &ServerCmd) -> Result<Self, String> {
        if server.http {
            return Err("the raw client speaks stdio only".into());
        }
        let mut child = Command::new(&server.program)
            .args(&server.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdin = child.stdin.take().ok_or("stdin")?;
        let stdout = child.stdout.take().ok_or("stdout")?;
        let (writer, rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            writer,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            _child: Mutex::new(child),
        });
        tokio::spawn(write_loop(stdin, rx));
        tokio::spawn(read_loop(stdout, inner.clone()));
        inner
            .start(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}),
            )
            .await?;
        let _ = inner
            .writer
            .send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n".to_vec());
        Ok(Self { inner })
    }

    fn echo(&self, text: &str) -> impl Future<Output = Result<(), String>> + 'static {
        let call = self.inner.start(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text}}),
        );
        let expected = text.to_owned();
        async move {
            let result = call.await?;
            if result["content"][0]["text"] == expected.as_str() {
                Ok(())
            } else {
                Err(format!("echo mismatch: {result}"))
            }
        }
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = Result<(), String>> + 'static {
        let call = self.inner.start(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": ms}}),
        );
        async move { call.await.map(drop) }
    }

    fn sleep_cancellable(&self, ms: u64) -> (u64, impl Future<Output = SleepOutcome> + 'static) {
        let call = self.inner.start(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": ms}}),
        );
        let id = call.id;
        let fut = async move {
            let outcome = call.await;
            SleepOutcome {
                cancelled: matches!(outcome, Err(ref e) if e == "cancelled"),
                seen_at: Instant::now(),
                cancel_call: None,
            }
        };
        (id, fut)
    }

    fn cancel(&self, id: &u64) {
        self.inner.cancel(*id);
    }

    async fn stats(&self) -> Result<Value, String> {
        let result = self
            .inner
            .start("tools/call", json!({"name": "stats", "arguments": {}}))
            .await?;
        Ok(result["structuredContent"].clone())
    }
}
