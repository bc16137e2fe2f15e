//! A raw HTTP/1.1 client of the gateway's `/mcp`, for tests that need what a client library
//! hides: a body that stalls, a connection dropped mid-call, a stream left unread, headers of
//! their own. Every request says `Connection: close`, so a response ends with its connection.
//! Also the gateway's resident memory, from `/proc`.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::{
    io::{ErrorKind, Read, Write},
    net::TcpStream,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use serde_json::{json, Value};

/// The version of the session era, and that of the stateless one.
pub const LEGACY: &str = "2025-11-25";
pub const MODERN: &str = "2026-07-28";

/// How long a test waits for a response it expects (a bound on a hang, not a timing).
pub const ANSWER_BOUND: Duration = Duration::from_secs(60);

/// `host:port` of the gateway at `url` (its `/mcp` URL).
pub fn authority(url: &str) -> &str {
    let rest = url.trim_start_matches("http://");
    rest.split('/').next().expect("an authority")
}

/// A response: status (0: the connection closed without one), head and body (de-chunked).
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    /// The body as text, cut to `n` characters: for failure messages.
    pub fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let cut: String = text.chars().take(600).collect();
        format!(
            "{} | {cut}",
            self.head.lines().next().unwrap_or("(no response)")
        )
    }

    /// The JSON-RPC messages of the body: one JSON message, or an event stream's `data` lines.
    pub fn messages(&self) -> Vec<Value> {
        if let Ok(message) = serde_json::from_slice::<Value>(&self.body) {
            return vec![message];
        }
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim_start()).ok())
            .collect()
    }

    /// The answer among them (a message with an id and no method).
    pub fn answer(&self) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("id").is_some() && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no JSON-RPC answer: {}", self.text()))
    }
}

/// The first text of a `tools/call` answer.
pub fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// Connects and writes a request: `headers`, and `Content-Length` of `body` unless `headers`
/// name one. The connection, to be read (or dropped) later.
pub fn open(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> TcpStream {
    let host = authority(url);
    let path = url.trim_start_matches("http://").trim_start_matches(host);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let sized = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-length"));
    if !sized && (method == "POST" || !body.is_empty()) {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut stream = TcpStream::connect(host).expect("connects");
    let _ = stream.set_nodelay(true);
    stream.write_all(head.as_bytes()).expect("head sent");
    stream.write_all(body).expect("body sent");
    stream
}

/// Reads a response to its end (the connection's), for at most `within`: none if it had not
/// ended by then. A connection reset ends it too.
pub fn read_response(stream: &mut TcpStream, within: Duration) -> Option<Response> {
    let deadline = Instant::now() + within;
    let mut bytes = Vec::new();
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("a timeout");
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Some(parse(&bytes))
}

fn parse(bytes: &[u8]) -> Response {
    let split = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    let Some(split) = split else {
        let head = String::from_utf8_lossy(bytes).into_owned();
        return Response {
            status: 0,
            head,
            body: Vec::new(),
        };
    };
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    let mut response = Response {
        status: status.unwrap_or(0),
        head,
        body: bytes[split + 4..].to_vec(),
    };
    if response
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        response.body = dechunk(&response.body);
    }
    response
}

/// A chunked body's data (as much of it as there is).
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..end])
            .ok()
            .and_then(|line| usize::from_str_radix(line.split(';').next()?.trim(), 16).ok());
        let Some(size) = size.filter(|size| *size > 0) else {
            break;
        };
        let data = &rest[end + 2..];
        body.extend_from_slice(&data[..size.min(data.len())]);
        rest = data.get(size + 2..).unwrap_or_default();
    }
    body
}

/// A whole request and its response (failing the test if none came within [`ANSWER_BOUND`]).
pub fn send(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut stream = open(url, method, headers, body);
    read_response(&mut stream, ANSWER_BOUND).expect("a response")
}

/// The headers of a JSON-RPC POST (in `session`, if any).
fn post_headers(session: Option<&str>) -> Vec<(&str, &str)> {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(session) = session {
        headers.extend([
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", LEGACY),
        ]);
    }
    headers
}

/// Writes `message` as a POST (in `session`, if any) and leaves it to be read or dropped.
pub fn open_post(url: &str, session: Option<&str>, message: &Value) -> TcpStream {
    let body = message.to_string();
    open(url, "POST", &post_headers(session), body.as_bytes())
}

/// POSTs `message` (in `session`, if any): the response.
pub fn post(url: &str, session: Option<&str>, message: &Value) -> Response {
    let mut stream = open_post(url, session, message);
    read_response(&mut stream, ANSWER_BOUND).expect("a response")
}

pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

pub fn tool_call(id: impl Into<Value>, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

/// A 2025-11-25 `initialize`: the response (its session id in `Mcp-Session-Id`).
pub fn initialize(url: &str) -> Response {
    let params = json!({"protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "wire", "version": "1"}});
    post(url, None, &request(1, "initialize", params))
}

/// A 2025-11-25 session, initialized: its id.
pub fn open_session(url: &str) -> String {
    let response = initialize(url);
    assert_eq!(response.status, 200, "initialize: {}", response.text());
    let session = response.header("mcp-session-id").expect("a session id");
    let session = session.to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let told = post(url, Some(&session), &initialized);
    assert_eq!(told.status, 202, "initialized: {}", told.text());
    session
}

/// Opens `session`'s GET stream and reads its head (then the gateway has it): the connection,
/// to be read or left unread.
pub fn open_stream(url: &str, session: &str) -> TcpStream {
    let headers = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", LEGACY),
    ];
    let mut stream = open(url, "GET", &headers, b"");
    let mut head = Vec::new();
    let mut byte = [0; 1];
    stream.set_read_timeout(Some(ANSWER_BOUND)).unwrap();
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).expect("the stream's head"), 1);
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "the GET stream: {head}");
    stream
}

/// Reads and drops what comes on `stream` until the connection ends, for at most `within`: how
/// many bytes came, or none if it had not ended by then.
pub fn drain(stream: &mut TcpStream, within: Duration) -> Option<usize> {
    let deadline = Instant::now() + within;
    let mut buffer = vec![0; 256 * 1024];
    let mut total = 0;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return Some(total),
            Ok(n) => total += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Some(total),
        }
    }
}

/// A 2026-07-28 request: `message` with the envelope that era asks for in its `_meta`.
pub fn modern(mut message: Value) -> Value {
    let meta = &mut message["params"]["_meta"];
    meta["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    message
}

/// The headers a 2026-07-28 POST of `message` carries (SEP-2243: they repeat the body).
pub fn modern_headers(message: &Value) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", MODERN.to_owned()),
        (
            "Mcp-Method",
            message["method"].as_str().unwrap_or_default().into(),
        ),
    ];
    let name = match message["method"].as_str() {
        Some("tools/call" | "prompts/get") => message["params"]["name"].as_str(),
        Some("resources/read") => message["params"]["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    headers
}

/// Writes a 2026-07-28 `message` (no session) and leaves it to be read or dropped.
pub fn open_modern(url: &str, message: &Value) -> TcpStream {
    let headers = modern_headers(message);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    open(url, "POST", &headers, message.to_string().as_bytes())
}

/// POSTs a 2026-07-28 `message` (no session): the response.
pub fn post_modern(url: &str, message: &Value) -> Response {
    let mut stream = open_modern(url, message);
    read_response(&mut stream, ANSWER_BOUND).expect("a response")
}

/// The resident memory of process `pid` (`VmRSS`), in bytes.
pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .expect("VmRSS");
    kib * 1024
}

pub const MB: u64 = 1024 * 1024;

/// The highest resident memory of process `pid` seen from now until [`stop`](Self::stop).
pub struct PeakRss {
    stop: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<u64>,
}

impl PeakRss {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak = rss(pid);
            while !stopped.load(Ordering::Relaxed) {
                peak = peak.max(rss(pid));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak.max(rss(pid))
        });
        Self { stop, sampler }
    }

    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.join().expect("the sampler")
    }
}

/// A POST (in `session`, if any) that says its body is 1000 bytes and sends 10 of them.
pub fn open_stalled(url: &str, session: Option<&str>) -> TcpStream {
    let mut headers = post_headers(session);
    headers.push(("Content-Length", "1000"));
    open(url, "POST", &headers, br#"{"jsonrpc""#)
}

/// POSTs `body` (in `session`, if any), too big to be taken: its head first, the body only if
/// no response came within 3 s (so a refusal made on `Content-Length` alone is not lost to the
/// reset a close with unread data brings).
pub fn post_oversized(url: &str, session: Option<&str>, body: &[u8]) -> Response {
    let mut headers = post_headers(session);
    let length = body.len().to_string();
    headers.push(("Content-Length", &length));
    let mut stream = open(url, "POST", &headers, b"");
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut first = [0; 1];
    let early = matches!(stream.peek(&mut first), Ok(n) if n > 0);
    if !early {
        // Written in pieces; the gateway may refuse (and close) before the last.
        for piece in body.chunks(64 * 1024) {
            if stream.write_all(piece).is_err() {
                break;
            }
        }
    }
    read_response(&mut stream, ANSWER_BOUND).expect("a response")
}
