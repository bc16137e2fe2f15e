//! The gateway over Streamable HTTP (2025-11-25 sessions, JSON answers) in front of two demo
//! servers: a client of this library lists and calls through it, a downstream cancel reaches the
//! upstream server after its request, and a session closed mid-call (`DELETE`) cancels it
//! upstream. Two downstream sessions share the one upstream connection of each server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use actix_mcp::{Client, HttpTransport};
use serde_json::json;
use support::*;

#[actix_rt::test]
async fn sessions_list_call_and_cancel_through_one_upstream_connection() {
    let upstreams = Upstreams::new("http");
    let gateway = listen(&upstreams);
    let first = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session");
    let second = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("another session");
    assert!(first.session_id().is_some());
    let tools = first.tools().await.expect("a list");
    assert!(tools.iter().any(|t| t.name == "a__echo"));
    for (client, text) in [(&first, "one"), (&second, "two")] {
        let answer = client
            .call_tool("b__echo", json!({ "text": text }))
            .await
            .expect("answered");
        assert_eq!(answer.text(), text);
    }
    let handshakes = upstreams
        .read_by("b")
        .into_iter()
        .filter(|m| m["method"] == "initialize")
        .count();
    assert_eq!(handshakes, 1, "two sessions, one upstream connection");

    let cancelled = cancel_a_sleep(&first, &upstreams).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("the user left"), "{cancelled}");
    first.shutdown().await;
    second.shutdown().await;

    let (head, body) = http(&gateway.1.replace("/mcp", "/healthz"), "GET", None, "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        health["servers"].as_array().map(Vec::len),
        Some(2),
        "{health}"
    );
    assert!(health["servers"][0]["status"] == "ready", "{health}");
}

/// A raw HTTP/1.1 request (`Connection: close`); the response's head and body.
fn http(url: &str, method: &str, session: Option<&str>, body: &str) -> (String, String) {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut stream = std::net::TcpStream::connect(host).expect("connects");
    let session = session.map_or(String::new(), |id| format!("Mcp-Session-Id: {id}\r\n"));
    write!(
        stream,
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_owned(), body.to_owned())
}

/// A 2025-11-25 session opened with a raw `initialize`: its id.
fn raw_session(url: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (head, _) = http(url, "POST", None, &initialize.to_string());
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .expect("a session id")
}

/// A downstream session closed (`DELETE`) while its call runs: the call is cancelled upstream,
/// after its request, and its POST's event stream ends without an answer.
#[actix_rt::test]
async fn a_session_closed_mid_call_cancels_it_upstream() {
    let upstreams = Upstreams::new("http-delete");
    let gateway = listen(&upstreams);
    let url = gateway.1.clone();
    let session = raw_session(&url);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "a__sleep", "arguments": {"ms": 60_000}}});
    let post = std::thread::spawn({
        let (url, session) = (url.clone(), session.clone());
        move || http(&url, "POST", Some(&session), &call.to_string())
    });
    let id = upstream_call(&upstreams, "a", "sleep").await;
    let (deleted, _) = http(&url, "DELETE", Some(&session), "");
    assert!(deleted.starts_with("HTTP/1.1 200"), "{deleted}");
    let cancelled = cancel_after_request(&upstreams, "a", &id).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("session was closed"), "{cancelled}");
    // Its POST (an event stream: the raw client takes one) ends with no answer in it.
    let (head, body) = post.join().expect("the POST ends");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert!(
        !body.contains("\"result\"") && !body.contains("\"error\""),
        "{body}"
    );
}

/// Over HTTP, a call's progress comes back on its POST's event stream, before its answer.
#[actix_rt::test]
async fn progress_comes_back_on_the_calls_event_stream() {
    let upstreams = Upstreams::new("http-progress");
    let gateway = listen(&upstreams);
    let client = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session");
    assert_eq!(progress_of(&client, "b__progress").await, 3);
    client.shutdown().await;
}

/// Over HTTP, an upstream `list_changed` comes on the session's GET stream.
#[actix_rt::test]
async fn an_upstream_list_changed_comes_on_the_sessions_stream() {
    let upstreams = Upstreams::new("http-changed");
    let gateway = listen(&upstreams);
    let client = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session");
    let mut notifications = client.notifications();
    // The client opens its GET stream once connected; a change may come before it is open, so
    // ask until one comes (a bound, not a timing assertion).
    let changed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            client
                .call_tool("b__notify", json!({"kind": "prompts"}))
                .await
                .expect("sent");
            let next = tokio::time::timeout(std::time::Duration::from_millis(500), async {
                loop {
                    match notifications.next().await {
                        Some(actix_mcp::ServerNotification::PromptsListChanged) => return true,
                        Some(_) => continue,
                        None => return false,
                    }
                }
            })
            .await;
            if let Ok(seen) = next {
                return seen;
            }
        }
    })
    .await;
    assert_eq!(changed, Ok(true));
    client.shutdown().await;
}

/// A client of the 2026-07-28 era (no session, `server/discover`): it lists and calls through
/// the gateway, and its cancel, an aborted POST, cancels the call upstream after its request.
#[actix_rt::test]
async fn a_stateless_client_cancels_by_aborting_its_post() {
    let upstreams = Upstreams::new("http-modern");
    let gateway = listen(&upstreams);
    let client = stateless_client(&gateway.1).await;
    assert_eq!(client.protocol_version(), "2026-07-28");
    assert!(client.session_id().is_none());
    let answer = client
        .call_tool("a__echo", json!({"text": "stateless"}))
        .await
        .expect("answered");
    assert_eq!(answer.text(), "stateless");

    let cancelled = cancel_a_sleep(&client, &upstreams).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("aborted"), "{cancelled}");
    client.shutdown().await;
}

/// A 2026-07-28 call answered as JSON, on a connection that served a call before, whose body
/// comes in a write of its own after its headers (as Python's httpx sends a POST): its POST
/// aborted cancels it upstream, after its request.
#[actix_rt::test]
async fn a_stateless_post_aborted_after_its_body_came_apart_cancels_upstream() {
    use std::io::{Read, Write};
    let upstreams = Upstreams::new("http-abort-apart");
    let gateway = listen(&upstreams);
    let host = gateway.1.trim_start_matches("http://").split('/').next();
    let mut stream = std::net::TcpStream::connect(host.unwrap()).expect("connects");
    let (head, body) = stateless_call(host.unwrap(), 1, "a__echo", json!({"text": "x"}));
    stream
        .write_all(format!("{head}{body}").as_bytes())
        .unwrap();
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains("\"result\"") {
        let mut chunk = [0; 4096];
        let n = stream.read(&mut chunk).expect("an answer");
        assert!(n > 0, "{}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
    }
    let (head, body) = stateless_call(host.unwrap(), 2, "a__sleep", json!({"ms": 60_000}));
    stream.write_all(head.as_bytes()).unwrap();
    // Time for the gateway to read the headers alone (were it to read both at once, the test
    // would pass without showing anything, not fail).
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    stream.write_all(body.as_bytes()).unwrap();
    let id = upstream_call(&upstreams, "a", "sleep").await;
    drop(stream);
    let cancelled = cancel_after_request(&upstreams, "a", &id).await;
    let reason = cancelled["params"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("aborted"), "{cancelled}");
}

/// A 2026-07-28 `tools/call` of `tool` as a raw POST to `host`: its head and its body.
fn stateless_call(
    host: &str,
    id: u64,
    tool: &str,
    arguments: serde_json::Value,
) -> (String, String) {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}})
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    (head, body)
}

#[actix_rt::test]
async fn the_inspector_is_served_only_when_asked_for_and_shows_every_upstream() {
    let upstreams = Upstreams::new("inspector");
    let plain = listen(&upstreams);
    assert_eq!(
        http_get(&plain.1, "/inspector/state").0,
        404,
        "off by default"
    );
    drop(plain);

    let gateway = listen_with(&upstreams, &["--inspector"]);
    let client = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session");
    let token = actix_mcp::Cancellation::new();
    let call = client
        .call_tool("a__sleep", json!({"ms": 30_000}))
        .cancellation(&token);
    let call = actix_rt::spawn(std::future::IntoFuture::into_future(call));
    let state = until("the call shows in the inspector", || {
        let (status, body) = http_get(&gateway.1, "/inspector/state");
        let state: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
        let calls = state["calls"].as_array().map_or(0, Vec::len);
        (status == 200 && calls == 1).then_some(state)
    })
    .await;
    let names: Vec<&str> = state["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "{state}");
    assert_eq!(state["calls"][0]["tool"], "sleep", "{state}");
    // A call that asked for progress goes the gateway's other way: it shows too.
    let with_progress = client
        .call_tool("b__sleep", json!({"ms": 30_000}))
        .on_progress(|_| {})
        .cancellation(&token);
    let with_progress = actix_rt::spawn(std::future::IntoFuture::into_future(with_progress));
    let state = until("the call with progress shows in the inspector", || {
        let (_, body) = http_get(&gateway.1, "/inspector/state");
        let state: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
        let calls = state["calls"].as_array()?;
        (calls.len() == 2).then_some(state)
    })
    .await;
    let servers: Vec<&str> = state["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["server"].as_str())
        .collect();
    assert!(servers.contains(&"b"), "{state}");
    token.cancel();
    let _ = call.await;
    let _ = with_progress.await;
    let (page, _) = http_get(&gateway.1, "/inspector/");
    assert_eq!(page, 200);
}

/// The next `notifications/resources/updated` a client is told of, skipping other notifications.
async fn next_update(notifications: &mut actix_mcp::client::NotificationStream) -> String {
    let wait = async {
        loop {
            match notifications.next().await {
                Some(actix_mcp::ServerNotification::ResourceUpdated { uri }) => return uri,
                Some(_) => continue,
                None => panic!("the notifications ended"),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), wait)
        .await
        .expect("told of the update")
}

/// Two sessions subscribe to one resource: the upstream server is asked once, each session is
/// told of its update, and the server is told to stop only when the last session unsubscribed.
#[actix_rt::test]
async fn resource_subscriptions_are_shared_upstream_and_each_subscriber_is_told() {
    let upstreams = Upstreams::new("subscribe");
    let gateway = listen(&upstreams);
    let first = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("a session");
    let second = Client::connect(HttpTransport::new(&gateway.1))
        .await
        .expect("another session");
    let resources = first.resources().await.expect("a list");
    let uri = resources.first().expect("a resource").uri.clone();
    let (mut told_first, mut told_second) = (first.notifications(), second.notifications());
    first.subscribe_resource(&uri).await.expect("subscribed");
    second.subscribe_resource(&uri).await.expect("subscribed");
    let asked = |method: &str| -> Vec<String> {
        ["a", "b"]
            .into_iter()
            .flat_map(|server| {
                let read = upstreams.read_by(server);
                let n = read.iter().filter(|m| m["method"] == method).count();
                std::iter::repeat_n(server.to_owned(), n)
            })
            .collect()
    };
    let subscribed = asked("resources/subscribe");
    assert_eq!(
        subscribed.len(),
        1,
        "one upstream subscription: {subscribed:?}"
    );
    let server = &subscribed[0];

    let sent = first
        .call_tool(
            &format!("{server}__notify"),
            json!({"kind": "updated", "uri": uri}),
        )
        .await
        .expect("answered");
    assert_eq!(sent.text(), "sent");
    assert_eq!(next_update(&mut told_first).await, uri);
    assert_eq!(next_update(&mut told_second).await, uri);

    first
        .unsubscribe_resource(&uri)
        .await
        .expect("unsubscribed");
    assert!(
        asked("resources/unsubscribe").is_empty(),
        "the second still is"
    );
    second
        .unsubscribe_resource(&uri)
        .await
        .expect("unsubscribed");
    assert_eq!(asked("resources/unsubscribe"), [server.as_str()]);
}

/// A 2026-07-28 client asks for logs per request (`_meta` `logLevel`): the upstream server's
/// log messages come back on the stream of the call that asked, at its level and above, named
/// after their server; a call that did not ask gets none (the spec's MUST NOT).
#[actix_rt::test]
async fn a_stateless_call_gets_the_upstream_logs_it_asked_for_on_its_stream() {
    use actix_mcp::LoggingLevel;
    let upstreams = Upstreams::new("http-modern-logs");
    let gateway = listen(&upstreams);
    let client = stateless_client(&gateway.1).await;
    let mut notifications = client.notifications();
    let log = |level: &str, message: &str| {
        client.call_tool("a__log", json!({"level": level, "message": message}))
    };
    log("error", "not asked for").await.expect("answered");
    for (level, message) in [("info", "below"), ("error", "above")] {
        let call = log(level, message).log_level(LoggingLevel::Warning);
        call.await.expect("answered");
    }
    let levels: Vec<serde_json::Value> = upstreams
        .read_by("a")
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["_meta"]["io.modelcontextprotocol/logLevel"].clone())
        .collect();
    assert_eq!(
        levels,
        [json!(null), json!("warning"), json!("warning")],
        "the level went upstream with the calls that asked"
    );
    // In order: a log of the first call (or the second's info) would come before the third's.
    let message = next_log(&mut notifications).await;
    assert_eq!(message.data, json!("above"), "{message:?}");
    assert_eq!(message.level, LoggingLevel::Error);
    assert_eq!(message.logger.as_deref(), Some("a/demo"));
    client.shutdown().await;
}

/// A client of the 2026-07-28 era (no session), discovered at the gateway's `url`.
async fn stateless_client(url: &str) -> Client {
    Client::builder()
        .era(actix_mcp::ProtocolEra::Modern)
        .connect(HttpTransport::new(url))
        .await
        .expect("discovered")
}

/// A client that reuses the id of its request still in flight in the same session gets an
/// error on the second POST; the first call goes on (and the second never reaches upstream).
#[actix_rt::test]
async fn a_reused_id_in_flight_is_refused_and_leaves_the_first_call_alone() {
    let upstreams = Upstreams::new("http-reused-id");
    let gateway = listen(&upstreams);
    let url = gateway.1.clone();
    let session = raw_session(&url);
    let call = |id: u64, tool: &str, arguments: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}})
        .to_string()
    };
    let first = {
        let body = call(7, "a__sleep", json!({"ms": 60_000}));
        let (url, session) = (url.clone(), session.clone());
        std::thread::spawn(move || {
            let answer = http(&url, "POST", Some(&session), &body);
            (answer, std::time::Instant::now())
        })
    };
    let upstream_id = upstream_call(&upstreams, "a", "sleep").await;
    let twice = call(7, "a__echo", json!({"text": "twice"}));
    let (_, second) = http(&url, "POST", Some(&session), &twice);
    assert!(second.contains("in flight"), "{second}");
    // The first POST is still open: only the session's end (which cancels its call upstream)
    // ends it.
    let closing = std::time::Instant::now();
    http(&url, "DELETE", Some(&session), "");
    let ((_, first), ended) = first.join().expect("the first POST");
    assert!(
        ended > closing,
        "the first POST ended when its id was reused"
    );
    assert!(!first.contains("in flight"), "{first}");
    cancel_after_request(&upstreams, "a", &upstream_id).await;
    let echoed = upstreams.read_by("a").into_iter();
    let echoed = echoed.filter(|m| m["params"]["name"] == "echo").count();
    assert_eq!(echoed, 0, "the refused call reached upstream");
}
