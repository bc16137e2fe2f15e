//! A call's span, by the OpenTelemetry semantic conventions for MCP: kind CLIENT, named
//! `{mcp.method.name} {target}` (`tools/call get_weather`), with the conventions' attributes,
//! and its outcome as `error.type` and the span status. A `tracing` span, so that
//! `tracing-opentelemetry` exports it as such (`otel.name`, `otel.kind` and `otel.status_code`
//! are that layer's names for the span's name, kind and status).
//!
//! Made only when a subscriber wants it (target `actix_mcp::call`, level INFO): without one,
//! a call pays one check of the callsite's cached interest and nothing else.

use serde::Deserialize;
use tracing::{field::Empty, Span};

use crate::{connection::Request, error::Error};

/// The span of one call.
pub(super) struct CallSpan {
    span: Span,
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

impl CallSpan {
    /// The span of `request`, if anyone listens.
    pub(super) fn open(request: &Request) -> Option<Self> {
        let method = request.method();
        let span = tracing::info_span!(
            target: "actix_mcp::call",
            "mcp.client",
            "otel.name" = Empty,
            "otel.kind" = "client",
            "mcp.method.name" = method,
            "jsonrpc.request.id" = %request.id().as_u64(),
            "gen_ai.operation.name" = Empty,
            "gen_ai.tool.name" = Empty,
            "gen_ai.prompt.name" = Empty,
            "mcp.resource.uri" = Empty,
            "error.type" = Empty,
            "rpc.response.status_code" = Empty,
            "otel.status_code" = Empty,
            "otel.status_description" = Empty,
        );
        if span.is_disabled() {
            return None;
        }
        let params = target(request);
        let name = params.as_ref().and_then(|p| p.name);
        let uri = params.as_ref().and_then(|p| p.uri);
        // The target is low in cardinality: a tool's or a prompt's name, never a resource URI.
        let target = match method {
            "tools/call" => {
                span.record("gen_ai.operation.name", "execute_tool");
                name.inspect(|name| {
                    span.record("gen_ai.tool.name", *name);
                })
            }
            "prompts/get" => name.inspect(|name| {
                span.record("gen_ai.prompt.name", *name);
            }),
            _ => None,
        };
        if let Some(uri) = uri {
            span.record("mcp.resource.uri", uri);
        }
        match target {
            Some(target) => span.record("otel.name", format!("{method} {target}")),
            None => span.record("otel.name", method),
        };
        Some(Self { span })
    }

    pub(super) fn span(&self) -> &Span {
        &self.span
    }

    /// An answer came: a tool's result that says `isError` is an error of the tool's.
    pub(super) fn answered(&self, tool_error: bool) {
        if tool_error {
            self.failed("tool_error", "the tool reported an error");
        }
    }

    /// The call ended with `error`.
    pub(super) fn ended_with(&self, error: &Error) {
        let _in = self.span.enter();
        let error_type = error.error_type();
        match error {
            Error::Cancelled { reason } => {
                tracing::info!(reason = reason.as_deref().unwrap_or(""), "cancelled");
            }
            Error::Server { .. } => {
                self.span.record("rpc.response.status_code", &*error_type);
            }
            _ => {}
        }
        self.failed(&error_type, &error.to_string());
    }

    /// The caller dropped the call before its end: cancelled, as the connection tells the
    /// server.
    pub(super) fn dropped(&self) {
        let _in = self.span.enter();
        tracing::info!(reason = "dropped by its caller", "cancelled");
        self.failed("cancelled", "dropped by its caller");
    }

    fn failed(&self, error_type: &str, description: &str) {
        self.span.record("error.type", error_type);
        self.span.record("otel.status_code", "ERROR");
        self.span.record("otel.status_description", description);
    }
}
