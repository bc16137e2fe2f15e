//! actix-mcp, used the way its README says.

use std::{
    future::{Future, IntoFuture},
    time::{Duration, Instant},
};

use futures::{future::LocalBoxFuture, FutureExt, StreamExt};

use actix_mcp::{Cancellation, Client, Error, HttpTransport, ProtocolEra, StdioTransport};
use serde_json::{json, Value};

use super::{
    ClientCounters, Driver, Era, HttpServer, ServerCmd, SleepOutcome, SoakOutcome, SoakPlan,
    SOAK_LONG_SLEEP_MS,
};

/// The 2026-07-28 era's protocol version.
const MODERN: &str = "2026-07-28";

pub struct ActixMcp {
    client: Client,
    _http: Option<HttpServer>,
    /// A written request is cancelled by aborting it (2026-07-28 over HTTP).
    cancels_by_abort: bool,
    http: bool,
    http2: bool,
    tools: ToolNames,
}

/// The demo server's tools by the names this client calls them: their own, or qualified by a
/// gateway (`demo__echo`).
#[derive(Clone)]
pub struct ToolNames {
    echo: String,
    sleep: String,
    task_sleep: String,
    stats: String,
}

impl ToolNames {
    pub fn prefixed(prefix: &str) -> Self {
        Self {
            echo: format!("{prefix}echo"),
            sleep: format!("{prefix}sleep"),
            task_sleep: format!("{prefix}task_sleep"),
            stats: format!("{prefix}stats"),
        }
    }
}

impl ActixMcp {
    fn options(era: Option<Era>) -> actix_mcp::ConnectOptions {
        Client::builder().era(match era {
            None => ProtocolEra::Auto,
            Some(Era::Legacy) => ProtocolEra::Legacy,
            Some(Era::Modern) => ProtocolEra::Modern,
        })
    }

    /// Over HTTP/1.1 to an endpoint something else runs (a gateway, a proxy), calling the demo
    /// server's tools by the names it gives them.
    pub async fn endpoint(url: &str, era: Option<Era>, tools: ToolNames) -> Result<Self, String> {
        let client = Self::options(era)
            .connect(HttpTransport::new(url))
            .await
            .map_err(|e| e.to_string())?;
        Self::checked(client, None, era, (true, false), tools)
    }

    /// Fails unless the client settled on the era asked for.
    fn checked(
        client: Client,
        http: Option<HttpServer>,
        era: Option<Era>,
        (over_http, http2): (bool, bool),
        tools: ToolNames,
    ) -> Result<Self, String> {
        let modern = client.protocol_version() == MODERN;
        if era.is_some_and(|era| (era == Era::Modern) != modern) {
            return Err(format!(
                "asked for the {} era, settled on {}",
                era.map_or("", Era::name),
                client.protocol_version()
            ));
        }
        Ok(Self {
            client,
            _http: http,
            cancels_by_abort: over_http && modern,
            http: over_http,
            http2,
            tools,
        })
    }
}

impl Driver for ActixMcp {
    type Cancel = Cancellation;

    async fn connect(server: &ServerCmd) -> Result<Self, String> {
        let options = Self::options(server.era);
        let (client, http) = if server.http {
            let http = HttpServer::start(server)?;
            let transport = HttpTransport::new(&http.url);
            let transport = if server.http2 {
                transport.http2_prior_knowledge()
            } else {
                transport
            };
            let client = options
                .connect(transport)
                .await
                .map_err(|e| e.to_string())?;
            (client, Some(http))
        } else {
            let transport = StdioTransport::new(&server.program).args(&server.args);
            let client = options
                .connect(transport)
                .await
                .map_err(|e| e.to_string())?;
            (client, None)
        };
        let how = (server.http, server.http && server.http2);
        Self::checked(client, http, server.era, how, ToolNames::prefixed(""))
    }

    fn echo(&self, text: &str) -> impl Future<Output = Result<(), String>> + 'static {
        let call = self
            .client
            .call_tool(&self.tools.echo, json!({ "text": text }));
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
        let call = self
            .client
            .call_tool(&self.tools.sleep, json!({ "ms": ms }));
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
            .call_tool(&self.tools.sleep, json!({ "ms": ms }))
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
            .call_tool(&self.tools.task_sleep, json!({ "ms": ms }))
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

    fn soak_call(&self, plan: SoakPlan) -> Option<LocalBoxFuture<'static, SoakOutcome>> {
        let long = || {
            self.client
                .call_tool(&self.tools.sleep, json!({ "ms": SOAK_LONG_SLEEP_MS }))
        };
        Some(match plan {
            SoakPlan::Echo(n) => {
                let call = self
                    .client
                    .call_tool(&self.tools.echo, json!({ "text": n.to_string() }));
                call.into_future().map(soak_outcome).boxed_local()
            }
            SoakPlan::Sleep(ms) => {
                let call = self
                    .client
                    .call_tool(&self.tools.sleep, json!({ "ms": ms }));
                call.into_future().map(soak_outcome).boxed_local()
            }
            SoakPlan::Token => {
                let token = Cancellation::new();
                let (call, mut progress) = long().cancellation(&token).progress_stream();
                async move {
                    let mut call = std::pin::pin!(call.into_future());
                    // Progress comes only from a sleep running at the server: cancel then.
                    tokio::select! {
                        biased;
                        early = &mut call => return soak_outcome(early),
                        _ = progress.next() => {
                            token.cancel();
                        }
                    }
                    soak_outcome(call.await)
                }
                .boxed_local()
            }
            SoakPlan::Timeout(ms) => {
                let call = long().timeout(Duration::from_millis(ms));
                call.into_future().map(soak_outcome).boxed_local()
            }
            SoakPlan::PreCancelled => {
                let token = Cancellation::new();
                token.cancel();
                let call = long().cancellation(&token);
                async move {
                    let mut call = std::pin::pin!(call.into_future());
                    match futures::poll!(call.as_mut()) {
                        std::task::Poll::Ready(outcome) => soak_outcome(outcome),
                        std::task::Poll::Pending => SoakOutcome::NotAtOnce,
                    }
                }
                .boxed_local()
            }
            // The scenario drops a `sleep` itself.
            SoakPlan::Drop(_) => return None,
        })
    }

    fn soak_counters(&self) -> LocalBoxFuture<'_, Option<ClientCounters>> {
        Box::pin(async move {
            let stats = self.client.stats().await.ok()?;
            Some(ClientCounters {
                in_flight: stats.in_flight as u64,
                requests_written: stats.requests_written,
                cancelled_before_write: stats.cancelled_before_write,
                cancelled_while_held: stats.cancelled_while_held,
                cancels_sent: stats.cancels_sent,
                requests_aborted: stats.requests_aborted,
                late_responses: stats.late_responses,
                cancels_by_abort: self.cancels_by_abort,
                http: self.http,
                http2: self.http2,
            })
        })
    }

    fn cancel(&self, token: &Cancellation) {
        token.cancel();
    }

    async fn stats(&self) -> Result<Value, String> {
        let result = self
            .client
            .call_tool(&self.tools.stats, json!({}))
            .await
            .map_err(|e| e.to_string())?;
        result.structured_content.ok_or_else(|| "no stats".into())
    }
}

fn soak_outcome(outcome: Result<actix_mcp::CallToolResult, Error>) -> SoakOutcome {
    match outcome {
        Ok(result) => SoakOutcome::Ok(result.text()),
        Err(Error::Cancelled { .. }) => SoakOutcome::Cancelled,
        Err(Error::Timeout { .. }) => SoakOutcome::Timeout,
        Err(e) => {
            // With the causes: "error sending request" alone does not say why.
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                why.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            SoakOutcome::Failed(why)
        }
    }
}
