//! actix-mcp, used the way its README says.

use std::{
    future::{Future, IntoFuture},
    time::Instant,
};

use futures::FutureExt;

use actix_mcp::{Cancellation, Client, HttpTransport, StdioTransport};
use serde_json::{json, Value};

use super::{Driver, HttpServer, ServerCmd, SleepOutcome};

pub struct ActixMcp {
    client: Client,
    _http: Option<HttpServer>,
}

impl Driver for ActixMcp {
    type Cancel = Cancellation;

    async fn connect(server: &ServerCmd) -> Result<Self, String> {
        if server.http {
            let http = HttpServer::start(server)?;
            let transport = HttpTransport::new(&http.url);
            let transport = if server.http2 {
                transport.http2_prior_knowledge()
            } else {
                transport
            };
            let client = Client::connect(transport)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Self {
                client,
                _http: Some(http),
            });
        }
        let transport = StdioTransport::new(&server.program).args(&server.args);
        let client = Client::connect(transport)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            _http: None,
        })
    }

    fn echo(&self, text: &str) -> impl Future<Output = Result<(), String>> + 'static {
        let call = self.client.call_tool("echo", json!({ "text": text }));
        let expected = text.to_owned();
        async move {
            let result = call.await.map_err(|e| e.to_string())?;
            if result.text() == expected {
                Ok(())
            } else {
                Err(format!("echo mismatch: {:?}", result.text()))
            }
        }
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = Result<(), String>> + 'static {
        // The call future itself, mapped: no async block holding the builder as well.
        let call = self.client.call_tool("sleep", json!({ "ms": ms }));
        call.into_future()
            .map(|r| r.map(drop).map_err(|e| e.to_string()))
    }

    fn sleep_cancellable(
        &self,
        ms: u64,
    ) -> (Cancellation, impl Future<Output = SleepOutcome> + 'static) {
        let token = Cancellation::new();
        let call = self
            .client
            .call_tool("sleep", json!({ "ms": ms }))
            .cancellation(&token);
        let fut = async move {
            let outcome = call.await;
            SleepOutcome {
                cancelled: matches!(outcome, Err(ref e) if e.is_cancelled()),
                seen_at: Instant::now(),
                cancel_call: None,
            }
        };
        (token, fut)
    }

    fn task_cancellable(
        &self,
        ms: u64,
    ) -> Option<(
        Cancellation,
        std::pin::Pin<Box<dyn Future<Output = SleepOutcome>>>,
    )> {
        let token = Cancellation::new();
        let call = self
            .client
            .call_tool("task_sleep", json!({ "ms": ms }))
            .as_task()
            .cancellation(&token);
        let fut = async move {
            let outcome = call.await;
            SleepOutcome {
                cancelled: matches!(outcome, Err(ref e) if e.is_cancelled()),
                seen_at: Instant::now(),
                cancel_call: None,
            }
        };
        Some((token, Box::pin(fut)))
    }

    fn cancel(&self, token: &Cancellation) {
        token.cancel();
    }

    async fn stats(&self) -> Result<Value, String> {
        let result = self
            .client
            .call_tool("stats", json!({}))
            .await
            .map_err(|e| e.to_string())?;
        result.structured_content.ok_or_else(|| "no stats".into())
    }
}
