//! The raw HTTP ceiling: no SDK, reqwest with the settings actix-mcp uses (its default client;
//! h2c with prior knowledge for `-h2`). One POST per request; the answer is the last `data:`
//! line of the event stream (or the JSON body). A cancel drops the POST and, once the server
//! has answered its headers (it holds the request), POSTs `notifications/cancelled`
//! (2025-11-25).

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Instant,
};

use futures::future::{AbortHandle, Abortable};
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Value};

use super::{Driver, HttpServer, ServerCmd, SleepOutcome};

struct Inner {
    client: reqwest::Client,
    url: String,
    session: Mutex<Option<HeaderValue>>,
    next_id: AtomicU64,
    /// The explicit cancel handles of calls in flight.
    cancels: Mutex<HashMap<u64, AbortHandle>>,
}

pub struct RawHttp {
    inner: Arc<Inner>,
    _http: HttpServer,
}

impl Inner {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut builder = self
            .client
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string());
        if let Some(session) = self.session.lock().unwrap().clone() {
            builder = builder.header("mcp-session-id", session);
        }
        builder
    }

    /// Sends `notifications/cancelled` for `id` in the background.
    fn notify_cancelled(self: &Arc<Self>, id: u64) {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id}});
        let send = self.post(&note).send();
        tokio::spawn(async move {
            let _ = send.await;
        });
    }

    /// One request: POST, read the whole answer, pick the response out of it.
    fn call(self: &Arc<Self>, method: &str, params: Value) -> (u64, RawHttpCall) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let send = self.post(&body).send();
        let at_server = Arc::new(AtomicBool::new(false));
        let seen = at_server.clone();
        let request = async move {
            let response = send.await.map_err(|e| e.to_string())?;
            seen.store(true, Ordering::Release);
            let status = response.status();
            let session = response.headers().get("mcp-session-id").cloned();
            let sse = response
                .headers()
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            let bytes = response.bytes().await.map_err(|e| e.to_string())?;
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            let message: Value = if sse {
                let data = bytes
                    .split(|b| *b == b'\n')
                    .filter_map(|line| line.strip_prefix(b"data:"))
                    .rfind(|data| !data.trim_ascii().is_empty())
                    .ok_or("no event")?;
                serde_json::from_slice(data).map_err(|e| e.to_string())?
            } else if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).map_err(|e| e.to_string())?
            };
            Ok((message, session))
        };
        let (abort, registration) = AbortHandle::new_pair();
        self.cancels.lock().unwrap().insert(id, abort);
        let call = RawHttpCall {
            inner: self.clone(),
            id,
            at_server,
            done: false,
            request: Abortable::new(Box::pin(request), registration),
        };
        (id, call)
    }

    fn cancel(self: &Arc<Self>, id: u64) {
        if let Some(abort) = self.cancels.lock().unwrap().remove(&id) {
            abort.abort();
        }
    }
}

type Answer = Result<(Value, Option<HeaderValue>), String>;

pub struct RawHttpCall {
    inner: Arc<Inner>,
    id: u64,
    at_server: Arc<AtomicBool>,
    done: bool,
    request: Abortable<std::pin::Pin<Box<dyn Future<Output = Answer> + Send>>>,
}

impl Future for RawHttpCall {
    type Output = Result<Value, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let answer = match std::pin::Pin::new(&mut self.request).poll(cx) {
            std::task::Poll::Pending => return std::task::Poll::Pending,
            std::task::Poll::Ready(answer) => answer,
        };
        let id = self.id;
        self.inner.cancels.lock().unwrap().remove(&id);
        let outcome = match answer {
            // Cancelled explicitly: the POST is dropped; the server learns by notification.
            Err(_aborted) => {
                if self.at_server.load(Ordering::Acquire) {
                    self.inner.notify_cancelled(id);
                }
                Err("cancelled".to_owned())
            }
            Ok(Err(e)) => Err(e),
            Ok(Ok((message, session))) => {
                if let Some(session) = session {
                    *self.inner.session.lock().unwrap() = Some(session);
                }
                match message.get("result") {
                    Some(result) => Ok(result.clone()),
                    None => Err(message["error"].to_string()),
                }
            }
        };
        self.done = true;
        std::task::Poll::Ready(outcome)
    }
}

impl Drop for RawHttpCall {
    fn drop(&mut self) {
        if !self.done {
            self.inner.cancels.lock().unwrap().remove(&self.id);
            if self.at_server.load(Ordering::Acquire) {
                self.inner.notify_cancelled(self.id);
            }
        }
    }
}

impl Driver for RawHttp {
    type Cancel = u64;

    async fn connect(server: &ServerCmd) -> Result<Self, String> {
        if !server.http {
            return Err("the raw HTTP client speaks HTTP only".into());
        }
        let http = HttpServer::start(server)?;
        let builder = reqwest::Client::builder();
        let builder = if server.http2 {
            builder.http2_prior_knowledge()
        } else {
            builder
        };
        let inner = Arc::new(Inner {
            client: builder.build().map_err(|e| e.to_string())?,
            url: http.url.clone(),
            session: Mutex::new(None),
            next_id: AtomicU64::new(1),
            cancels: Mutex::new(HashMap::new()),
        });
        inner
            .call(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw-http", "version": "0"}}),
            )
            .1
            .await?;
        inner
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self { inner, _http: http })
    }

    fn echo(&self, text: &str) -> impl Future<Output = Result<(), String>> + 'static {
        let (_, call) = self.inner.call(
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
        let (_, call) = self.inner.call(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": ms}}),
        );
        async move { call.await.map(drop) }
    }

    fn sleep_cancellable(&self, ms: u64) -> (u64, impl Future<Output = SleepOutcome> + 'static) {
        let (id, call) = self.inner.call(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": ms}}),
        );
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
        let (_, call) = self
            .inner
            .call("tools/call", json!({"name": "stats", "arguments": {}}));
        Ok(call.await?["structuredContent"].clone())
    }
}
