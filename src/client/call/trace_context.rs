//! The caller's W3C trace context in a request's `params._meta` (SEP-414; the OpenTelemetry
//! conventions for MCP): `traceparent`, and `tracestate` when there is one, so that the
//! server's span for the request is a child of the call's.

use opentelemetry::trace::{SpanContext, TraceContextExt};
use serde_json::{Map, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Adds the trace context to the `_meta` that `meta` gives, if a span is active: the call's
/// own (its OpenTelemetry span, or its `tracing` span when `tracing-opentelemetry` exports it), else
/// the current OpenTelemetry context's
/// (read in place: a request with no trace clones nothing).
pub(super) fn inject<'m>(
    span: Option<&super::span::CallSpan>,
    meta: impl FnOnce() -> &'m mut Map<String, Value>,
) {
    let own = span.and_then(|span| match span.otel() {
        Some(cx) => headers(cx.span().span_context()),
        None => span
            .tracing()
            .and_then(|span| headers(span.context().span().span_context())),
    });
    let Some((parent, state)) =
        own.or_else(|| opentelemetry::Context::map_current(|cx| headers(cx.span().span_context())))
    else {
        return;
    };
    let meta = meta();
    meta.insert("traceparent".into(), Value::String(parent));
    if !state.is_empty() {
        meta.insert("tracestate".into(), Value::String(state));
    }
}

/// `traceparent` and `tracestate` of a valid span context.
fn headers(context: &SpanContext) -> Option<(String, String)> {
    context.is_valid().then(|| {
        let parent = format!(
            "00-{:032x}-{:016x}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8()
        );
        (parent, context.trace_state().header())
    })
}
