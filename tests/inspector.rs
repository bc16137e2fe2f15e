//! The live inspector of a `Servers` manager (`actix_mcp::inspector`): its page in a real
//! headless Chromium, and its JSON API. What counts is at the MCP server: the call cancelled
//! from the page gets its cancel there, and nothing is left running.
#![cfg(all(feature = "actix-web", feature = "http"))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;
#[path = "common/webdriver.rs"]
mod webdriver;

use std::time::Duration;

use actix_mcp::{servers::ServersError, ConnectOptions, Error, Servers};
use actix_web::{App, HttpServer};
use serde_json::{json, Value};

/// Only a bound on a hang; never a timing assertion.
const DEADLINE: Duration = Duration::from_secs(30);

/// Two demo servers under one manager, the inspector served on a loopback port.
async fn inspected() -> (Servers, String, actix_web::dev::ServerHandle) {
    let servers = Servers::new(ConnectOptions::default());
    servers.add("demo", common::demo_server);
    servers.add("spare", common::demo_server);
    servers.start_all().await;
    let for_app = servers.clone();
    let server = HttpServer::new(move || {
        App::new().service(actix_mcp::inspector::scope("/inspector", for_app.clone()))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .expect("a loopback port");
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (
        servers,
        format!("http://127.0.0.1:{port}/inspector"),
        handle,
    )
}

async fn stats(servers: &Servers) -> Value {
    let result = tokio::time::timeout(DEADLINE, servers.call_tool("demo", "stats", json!({})))
        .await
        .expect("stats in time")
        .expect("the stats tool");
    result.structured_content.expect("structured stats")
}

/// A long routed call with progress (one step each 100 ms, 600 steps).
fn long_call(servers: &Servers) -> actix_rt::task::JoinHandle<Result<String, ServersError>> {
    let call = servers.call("demo/progress", json!({"steps": 600, "interval_ms": 100}));
    actix_rt::spawn(async move { call.await.map(|r| r.text()) })
}

async fn until_server_pending(servers: &Servers, n: u64) {
    common::eventually_async(&format!("{n} pending at the server"), || async {
        stats(servers).await["pending"] == n
    })
    .await;
}

/// The inspector's `state`, as JSON.
async fn state_of(http: &reqwest::Client, url: &str) -> Value {
    http.get(format!("{url}/state"))
        .send()
        .await
        .expect("state")
        .json()
        .await
        .expect("JSON")
}

#[actix_rt::test]
async fn the_page_shows_a_call_with_its_progress_and_its_cancel_button_stops_it_at_the_server() {
    let (servers, url, http) = inspected().await;
    let keep = long_call(&servers);
    let cancelled = long_call(&servers);
    until_server_pending(&servers, 2).await;
    let calls = servers.calls_in_flight();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let target = calls[1].id;

    let browser = webdriver::Browser::start().await;
    browser.open(&format!("{url}/")).await;
    browser
        .wait_for("#server-demo", |t| t.contains("ready"))
        .await;
    browser
        .wait_for("#server-spare", |t| t.contains("ready"))
        .await;
    // The row shows the server, the tool and the progress the server reported.
    let (_, row) = browser
        .wait_for(&format!("#call-{target}"), |t| t.contains("/ 600"))
        .await;
    assert!(row.contains("demo") && row.contains("progress"), "{row}");
    let (button, _) = browser
        .wait_for(&format!("#cancel-{target}"), |t| t == "Cancel")
        .await;
    browser.click(&button).await;

    // The caller is woken with the inspector's reason, and the server stops that call only.
    let outcome = tokio::time::timeout(DEADLINE, cancelled)
        .await
        .expect("the cancelled call ends")
        .expect("its task");
    match outcome {
        Err(ServersError::Client(Error::Cancelled { reason })) => {
            assert_eq!(reason.as_deref(), Some("cancelled from the inspector"))
        }
        other => panic!("not cancelled: {other:?}"),
    }
    browser.wait_gone(&format!("#call-{target}")).await;
    until_server_pending(&servers, 1).await;
    let at_server = stats(&servers).await;
    assert_eq!(at_server["cancels_matched"], 1, "{at_server}");
    let left = servers.calls_in_flight();
    assert_eq!(left.len(), 1);
    assert_ne!(left[0].id, target);
    browser
        .wait_for(&format!("#call-{}", left[0].id), |t| t.contains("progress"))
        .await;

    // The other one is still running; cancel it through the API and nothing is left.
    let response = reqwest::Client::new()
        .post(format!("{url}/calls/{}/cancel", left[0].id))
        .send()
        .await
        .expect("the inspector answers");
    assert_eq!(response.status(), 204);
    let outcome = tokio::time::timeout(DEADLINE, keep).await.expect("ends");
    assert!(
        matches!(
            outcome,
            Ok(Err(ServersError::Client(Error::Cancelled { .. })))
        ),
        "{outcome:?}"
    );
    until_server_pending(&servers, 0).await;
    browser.wait_for("#none", |t| t.contains("No calls")).await;
    // The cancelled call is counted for its tool.
    browser
        .wait_for("#tools", |t| t.contains("progress") && t.contains("ms"))
        .await;
    browser.close().await;
    http.stop(true).await;
    servers.stop().await;
}

#[actix_rt::test]
async fn the_state_lists_servers_and_calls_and_an_unknown_call_is_a_404() {
    let (servers, url, http) = inspected().await;
    let http_client = reqwest::Client::new();
    let state = state_of(&http_client, &url).await;
    let names: Vec<&str> = state["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["demo", "spare"]);
    assert_eq!(state["calls"], json!([]));

    let call = long_call(&servers);
    until_server_pending(&servers, 1).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let listed = loop {
        let state = state_of(&http_client, &url).await;
        let call = state["calls"][0].clone();
        if call["progress"].is_number() {
            break call;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress: {state}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(listed["server"], "demo");
    assert_eq!(listed["tool"], "demo/progress");
    assert_eq!(listed["total"], 600.0);

    let unknown = http_client
        .post(format!("{url}/calls/999999/cancel"))
        .send()
        .await
        .expect("answer");
    assert_eq!(unknown.status(), 404);
    // The call is untouched by that, and a call that ended leaves the list.
    assert_eq!(servers.calls_in_flight().len(), 1);
    call.abort();
    common::eventually("the dropped call to leave the list", || {
        servers.calls_in_flight().is_empty()
    })
    .await;
    until_server_pending(&servers, 0).await;

    // What ended, by server and tool: the dropped call a cancel, a tool's isError an error.
    servers
        .call_tool("demo", "echo", json!({"text": "x"}))
        .await
        .expect("answered");
    let failed = servers.call_tool("demo", "echo", json!({})).await;
    assert!(failed.expect("a result").is_error == Some(true));
    let state = state_of(&http_client, &url).await;
    let tool = |name: &str| {
        state["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["tool"] == name).cloned())
            .unwrap_or_else(|| panic!("no {name} in {state}"))
    };
    let echo = tool("echo");
    assert_eq!(
        (
            &echo["server"],
            &echo["calls"],
            &echo["errors"],
            &echo["cancels"]
        ),
        (&json!("demo"), &json!(2), &json!(1), &json!(0)),
        "{echo}"
    );
    assert!(echo["p99_ms"].as_f64() >= echo["p50_ms"].as_f64(), "{echo}");
    let progress = tool("progress");
    assert_eq!(
        (&progress["calls"], &progress["cancels"]),
        (&json!(1), &json!(1)),
        "{progress}"
    );
    http.stop(true).await;
    servers.stop().await;
}

/// With the inspector on, a routed call runs under a token of its own: the caller's token must
/// still cancel it, with the caller's reason, and the server gets the cancel.
#[actix_rt::test]
async fn a_tracked_call_is_still_cancelled_by_its_callers_token() {
    let (servers, _url, http) = inspected().await;
    let token = actix_mcp::Cancellation::new();
    let call = servers
        .call("demo/progress", json!({"steps": 600, "interval_ms": 100}))
        .cancellation(&token);
    let call = actix_rt::spawn(async move { call.await });
    until_server_pending(&servers, 1).await;
    assert_eq!(servers.calls_in_flight().len(), 1);
    token.cancel_with_reason("mine");
    let outcome = tokio::time::timeout(DEADLINE, call).await.expect("ends");
    match outcome {
        Ok(Err(ServersError::Client(Error::Cancelled { reason }))) => {
            assert_eq!(reason.as_deref(), Some("mine"))
        }
        other => panic!("not cancelled: {other:?}"),
    }
    until_server_pending(&servers, 0).await;
    assert_eq!(stats(&servers).await["cancels_matched"], 1);
    assert!(servers.calls_in_flight().is_empty());
    http.stop(true).await;
    servers.stop().await;
}

/// The page lists every server's skills (SEP-2640) with their server, asked once when it opens.
#[cfg(feature = "skills")]
#[actix_rt::test]
async fn the_page_lists_each_servers_skills() {
    let (servers, url, http) = inspected().await;
    let listed: Value = reqwest::get(format!("{url}/skills"))
        .await
        .expect("the inspector answers")
        .json()
        .await
        .expect("JSON");
    let pairs: Vec<(&str, &str)> = listed["skills"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| (s["server"].as_str().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(pairs, [("demo", "demo-skill"), ("spare", "demo-skill")]);
    assert_eq!(listed["unavailable"], json!([]));

    let browser = webdriver::Browser::start().await;
    browser.open(&format!("{url}/")).await;
    browser
        .wait_for("#skills", |t| {
            t.contains("demo-skill") && t.contains("spare") && t.contains("Echo text back")
        })
        .await;
    browser.close().await;
    http.stop(true).await;
    servers.stop().await;
}
