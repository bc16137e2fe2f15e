//! A call's span, by the OpenTelemetry semantic conventions for MCP: kind CLIENT, named
//! `{mcp.method.name} {target}` (`tools/call get_weather`), with the conventions' attributes
//! (the session's among them: `mcp.session.id`, `mcp.protocol.version`, `network.transport`,
//! `server.address`), and its outcome as `error.type` and the span status.
//!
//! Made two ways, each only when someone wants it:
//! - a `tracing` span (target `actix_mcp::call`, level INFO), which `tracing-opentelemetry`
//!   exports as such (`otel.name`, `otel.kind` and `otel.status_code` are that layer's names for
//!   the span's name, kind and status). Without a subscriber a call pays one check of the
//!   callsite's cached interest;
//! - with a tracer (`ConnectOptions::tracer`, feature `otel`), the same span straight through
//!   the OpenTelemetry API, its context attached while the call is polled.

use std::borrow::Cow;

use serde::Deserialize;
use tracing::{field::Empty, Span};

use super::super::session_facts::SessionFacts;
use crate::{connection::Request, error::Error};

/// The span of one call: either kind, or both (a clone is a handle on the same span).
#[derive(Clone)]
pub(super) struct CallSpan {
    tracing: Option<Span>,
    #[cfg(feature = "otel")]
    otel: Option<opentelemetry::Context>,
}

/// What a request's params name as its target.
#[derive(Deserialize)]
struct Target<'a> {
    #[serde(borrow, default)]
    name: Option<&'a str>,
    #[serde(borrow, default)]
    uri: Option<&'a str>,
}

/// Whether a `tools/call` result says `isError`.
pub(super) fn is_tool_error(raw: &str) -> bool {
    #[derive(Deserialize)]
    struct ToolResult {
        #[serde(default, rename = "isError")]
        is_error: bool,
    }
    serde_json::from_str::<ToolResult>(raw).is_ok_and(|result| result.is_error)
}

/// What `request`'s params name, if they read as an object.
fn target(request: &Request) -> Option<Target<'_>> {
    match &request.params {
        Ok(Some(raw)) => serde_json::from_str(raw.get()).ok(),
        _ => None,
    }
}

/// The tool a `tools/call` names.
#[cfg(feature = "otel")]
pub(super) fn tool_name(request: &Request) -> Option<String> {
    if request.method() != "tools/call" {
        return None;
    }
    target(request).and_then(|t| t.name.map(str::to_owned))
}

/// A span's name and attributes, read once from the request and the session.
struct Described<'r> {
    name: Cow<'r, str>,
    attributes: Vec<(&'static str, Cow<'r, str>)>,
    port: Option<u16>,
}

fn describe<'r>(request: &'r Request, facts: &SessionFacts) -> Described<'r> {
    let method = request.method();
    let mut attributes: Vec<(&'static str, Cow<'r, str>)> = vec![
        ("mcp.method.name", method.into()),
        (
            "jsonrpc.request.id",
            request.id().as_u64().to_string().into(),
        ),
    ];
    let params = target(request);
    let name = params.as_ref().and_then(|p| p.name);
    // The target is low in cardinality: a tool's or a prompt's name, never a resource URI.
    let target = match (method, name) {
        ("tools/call", Some(name)) => {
            attributes.push(("gen_ai.operation.name", "execute_tool".into()));
            attributes.push(("gen_ai.tool.name", name.into()));
            Some(name)
        }
        ("prompts/get", Some(name)) => {
            attributes.push(("gen_ai.prompt.name", name.into()));
            Some(name)
        }
        ("tools/call", None) => {
            attributes.push(("gen_ai.operation.name", "execute_tool".into()));
            None
        }
        _ => None,
    };
    if let Some(uri) = params.as_ref().and_then(|p| p.uri) {
        attributes.push(("mcp.resource.uri", uri.into()));
    }
    let known = facts.known();
    if let Some(id) = known.session_id {
        attributes.push(("mcp.session.id", id.to_string().into()));
    }
    if let Some(version) = known.protocol_version {
        attributes.push(("mcp.protocol.version", version.to_string().into()));
    }
    let peer = facts.peer();
    if let Some(transport) = peer.network_transport {
        attributes.push(("network.transport", transport.into()));
    }
    if let Some(protocol) = peer.network_protocol {
        attributes.push(("network.protocol.name", protocol.into()));
    }
    if let Some(address) = &peer.server_address {
        attributes.push(("server.address", address.clone().into()));
    }
    let name = match target {
        Some(target) => format!("{method} {target}").into(),
        None => method.into(),
    };
    Described {
        name,
        attributes,
        port: peer.server_port,
    }
}

/// The `tracing` span, if a subscriber wants it.
fn tracing_span<'r>(described: impl FnOnce() -> Described<'r>) -> Option<Span> {
    let span = tracing::info_span!(
        target: "actix_mcp::call",
        "mcp.client",
        "otel.name" = Empty,
        "otel.kind" = "client",
        "mcp.method.name" = Empty,
        "jsonrpc.request.id" = Empty,
        "gen_ai.operation.name" = Empty,
        "gen_ai.tool.name" = Empty,
        "gen_ai.prompt.name" = Empty,
        "mcp.resource.uri" = Empty,
        "mcp.session.id" = Empty,
        "mcp.protocol.version" = Empty,
        "network.transport" = Empty,
        "network.protocol.name" = Empty,
        "server.address" = Empty,
        "server.port" = Empty,
        "error.type" = Empty,
        "rpc.response.status_code" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    );
    if span.is_disabled() {
        return None;
    }
    let described = described();
    span.record("otel.name", &*described.name);
    for (key, value) in &described.attributes {
        span.record(*key, &**value);
    }
    if let Some(port) = described.port {
        span.record("server.port", port);
    }
    Some(span)
}

/// Marks a context as a call's own: the task's status events go on its span, never on the
/// caller's.
#[cfg(feature = "otel")]
struct OwnCall;

#[cfg(feature = "otel")]
fn otel_span(
    tracer: &opentelemetry::global::BoxedTracer,
    described: &Described<'_>,
    tracing: Option<&Span>,
) -> opentelemetry::Context {
    use opentelemetry::{
        trace::{SpanKind, TraceContextExt, Tracer},
        Context, KeyValue,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let mut attributes: Vec<KeyValue> = described
        .attributes
        .iter()
        .map(|(key, value)| KeyValue::new(*key, value.to_string()))
        .collect();
    if let Some(port) = described.port {
        attributes.push(KeyValue::new("server.port", i64::from(port)));
    }
    // The parent: the current `tracing` span's context when that layer exports it, else the
    // current OpenTelemetry context.
    let from_tracing = tracing
        .map(|_| Span::current().context())
        .filter(|cx| cx.span().span_context().is_valid());
    let parent = from_tracing.unwrap_or_else(Context::current);
    let builder = tracer
        .span_builder(described.name.to_string())
        .with_kind(SpanKind::Client)
        .with_attributes(attributes);
    let span = tracer.build_with_context(builder, &parent);
    parent.with_span(span).with_value(OwnCall)
}

/// Adds an event to the current context's span, if that is a call's own (the OpenTelemetry
/// span of `ConnectOptions::tracer`).
#[cfg(feature = "otel")]
pub(crate) fn otel_event(
    name: &'static str,
    attributes: impl FnOnce() -> Vec<(&'static str, String)>,
) {
    use opentelemetry::{trace::TraceContextExt, Context, KeyValue};
    Context::map_current(|cx| {
        if cx.get::<OwnCall>().is_some() {
            let attributes = attributes()
                .into_iter()
                .map(|(key, value)| KeyValue::new(key, value))
                .collect();
            cx.span().add_event(name, attributes);
        }
    });
}

impl CallSpan {
    /// The span of `request`, if anyone wants one (`tracer`: `ConnectOptions::tracer`).
    pub(super) fn open(
        request: &Request,
        facts: &SessionFacts,
        #[cfg(feature = "otel")] tracer: Option<&opentelemetry::global::BoxedTracer>,
    ) -> Option<Self> {
        let tracing = tracing_span(|| describe(request, facts));
        #[cfg(feature = "otel")]
        {
            let otel = tracer.map(|tracer| {
                let _in = tracing.as_ref().map(Span::enter);
                otel_span(tracer, &describe(request, facts), tracing.as_ref())
            });
            if tracing.is_none() && otel.is_none() {
                return None;
            }
            Some(Self { tracing, otel })
        }
        #[cfg(not(feature = "otel"))]
        tracing.map(|tracing| Self {
            tracing: Some(tracing),
        })
    }

    /// Runs `poll` in the call's span(s): the `tracing` span entered, the OpenTelemetry context
    /// attached.
    pub(super) fn within<R>(&self, poll: impl FnOnce() -> R) -> R {
        #[cfg(feature = "otel")]
        let _attached = self.otel.clone().map(opentelemetry::Context::attach);
        match &self.tracing {
            Some(span) => span.in_scope(poll),
            None => poll(),
        }
    }

    /// The `tracing` span, if there is one.
    #[cfg(feature = "otel")]
    pub(super) fn tracing(&self) -> Option<&Span> {
        self.tracing.as_ref()
    }

    /// The OpenTelemetry span's context, if there is one.
    #[cfg(feature = "otel")]
    pub(super) fn otel(&self) -> Option<&opentelemetry::Context> {
        self.otel.as_ref()
    }

    /// An answer came: a tool's result that says `isError` is an error of the tool's.
    pub(super) fn answered(&self, tool_error: bool) {
        if tool_error {
            self.failed("tool_error", "the tool reported an error");
        }
    }

    /// The call ended with `error`.
    pub(super) fn ended_with(&self, error: &Error) {
        let error_type = error.error_type();
        match error {
            Error::Cancelled { reason } => {
                self.cancelled(reason.as_deref().unwrap_or(""));
            }
            Error::Server { .. } => {
                if let Some(span) = &self.tracing {
                    span.record("rpc.response.status_code", &*error_type);
                }
                #[cfg(feature = "otel")]
                if let Some(cx) = &self.otel {
                    use opentelemetry::trace::TraceContextExt;
                    cx.span().set_attribute(opentelemetry::KeyValue::new(
                        "rpc.response.status_code",
                        error_type.to_string(),
                    ));
                }
            }
            _ => {}
        }
        self.failed(&error_type, &error.to_string());
    }

    /// The caller dropped the call before its end: cancelled, as the connection tells the
    /// server.
    pub(super) fn dropped(&self) {
        self.cancelled("dropped by its caller");
        self.failed("cancelled", "dropped by its caller");
        self.end();
    }

    /// The call is over: the OpenTelemetry span ends now (the `tracing` span with its last
    /// handle).
    pub(super) fn end(&self) {
        #[cfg(feature = "otel")]
        if let Some(cx) = &self.otel {
            use opentelemetry::trace::TraceContextExt;
            cx.span().end();
        }
    }

    fn cancelled(&self, reason: &str) {
        if let Some(span) = &self.tracing {
            let _in = span.enter();
            tracing::info!(reason, "cancelled");
        }
        #[cfg(feature = "otel")]
        if let Some(cx) = &self.otel {
            use opentelemetry::trace::TraceContextExt;
            let reason = opentelemetry::KeyValue::new("reason", reason.to_owned());
            cx.span().add_event("cancelled", vec![reason]);
        }
    }

    fn failed(&self, error_type: &str, description: &str) {
        if let Some(span) = &self.tracing {
            span.record("error.type", error_type);
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", description);
        }
        #[cfg(feature = "otel")]
        if let Some(cx) = &self.otel {
            use opentelemetry::trace::{Status, TraceContextExt};
            let span = cx.span();
            span.set_attribute(opentelemetry::KeyValue::new(
                "error.type",
                error_type.to_owned(),
            ));
            span.set_status(Status::error(description.to_owned()));
        }
    }
}
