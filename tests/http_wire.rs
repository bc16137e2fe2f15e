//! Streamable HTTP as the server sees it: a scripted actix-web server on 127.0.0.1 records every
//! request (method, headers, body) and answers as each test needs (JSON, an event stream held
//! open, error statuses). What is asserted is what reached the server.
#![cfg(all(feature = "http", feature = "actix-web"))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{
    collections::HashMap,
    future::IntoFuture,
    sync::{Arc, Mutex},
    time::Duration,
};

use actix_mcp::{
    Cancellation, Client, CloseReason, Error, HttpTransport, ListenFilter, ProtocolEra,
    ServerNotification,
};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

mod common;
use common::eventually;

/// One request as the server received it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    headers: HashMap<String, String>,
    body: Value,
}

#[derive(Default)]
struct Script {
    seen: Mutex<Vec<Seen>>,
    /// The event stream of the `slow` call, held open until the test writes to it.
    slow_stream: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Set when the `slow` call's response stream was dropped: its client went away.
    slow_abandoned: Arc<std::sync::atomic::AtomicBool>,
    /// A 2026-07-28-only server: `initialize` is an unknown method.
    modern_only: bool,
}

/// Marks the `slow` stream abandoned when actix-web drops it (the client closed the connection).
struct AbandonGuard(Arc<std::sync::atomic::AtomicBool>);

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Script {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn posts_of(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.body["method"] == method)
            .collect()
    }
}

/// An event stream that stays open: `first` is sent at once, the rest whenever the test writes to
/// `slow_stream`; `slow_abandoned` is set when actix-web drops it (the client went away).
fn held_stream(script: &Script, first: Vec<String>) -> HttpResponse {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    for text in first {
        tx.send(text).unwrap();
    }
    *script.slow_stream.lock().unwrap() = Some(tx);
    let guard = AbandonGuard(script.slow_abandoned.clone());
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|text| {
            (
                Ok::<_, actix_web::Error>(web::Bytes::from(text)),
                (rx, guard),
            )
        })
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .streaming(stream)
}

fn event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

async fn handle(req: HttpRequest, body: web::Bytes, script: web::Data<Script>) -> HttpResponse {
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    script.seen.lock().unwrap().push(Seen {
        method: req.method().as_str().to_owned(),
        headers,
        body: body.clone(),
    });
    match req.method().as_str() {
        "GET" => return HttpResponse::MethodNotAllowed().finish(),
        // Allowed by the spec: the server does not end sessions on request, so only a cancel
        // stops a call when the client goes.
        "DELETE" => return HttpResponse::MethodNotAllowed().finish(),
        _ => {}
    }
    let id = body["id"].clone();
    let method = body["method"].as_str().unwrap_or("");
    if id.is_null() {
        return HttpResponse::Accepted().finish(); // a notification
    }
    if method == "server/discover" {
        return HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted-modern", "version": "1"}}}}));
    }
    if method == "subscriptions/listen" {
        let tag = json!({"io.modelcontextprotocol/subscriptionId": id});
        let acknowledged = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": body["params"]["notifications"], "_meta": tag}});
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": tag}});
        return held_stream(&script, vec![event(&acknowledged), event(&changed)]);
    }
    if method == "initialize" && script.modern_only {
        return HttpResponse::NotFound().json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found: initialize"}}));
    }
    if method == "initialize" {
        return HttpResponse::Ok()
            .insert_header(("mcp-session-id", "session-1"))
            .json(json!({
            "jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "0"}}}));
    }
    let done = |text: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}});
    match body["params"]["name"].as_str().unwrap_or("") {
        "json" => HttpResponse::Ok().json(done("plain JSON")),
        "sse" => HttpResponse::Ok()
            .content_type("text/event-stream")
            .body(event(&done("over an event stream"))),
        "slow" => {
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": body["params"]["_meta"]["progressToken"], "progress": 1}});
            held_stream(&script, vec![event(&progress)])
        }
        "needs-input" if body["params"]["inputResponses"].is_null() => {
            HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "input_required",
                "inputRequests": {"who": {"method": "elicitation/create", "params": {
                    "message": "name?", "requestedSchema": {"type": "object",
                        "properties": {"name": {"type": "string"}}}}}},
                "requestState": "opaque-é"}}))
        }
        "needs-input-progress" if body["params"]["inputResponses"].is_null() => HttpResponse::Ok()
            .json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "input_required",
                "inputRequests": {"who": {"method": "elicitation/create", "params": {
                    "message": "name?", "requestedSchema": {"type": "object"}}}}}})),
        "needs-input-progress" => {
            let token = body["params"]["_meta"]["progressToken"].clone();
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "total": 1}});
            let done = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete",
                "content": [{"type": "text", "text": "done"}]}});
            HttpResponse::Ok()
                .content_type("text/event-stream")
                .body(format!("{}{}", event(&progress), event(&done)))
        }
        "needs-input" => {
            let name = body["params"]["inputResponses"]["who"]["content"]["name"].clone();
            let state = body["params"]["requestState"].clone();
            HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete",
                "content": [{"type": "text", "text": format!("hello {name} {state}")}]}}))
        }
        "fail500" => HttpResponse::InternalServerError().body("boom"),

        "rpc-error" => HttpResponse::BadRequest().json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32602, "message": "no such tool"}})),
        "expire" => HttpResponse::NotFound().finish(),
        "huge" => HttpResponse::Ok()
            .content_type("text/event-stream")
            .body(format!("data: {}\n\n", "x".repeat(256 * 1024))),
        "garbage" => HttpResponse::Ok()
            .content_type("application/json")
            .body("{not json"),
        "hostile" => {
            let seed = body["params"]["arguments"]["seed"].as_u64().unwrap_or(0);
            hostile_answer(seed, &id)
        }
        other => HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("unknown {other}")}})),
    }
}

/// A hostile answer to a request, chosen by `seed`: broken JSON, broken events, answers for other
/// ids, wrong types, odd statuses and content types, random bytes.
fn hostile_answer(seed: u64, id: &Value) -> HttpResponse {
    // A small deterministic generator (xorshift): the same seed, the same answer.
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let random_bytes: Vec<u8> = (0..(next() % 512)).map(|_| next() as u8).collect();
    let ok = json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}});
    let sse = |text: String| {
        HttpResponse::Ok()
            .content_type("text/event-stream")
            .body(text)
    };
    match next() % 14 {
        0 => sse(format!(
            "data: {}\n\n",
            String::from_utf8_lossy(&random_bytes)
        )),
        1 => sse("data: {\"jsonrpc\":\"2.0\",\"id\":\n\n".into()),
        2 => sse(format!("retry: nonsense\nid: \u{0}\ndata: {ok}\n\n")),
        3 => sse(format!("event: other\ndata: {ok}\n\n")), // not a message: never answered
        4 => sse(format!(": comment\n\n\n\ndata: {ok}\n\n")),
        5 => sse(format!(
            "data: {}\n\n",
            json!({"jsonrpc": "2.0", "id": "x", "result": 1})
        )),
        6 => sse(format!(
            "data: {}\n\n",
            json!({"jsonrpc": "2.0", "id": id, "result": "text"})
        )),
        7 => HttpResponse::Ok()
            .content_type("application/json")
            .body(random_bytes),
        8 => HttpResponse::Ok()
            .content_type("application/json")
            .body(format!("[{ok}, 1, null, {{}}]")),
        9 => HttpResponse::build(
            actix_web::http::StatusCode::from_u16(400 + (next() % 200) as u16)
                .unwrap_or(actix_web::http::StatusCode::IM_A_TEAPOT),
        )
        .body(random_bytes),
        10 => HttpResponse::Ok()
            .content_type("image/png")
            .body(random_bytes),
        11 => HttpResponse::Accepted().finish(), // a request "accepted" with no answer
        12 => HttpResponse::Ok()
            .content_type("application/json")
            .body(format!(
                "{}",
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": "x"}})
            )),
        _ => sse(format!(
            "data: {}\ndata: {}\n\n",
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": {}}}),
            ok
        )),
    }
}

/// Starts the scripted server on 127.0.0.1 and a free port.
fn scripted_server() -> (String, Arc<Script>) {
    start_script(Script::default())
}

fn start_script(script: Script) -> (String, Arc<Script>) {
    let script = web::Data::new(script);
    let data = script.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .default_service(web::to(handle))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .expect("bind 127.0.0.1");
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    (format!("http://127.0.0.1:{port}/mcp"), script.into_inner())
}

async fn connected() -> (Client, Arc<Script>) {
    let (url, script) = scripted_server();
    let client = Client::connect(HttpTransport::new(url).max_frame_bytes(64 * 1024))
        .await
        .expect("connect");
    (client, script)
}

/// Every POST carries both accepted types; after the handshake, the session id the server gave
/// and the negotiated version go on every request, and not before.
#[actix::test]
async fn posts_after_the_handshake_carry_the_session_and_the_version() {
    let (client, script) = connected().await;
    let json = client.call_tool("json", json!({})).await.unwrap();
    assert_eq!(json.text(), "plain JSON");
    let sse = client.call_tool("sse", json!({})).await.unwrap();
    assert_eq!(sse.text(), "over an event stream");

    let posts: Vec<Seen> = script
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST")
        .collect();
    assert_eq!(posts[0].body["method"], "initialize");
    assert!(!posts[0].headers.contains_key("mcp-session-id"));
    assert!(!posts[0].headers.contains_key("mcp-protocol-version"));
    assert!(posts.len() >= 4, "{posts:?}");
    for post in &posts {
        let accept = &post.headers["accept"];
        assert!(accept.contains("application/json") && accept.contains("text/event-stream"));
        assert_eq!(post.headers["content-type"], "application/json");
    }
    for post in &posts[1..] {
        assert_eq!(post.headers["mcp-session-id"], "session-1", "{post:?}");
        assert_eq!(post.headers["mcp-protocol-version"], "2025-11-25");
    }
    // The GET stream was asked for once the handshake was done (this server refuses it).
    eventually("a GET for the event stream", || {
        script.seen().iter().any(|s| s.method == "GET")
    })
    .await;
}

/// Starts the script's `slow` call under `token` and returns once the server has it (its first
/// progress arrived on the request's stream): the call's id and its task.
async fn slow_call_at_the_server(
    client: &Client,
    token: &Cancellation,
) -> (
    actix_mcp::RequestId,
    tokio::task::JoinHandle<Result<actix_mcp::CallToolResult, Error>>,
) {
    let (call, mut progress) = client
        .call_tool("slow", json!({}))
        .cancellation(token)
        .progress_stream();
    let id = call.id();
    let call = actix_rt::spawn(async move { call.await });
    tokio::time::timeout(Duration::from_secs(10), progress.next())
        .await
        .expect("progress within 10 s")
        .expect("progress");
    (id, call)
}

/// A cancel of a request whose POST went out is its own POST of `notifications/cancelled`,
/// after the request; the caller is woken at once. Once the server accepted the cancel, the client
/// closes its copy of the request's event stream (the server may never end it).
#[actix::test]
async fn a_cancel_is_posted_after_its_request_then_its_stream_is_closed() {
    let (client, script) = connected().await;
    let token = Cancellation::new();
    let (id, call) = slow_call_at_the_server(&client, &token).await;
    token.cancel_with_reason("user left");
    assert!(call.await.unwrap().unwrap_err().is_cancelled());

    eventually("the cancel POST", || {
        !script.posts_of("notifications/cancelled").is_empty()
    })
    .await;
    let seen = script.seen();
    let request_at = seen
        .iter()
        .position(|s| s.body["params"]["name"] == "slow")
        .unwrap();
    let cancel_at = seen
        .iter()
        .position(|s| s.body["method"] == "notifications/cancelled")
        .unwrap();
    assert!(request_at < cancel_at);
    let cancel = &seen[cancel_at];
    assert_eq!(cancel.body["params"]["requestId"], id.as_u64());
    assert_eq!(cancel.body["params"]["reason"], "user left");
    assert_eq!(cancel.headers["mcp-session-id"], "session-1");

    let stream = script.slow_stream.lock().unwrap().take().unwrap();
    eventually("the client closes the cancelled request's stream", || {
        let _ = stream.send(": keep-alive\n\n".to_owned());
        script
            .slow_abandoned
            .load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.cancels_sent, 1);
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "plain JSON"
    );
}

/// An HTTP error fails only its own request: a status without a JSON-RPC body is `Http`, one with
/// a JSON-RPC error is the server's answer, and an unreadable body or an event larger than the
/// frame cap fails that request. Other calls go on.
#[actix::test]
async fn http_errors_fail_only_their_own_request() {
    let (client, _script) = connected().await;
    match client.call_tool("fail500", json!({})).await {
        Err(Error::Http {
            status: 500,
            body,
            retry_after: None,
        }) => assert_eq!(body, "boom"),
        other => panic!("{other:?}"),
    }
    match client.call_tool("rpc-error", json!({})).await {
        Err(Error::Server { code: -32602, .. }) => {}
        other => panic!("{other:?}"),
    }
    let huge = client.call_tool("huge", json!({})).await;
    match huge {
        Err(Error::Transport { source, .. }) => {
            assert!(source.to_string().contains("65536"), "{source}")
        }
        other => panic!("{other:?}"),
    }
    let garbage = client.call_tool("garbage", json!({})).await;
    assert!(matches!(garbage, Err(Error::Protocol(_))), "{garbage:?}");
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "plain JSON"
    );
}

/// With renewal turned off, a 404 to a request carrying the session id means the server ended
/// the session: that request and every later one fail with `SessionExpired`.
#[actix::test]
async fn without_renewal_a_404_with_the_session_id_ends_the_connection() {
    let (url, _script) = scripted_server();
    let transport = HttpTransport::new(url).no_session_renewal();
    let client = Client::connect(transport).await.expect("connect");
    let expired = client.call_tool("expire", json!({})).await;
    assert!(
        matches!(
            expired,
            Err(Error::Closed {
                reason: CloseReason::SessionExpired
            })
        ),
        "{expired:?}"
    );
    let after = client.call_tool("json", json!({})).await;
    assert!(
        matches!(
            after,
            Err(Error::Closed {
                reason: CloseReason::SessionExpired
            })
        ),
        "{after:?}"
    );
}

/// Closing the client ends the session on the server with DELETE and the session id.
#[actix::test]
async fn closing_deletes_the_session() {
    let (client, script) = connected().await;
    client.call_tool("json", json!({})).await.unwrap();
    client.shutdown().await;
    let deletes: Vec<Seen> = script
        .seen()
        .into_iter()
        .filter(|s| s.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0].headers["mcp-session-id"], "session-1");
    // Issue 20: the version the session speaks, like every other request of the session.
    assert_eq!(deletes[0].headers["mcp-protocol-version"], "2025-11-25");
}

/// Issue 20: a call given up just before the client closes (Ctrl-C) still has its cancel
/// reach the server: closing sends the cancels still owed before it ends the session. This
/// server answers `DELETE` with 405, so without the cancel the call would run to its end.
#[actix::test]
async fn closing_right_after_a_cancel_sends_the_cancel_before_ending_the_session() {
    let (client, script) = connected().await;
    let token = Cancellation::new();
    let (_, call) = slow_call_at_the_server(&client, &token).await;
    token.cancel();
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    client.shutdown().await;
    let seen = script.seen();
    let cancel_at = seen
        .iter()
        .position(|s| s.body["method"] == "notifications/cancelled")
        .expect("the cancel reached the server");
    let delete_at = seen
        .iter()
        .position(|s| s.method == "DELETE")
        .expect("the session was ended");
    assert!(cancel_at < delete_at, "the cancel came after DELETE");
}

async fn connected_modern() -> (Client, Arc<Script>) {
    let (url, script) = scripted_server();
    let client = Client::builder()
        .era(ProtocolEra::Modern)
        .connect(HttpTransport::new(url))
        .await
        .expect("connect");
    (client, script)
}

/// 2026-07-28 over HTTP: no handshake and no session; every POST carries the version header, its
/// method and (for a tool call) its name as headers, and its params carry our `_meta`.
#[actix::test]
async fn modern_posts_carry_meta_and_routing_headers_and_no_session() {
    let (client, script) = connected_modern().await;
    assert_eq!(client.protocol_version(), "2026-07-28");
    assert_eq!(client.server_info().name, "scripted-modern");
    client.call_tool("json", json!({})).await.unwrap();
    let seen = script.seen();
    assert_eq!(seen[0].body["method"], "server/discover");
    assert!(seen.iter().all(|s| s.method == "POST"), "no GET, no DELETE");
    assert!(seen.iter().all(|s| s.body["method"] != "initialize"));
    for post in &seen {
        assert_eq!(post.headers["mcp-protocol-version"], "2026-07-28");
        assert_eq!(
            post.headers["mcp-method"],
            post.body["method"].as_str().unwrap()
        );
        assert!(!post.headers.contains_key("mcp-session-id"));
        let meta = &post.body["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "actix-mcp"
        );
    }
    let call = seen
        .iter()
        .find(|s| s.body["method"] == "tools/call")
        .unwrap();
    assert_eq!(call.headers["mcp-name"], "json");

    // A raw request names its target too: read from its params where it is written.
    let raw = actix_mcp::Request::new("resources/read", Some(json!({"uri": "file:///é"})));
    let _ = client.addr().send(raw).await.unwrap().await;
    let read = script
        .seen()
        .into_iter()
        .find(|s| s.body["method"] == "resources/read")
        .expect("the raw request reached the server");
    assert_eq!(read.headers["mcp-name"], "=?base64?ZmlsZTovLy/DqQ==?=");
}

/// 2026-07-28 over HTTP: cancelling a request aborts its POST. The server sees the request's
/// stream go away; no `notifications/cancelled` is sent.
#[actix::test]
async fn a_modern_cancel_aborts_the_post_and_sends_no_notification() {
    let (client, script) = connected_modern().await;
    let token = Cancellation::new();
    let (_, call) = slow_call_at_the_server(&client, &token).await;
    assert!(!script
        .slow_abandoned
        .load(std::sync::atomic::Ordering::SeqCst));
    token.cancel();
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    // The server keeps the stream alive with comments, as servers do; actix-web notices a gone
    // client when it writes.
    let stream = script.slow_stream.lock().unwrap().take().unwrap();
    eventually("the server sees the request's stream abandoned", || {
        let _ = stream.send(": keep-alive\n\n".to_owned());
        script
            .slow_abandoned
            .load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    assert!(script.posts_of("notifications/cancelled").is_empty());
    assert_eq!(client.stats().await.unwrap().cancels_sent, 0);
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "plain JSON"
    );
}

/// `ProtocolEra::Auto` starts with the handshake; a server that does not know `initialize` (a
/// 2026-07-28-only server) gets the stateless era instead.
#[actix::test]
async fn auto_switches_to_the_stateless_era_when_initialize_is_unknown() {
    let (url, script) = start_script(Script {
        modern_only: true,
        ..Script::default()
    });
    let client = Client::connect(HttpTransport::new(url)).await.unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    client.call_tool("json", json!({})).await.unwrap();
    let methods: Vec<Value> = script
        .seen()
        .iter()
        .map(|s| s.body["method"].clone())
        .collect();
    assert_eq!(
        methods,
        vec![
            json!("initialize"),
            json!("server/discover"),
            json!("tools/call")
        ]
    );
    // The handshake POST had no `_meta`; everything after it has.
    let seen = script.seen();
    assert!(seen[0].body["params"]["_meta"].is_null());
    assert!(seen[1..]
        .iter()
        .all(|s| s.body["params"]["_meta"].is_object()));
}

/// `subscriptions/listen` (2026-07-28): the filter goes out, the notifications on the listen
/// stream reach the client's notification stream, and dropping the listen call ends the
/// subscription by aborting its POST.
#[actix::test]
async fn a_listen_brings_notifications_until_it_is_dropped() {
    let (client, script) = connected_modern().await;
    let mut notifications = client.notifications();
    let filter = ListenFilter {
        tools_list_changed: true,
        ..ListenFilter::default()
    };
    let call = client.listen(&filter);
    let listen = actix_rt::spawn(async move { call.await });
    let changed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match notifications.next().await {
                Some(ServerNotification::ToolsListChanged) => return,
                Some(_) => continue,
                None => panic!("notification stream ended"),
            }
        }
    })
    .await;
    assert!(changed.is_ok(), "tools/list_changed arrived");
    let sent = script.posts_of("subscriptions/listen");
    assert_eq!(
        sent[0].body["params"]["notifications"],
        json!({"toolsListChanged": true})
    );

    listen.abort(); // drops the call: the subscription ends
    let stream = script.slow_stream.lock().unwrap().take().unwrap();
    eventually("the listen stream is closed", || {
        let _ = stream.send(": keep-alive\n\n".to_owned());
        script
            .slow_abandoned
            .load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
}

/// 2026-07-28 `input_required`: the call runs the elicitation handler and retries under a new id
/// with the answer and the server's state. Cancelled while the handler works, the call ends at
/// once, the handler is told, and nothing more is sent (no request is in flight).
#[actix::test]
async fn input_required_is_fulfilled_by_the_handler_and_a_cancel_meanwhile_sends_nothing() {
    let (url, script) = scripted_server();
    let block = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The token the handler got: cancelled (and the handler dropped) when the call is.
    let handler_token: Arc<Mutex<Option<Cancellation>>> = Arc::default();
    let (blocking, seen) = (block.clone(), handler_token.clone());
    let client = Client::builder()
        .era(ProtocolEra::Modern)
        .on_form_elicitation(move |_, token| {
            let (blocking, seen) = (blocking.clone(), seen.clone());
            async move {
                if blocking.load(std::sync::atomic::Ordering::SeqCst) {
                    *seen.lock().unwrap() = Some(token.clone());
                    std::future::pending::<()>().await;
                }
                let mut content = serde_json::Map::new();
                content.insert("name".into(), json!("Ann"));
                Ok(actix_mcp::ElicitResult::accept(content))
            }
        })
        .connect(HttpTransport::new(url))
        .await
        .unwrap();

    let answered = client.call_tool("needs-input", json!({})).await.unwrap();
    assert_eq!(answered.text(), "hello \"Ann\" \"opaque-é\"");
    let calls = script.posts_of("tools/call");
    assert_eq!(calls.len(), 2);
    assert_ne!(
        calls[0].body["id"], calls[1].body["id"],
        "the retry has a new id"
    );
    assert_eq!(
        calls[1].body["params"]["inputResponses"]["who"]["action"],
        "accept"
    );
    assert!(calls[0].body["params"]["_meta"].is_object());
    assert!(calls[1].body["params"]["_meta"].is_object());

    // Progress keeps reaching the call after a round: the retry carries its own id as the token.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let done = client
        .call_tool("needs-input-progress", json!({}))
        .on_progress(move |p| record.lock().unwrap().push(p.progress))
        .await
        .unwrap();
    assert_eq!(done.text(), "done");
    assert_eq!(*seen.lock().unwrap(), vec![1.0]);
    let retried = script.posts_of("tools/call").pop().unwrap();
    assert_eq!(
        retried.body["params"]["_meta"]["progressToken"],
        retried.body["id"]
    );

    block.store(true, std::sync::atomic::Ordering::SeqCst);
    let token = Cancellation::new();
    let call = client
        .call_tool("needs-input", json!({}))
        .cancellation(&token);
    let call = actix_rt::spawn(async move { call.await });
    eventually("the first round reached the server", || {
        script.posts_of("tools/call").len() == 5
    })
    .await;
    eventually("the handler is working", || {
        handler_token.lock().unwrap().is_some()
    })
    .await;
    token.cancel();
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    let told = handler_token.lock().unwrap().clone().unwrap();
    assert!(told.is_cancelled(), "the handler's token is cancelled");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        script.posts_of("tools/call").len(),
        5,
        "no retry after the cancel"
    );
    assert!(script.posts_of("notifications/cancelled").is_empty());
}

/// Regression guard: whatever a server answers over HTTP (broken JSON or events, answers for other
/// ids, wrong types, random bytes, odd statuses and content types), the client never panics, each
/// call ends with its result or an error (none waits for its timeout), the same answer always
/// ends its call the same way, and the connection goes on working.
#[actix::test]
async fn hostile_http_answers_never_break_the_connection() {
    let (client, _script) = connected().await;
    // Every seed twice, all at once.
    let calls = (0..1200u64).map(|n| {
        client
            .call_tool("hostile", json!({"seed": n % 600}))
            .timeout(Duration::from_secs(3))
            .into_future()
    });
    let outcomes = futures::future::join_all(calls).await;
    let class = |outcome: &Result<_, Error>| match outcome {
        Ok(_) => "answered".to_owned(),
        Err(error) => format!("{:?}", std::mem::discriminant(error)),
    };
    let timed_out: Vec<usize> = (0..600)
        .filter(|&seed| matches!(outcomes[seed], Err(Error::Timeout { .. })))
        .collect();
    assert!(timed_out.is_empty(), "seeds that timed out: {timed_out:?}");
    for seed in 0..600 {
        assert_eq!(
            class(&outcomes[seed]),
            class(&outcomes[seed + 600]),
            "seed {seed} ended two ways: {:?} and {:?}",
            outcomes[seed],
            outcomes[seed + 600]
        );
    }
    assert!(
        outcomes.iter().any(|o| o.is_ok()),
        "some hostile answers are still answers"
    );
    assert!(!client.is_closed());
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "plain JSON"
    );
}

// ---------------------------------------------------------------------------------------------
// Renewing an expired session (the default; 2025-11-25).

/// A server whose sessions expire: it forgets `session-1` when the `forget_after + 1`-th
/// `tools/call` arrives on it (and answers that call 404, as every later use of the old id).
/// Each later `initialize` makes a new session (`session-2`, …) unless `reinit_status` says how
/// to refuse it; with `hold_reinit` it waits for `release_reinit` before answering.
#[derive(Default)]
struct Expiring {
    seen: Mutex<Vec<Seen>>,
    /// The session the server knows now.
    session: Mutex<Option<String>>,
    initializes: std::sync::atomic::AtomicUsize,
    calls_on_first: std::sync::atomic::AtomicUsize,
    forget_after: usize,
    /// Answer a later `initialize` with this status instead of a new session.
    reinit_status: Option<u16>,
    hold_reinit: bool,
    /// Forget a renewed session at its first call (answered `404`).
    forget_renewed: bool,
    /// Set when a later `initialize` arrived (and, with `hold_reinit`, waits).
    reinit_arrived: std::sync::atomic::AtomicBool,
    release_reinit: tokio::sync::Notify,
    /// The `slow` call's event stream, held open.
    slow_stream: Mutex<Option<mpsc::UnboundedSender<String>>>,
    slow_abandoned: Arc<std::sync::atomic::AtomicBool>,
}

impl Expiring {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn posts_of(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.body["method"] == method)
            .collect()
    }

    /// The POSTs of `tools/call` with this request id.
    fn calls_with_id(&self, id: u64) -> Vec<Seen> {
        self.posts_of("tools/call")
            .into_iter()
            .filter(|s| s.body["id"] == id)
            .collect()
    }
}

async fn expiring_handle(
    req: HttpRequest,
    body: web::Bytes,
    script: web::Data<Expiring>,
) -> HttpResponse {
    use std::sync::atomic::Ordering::SeqCst;
    let headers: HashMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    script.seen.lock().unwrap().push(Seen {
        method: req.method().as_str().to_owned(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let id = body["id"].clone();
    let method = body["method"].as_str().unwrap_or("");
    if req.method() == "POST" && method == "initialize" {
        let n = script.initializes.fetch_add(1, SeqCst) + 1;
        if n > 1 {
            script.reinit_arrived.store(true, SeqCst);
            if script.hold_reinit {
                script.release_reinit.notified().await;
            }
            if let Some(status) = script.reinit_status {
                let status = actix_web::http::StatusCode::from_u16(status).unwrap();
                return HttpResponse::build(status).body("no new session");
            }
        }
        let session = format!("session-{n}");
        *script.session.lock().unwrap() = Some(session.clone());
        return HttpResponse::Ok()
            .insert_header(("mcp-session-id", session))
            .json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "expiring", "version": "0"}}}));
    }
    let known = script.session.lock().unwrap().clone();
    let given = headers.get("mcp-session-id").cloned();
    if given.is_none() || given != known {
        return HttpResponse::NotFound().body("unknown session");
    }
    match req.method().as_str() {
        "GET" => return HttpResponse::MethodNotAllowed().finish(),
        "DELETE" => return HttpResponse::Ok().finish(),
        _ => {}
    }
    if id.is_null() {
        return HttpResponse::Accepted().finish(); // a notification
    }
    if script.forget_renewed && given.as_deref() == Some("session-2") {
        *script.session.lock().unwrap() = None;
        return HttpResponse::NotFound().body("session expired");
    }
    if given.as_deref() == Some("session-1") {
        let calls = script.calls_on_first.fetch_add(1, SeqCst) + 1;
        if calls > script.forget_after {
            *script.session.lock().unwrap() = None;
            return HttpResponse::NotFound().body("session expired");
        }
    }
    let name = body["params"]["name"].as_str().unwrap_or("");
    if name == "slow" {
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": body["params"]["_meta"]["progressToken"], "progress": 1}});
        tx.send(event(&progress)).unwrap();
        *script.slow_stream.lock().unwrap() = Some(tx);
        let guard = AbandonGuard(script.slow_abandoned.clone());
        let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
            rx.recv().await.map(|text| {
                (
                    Ok::<_, actix_web::Error>(web::Bytes::from(text)),
                    (rx, guard),
                )
            })
        });
        return HttpResponse::Ok()
            .content_type("text/event-stream")
            .streaming(stream);
    }
    let text = format!("{name} on {}", given.unwrap_or_default());
    HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id,
        "result": {"content": [{"type": "text", "text": text}]}}))
}

fn start_expiring(script: Expiring) -> (String, Arc<Expiring>) {
    let script = web::Data::new(script);
    let data = script.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .default_service(web::to(expiring_handle))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .expect("bind 127.0.0.1");
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    (format!("http://127.0.0.1:{port}/mcp"), script.into_inner())
}

async fn connected_renewing(script: Expiring) -> (Client, Arc<Expiring>) {
    let (url, script) = start_expiring(script);
    // Renewal is the default.
    let transport = HttpTransport::new(url);
    let client = Client::connect(transport).await.expect("connect");
    (client, script)
}

fn is_session_expired<T>(outcome: &Result<T, Error>) -> bool {
    matches!(
        outcome,
        Err(Error::Closed {
            reason: CloseReason::SessionExpired
        })
    )
}

/// Waits (bounded) until the connection holds `n` requests.
async fn in_flight(client: &Client, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = client.stats().await.unwrap().in_flight;
        if now == n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {now} requests in flight, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The session expires with requests at it: the one answered 404 (never processed) goes again,
/// once, on the renewed session and succeeds; the one whose stream was still open (the server
/// took it) fails with `SessionLost` and is never posted again. The transport re-runs the
/// handshake by itself (the same `initialize` without session id, then `initialized` with the
/// new id, then the GET stream again) and later calls use the new session.
#[actix::test]
async fn an_expired_session_is_renewed_the_404_request_sent_again_and_the_taken_one_lost() {
    let (client, script) = connected_renewing(Expiring {
        forget_after: 2,
        ..Expiring::default()
    })
    .await;
    let first_initialize = script.posts_of("initialize")[0].body.clone();

    // In flight on session-1: its event stream stays open.
    let (slow, mut progress) = client.call_tool("slow", json!({})).progress_stream();
    let slow_id = slow.id().as_u64();
    let slow = actix_rt::spawn(async move { slow.await });
    tokio::time::timeout(Duration::from_secs(10), progress.next())
        .await
        .expect("progress within 10 s")
        .expect("progress");
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "json on session-1"
    );

    // The third call on session-1: the server forgot the session; it goes again on session-2.
    let refused = client.call_tool("json", json!({}));
    let refused_id = refused.id().as_u64();
    assert_eq!(refused.await.unwrap().text(), "json on session-2");
    let outcome = slow.await.unwrap();
    assert!(matches!(outcome, Err(Error::SessionLost)), "{outcome:?}");

    let later = client.call_tool("json", json!({})).await.unwrap();
    assert_eq!(later.text(), "json on session-2");
    assert!(!client.is_closed());

    let initializes = script.posts_of("initialize");
    assert_eq!(initializes.len(), 2, "{initializes:?}");
    assert_eq!(
        initializes[1].body, first_initialize,
        "the same frame again"
    );
    assert!(!initializes[1].headers.contains_key("mcp-session-id"));
    let initialized = script.posts_of("notifications/initialized");
    assert_eq!(initialized.len(), 2, "{initialized:?}");
    assert_eq!(initialized[0].headers["mcp-session-id"], "session-1");
    assert_eq!(initialized[1].headers["mcp-session-id"], "session-2");
    // Server order: the renewal's handshake before the later call.
    let seen = script.seen();
    let reinit = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| s.body["method"] == "initialize")
        .map(|(i, _)| i)
        .nth(1)
        .unwrap();
    let reinitialized = seen
        .iter()
        .position(|s| {
            s.body["method"] == "notifications/initialized"
                && s.headers.get("mcp-session-id").map(String::as_str) == Some("session-2")
        })
        .unwrap();
    let later_call = seen
        .iter()
        .position(|s| {
            s.body["method"] == "tools/call"
                && s.headers.get("mcp-session-id").map(String::as_str) == Some("session-2")
        })
        .unwrap();
    assert!(reinit < reinitialized && reinitialized < later_call);

    // The lost request went out once, on session-1; the refused one once on each session.
    let posts = script.calls_with_id(slow_id);
    assert_eq!(posts.len(), 1, "request {slow_id}: {posts:?}");
    assert_eq!(posts[0].headers["mcp-session-id"], "session-1");
    let sessions: Vec<String> = script
        .calls_with_id(refused_id)
        .iter()
        .map(|s| s.headers["mcp-session-id"].clone())
        .collect();
    assert_eq!(sessions, ["session-1", "session-2"]);
    assert!(script.posts_of("notifications/cancelled").is_empty());
    // The GET stream is asked for again, on the new session.
    eventually("a GET on session-2", || {
        script.seen().iter().any(|s| {
            s.method == "GET"
                && s.headers.get("mcp-session-id").map(String::as_str) == Some("session-2")
        })
    })
    .await;
    // The old session's stream of the lost request was closed by the client.
    let stream = script.slow_stream.lock().unwrap().take().unwrap();
    eventually("the lost request's stream is closed", || {
        let _ = stream.send(": keep-alive\n\n".to_owned());
        script
            .slow_abandoned
            .load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
}

/// A call made while the renewal runs waits, and goes out on the new session after its
/// handshake; a call cancelled while it waits is never written, and no cancel is sent for it.
#[actix::test]
async fn a_call_made_during_the_renewal_waits_for_the_new_session() {
    let (client, script) = connected_renewing(Expiring {
        forget_after: 0,
        hold_reinit: true,
        ..Expiring::default()
    })
    .await;
    let expired = client.call_tool("json", json!({}));
    let expired = actix_rt::spawn(async move { expired.await });
    eventually("the renewal's initialize reached the server", || {
        script
            .reinit_arrived
            .load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;

    let waiting = client.call_tool("json", json!({}));
    let waiting_id = waiting.id().as_u64();
    let waiting = actix_rt::spawn(async move { waiting.await });
    let token = Cancellation::new();
    let dropped = client.call_tool("json", json!({})).cancellation(&token);
    let dropped_id = dropped.id().as_u64();
    let dropped = actix_rt::spawn(async move { dropped.await });
    in_flight(&client, 3).await;
    token.cancel();
    assert!(dropped.await.unwrap().unwrap_err().is_cancelled());
    in_flight(&client, 2).await;
    assert!(
        script.calls_with_id(waiting_id).is_empty(),
        "held meanwhile"
    );

    script.release_reinit.notify_one();
    let answered = waiting.await.unwrap().unwrap();
    assert_eq!(answered.text(), "json on session-2");
    let again = expired.await.unwrap().unwrap();
    assert_eq!(
        again.text(),
        "json on session-2",
        "the 404'd call, sent again"
    );

    let seen = script.seen();
    let methods: Vec<(String, Option<String>)> = seen
        .iter()
        .filter(|s| s.method == "POST")
        .map(|s| {
            (
                s.body["method"].as_str().unwrap_or("").to_owned(),
                s.headers.get("mcp-session-id").cloned(),
            )
        })
        .collect();
    let session = |n: &str| Some(format!("session-{n}"));
    assert_eq!(
        methods,
        vec![
            ("initialize".into(), None),
            ("notifications/initialized".into(), session("1")),
            ("tools/call".into(), session("1")),
            ("initialize".into(), None),
            ("notifications/initialized".into(), session("2")),
            ("tools/call".into(), session("2")),
            ("tools/call".into(), session("2")),
        ]
    );
    assert_eq!(script.calls_with_id(waiting_id).len(), 1);
    assert!(script.calls_with_id(dropped_id).is_empty());
    assert!(script.posts_of("notifications/cancelled").is_empty());
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "json on session-2"
    );
}

/// The renewal's `initialize` refused (`status`): the connection ends with `SessionExpired`, the
/// call waiting for the renewal fails with it and is never sent, and nothing is tried again.
async fn a_failed_renewal_ends_the_connection(status: u16) {
    let (client, script) = connected_renewing(Expiring {
        forget_after: 0,
        hold_reinit: true,
        reinit_status: Some(status),
        ..Expiring::default()
    })
    .await;
    let expired = client.call_tool("json", json!({}));
    let expired = actix_rt::spawn(async move { expired.await });
    eventually("the renewal's initialize reached the server", || {
        script
            .reinit_arrived
            .load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    let waiting = client.call_tool("json", json!({}));
    let waiting_id = waiting.id().as_u64();
    let waiting = actix_rt::spawn(async move { waiting.await });
    in_flight(&client, 2).await;

    script.release_reinit.notify_one();
    let outcome = waiting.await.unwrap();
    assert!(is_session_expired(&outcome), "{outcome:?}");
    let outcome = expired.await.unwrap();
    assert!(is_session_expired(&outcome), "the 404'd call: {outcome:?}");
    eventually("the connection is closed", || client.is_closed()).await;
    let after = client.call_tool("json", json!({})).await;
    assert!(is_session_expired(&after), "{after:?}");

    assert_eq!(script.posts_of("initialize").len(), 2, "one renewal only");
    assert_eq!(script.posts_of("notifications/initialized").len(), 1);
    assert!(script.calls_with_id(waiting_id).is_empty());
    assert_eq!(script.posts_of("tools/call").len(), 1);
}

#[actix::test]
async fn a_renewal_answered_500_ends_the_connection_and_fails_the_waiting_calls() {
    a_failed_renewal_ends_the_connection(500).await;
}

#[actix::test]
async fn a_renewal_answered_404_is_final() {
    a_failed_renewal_ends_the_connection(404).await;
}

/// With `no_session_renewal`, an expired session ends the connection: no second `initialize`
/// is sent.
#[actix::test]
async fn with_renewal_turned_off_an_expired_session_ends_the_connection() {
    let (url, script) = start_expiring(Expiring::default());
    let transport = HttpTransport::new(url).no_session_renewal();
    let client = Client::connect(transport).await.unwrap();
    let expired = client.call_tool("json", json!({})).await;
    assert!(is_session_expired(&expired), "{expired:?}");
    eventually("the connection is closed", || client.is_closed()).await;
    let after = client.call_tool("json", json!({})).await;
    assert!(is_session_expired(&after), "{after:?}");
    assert_eq!(script.posts_of("initialize").len(), 1);
}

/// Issue 34: a server that forgets the session right after the handshake. A client that makes
/// one call and closes (an agent's single call) gets its answer: the transport starts a new
/// session at the `404` by itself (one `initialize`, without a session id) and the call goes
/// out once on it.
#[actix::test]
async fn a_single_call_answered_404_succeeds_on_the_new_session() {
    let (client, script) = connected_renewing(Expiring {
        forget_after: 0,
        ..Expiring::default()
    })
    .await;
    let call = client.call_tool("json", json!({}));
    let id = call.id().as_u64();
    assert_eq!(call.await.unwrap().text(), "json on session-2");
    client.close().await;
    let initializes = script.posts_of("initialize");
    assert_eq!(initializes.len(), 2, "{initializes:?}");
    assert!(!initializes[1].headers.contains_key("mcp-session-id"));
    let sessions: Vec<String> = script
        .calls_with_id(id)
        .iter()
        .map(|s| s.headers["mcp-session-id"].clone())
        .collect();
    assert_eq!(sessions, ["session-1", "session-2"], "once on each");
    assert!(script.posts_of("notifications/cancelled").is_empty());
}

/// A renewed session that expires before it answered anything is not renewed again: the
/// connection ends (no loop of renewals), and the call sent again on it fails.
#[actix::test]
async fn a_renewed_session_that_expires_at_once_ends_the_connection() {
    let (client, script) = connected_renewing(Expiring {
        forget_after: 0,
        forget_renewed: true,
        ..Expiring::default()
    })
    .await;
    let expired = client.call_tool("json", json!({}));
    let expired_id = expired.id().as_u64();
    let expired = expired.await;
    assert!(is_session_expired(&expired), "{expired:?}");
    eventually("the connection is closed", || client.is_closed()).await;
    assert_eq!(script.posts_of("initialize").len(), 2, "no second renewal");
    assert_eq!(script.calls_with_id(expired_id).len(), 2, "sent again once");
}

// Redirects (issue 20).

/// A server at `/mcp/` with `/mcp` redirecting there (307, as Starlette does), and `/away`
/// answering with `status` to `elsewhere`.
fn start_redirecting(elsewhere: String, status: u16) -> (String, Arc<Script>) {
    let script = web::Data::new(Script::default());
    let data = script.clone();
    let server = HttpServer::new(move || {
        let elsewhere = elsewhere.clone();
        App::new()
            .app_data(data.clone())
            .route(
                "/mcp",
                web::to(|| async {
                    HttpResponse::TemporaryRedirect()
                        .insert_header(("location", "/mcp/"))
                        .finish()
                }),
            )
            .route(
                "/away",
                web::to(move || {
                    let elsewhere = elsewhere.clone();
                    async move {
                        let status = actix_web::http::StatusCode::from_u16(status).unwrap();
                        HttpResponse::build(status)
                            .insert_header(("location", elsewhere))
                            .finish()
                    }
                }),
            )
            .default_service(web::to(handle))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .expect("bind 127.0.0.1");
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    (format!("http://127.0.0.1:{port}"), script.into_inner())
}

/// A same-origin 307 (`/mcp` → `/mcp/`) is followed with the same method and body; no request
/// carries a `Referer`.
#[actix::test]
async fn a_same_origin_307_is_followed_with_its_post_and_no_referer() {
    let (base, script) = start_redirecting(String::new(), 302);
    let client = Client::connect(HttpTransport::new(format!("{base}/mcp")))
        .await
        .expect("connected through the redirect");
    assert_eq!(
        client.call_tool("json", json!({})).await.unwrap().text(),
        "plain JSON"
    );
    let seen = script.seen();
    assert!(seen.iter().any(|s| s.body["method"] == "tools/call"));
    assert!(
        seen.iter().all(|s| !s.headers.contains_key("referer")),
        "{seen:?}"
    );
}

/// A redirect to another origin is not followed: nothing of ours (session, MCP headers, the
/// body) reaches the other server, and the POST is never replayed as a GET. Each status ends
/// the request with an error that names the redirect.
#[actix::test]
async fn a_cross_origin_redirect_is_not_followed() {
    let (other, elsewhere) = scripted_server();
    for status in [302, 303, 307, 308] {
        let (base, _) = start_redirecting(other.clone(), status);
        let connected = Client::connect(HttpTransport::new(format!("{base}/away"))).await;
        match connected {
            Err(Error::Http {
                status: got, body, ..
            }) => {
                assert_eq!(got, status);
                assert!(body.contains("not followed"), "{body}");
            }
            other => panic!("{status}: {other:?}"),
        }
    }
    assert!(elsewhere.seen().is_empty(), "{:?}", elsewhere.seen());
}
