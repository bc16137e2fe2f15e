//! A small OTLP/HTTP receiver on 127.0.0.1: it accepts `POST /v1/traces`, `/v1/metrics` and
//! `/v1/logs` (protobuf), answers `200`, and keeps every span, every histogram point and every
//! log record it was sent, decoded with the `opentelemetry-proto` types.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
};

use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::ExportLogsServiceRequest, metrics::v1::ExportMetricsServiceRequest,
        trace::v1::ExportTraceServiceRequest,
    },
    common::v1::{any_value::Value as Any, KeyValue},
    logs::v1::LogRecord,
    metrics::v1::{metric::Data, HistogramDataPoint},
    trace::v1::Span,
};

/// Spans, histogram points, log records.
type Kept = Mutex<(
    Vec<(String, Span)>,
    Vec<(String, HistogramDataPoint)>,
    Vec<LogRecord>,
)>;
use prost::Message;

#[derive(Clone)]
pub struct Receiver {
    pub endpoint: String,
    kept: Arc<Kept>,
}

impl Receiver {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let kept: Arc<Kept> = Arc::default();
        let received = kept.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let received = received.clone();
                std::thread::spawn(move || serve(stream, &received));
            }
        });
        Self { endpoint, kept }
    }

    /// Every span received: `(service.name, span)`.
    pub fn spans(&self) -> Vec<(String, Span)> {
        self.kept.lock().unwrap().0.clone()
    }

    /// Every log record received.
    #[allow(dead_code, reason = "shared by test crates, each using a part")]
    pub fn logs(&self) -> Vec<LogRecord> {
        self.kept.lock().unwrap().2.clone()
    }

    /// Every histogram point received: `(metric name, point)`.
    pub fn histograms(&self) -> Vec<(String, HistogramDataPoint)> {
        self.kept.lock().unwrap().1.clone()
    }
}

/// HTTP/1.1 requests on one connection, one after another.
fn serve(stream: TcpStream, kept: &Kept) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if path == "/v1/traces" {
            if let Ok(request) = ExportTraceServiceRequest::decode(body.as_slice()) {
                let mut kept = kept.lock().unwrap();
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .as_ref()
                        .and_then(|r| string(&r.attributes, "service.name"))
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        kept.0
                            .extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
                    }
                }
            }
        }
        if path == "/v1/metrics" {
            if let Ok(request) = ExportMetricsServiceRequest::decode(body.as_slice()) {
                let mut kept = kept.lock().unwrap();
                let metrics = request
                    .resource_metrics
                    .into_iter()
                    .flat_map(|r| r.scope_metrics)
                    .flat_map(|s| s.metrics);
                for metric in metrics {
                    if let Some(Data::Histogram(histogram)) = metric.data {
                        let name = metric.name.clone();
                        kept.1
                            .extend(histogram.data_points.into_iter().map(|p| (name.clone(), p)));
                    }
                }
            }
        }
        if path == "/v1/logs" {
            if let Ok(request) = ExportLogsServiceRequest::decode(body.as_slice()) {
                let records = request
                    .resource_logs
                    .into_iter()
                    .flat_map(|r| r.scope_logs)
                    .flat_map(|s| s.log_records);
                kept.lock().unwrap().2.extend(records);
            }
        }
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A string attribute's value.
pub fn string(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Any::StringValue(value) => Some(value.clone()),
            Any::IntValue(value) => Some(value.to_string()),
            _ => None,
        }
    })
}
