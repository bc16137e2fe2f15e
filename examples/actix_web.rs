//! An actix-web service sharing one MCP connection across its workers.
//!
//! ```text
//! cargo run --features actix-web --example actix_web     # PORT=8081 for another port
//! curl 'http://127.0.0.1:8080/echo?text=hi'
//! curl 'http://127.0.0.1:8080/sleep?ms=60000'   # press Ctrl-C: the MCP call is cancelled on the server
//! ```
//!
//! The connection is made once, in `main`, before `HttpServer::new`, and shared through
//! `web::Data`. A handler awaits the MCP call directly. With `watch_connection` and the
//! `cancel_on_disconnect` middleware, a handler whose HTTP client went away is dropped, which
//! cancels its MCP call on the MCP server.
//!
//! One trace from the incoming HTTP request through the MCP call to the MCP server, exported
//! over OTLP/HTTP (to Jaeger, say: `docker run -p 16686:16686 -p 4318:4318 jaegertracing/all-in-one`):
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo run --features actix-web,otel --example actix_web
//! curl -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' 'http://127.0.0.1:8080/echo?text=hi'
//! ```
//!
//! Each request runs in a SERVER span (a child of the request's `traceparent` when it has one),
//! the MCP call in its CLIENT span inside it, and the MCP server receives that span as its parent
//! in `params._meta.traceparent`.

#[path = "../tests/support/workspace_bins.rs"]
mod workspace_bins;

use std::future::IntoFuture;

use actix_mcp::{Client, StdioTransport};
use actix_web::{get, middleware::from_fn, web, App, HttpResponse, HttpServer};
use serde_json::json;

#[derive(serde::Deserialize)]
struct Echo {
    text: String,
}

#[get("/echo")]
async fn echo(
    mcp: web::Data<Client>,
    query: web::Query<Echo>,
    request: actix_web::HttpRequest,
) -> HttpResponse {
    use tracing::Instrument;
    let call = mcp.call_tool("echo", json!({ "text": query.text }));
    match call
        .into_future()
        .instrument(traced::request_span(&request))
        .await
    {
        Ok(result) => HttpResponse::Ok().body(result.text()),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

#[derive(serde::Deserialize)]
struct Sleep {
    ms: u64,
}

#[get("/sleep")]
async fn sleep(mcp: web::Data<Client>, query: web::Query<Sleep>) -> HttpResponse {
    match mcp
        .call_tool("sleep", json!({ "ms": query.ms }))
        .no_timeout()
        .await
    {
        Ok(result) => HttpResponse::Ok().body(result.text()),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

fn main() -> std::io::Result<()> {
    // The demo server (package `actix-mcp-demo-server`), built first if needed.
    let server = workspace_bins::try_program(
        &[workspace_bins::DEMO_SERVER],
        workspace_bins::DEMO_SERVER,
        false,
    )
    .map_err(std::io::Error::other)?;
    let tracing = traced::start();
    let served = actix_web::rt::System::new().block_on(async {
        // One connection for the whole service, made before the workers start.
        let client = Client::connect(StdioTransport::new(server))
            .await
            .map_err(std::io::Error::other)?;
        let client = web::Data::new(client);
        let port: u16 = std::env::var("PORT")
            .ok()
            .and_then(|port| port.parse().ok())
            .unwrap_or(8080);
        println!("listening on http://127.0.0.1:{port}");
        HttpServer::new(move || {
            App::new()
                .app_data(client.clone())
                .wrap(from_fn(actix_mcp::web::cancel_on_disconnect))
                .service(echo)
                .service(sleep)
        })
        .on_connect(actix_mcp::web::watch_connection)
        .bind(("127.0.0.1", port))?
        .run()
        .await
    });
    // What is left is exported before the process ends.
    drop(tracing);
    served
}

/// The HTTP request's span, and the exporting (with the `otel` feature and
/// `OTEL_EXPORTER_OTLP_ENDPOINT` set; otherwise nothing is set up and the spans are disabled).
mod traced {
    /// A SERVER span for the HTTP request, the child of its `traceparent`, if any.
    pub fn request_span(request: &actix_web::HttpRequest) -> tracing::Span {
        let span = tracing::info_span!(
            target: "actix_mcp::call",
            "http.server",
            "otel.name" = format!("{} {}", request.method(), request.path()),
            "otel.kind" = "server",
        );
        #[cfg(feature = "otel")]
        {
            use opentelemetry::propagation::TextMapPropagator;
            use tracing_opentelemetry::OpenTelemetrySpanExt;
            let carrier: std::collections::HashMap<String, String> = ["traceparent", "tracestate"]
                .into_iter()
                .filter_map(|name| {
                    let value = request.headers().get(name)?.to_str().ok()?;
                    Some((name.to_owned(), value.to_owned()))
                })
                .collect();
            let parent =
                opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
            let _ = span.set_parent(parent);
        }
        #[cfg(not(feature = "otel"))]
        let _ = request;
        span
    }

    /// Exports the spans over OTLP/HTTP until dropped, when the environment names an endpoint.
    pub struct Exporting {
        #[cfg(feature = "otel")]
        provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    }

    impl Drop for Exporting {
        fn drop(&mut self) {
            #[cfg(feature = "otel")]
            if let Some(provider) = self.provider.take() {
                let _ = provider.shutdown();
            }
        }
    }

    pub fn start() -> Exporting {
        #[cfg(feature = "otel")]
        {
            use opentelemetry::trace::TracerProvider as _;
            use opentelemetry_otlp::{Protocol, WithExportConfig};
            use tracing_subscriber::prelude::*;
            if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() {
                return Exporting { provider: None };
            }
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build();
            let Ok(exporter) = exporter else {
                eprintln!("no OTLP exporter: {exporter:?}");
                return Exporting { provider: None };
            };
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .build();
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("actix_web"));
            let only = tracing_subscriber::filter::Targets::new()
                .with_target("actix_mcp::call", tracing::Level::INFO);
            let _ = tracing_subscriber::registry()
                .with(layer.with_filter(only))
                .try_init();
            Exporting {
                provider: Some(provider),
            }
        }
        #[cfg(not(feature = "otel"))]
        Exporting {}
    }
}
