//! OpenTelemetry for the workspace's programs (the `actix-mcp` command, the gateway), by the
//! standard environment: with `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp`) set, the program's own
//! spans (its `tracing` target) and the library's call spans are exported over OTLP/HTTP
//! (protobuf), with the client's metrics (unless `OTEL_METRICS_EXPORTER=none`), until
//! [`Telemetry::finish`]; the servers get the trace context in each request. The gateway's audit
//! records are exported as log records too (unless `OTEL_LOGS_EXPORTER=none`). Without it nothing is
//! set up: no subscriber, no exporter, no meter, nothing slower. The library's authorization
//! warnings go to stderr either way.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, OnceLock,
    },
};

use opentelemetry::{
    propagation::TextMapPropagator,
    trace::{TraceContextExt, TracerProvider as _},
    KeyValue,
};
use opentelemetry_otlp::{LogExporter, MetricExporter, Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::{
    logs::{SdkLogger, SdkLoggerProvider},
    metrics::{PeriodicReader, SdkMeterProvider},
    propagation::TraceContextPropagator,
    trace::SdkTracerProvider,
    Resource,
};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::{filter::Targets, prelude::*};

/// A program of the workspace, as its telemetry names it.
#[derive(Clone, Copy)]
pub struct Program {
    /// Its name: the default `service.name`, the prefix of its warnings.
    pub name: &'static str,
    /// The `tracing` target of its own spans, exported with the library's.
    pub target: &'static str,
}

/// The exporting set up for this run, if the environment asked for it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    meters: Option<SdkMeterProvider>,
    logs: Option<SdkLoggerProvider>,
}

/// The log records' provider, when they are exported.
static LOGS: OnceLock<SdkLoggerProvider> = OnceLock::new();

/// Structured records (the gateway's audit trail) as OpenTelemetry log records.
pub struct AuditLogger(SdkLogger);

/// The logger of structured records, when log records are exported.
pub fn logger() -> Option<Arc<AuditLogger>> {
    use opentelemetry::logs::LoggerProvider as _;
    let provider = LOGS.get()?;
    Some(Arc::new(AuditLogger(provider.logger("actix-mcp"))))
}

impl AuditLogger {
    /// One record, event `name`, its `fields` as attributes (a string, number or boolean each;
    /// anything else as its JSON).
    pub fn emit(&self, name: &'static str, fields: &serde_json::Map<String, serde_json::Value>) {
        use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
        let mut record = self.0.create_log_record();
        record.set_event_name(name);
        record.set_severity_number(Severity::Info);
        record.set_severity_text("INFO");
        record.set_timestamp(std::time::SystemTime::now());
        record.set_body(AnyValue::from(name));
        for (key, value) in fields {
            let value = match value {
                serde_json::Value::Null => continue,
                serde_json::Value::String(text) => AnyValue::from(text.clone()),
                serde_json::Value::Bool(flag) => AnyValue::from(*flag),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(whole) => AnyValue::from(whole),
                    None => AnyValue::from(n.as_f64().unwrap_or_default()),
                },
                other => AnyValue::from(other.to_string()),
            };
            record.add_attribute(key.clone(), value);
        }
        self.0.emit(record);
    }
}

/// Whether the client's metrics are exported (then connections get the global meter).
static METRICS: AtomicBool = AtomicBool::new(false);

/// The meter connections record their metrics with, when they are exported.
pub fn meter() -> Option<opentelemetry::metrics::Meter> {
    METRICS
        .load(Ordering::Relaxed)
        .then(|| opentelemetry::global::meter("actix-mcp"))
}

/// Adds one to counter `name` with `attributes`, when metrics are exported.
pub fn count(name: &'static str, attributes: &[(&'static str, String)]) {
    let Some(meter) = meter() else {
        return;
    };
    let counter = meter.u64_counter(name).build();
    let attributes: Vec<KeyValue> = attributes
        .iter()
        .map(|(key, value)| KeyValue::new(*key, value.clone()))
        .collect();
    counter.add(1, &attributes);
}

/// What the environment says, read once (a function of it, for tests).
pub fn wanted(var: impl Fn(&str) -> Option<String>) -> Result<bool, String> {
    let exporter = var("OTEL_TRACES_EXPORTER");
    match exporter.as_deref().map(str::trim) {
        Some("none") => return Ok(false),
        Some("otlp") | None => {}
        Some(other) => {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={other:?}: only \"otlp\" and \"none\" are supported"
            ))
        }
    }
    let protocol =
        var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(protocol) = protocol.filter(|p| p.trim() != "http/protobuf") {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol:?}: only \"http/protobuf\" is supported"
        ));
    }
    let endpoint = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| var(name).is_some_and(|v| !v.trim().is_empty()));
    Ok(endpoint || exporter.is_some())
}

/// The authorization's warnings (a refresh token refused, a store that cannot be written) on
/// stderr, one line each, control characters made visible. Other warnings end in an error the
/// command reports anyway.
fn warnings<S>(program: Program) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let only = Targets::new().with_target("actix_mcp::auth", tracing::Level::WARN);
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .event_format(Warning(program.name))
        .with_filter(only)
}

/// `<program>: warning: <message> <fields>`.
struct Warning(&'static str);

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Warning
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut text = String::new();
        use tracing_subscriber::fmt::FormatFields as _;
        ctx.format_fields(
            tracing_subscriber::fmt::format::Writer::new(&mut text),
            event,
        )?;
        writeln!(
            writer,
            "{}: warning: {}",
            self.0,
            actix_mcp::visible::visible(&text)
        )
    }
}

impl Telemetry {
    /// Sets up exporting if the environment asks for it; the library's warnings go to stderr
    /// either way.
    pub fn start(program: Program) -> Result<Self, String> {
        if !wanted(|name| std::env::var(name).ok())? {
            let _ = tracing_subscriber::registry()
                .with(warnings(program))
                .try_init();
            return Ok(Self {
                provider: None,
                meters: None,
                logs: None,
            });
        }
        // The exporter reads the endpoint and headers from the environment itself.
        let exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build()
            .map_err(|e| format!("OpenTelemetry exporter: {e}"))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_attribute(KeyValue::new("service.name", program.name));
        }
        let resource = resource.build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.clone())
            .build();
        let meters = match std::env::var("OTEL_METRICS_EXPORTER").as_deref() {
            Ok("none") => None,
            _ => {
                let exporter = MetricExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .build()
                    .map_err(|e| format!("OpenTelemetry metrics exporter: {e}"))?;
                let meters = SdkMeterProvider::builder()
                    .with_reader(PeriodicReader::builder(exporter).build())
                    .with_resource(resource.clone())
                    .build();
                opentelemetry::global::set_meter_provider(meters.clone());
                METRICS.store(true, Ordering::Relaxed);
                Some(meters)
            }
        };
        let logs = match std::env::var("OTEL_LOGS_EXPORTER").as_deref() {
            Ok("none") => None,
            _ => {
                let exporter = LogExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .build()
                    .map_err(|e| format!("OpenTelemetry logs exporter: {e}"))?;
                let logs = SdkLoggerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource.clone())
                    .build();
                let _ = LOGS.set(logs.clone());
                Some(logs)
            }
        };
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("actix-mcp"));
        // The program's spans and the library's call spans; nothing else is exported.
        let only = Targets::new()
            .with_target("actix_mcp::call", tracing::Level::INFO)
            .with_target(program.target, tracing::Level::INFO);
        tracing_subscriber::registry()
            .with(layer.with_filter(only))
            .with(warnings(program))
            .try_init()
            .map_err(|e| format!("OpenTelemetry: {e}"))?;
        Ok(Self {
            provider: Some(provider),
            meters,
            logs,
        })
    }

    /// Whether spans are exported.
    pub fn is_on(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is left, before the process exits.
    pub fn finish(self) {
        if let Some(provider) = self.provider {
            if let Err(e) = provider.shutdown() {
                eprintln!("OpenTelemetry export: {e}");
            }
        }
        if let Some(meters) = self.meters {
            if let Err(e) = meters.shutdown() {
                eprintln!("OpenTelemetry metrics export: {e}");
            }
        }
        if let Some(logs) = self.logs {
            if let Err(e) = logs.shutdown() {
                eprintln!("OpenTelemetry logs export: {e}");
            }
        }
    }
}

/// Makes `span` a child of the remote span `traceparent` (and `tracestate`) names, if it is
/// valid: a caller's (`TRACEPARENT` in the environment, a request's `_meta`).
pub fn join_remote(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    let mut carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_owned(), state.to_owned());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_standard_environment_decides() {
        assert_eq!(wanted(env(&[])), Ok(false));
        assert_eq!(
            wanted(env(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://127.0.0.1:4318"
            )])),
            Ok(true)
        );
        assert_eq!(wanted(env(&[("OTEL_TRACES_EXPORTER", "otlp")])), Ok(true));
        assert_eq!(
            wanted(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_TRACES_EXPORTER", "none")
            ])),
            Ok(false)
        );
        assert!(wanted(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        ]))
        .is_err_and(|e| e.contains("http/protobuf")));
    }
}
