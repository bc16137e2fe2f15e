//! The caller's W3C trace context in a request's `params._meta` (SEP-414; the OpenTelemetry
//! conventions for MCP): `traceparent`, and `tracestate` when there is one, so that the
//! server's span for the request is a child of the call's.

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Adds the trace context to the `_meta` that `meta` gives, if a span is active: the call's
/// own (when `tracing-opentelemetry` exports it), else the current OpenTelemetry context's.
pub(super) fn inject<'m>(
    span: Option<&tracing::Span>,
    meta: impl FnOnce() -> &'m mut Map<String, Value>,
) {
    let from_span = span
        .map(OpenTelemetrySpanExt::context)
        .filter(|cx| cx.span().span_context().is_valid());
    let cx = from_span.unwrap_or_else(opentelemetry::Context::current);
    let span = cx.span();
    let context = span.span_context();
    if !context.is_valid() {
        return;
    }
    let meta = meta();
    meta.insert(
        "traceparent".into(),
        Value::String(format!(
            "00-{:032x}-{:016x}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8()
        )),
    );
    let state = context.trace_state().header();
    if !state.is_empty() {
        meta.insert("tracestate".into(), Value::String(state));
    }
}
