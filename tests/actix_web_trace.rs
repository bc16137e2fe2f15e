//! The actix-web example as a deployment runs it: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, one
//! HTTP request that carries a `traceparent` is one trace: the request's SERVER span, a child of
//! that `traceparent`, and inside it the MCP call's CLIENT span (`tools/call echo`), exported
//! over OTLP/HTTP to a receiver of the test's own before the service exits.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

#[path = "common/otlp.rs"]
#[allow(dead_code, reason = "the metrics' half is the CLI test's")]
mod otlp;

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The example's binary, next to this test's (`<target>/<profile>/examples/`), built first
/// (a no-op when `cargo test` built it already).
fn example() -> PathBuf {
    let deps = std::env::current_exe().expect("our path");
    let profile = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("<target>/<profile>");
    let binary = profile.join(format!(
        "examples/actix_web{}",
        std::env::consts::EXE_SUFFIX
    ));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args([
        "build",
        "--quiet",
        "--all-features",
        "--example",
        "actix_web",
    ]);
    if profile.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "cannot build the example");
    binary
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `GET path` with `headers`; the response's body.
fn get(port: u16, path: &str, headers: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n"
    )
    .expect("sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn one_http_request_is_one_trace_through_the_mcp_call() {
    let receiver = otlp::Receiver::start();
    let port = free_port();
    let mut service = Service(
        Command::new(example())
            .env("PORT", port.to_string())
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
            .stdout(Stdio::null())
            .spawn()
            .expect("the example starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the example never listened");
        assert!(
            service.0.try_wait().expect("status").is_none(),
            "the example exited"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let traceparent = format!("traceparent: 00-{CALLER_TRACE}-{CALLER_SPAN}-01\r\n");
    let response = get(port, "/echo?text=hi", &traceparent);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hi"), "{response}");

    // Ctrl-C: actix-web stops gracefully, and the example exports what is left.
    let pid = service.0.id().to_string();
    let status = Command::new("kill").args(["-INT", &pid]).status();
    assert!(status.is_ok_and(|s| s.success()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while service.0.try_wait().expect("status").is_none() {
        assert!(Instant::now() < deadline, "the example did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }

    let spans = receiver.spans();
    let find = |name: &str| {
        spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
    };
    let request = find("GET /echo");
    let call = find("tools/call echo");
    assert_eq!(hex(&request.trace_id), CALLER_TRACE);
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN);
    assert_eq!(hex(&call.trace_id), CALLER_TRACE);
    assert_eq!(call.parent_span_id, request.span_id, "{call:#?}");
    // OTLP's kinds: 2 is SERVER, 3 is CLIENT.
    assert_eq!((request.kind, call.kind), (2, 3));
    assert_eq!(
        otlp::string(&call.attributes, "gen_ai.tool.name").as_deref(),
        Some("echo")
    );
}
