//! The two protocol eras against the bundled demo server, a real child process, and what each one
//! puts on the wire (the server's journal).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::time::Duration;

use actix_mcp::{Cancellation, Client, ProtocolEra};
use common::*;
use futures::StreamExt;
use serde_json::json;

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// A 2026-07-28-only server over stdio: `Auto` starts with the handshake, the server does not know
/// `initialize`, the client switches to the stateless era. Every request after that carries the
/// `_meta` entries (a progress token merged in beside them), and a cancel is still a
/// `notifications/cancelled` after its request: that is the rule on stdio in both eras.
#[actix::test]
async fn a_modern_server_over_stdio_gets_meta_on_every_request_and_cancels_by_notification() {
    let journal = Journal::new("era-modern");
    let client = Client::connect(journal.server().args(["--era", "modern"]))
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    assert_eq!(client.server_info().name, "actix-mcp-demo-server");
    assert!(client.instructions().unwrap_or_default().contains("echo"));

    let echo = client
        .call_tool("echo", json!({"text": "stateless"}))
        .await
        .unwrap();
    assert_eq!(echo.text(), "stateless");
    let (call, mut progress) = client
        .call_tool("progress", json!({"steps": 2, "interval_ms": 1}))
        .progress_stream();
    call.await.unwrap();
    assert!(
        progress.next().await.is_some(),
        "progress still reaches its call"
    );

    let token = Cancellation::new();
    let sleep = spawn_sleep(&client, &token);
    journal
        .wait_for("the sleep request", |l| {
            l.iter().any(|l| l.contains("\"sleep\""))
        })
        .await;
    token.cancel_with_reason("enough");
    assert!(sleep.await.unwrap().unwrap_err().is_cancelled());
    eventually("the cancel reaches the server", || {
        journal
            .lines()
            .iter()
            .any(|l| l.contains("notifications/cancelled"))
    })
    .await;
    let (request, cancel) = journal.cancelled_call("sleep");
    assert_eq!(cancel["params"]["reason"], "enough");
    assert_eq!(request["params"]["_meta"][META_VERSION], "2026-07-28");

    let frames = journal.frames();
    assert_eq!(frames[0]["method"], "initialize");
    assert_eq!(frames[1]["method"], "server/discover");
    assert!(frames
        .iter()
        .all(|f| f["method"] != "notifications/initialized"));
    for request in frames[1..].iter().filter(|f| f.get("id").is_some()) {
        let meta = &request["params"]["_meta"];
        assert_eq!(meta[META_VERSION], "2026-07-28", "{request}");
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "actix-mcp"
        );
    }
    let with_progress = frames
        .iter()
        .find(|f| f["params"]["name"] == "progress")
        .unwrap();
    assert!(with_progress["params"]["_meta"]["progressToken"].is_u64());
    assert_eq!(with_progress["params"]["_meta"][META_VERSION], "2026-07-28");
}

/// `PreferModern` probes with `server/discover` first; a legacy server does not know it, and the
/// client falls back to the handshake, without `_meta` from then on.
#[actix::test]
async fn prefer_modern_falls_back_to_the_handshake_with_a_legacy_server() {
    let journal = Journal::new("era-prefer-modern");
    let client = Client::builder()
        .era(ProtocolEra::PreferModern)
        .connect(journal.server())
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), "2025-11-25");
    client
        .call_tool("echo", json!({"text": "x"}))
        .await
        .unwrap();
    let frames = journal.frames();
    let methods: Vec<&str> = frames.iter().filter_map(|f| f["method"].as_str()).collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    assert!(frames[1..].iter().all(|f| f["params"]["_meta"].is_null()));
}

/// A server that speaks both eras: `PreferModern` gets the stateless one with one request and no
/// handshake; `Legacy` gets the handshake.
#[actix::test]
async fn a_dual_era_server_speaks_whichever_era_is_asked() {
    let journal = Journal::new("era-dual");
    let modern = Client::builder()
        .era(ProtocolEra::PreferModern)
        .connect(journal.server().args(["--era", "dual"]))
        .await
        .unwrap();
    assert_eq!(modern.protocol_version(), "2026-07-28");
    assert_eq!(journal.frames()[0]["method"], "server/discover");
    assert_eq!(journal.frames().len(), 1);

    let legacy = Client::builder()
        .era(ProtocolEra::Legacy)
        .connect(demo_server().args(["--era", "dual"]))
        .await
        .unwrap();
    assert_eq!(legacy.protocol_version(), "2025-11-25");
    let timeout = Duration::from_secs(5);
    legacy.ping().timeout(timeout).await.unwrap();
}

/// How many requests of `method` the server has served.
async fn list_requests(client: &Client, method: &str) -> u64 {
    server_stats(client).await["lists"][method]
        .as_u64()
        .unwrap_or(0)
}

/// A 2026-07-28 server marks its list pages cacheable (`ttlMs`): asked twice, the server sees
/// one request. Its `list_changed` drops the family's pages, so the next list is asked again;
/// `refetch` always asks. A tool list change also has the client fetch the tools again by itself
/// (so output schemas and header annotations follow), which the server sees.
#[actix::test]
async fn cacheable_lists_are_served_from_the_cache_until_their_list_changed() {
    let client =
        Client::connect(demo_server().args(["--era", "modern", "--list-ttl-ms", "600000"]))
            .await
            .unwrap();
    let mut notifications = client.notifications();

    let first = client.prompts().await.unwrap();
    let second = client.prompts().await.unwrap();
    assert_eq!(first, second);
    assert_eq!(list_requests(&client, "prompts/list").await, 1);
    let page = client.list_prompts(None).await.unwrap();
    assert_eq!(page.page.ttl_ms, Some(600_000));
    assert_eq!(
        list_requests(&client, "prompts/list").await,
        1,
        "one page from the cache"
    );
    client.prompts().refetch().await.unwrap();
    assert_eq!(
        list_requests(&client, "prompts/list").await,
        2,
        "refetch asks"
    );

    client
        .call_tool("notify", json!({"kind": "prompts"}))
        .await
        .unwrap();
    assert_eq!(
        notifications.next().await,
        Some(actix_mcp::ServerNotification::PromptsListChanged)
    );
    client.prompts().await.unwrap();
    assert_eq!(
        list_requests(&client, "prompts/list").await,
        3,
        "invalidated"
    );
    client.prompts().await.unwrap();
    assert_eq!(
        list_requests(&client, "prompts/list").await,
        3,
        "kept again"
    );

    // Tools: listed once, then changed: the client asks again without being told to.
    client.tools().await.unwrap();
    client.tools().await.unwrap();
    assert_eq!(list_requests(&client, "tools/list").await, 1);
    client
        .call_tool("notify", json!({"kind": "tools"}))
        .await
        .unwrap();
    assert_eq!(
        notifications.next().await,
        Some(actix_mcp::ServerNotification::ToolsListChanged)
    );
    let mut asked = 0;
    for _ in 0..200 {
        asked = list_requests(&client, "tools/list").await;
        if asked >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        asked >= 2,
        "the tool list was fetched again after its change"
    );
    // Unrelated lists kept their pages.
    client.prompts().await.unwrap();
    assert_eq!(list_requests(&client, "prompts/list").await, 3);
}

/// Pages without `ttlMs` (every legacy server, and modern ones that do not say) are never kept.
#[actix::test]
async fn lists_without_cache_hints_are_always_asked() {
    for era in ["modern", "legacy"] {
        let client = Client::connect(demo_server().args(["--era", era]))
            .await
            .unwrap();
        client.tools().await.unwrap();
        client.tools().await.unwrap();
        assert_eq!(list_requests(&client, "tools/list").await, 2, "{era}");
    }
}

/// 2026-07-28 removed `logging/setLevel`: a request asks for logs with `_meta` `logLevel`, and
/// without it the server sends none. `set_logging_level` puts the level on every later request;
/// `Call::log_level` on one.
#[actix::test]
async fn a_modern_log_level_travels_in_each_requests_meta() {
    let journal = Journal::new("era-log-level");
    let client = Client::connect(journal.server().args(["--era", "modern"]))
        .await
        .unwrap();
    let mut notifications = client.notifications();
    let log = |level: &str| json!({"level": level, "message": format!("at {level}")});

    let silent = client.call_tool("log", log("error")).await.unwrap();
    assert_eq!(silent.text(), "filtered", "no logLevel, no log");

    let one = client
        .call_tool("log", log("info"))
        .log_level(actix_mcp::LoggingLevel::Debug)
        .await
        .unwrap();
    assert_eq!(one.text(), "logged");
    let Some(actix_mcp::ServerNotification::Log(message)) = notifications.next().await else {
        panic!("no log message");
    };
    assert_eq!(message.data, "at info");

    client
        .set_logging_level(actix_mcp::LoggingLevel::Warning)
        .await
        .unwrap();
    assert_eq!(
        client.call_tool("log", log("info")).await.unwrap().text(),
        "filtered"
    );
    assert_eq!(
        client.call_tool("log", log("error")).await.unwrap().text(),
        "logged"
    );
    assert!(
        !journal
            .lines()
            .iter()
            .any(|l| l.contains("logging/setLevel")),
        "the removed method is never sent"
    );
    let levels: Vec<String> = journal
        .frames()
        .iter()
        .filter(|frame| frame["params"]["name"] == "log")
        .map(|frame| {
            frame["params"]["_meta"]["io.modelcontextprotocol/logLevel"]
                .as_str()
                .unwrap_or("none")
                .to_owned()
        })
        .collect();
    assert_eq!(
        levels,
        ["none", "debug", "warning", "warning"],
        "{levels:?}"
    );

    client.clear_logging_level();
    assert_eq!(
        client.call_tool("log", log("error")).await.unwrap().text(),
        "filtered"
    );
}

/// Issue 20: a client declares its own extensions (here MCP Apps) and reads the server's, in
/// both eras; the server sees the declaration (at `initialize`, or in each request's `_meta`).
#[actix::test]
async fn declared_extensions_reach_the_server_and_the_servers_are_read() {
    const APPS: &str = "io.modelcontextprotocol/ui";
    let settings = json!({"mimeTypes": ["text/html;profile=mcp-app"]});
    for era in [ProtocolEra::Legacy, ProtocolEra::Modern] {
        let client = Client::builder()
            .era(era)
            .extension(APPS, settings.clone())
            .connect(demo_server().args(["--era", "dual"]))
            .await
            .unwrap();
        assert_eq!(
            client.server_extension(APPS),
            Some(&json!({"mimeTypes": ["text/html;profile=mcp-app"]})),
            "{era:?}"
        );
        let seen = client
            .call_tool("client_extensions", json!({}))
            .await
            .unwrap();
        let seen: serde_json::Value = serde_json::from_str(&seen.text()).unwrap();
        assert_eq!(seen[APPS], settings, "{era:?}: the server saw {seen}");
        if era == ProtocolEra::Modern {
            // Declared beside the tasks extension the client always declares there.
            assert!(
                seen.get("io.modelcontextprotocol/tasks").is_some(),
                "{seen}"
            );
        }
    }
}
