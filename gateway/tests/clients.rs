//! The official SDKs' clients through the gateway over Streamable HTTP, in each protocol era
//! they speak: 2025-11-25 (`initialize`, then a session by `Mcp-Session-Id`) and 2026-07-28
//! (`server/discover`, then a self-describing POST per request). Each lists the tools under their
//! gateway names, calls one routed to server `b`, gets a call's progress, answers an elicitation
//! of server `b` (in 2026-07-28 through `input_required`), runs a call as a task where its SDK
//! can (v1's experimental tasks: TypeScript's `callToolStream`, Python's `call_tool_as_task`,
//! then the session's task list), and abandons a call of `a__sleep` in
//! its own way (an AbortSignal, an anyio cancel scope); server `a` then reads the cancel of that
//! call, after the call.
//!
//! The pairs not tested here, and why (from the pinned SDKs' sources):
//! - TypeScript v1 (`@modelcontextprotocol/sdk` 1.32.2) at 2026-07-28: it has no such version;
//!   its `LATEST_PROTOCOL_VERSION` is `2025-11-25`, its `Client.connect` always sends
//!   `initialize`, and nothing in it sends `server/discover`.
//! - Python v1 (`mcp` 1.30.0) at 2026-07-28: the same; its `LATEST_PROTOCOL_VERSION` is
//!   `2025-11-25`, `ClientSession` connects only by `initialize`, and nothing in it sends
//!   `server/discover`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use serde_json::Value;
use support::{sdk::*, *};

const SESSIONS: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";

/// The reason the gateway gives upstream when a 2026-07-28 client aborts its call's POST.
const ABORTED: &str = "the downstream client aborted the request";

#[actix_rt::test]
async fn the_typescript_v1_client_lists_calls_and_cancels_in_a_session() {
    let cancelled = through_the_gateway(typescript_client("sdk"), SESSIONS, When::Abandoned).await;
    assert_reason(
        &cancelled,
        "cancelled by the downstream client: the user left",
    );
}

#[actix_rt::test]
async fn the_typescript_v2_client_lists_calls_and_cancels_in_a_session() {
    let client = typescript_client("client");
    let cancelled = through_the_gateway(client, SESSIONS, When::Abandoned).await;
    assert_reason(
        &cancelled,
        "cancelled by the downstream client: the user left",
    );
}

/// At 2026-07-28 the SDK cancels by aborting its call's POST, so the reason it gave stays home.
#[actix_rt::test]
async fn the_typescript_v2_client_lists_calls_and_cancels_statelessly() {
    let client = typescript_client("client");
    let cancelled = through_the_gateway(client, STATELESS, When::Abandoned).await;
    assert_reason(&cancelled, ABORTED);
}

/// The v1 SDK sends nothing when a call's cancel scope is cancelled (`BaseSession.send_request`
/// has no cancel path, and the call's POST runs on in the transport's task group): its call is
/// cancelled upstream only when the client leaves, closing the session (`DELETE`).
#[actix_rt::test]
async fn the_python_v1_clients_abandoned_call_is_cancelled_when_it_leaves_its_session() {
    let client = python_client(PYTHON_V1);
    let cancelled = through_the_gateway(client, SESSIONS, When::Left).await;
    assert_reason(&cancelled, "the downstream session was closed");
}

#[actix_rt::test]
async fn the_python_v2_client_lists_calls_and_cancels_in_a_session() {
    let client = python_client(PYTHON_V2);
    let cancelled = through_the_gateway(client, SESSIONS, When::Abandoned).await;
    assert_reason(
        &cancelled,
        "cancelled by the downstream client: caller cancelled",
    );
}

/// (Its POST's body goes in a write of its own after the headers: see http.rs's
/// `a_stateless_post_aborted_after_its_body_came_apart_cancels_upstream`.)
#[actix_rt::test]
async fn the_python_v2_client_lists_calls_and_cancels_statelessly() {
    let client = python_client(PYTHON_V2);
    let cancelled = through_the_gateway(client, STATELESS, When::Abandoned).await;
    assert_reason(&cancelled, ABORTED);
}

/// Runs `client` in `era` through a gateway of its own (see [`script_through`]).
async fn through_the_gateway(client: SdkClient, era: &str, when: When) -> Value {
    let upstreams = Upstreams::new(&format!("sdk-{}-{era}", client.name));
    let gateway = listen(&upstreams);
    script_through(client, &gateway.1, &upstreams, era, when).await
}
