//! The client's metrics through the OpenTelemetry metrics API (feature `otel`), once a meter is
//! given ([`ConnectOptions::metrics`](super::ConnectOptions::metrics)): the conventions'
//! `mcp.client.operation.duration` and `mcp.client.session.duration` (histograms in seconds,
//! their bucket boundaries), and ours: calls in flight, calls given up by way (token, timeout,
//! drop, close), what reached the wire for them (cancels written, POSTs aborted, requests never
//! written) and answers that came too late, restarts and state changes of managed servers.
//! Without a meter nothing is recorded and a call carries nothing more.

use std::{borrow::Cow, sync::Arc, time::Instant};

use opentelemetry::{
    metrics::{Counter, Histogram, Meter, UpDownCounter},
    KeyValue,
};

use super::session_facts::SessionFacts;
use crate::{
    connection::{CountersObserver, Request, RequestCounters},
    error::Error,
};

/// The conventions' bucket boundaries, in seconds.
const BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The instruments, made once per connection from the meter given.
pub(crate) struct Metrics {
    operation: Histogram<f64>,
    session: Histogram<f64>,
    in_flight: UpDownCounter<i64>,
    given_up: Counter<u64>,
    cancelled_on_wire: Counter<u64>,
    late_answers: Counter<u64>,
    restarts: Counter<u64>,
    state_changes: Counter<u64>,
    /// `mcp.server.name`, when the connection is named (the manager names it after its server).
    server: Option<KeyValue>,
}

impl Metrics {
    pub(crate) fn new(meter: &Meter, server: Option<&str>) -> Self {
        Self {
            operation: meter
                .f64_histogram("mcp.client.operation.duration")
                .with_unit("s")
                .with_description("MCP request duration as observed by the client")
                .with_boundaries(BOUNDARIES.to_vec())
                .build(),
            session: meter
                .f64_histogram("mcp.client.session.duration")
                .with_unit("s")
                .with_description("MCP session duration as observed by the client")
                .with_boundaries(BOUNDARIES.to_vec())
                .build(),
            in_flight: meter
                .i64_up_down_counter("mcp.client.requests.in_flight")
                .with_description("MCP requests sent and not yet ended")
                .build(),
            given_up: meter
                .u64_counter("mcp.client.requests.given_up")
                .with_description("MCP requests given up by the caller, by way")
                .build(),
            cancelled_on_wire: meter
                .u64_counter("mcp.client.requests.cancelled")
                .with_description(
                    "Cancelled MCP requests by what the wire saw: nothing (never written), a \
                     notifications/cancelled, or an aborted POST",
                )
                .build(),
            late_answers: meter
                .u64_counter("mcp.client.responses.late")
                .with_description("Answers dropped because nobody waited for them any more")
                .build(),
            restarts: meter
                .u64_counter("mcp.client.server.restarts")
                .with_description("Restarts of managed MCP servers")
                .build(),
            state_changes: meter
                .u64_counter("mcp.client.server.state_changes")
                .with_description("State changes of managed MCP servers, by new state")
                .build(),
            server: server.map(|name| KeyValue::new("mcp.server.name", name.to_owned())),
        }
    }

    fn with_server(&self, mut attributes: Vec<KeyValue>) -> Vec<KeyValue> {
        attributes.extend(self.server.clone());
        attributes
    }

    /// A session of `seconds` ended, with `error` (its `error.type`) if it ended badly.
    pub(crate) fn session_ended(&self, seconds: f64, error: Option<Cow<'static, str>>) {
        let attributes = error
            .map(|e| KeyValue::new("error.type", e))
            .into_iter()
            .collect();
        self.session.record(seconds, &self.with_server(attributes));
    }

    /// What reports the wire's counters to these instruments: the increase since the last report.
    pub(crate) fn wire_counter(self: &Arc<Self>) -> CountersObserver {
        let metrics = self.clone();
        let mut last = RequestCounters::default();
        let by = |wire: &'static str| metrics.with_server(vec![KeyValue::new("wire", wire)]);
        let attributes = [by("not_written"), by("notification"), by("abort")];
        let server = metrics.with_server(Vec::new());
        Box::new(move |now: &RequestCounters| {
            if *now == last {
                return;
            }
            let cancelled = &metrics.cancelled_on_wire;
            let rises = [
                now.cancelled_before_write - last.cancelled_before_write,
                now.cancels_sent - last.cancels_sent,
                now.requests_aborted - last.requests_aborted,
            ];
            for (rise, attributes) in rises.into_iter().zip(&attributes) {
                if rise > 0 {
                    cancelled.add(rise, attributes);
                }
            }
            let late = now.late_responses - last.late_responses;
            if late > 0 {
                metrics.late_answers.add(late, &server);
            }
            last = *now;
        })
    }

    /// A managed server is restarted.
    pub(crate) fn restarted(&self, server: &str) {
        self.restarts
            .add(1, &[KeyValue::new("mcp.server.name", server.to_owned())]);
    }

    /// A managed server moved to `state`.
    pub(crate) fn state_changed(&self, server: &str, state: &'static str) {
        self.state_changes.add(
            1,
            &[
                KeyValue::new("mcp.server.name", server.to_owned()),
                KeyValue::new("state", state),
            ],
        );
    }
}

/// One call being measured, from its start.
pub(crate) struct Metered {
    metrics: Arc<Metrics>,
    started: Instant,
    attributes: Vec<KeyValue>,
}

/// How a measured call ended.
pub(crate) enum Ending<'a> {
    Answered { tool_error: bool },
    Failed(&'a Error),
    Dropped,
}

impl Metered {
    pub(crate) fn start(
        metrics: Arc<Metrics>,
        request: &Request,
        tool: Option<&str>,
        facts: &SessionFacts,
    ) -> Self {
        let method = request.method().to_owned();
        let mut attributes = vec![KeyValue::new("mcp.method.name", method)];
        if let Some(tool) = tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        if let Some(version) = facts.known().protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version));
        }
        let peer = facts.peer();
        if let Some(transport) = peer.network_transport {
            attributes.push(KeyValue::new("network.transport", transport));
        }
        if let Some(protocol) = peer.network_protocol {
            attributes.push(KeyValue::new("network.protocol.name", protocol));
        }
        let attributes = metrics.with_server(attributes);
        metrics.in_flight.add(1, &attributes);
        Self {
            metrics,
            started: Instant::now(),
            attributes,
        }
    }

    pub(crate) fn end(&self, ending: Ending<'_>) {
        let metrics = &self.metrics;
        metrics.in_flight.add(-1, &self.attributes);
        let mut attributes = self.attributes.clone();
        let (error_type, way): (Option<Cow<'static, str>>, _) = match ending {
            Ending::Answered { tool_error: false } => (None, None),
            Ending::Answered { tool_error: true } => (Some("tool_error".into()), None),
            Ending::Dropped => (Some("cancelled".into()), Some("drop")),
            Ending::Failed(error) => {
                let way = match error {
                    Error::Cancelled { .. } => Some("token"),
                    Error::Timeout { .. } => Some("timeout"),
                    Error::Closed { .. } => Some("close"),
                    Error::Server { code, .. } => {
                        attributes
                            .push(KeyValue::new("rpc.response.status_code", code.to_string()));
                        None
                    }
                    _ => None,
                };
                (Some(error.error_type()), way)
            }
        };
        if let Some(way) = way {
            let mut by_way = self.attributes.clone();
            by_way.push(KeyValue::new("way", way));
            metrics.given_up.add(1, &by_way);
        }
        if let Some(error_type) = error_type {
            attributes.push(KeyValue::new("error.type", error_type));
        }
        metrics
            .operation
            .record(self.started.elapsed().as_secs_f64(), &attributes);
    }
}
