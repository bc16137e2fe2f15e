//! The span a handler of the server's request (sampling, elicitation, roots) runs in: kind
//! SERVER (we are the receiver of that request), named after its method, at INFO under target
//! `actix_mcp::call` like the calls' spans. With the `otel` feature, a request that carries a
//! W3C `traceparent` in `params._meta` makes the span its child, so the handler's work joins the
//! server's trace.

use serde_json::Value;
use tracing::Span;

/// The handler's span (disabled when nobody listens).
pub(super) fn open(method: &str, params: &Value) -> Span {
    let span = tracing::info_span!(
        target: "actix_mcp::call",
        "mcp.server",
        "otel.name" = method,
        "otel.kind" = "server",
        "mcp.method.name" = method,
    );
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        if let Some(parent) = remote_parent(&params["_meta"]) {
            use tracing_opentelemetry::OpenTelemetrySpanExt;
            let _ = span.set_parent(parent);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = params;
    span
}

/// The caller's context from `traceparent` (`00-{trace id}-{span id}-{flags}`) and
/// `tracestate`; `None` if it is missing or malformed.
#[cfg(feature = "otel")]
fn remote_parent(meta: &Value) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    let traceparent = meta.get("traceparent")?.as_str()?;
    let mut parts = traceparent.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let state = meta
        .get("tracestate")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let context = SpanContext::new(trace, span, TraceFlags::new(flags), true, state);
    context
        .is_valid()
        .then(|| opentelemetry::Context::new().with_remote_span_context(context))
}

#[cfg(test)]
#[cfg(feature = "otel")]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;
    use serde_json::json;

    #[test]
    fn a_traceparent_is_read_and_a_malformed_one_ignored() {
        let meta =
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
        let cx = remote_parent(&meta).expect("read");
        let span = cx.span();
        let context = span.span_context();
        assert_eq!(
            format!("{:032x}", context.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(format!("{:016x}", context.span_id()), "00f067aa0ba902b7");
        assert!(context.is_remote() && context.is_sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(
                remote_parent(&json!({"traceparent": bad})).is_none(),
                "{bad}"
            );
        }
        assert!(remote_parent(&json!({"traceparent": 7})).is_none());
        assert!(remote_parent(&Value::Null).is_none());
    }
}
