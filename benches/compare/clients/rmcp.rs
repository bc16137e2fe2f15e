//! rmcp (the official Rust SDK), pinned in Cargo.toml, used through its public API.

use std::{future::Future, sync::Arc, time::Instant};

use rmcp::{
    model::{CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject},
    service::{PeerRequestOptions, RunningService},
    transport::{
        streamable_http_client::StreamableHttpClientTransportConfig, StreamableHttpClientTransport,
        TokioChildProcess,
    },
    RoleClient, ServiceExt,
};
use serde_json::{json, Value};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::{Driver, HttpServer, ServerCmd, SleepOutcome};

pub struct Rmcp {
    service: Arc<RunningService<RoleClient, ()>>,
    _http: Option<HttpServer>,
}

fn params(name: &'static str, args: Value) -> CallToolRequestParams {
    let args: JsonObject = match args {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    CallToolRequestParams::new(name).with_arguments(args)
}

impl Driver for Rmcp {
    type Cancel = CancellationToken;

    async fn connect(server: &ServerCmd) -> Result<Self, String> {
        if server.http {
            let http = HttpServer::start(server)?;
            let service = if server.http2 {
                let client = reqwest::Client::builder()
                    .http2_prior_knowledge()
                    .build()
                    .map_err(|e| e.to_string())?;
                let mut config = StreamableHttpClientTransportConfig::default();
                config.uri = http.url.as_str().into();
                let transport = StreamableHttpClientTransport::with_client(client, config);
                ().serve(transport).await.map_err(|e| e.to_string())?
            } else {
                let transport = StreamableHttpClientTransport::from_uri(http.url.as_str());
                ().serve(transport).await.map_err(|e| e.to_string())?
            };
            return Ok(Self {
                service: Arc::new(service),
                _http: Some(http),
            });
        }
        let mut cmd = Command::new(&server.program);
        cmd.args(&server.args);
        let transport = TokioChildProcess::new(cmd).map_err(|e| e.to_string())?;
        let service = ().serve(transport).await.map_err(|e| e.to_string())?;
        Ok(Self {
            service: Arc::new(service),
            _http: None,
        })
    }

    fn echo(&self, text: &str) -> impl Future<Output = Result<(), String>> + 'static {
        let service = self.service.clone();
        let expected = text.to_owned();
        async move {
            let result = service
                .call_tool(params("echo", json!({ "text": expected })))
                .await
                .map_err(|e| e.to_string())?;
            let text = result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone())
                .unwrap_or_default();
            if text == expected {
                Ok(())
            } else {
                Err(format!("echo mismatch: {text:?}"))
            }
        }
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = Result<(), String>> + 'static {
        let service = self.service.clone();
        async move {
            service
                .call_tool(params("sleep", json!({ "ms": ms })))
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
    }

    fn sleep_cancellable(
        &self,
        ms: u64,
    ) -> (
        CancellationToken,
        impl Future<Output = SleepOutcome> + 'static,
    ) {
        let trigger = CancellationToken::new();
        let service = self.service.clone();
        let fired = trigger.clone();
        let fut = async move {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(
                "sleep",
                json!({ "ms": ms }),
            )));
            let handle = match service
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
            {
                Ok(handle) => handle,
                Err(_) => {
                    return SleepOutcome {
                        cancelled: false,
                        seen_at: Instant::now(),
                        cancel_call: None,
                    }
                }
            };
            let mut handle = handle;
            let cancelled = tokio::select! {
                _ = fired.cancelled() => true,
                _ = &mut handle.rx => false,
            };
            let mut cancel_call = None;
            if cancelled {
                // rmcp's explicit cancel: it sends the notification and waits for its write.
                let start = Instant::now();
                let _ = handle.cancel(None).await;
                cancel_call = Some(start.elapsed());
            }
            SleepOutcome {
                cancelled,
                seen_at: Instant::now(),
                cancel_call,
            }
        };
        (trigger, fut)
    }

    fn cancel(&self, trigger: &CancellationToken) {
        trigger.cancel();
    }

    async fn stats(&self) -> Result<Value, String> {
        let result = self
            .service
            .call_tool(params("stats", json!({})))
            .await
            .map_err(|e| e.to_string())?;
        result
            .structured_content
            .ok_or_else(|| "no stats".to_owned())
    }
}
