//! What a POST must be before anything reads it as MCP: `application/json` (a form or text body
//! is what a browser sends cross-site without a preflight), no larger than `--max-body`, sent
//! within `--body-timeout`, and one JSON-RPC message whose id, if any, is a string or a number.

use std::time::Duration;

use crate::message::{parse, Incoming};
use actix_web::{http::StatusCode, web, HttpMessage as _, HttpRequest, HttpResponse};
use futures::StreamExt as _;

/// How much a POST may carry and how long it may take.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    pub max: usize,
    pub timeout: Duration,
}

/// The POST's message, or the answer that refuses it.
pub async fn read(
    request: &HttpRequest,
    mut payload: web::Payload,
    limits: BodyLimits,
) -> Result<Incoming, HttpResponse> {
    let json = request.mime_type().ok().flatten().is_some_and(|mime| {
        mime.type_() == "application" && mime.subtype() == "json" && mime.suffix().is_none()
    });
    if !json {
        return Err(HttpResponse::UnsupportedMediaType().body(
            "a POST to /mcp carries one JSON-RPC message as Content-Type: application/json",
        ));
    }
    let too_large = || {
        HttpResponse::PayloadTooLarge().body(format!(
            "the body is over {} bytes (the gateway's --max-body)",
            limits.max
        ))
    };
    let declared = request
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH);
    let declared = declared.and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limits.max) {
        return Err(too_large());
    }
    let mut body = web::BytesMut::with_capacity(declared.unwrap_or(0).min(64 * 1024));
    let read = tokio::time::timeout(limits.timeout, async {
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|_| HttpResponse::BadRequest().body("the body broke off"))?;
            if body.len() + chunk.len() > limits.max {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(())
    });
    match read.await {
        Ok(Ok(())) => {}
        Ok(Err(refused)) => return Err(refused),
        Err(_) => {
            let status = StatusCode::REQUEST_TIMEOUT;
            let why = "the body did not arrive within the gateway's --body-timeout";
            return Err(HttpResponse::build(status)
                .insert_header(("connection", "close"))
                .body(why));
        }
    }
    parse(&body).map_err(|answer| {
        HttpResponse::BadRequest()
            .content_type("application/json")
            .body(answer.to_string())
    })
}
