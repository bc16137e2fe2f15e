//! The gateway's limits, on the wire (a raw HTTP/1.1 client, `support/wire.rs`) and at the
//! upstream server (its journal says whether anything reached it): idle sessions end, the
//! sessions, bodies and stream buffers are bounded, a stalled body is not waited for forever,
//! what is not JSON-RPC is refused before it goes upstream, a client that goes away or a SIGTERM
//! cancels the calls in flight.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;
use wire::*;

/// The `tools/call`s server `a` read, once it answered one more (`marker`, in `session`): what
/// the gateway sent it before is in its journal by then.
fn calls_read_by_a(upstreams: &Upstreams, url: &str, session: &str) -> Vec<Value> {
    let marker = tool_call(99_999, "a__echo", json!({"text": "marker"}));
    let answer = post(url, Some(session), &marker).answer();
    assert_eq!(text_of(&answer), "marker", "{answer}");
    let read = upstreams.read_by("a").into_iter();
    read.filter(|m| m["method"] == "tools/call").collect()
}

/// The texts those calls echoed.
fn echoed(calls: &[Value]) -> Vec<&str> {
    let texts = calls
        .iter()
        .map(|m| m["params"]["arguments"]["text"].as_str());
    texts.map(Option::unwrap_or_default).collect()
}

/// A session left idle (its one call's client gone: over 2025-11-25 that is no cancel) is
/// ended after `--session-idle`, not before: its call is cancelled upstream, its id is 404.
#[actix_rt::test]
async fn an_idle_session_is_ended_its_call_cancelled_and_its_id_then_answers_404() {
    let upstreams = Upstreams::new("limits-idle");
    let gateway = listen_with(&upstreams, &["--session-idle", "2"]);
    let session = open_session(&gateway.1);
    let last_asked = Instant::now();
    let sleep = tool_call(2, "a__sleep", json!({"ms": 60_000}));
    let held = open_post(&gateway.1, Some(&session), &sleep);
    let id = upstream_call(&upstreams, "a", "sleep").await;
    drop(held);
    // Nothing touches the session meanwhile: the journal is read, not the gateway.
    let cancelled = cancel_after_request(&upstreams, "a", &id).await;
    let idle = last_asked.elapsed();
    println!("the idle session was ended after {idle:?}: {cancelled}");
    let early = "cancelled before --session-idle 2 (the POST's end is no cancel in 2025-11-25)";
    assert!(
        idle >= Duration::from_secs(2),
        "{early}: {idle:?}, {cancelled}"
    );
    let probe = post(&gateway.1, Some(&session), &request(3, "ping", json!({})));
    assert_eq!(probe.status, 404, "{}", probe.text());
}

/// A session asked something more often than `--session-idle` is not ended.
#[actix_rt::test]
async fn a_session_in_use_outlives_the_idle_limit() {
    let upstreams = Upstreams::new("limits-in-use");
    let gateway = listen_with(&upstreams, &["--session-idle", "2"]);
    let session = open_session(&gateway.1);
    let started = Instant::now();
    let mut id = 10;
    while started.elapsed() < Duration::from_secs(5) {
        id += 1;
        let call = tool_call(id, "b__echo", json!({"text": "still here"}));
        let answered = post(&gateway.1, Some(&session), &call);
        assert_eq!(answered.status, 200, "after {:?}", started.elapsed());
        assert_eq!(text_of(&answered.answer()), "still here");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// `--max-sessions`: an `initialize` beyond it is answered 503 with a JSON-RPC error and no
/// session; the sessions open still serve; one closed makes room for another.
#[actix_rt::test]
async fn an_initialize_beyond_max_sessions_is_answered_503_and_a_closed_one_makes_room() {
    let upstreams = Upstreams::new("limits-max-sessions");
    let gateway = listen_with(&upstreams, &["--max-sessions", "2"]);
    let url = &gateway.1;
    let (first, second) = (open_session(url), open_session(url));
    let refused = initialize(url);
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(
        refused.header("mcp-session-id").is_none(),
        "{}",
        refused.head
    );
    let error: Value = serde_json::from_slice(&refused.body).expect("a JSON body");
    assert_eq!(error["jsonrpc"], "2.0", "{error}");
    assert!(error["error"]["code"].is_i64(), "{error}");
    assert!(error["error"]["message"].is_string(), "{error}");

    let call = tool_call(2, "b__echo", json!({"text": "served"}));
    assert_eq!(text_of(&post(url, Some(&second), &call).answer()), "served");
    let session = [
        ("Mcp-Session-Id", first.as_str()),
        ("MCP-Protocol-Version", LEGACY),
    ];
    let deleted = send(url, "DELETE", &session, b"");
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let again = initialize(url);
    assert_eq!(again.status, 200, "{}", again.text());
    assert!(again.header("mcp-session-id").is_some(), "{}", again.head);
}

/// A GET stream whose reader does not read, while the upstream server floods log messages
/// (~256 MB): the gateway ends it rather than keep what waits for it (`--stream-buffer`,
/// default 4 MiB), its memory stays within 100 MB of before, and the session still serves.
#[actix_rt::test]
async fn a_get_stream_left_unread_under_a_log_flood_is_ended_not_grown() {
    let upstreams = Upstreams::new("limits-flood");
    let gateway = listen(&upstreams);
    let (url, pid) = (&gateway.1, gateway.0.id());
    let session = open_session(url);
    let level = request(2, "logging/setLevel", json!({"level": "debug"}));
    assert!(post(url, Some(&session), &level).answer()["result"].is_object());
    let mut unread = open_stream(url, &session);

    let before = rss(pid);
    let peak = PeakRss::start(pid);
    let flood = tool_call(3, "a__flood", json!({"count": 4000, "size": 65_536}));
    let flooded = post(url, Some(&session), &flood).answer();
    assert_eq!(text_of(&flooded), "flooded 4000", "{flooded}");
    // Only now is the stream read: what the kernel holds, then its end.
    let ended = drain(&mut unread, Duration::from_secs(30));
    let peak = peak.stop();
    println!(
        "RSS before the flood {} MB, at its peak {} MB; the stream gave {ended:?} bytes",
        before / MB,
        peak / MB
    );
    assert!(
        peak < before + 100 * MB,
        "the gateway grew by {} MB",
        (peak - before) / MB
    );
    assert!(ended.is_some(), "the unread stream was not ended");
    let call = tool_call(4, "a__echo", json!({"text": "after the flood"}));
    assert_eq!(
        text_of(&post(url, Some(&session), &call).answer()),
        "after the flood"
    );
}

/// `--body-timeout 1`: a POST whose body stalls (10 bytes of the 1000 it announced) is
/// answered 408 (or its connection closed) soon after a second, and nothing went upstream.
#[actix_rt::test]
async fn a_stalled_body_is_answered_408_soon_after_the_body_timeout() {
    let upstreams = Upstreams::new("limits-stalled");
    let gateway = listen_with(&upstreams, &["--body-timeout", "1"]);
    let session = open_session(&gateway.1);
    let sent = Instant::now();
    let mut stalled = open_stalled(&gateway.1, Some(&session));
    let answered = read_response(&mut stalled, Duration::from_secs(10));
    let took = sent.elapsed();
    println!("the stalled POST ended after {took:?}");
    let answered = answered.expect("answered or closed within 10 s");
    assert!(matches!(answered.status, 408 | 0), "{}", answered.text());
    assert!(took >= Duration::from_secs(1), "not waited for: {took:?}");
    let calls = calls_read_by_a(&upstreams, &gateway.1, &session);
    assert_eq!(echoed(&calls), ["marker"]);
}

/// `--body-timeout 1`: 200 stalled POSTs do not keep a new client's `initialize` waiting, and
/// each of them is answered 408 or closed.
#[actix_rt::test]
async fn many_stalled_bodies_do_not_keep_a_new_client_waiting() {
    let upstreams = Upstreams::new("limits-stalled-many");
    let gateway = listen_with(&upstreams, &["--body-timeout", "1"]);
    let mut stalled: Vec<_> = (0..200).map(|_| open_stalled(&gateway.1, None)).collect();
    let started = Instant::now();
    let fresh = initialize(&gateway.1);
    let took = started.elapsed();
    println!("a new initialize behind 200 stalled POSTs took {took:?}");
    assert_eq!(fresh.status, 200, "{}", fresh.text());
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    for (n, stream) in stalled.iter_mut().enumerate() {
        let answered = read_response(stream, Duration::from_secs(20));
        let status = answered.map(|r| r.status);
        assert!(
            matches!(status, Some(408 | 0)),
            "stalled POST {n}: {status:?}"
        );
    }
}

/// The default `--max-body` (16 MiB) takes a 4 MiB argument (it reaches the server and its
/// echo comes back whole) and refuses 17 MiB: 413, naming `--max-body`, nothing upstream.
#[actix_rt::test]
async fn the_default_max_body_takes_four_mib_and_refuses_seventeen() {
    let upstreams = Upstreams::new("limits-body-default");
    let gateway = listen(&upstreams);
    let session = open_session(&gateway.1);
    let text = "0123456789abcdef".repeat(4 << 16);
    let call = tool_call(2, "a__echo", json!({ "text": text }));
    let answered = post(&gateway.1, Some(&session), &call);
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert!(text_of(&answered.answer()) == text, "not echoed whole");

    refused_over_max_body(&gateway.1, &session, 17 << 20);
    let calls = calls_read_by_a(&upstreams, &gateway.1, &session);
    assert_eq!(calls.len(), 2, "the 4 MiB call and the marker only");
}

/// `--max-body 1048576`: a 2 MiB body is refused 413, naming `--max-body`, nothing upstream.
#[actix_rt::test]
async fn a_body_over_max_body_is_refused_413_naming_the_option_before_upstream() {
    let upstreams = Upstreams::new("limits-body");
    let gateway = listen_with(&upstreams, &["--max-body", "1048576"]);
    let session = open_session(&gateway.1);
    refused_over_max_body(&gateway.1, &session, 2 << 20);
    let calls = calls_read_by_a(&upstreams, &gateway.1, &session);
    assert_eq!(echoed(&calls), ["marker"]);
}

/// A `tools/call` of `a__echo` of about `bytes`, POSTed in `session`: refused 413, naming the
/// option.
fn refused_over_max_body(url: &str, session: &str, bytes: usize) {
    let call = tool_call(3, "a__echo", json!({ "text": "y".repeat(bytes) }));
    let refused = post_oversized(url, Some(session), call.to_string().as_bytes());
    assert_eq!(refused.status, 413, "{}", refused.text());
    let said = String::from_utf8_lossy(&refused.body);
    assert!(said.contains("--max-body"), "{}", refused.text());
}

/// A POST to `/mcp` not of JSON (`text/plain`, a form, no `Content-Type`) is refused 415 and
/// goes nowhere; `application/json` with a charset is JSON.
#[actix_rt::test]
async fn a_post_not_of_json_is_refused_415_before_upstream() {
    let upstreams = Upstreams::new("limits-content-type");
    let gateway = listen(&upstreams);
    let session = open_session(&gateway.1);
    let send_as = |content_type: Option<&str>, text: &str| {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", LEGACY),
        ];
        headers.extend(content_type.map(|t| ("Content-Type", t)));
        let call = tool_call(2, "a__echo", json!({ "text": text }));
        send(&gateway.1, "POST", &headers, call.to_string().as_bytes())
    };
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let refused = send_as(content_type, "refused");
        assert_eq!(refused.status, 415, "{content_type:?}: {}", refused.text());
    }
    let charset = send_as(Some("application/json; charset=utf-8"), "charset");
    assert_eq!(text_of(&charset.answer()), "charset", "{}", charset.text());
    let calls = calls_read_by_a(&upstreams, &gateway.1, &session);
    assert_eq!(echoed(&calls), ["charset", "marker"]);
}

/// A request whose `id` is an object or an array (in a session, or of 2026-07-28) is answered
/// with JSON-RPC's -32600 and a null id, and never executed.
#[actix_rt::test]
async fn a_request_whose_id_is_an_object_or_an_array_is_refused_unexecuted() {
    let upstreams = Upstreams::new("limits-id");
    let gateway = listen(&upstreams);
    let session = open_session(&gateway.1);
    for id in [json!({"n": 1}), json!([1])] {
        let call = tool_call(id.clone(), "a__echo", json!({"text": "never"}));
        let answers = [
            post(&gateway.1, Some(&session), &call),
            post_modern(&gateway.1, &modern(call.clone())),
        ];
        for answer in answers {
            let error = answer.answer();
            assert_eq!(error["error"]["code"], -32600, "{id}: {}", answer.text());
            assert_eq!(error["id"], Value::Null, "{id}: {error}");
        }
    }
    let calls = calls_read_by_a(&upstreams, &gateway.1, &session);
    assert_eq!(echoed(&calls), ["marker"]);
}

/// 2026-07-28: `server/discover` says how long its answer may be kept and by whom (`ttlMs`,
/// `cacheScope`), and that it is complete.
#[actix_rt::test]
async fn server_discover_carries_its_cache_hints_and_result_type() {
    let upstreams = Upstreams::new("limits-discover");
    let gateway = listen(&upstreams);
    let discover = modern(request(1, "server/discover", json!({})));
    let response = post_modern(&gateway.1, &discover);
    assert_eq!(response.status, 200, "{}", response.text());
    let result = &response.answer()["result"];
    assert!(result["ttlMs"].is_u64(), "{result}");
    let scope = result["cacheScope"].as_str();
    assert!(matches!(scope, Some("public" | "private")), "{result}");
    assert_eq!(result["resultType"], "complete", "{result}");
    let versions = result["supportedVersions"].as_array();
    assert!(
        versions.is_some_and(|v| v.contains(&json!(MODERN))),
        "{result}"
    );
}

/// A 2026-07-28 `a__sleep` (its `_meta` with `extra`), its connection dropped once server `a`
/// read it: the cancel server `a` read, after the call.
async fn an_abandoned_stateless_sleep(name: &str, extra: Value) -> Value {
    let upstreams = Upstreams::new(name);
    let gateway = listen(&upstreams);
    let mut call = modern(tool_call(1, "a__sleep", json!({"ms": 60_000})));
    if let (Some(meta), Some(extra)) = (call["params"]["_meta"].as_object_mut(), extra.as_object())
    {
        meta.extend(extra.clone());
    }
    let held = open_modern(&gateway.1, &call);
    let id = upstream_call(&upstreams, "a", "sleep").await;
    let _ = held.shutdown(std::net::Shutdown::Both);
    drop(held);
    cancel_after_request(&upstreams, "a", &id).await
}

/// A 2026-07-28 call that asked for logs (its answer an event stream) whose client goes away is
/// cancelled upstream.
#[actix_rt::test]
async fn a_stateless_call_asking_for_logs_is_cancelled_upstream_when_its_client_goes_away() {
    let level = json!({"io.modelcontextprotocol/logLevel": "info"});
    let cancelled = an_abandoned_stateless_sleep("limits-gone-logs", level).await;
    println!("{cancelled}");
}

/// The control: the same call without `logLevel` (its answer JSON).
#[actix_rt::test]
async fn a_stateless_call_is_cancelled_upstream_when_its_client_goes_away() {
    let cancelled = an_abandoned_stateless_sleep("limits-gone", json!({})).await;
    println!("{cancelled}");
}

/// SIGTERM, with a session whose GET stream is open (never closed) and a call in flight: the
/// gateway ends within a second (asserted: 3 s) and the call is cancelled upstream.
#[actix_rt::test]
async fn sigterm_ends_the_gateway_promptly_and_cancels_the_calls_in_flight() {
    let upstreams = Upstreams::new("limits-sigterm");
    let mut gateway = listen(&upstreams);
    let url = gateway.1.clone();
    let session = open_session(&url);
    let _stream = open_stream(&url, &session);
    let sleep = tool_call(2, "a__sleep", json!({"ms": 60_000}));
    let _held = open_post(&url, Some(&session), &sleep);
    let id = upstream_call(&upstreams, "a", "sleep").await;

    let signalled = Instant::now();
    let pid = gateway.0.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -TERM {pid}");
    let ended = until("the gateway ending", || gateway.0.try_wait().ok().flatten()).await;
    let took = signalled.elapsed();
    println!("SIGTERM ended the gateway ({ended}) after {took:?}");
    // Reaped: nothing is left for `Listening` to interrupt (its pid may be another's now).
    std::mem::forget(gateway);
    assert!(took < Duration::from_secs(3), "ended after {took:?}");
    cancel_after_request(&upstreams, "a", &id).await;
}

/// `--session-idle 2`: 2,000 sessions opened (16 at a time) and abandoned expire (the first and
/// the last are 404), and their memory is the gateway's again: 2,000 more take it, not as much
/// again. (Freed memory stays the process's, so RSS is not expected to fall back: reuse is.)
#[actix_rt::test]
async fn two_thousand_abandoned_sessions_expire_and_their_memory_is_reused() {
    let upstreams = Upstreams::new("limits-abandoned");
    let gateway = listen_with(&upstreams, &["--session-idle", "2"]);
    let (url, pid) = (gateway.1.clone(), gateway.0.id());
    // The first session makes what every session shares; it is not counted.
    let warm = open_session(&url);
    let before = rss(pid);
    let ids = open_sessions(&url, 2_000, 16);
    let first = rss(pid);
    // The sessions' own time (idle, and the gateway's sweep): a probe meanwhile would be
    // activity, so nothing looks at them until then.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let expired = rss(pid);
    for session in [&warm, &ids[0], &ids[ids.len() - 1]] {
        let probe = post(&url, Some(session), &request(9, "ping", json!({})));
        assert_eq!(probe.status, 404, "{session}: {}", probe.text());
    }
    let more = open_sessions(&url, 2_000, 16);
    let second = rss(pid);
    println!(
        "RSS before {} MB, with 2,000 sessions {} MB, after their expiry {} MB, with 2,000 \
         more {} MB",
        before / MB,
        first / MB,
        expired / MB,
        second / MB
    );
    let grown = first.saturating_sub(before);
    let again = second.saturating_sub(first);
    assert!(
        again < (grown / 2).max(4 * MB),
        "the first 2,000 took {} KB, the next {} KB more",
        grown / 1024,
        again / 1024
    );
    assert_eq!(more.len(), 2_000);
}

/// Opens `count` sessions, `at_once` at a time, never closed: their ids, in the order asked.
fn open_sessions(url: &str, count: usize, at_once: usize) -> Vec<String> {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let openers: Vec<_> = (0..at_once)
        .map(|_| {
            let (url, next) = (url.to_owned(), next.clone());
            std::thread::spawn(move || {
                let mut opened = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= count {
                        return opened;
                    }
                    let response = initialize(&url);
                    assert_eq!(response.status, 200, "session {n}: {}", response.text());
                    let id = response.header("mcp-session-id").expect("a session id");
                    opened.push((n, id.to_owned()));
                }
            })
        })
        .collect();
    let mut ids: Vec<(usize, String)> = openers
        .into_iter()
        .flat_map(|opener| opener.join().expect("opened"))
        .collect();
    ids.sort();
    ids.into_iter().map(|(_, id)| id).collect()
}
