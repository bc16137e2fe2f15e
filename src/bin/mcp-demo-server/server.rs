//! A small, fast MCP server speaking newline-delimited JSON-RPC 2.0 over stdio.
//!
//! It is the real child process behind the library's integration tests, demo and
//! benchmark. It deliberately shares no code with the library, so a protocol bug in the
//! library cannot be hidden by the same bug on this side.
//!
//! Design:
//! - one reader task parses stdin line by line and never waits for a handler: instant
//!   requests are answered inline, anything that sleeps runs in its own local task;
//! - one writer owns stdout and writes every line queued so far as one batch;
//! - all protocol work runs on one thread (`current_thread` runtime + `LocalSet`), so
//!   state is a plain `RefCell` behind an `Rc`, with no locks.
//!
//! Besides tools it serves small fixed resources (`demo://...`), two prompts, completions
//! and logging, with `*/list` pagination shaped by `--page-size` / `--cursor-mode` so a
//! client's cursor handling (cycles, endless cursors) can be tested.
//!
//! tokio's `io-std` feature is not enabled for this crate, so the blocking stdio calls
//! live on two plain OS threads: one reads raw stdin chunks into a small bounded channel
//! (a paused reader therefore backs the pipe up, as with direct reads), the other is the
//! writer. Both threads only move bytes; all parsing and state stay on the runtime.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use futures::future::{FutureExt as _, LocalBoxFuture};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{spawn_local, AbortHandle, LocalSet};
use tokio::time::Instant;

const SERVER_NAME: &str = "actix-mcp-demo-server";
const SERVER_VERSION: &str = "0.1.0";
const INSTRUCTIONS: &str = "Demo server for actix-mcp: echo, add, sleep and test tools.";
/// Versions echoed back when the client asks for them; anything else gets the latest.
const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const LATEST_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";

const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
const SIGTERM_POLL: Duration = Duration::from_millis(20);
/// Upper bound for `big` / `flood` output, so a typo cannot make the server abort on OOM.
const MAX_PAYLOAD: usize = 1 << 30;
/// How much of a bad input line is echoed to stderr.
const LOG_SNIPPET: usize = 200;
/// Size of one raw stdin read.
const STDIN_CHUNK: usize = 64 * 1024;
/// Raw stdin chunks allowed in flight between the stdin thread and the reader task.
const STDIN_CHUNKS_IN_FLIGHT: usize = 2;

const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
/// MCP: `resources/read` of a uri the server does not have.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// RFC 5424 severities, least severe first (the order `logging/setLevel` compares in).
const LOG_LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];
/// Index in `LOG_LEVELS` of the level in force before any `logging/setLevel`.
const DEFAULT_LOG_LEVEL: usize = 1;
/// How long `ask_client_then_cancel` still waits for a response after its cancel.
const CANCEL_GRACE: Duration = Duration::from_millis(500);
/// Upper bound for the `progress` tool's `steps`.
const MAX_PROGRESS_STEPS: u64 = 1_000_000;
/// The cursor every page carries in `--cursor-mode repeat`.
const REPEAT_CURSOR: &str = "same-cursor";

/// Lines written by the `garbage` tool: not JSON, not objects, not JSON-RPC, a response
/// nobody asked for, and finally a valid notification to prove the stream is still in sync.
const GARBAGE: &str = concat!(
    "this is not json\n",
    "[1,2,3]\n",
    "{\"jsonrpc\":\"2.0\"}\n",
    "{\"hello\":\"world\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":987654321,\"result\":{}}\n",
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",",
    "\"params\":{\"level\":\"info\",\"data\":\"between\"}}\n",
);

#[cfg(feature = "http")]
#[path = "http.rs"]
mod http;

// ---------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
    Dual,
}

/// Demo MCP server for actix-mcp (newline-delimited JSON-RPC over stdio).
#[derive(Parser, Debug)]
#[command(name = "mcp-demo-server", version)]
struct Cli {
    /// Append every stdin line, verbatim, to this file (plus `#EOF` / `#SIGTERM` markers).
    #[arg(long, value_name = "PATH")]
    journal: Option<PathBuf>,

    /// Answer `initialize` with this protocol version, whatever the client asked for.
    #[arg(long, value_name = "V")]
    protocol_version: Option<String>,

    /// Delay the `initialize` response by this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    initialize_delay_ms: u64,

    /// Answer `initialize` with a JSON-RPC error.
    #[arg(long)]
    fail_initialize: bool,

    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:0) instead of stdio; the bound port
    /// is printed to stderr as `LISTENING <port>`.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,

    /// Which protocol eras to speak: `legacy` (the handshake; `server/discover` is unknown),
    /// `modern` (2026-07-28 only: `server/discover`, and `initialize` is unknown) or `dual`.
    #[arg(long, value_enum, default_value_t = Era::Legacy)]
    era: Era,

    /// Catch SIGTERM, journal it and keep running.
    #[arg(long)]
    ignore_sigterm: bool,

    /// On stdin EOF, journal `#EOF` but keep running until killed.
    #[arg(long)]
    linger_after_eof: bool,

    /// Items per page of `tools/list`, `resources/list`, `resources/templates/list` and
    /// `prompts/list` (0: everything in one page, without `nextCursor`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    page_size: usize,

    /// How `nextCursor` behaves: `normal` pages through the list, `repeat` always
    /// answers `same-cursor` (a cycle), `endless` always answers a fresh cursor.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = CursorMode::Normal)]
    cursor_mode: CursorMode,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum CursorMode {
    /// `nextCursor` = `page:<offset>` while items remain, then none.
    Normal,
    /// Every page, the last one too, has `nextCursor` `same-cursor`, which serves the
    /// second page again and again.
    Repeat,
    /// Every page has a new `nextCursor` (`endless:<k>`) and serves the first page again.
    Endless,
}

/// Parses `args` (program name first, as `std::env::args_os()`) and runs the server
/// until stdin reaches EOF.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // `--help` and `--version` come through here too, with exit code 0.
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    // Installed before anything else so a SIGTERM sent right after spawn is caught.
    if cli.ignore_sigterm {
        install_sigterm_flag();
    }
    let journal = match Journal::create(cli.journal.as_deref()) {
        Ok(journal) => journal,
        Err(err) => {
            eprintln!("mcp-demo-server: cannot create journal: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("mcp-demo-server: cannot build tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let local = LocalSet::new();
    let code = local.block_on(&runtime, run(cli, journal));
    {
        // Abandoned tasks (running sleeps) are dropped inside the runtime context.
        let _guard = runtime.enter();
        drop(local);
    }
    // Nothing blocking should be left in tokio's pool, but never hang on the way out.
    runtime.shutdown_background();
    code
}

async fn run(cli: Cli, journal: Journal) -> ExitCode {
    let journal = Rc::new(journal);
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let threads = spawn_thread("mcp-demo-stdout", move || write_loop(out_rx))
        .and_then(|()| spawn_stdin_reader());
    let stdin = match threads {
        Ok(stdin) => stdin,
        Err(err) => {
            eprintln!("{SERVER_NAME}: cannot start stdio threads: {err}");
            return ExitCode::FAILURE;
        }
    };
    if cli.ignore_sigterm {
        spawn_local(watch_sigterm(Rc::clone(&journal)));
    }
    eprintln!(
        "{SERVER_NAME} {SERVER_VERSION}: ready (pid {})",
        std::process::id()
    );

    let http_addr = cli.http.clone();
    let server = Rc::new(Server {
        #[cfg(feature = "http")]
        http: http_addr.as_ref().and_then(|_| http::routes()),
        cli,
        journal,
        out: out_tx,
        state: RefCell::default(),
        tools: tool_list(),
    });
    if let Some(addr) = http_addr {
        #[cfg(feature = "http")]
        return http::serve(server, &addr).await;
        #[cfg(not(feature = "http"))]
        {
            eprintln!("{SERVER_NAME}: --http {addr}: built without the `http` feature");
            return ExitCode::from(2);
        }
    }
    let code = server.read_loop(stdin).await;

    server.journal.record(b"#EOF");
    // Whatever was answered before EOF must still reach the client.
    server.flush().await;
    if server.cli.linger_after_eof {
        eprintln!("{SERVER_NAME}: stdin closed, lingering (--linger-after-eof)");
        std::future::pending::<()>().await;
    }
    code
}

// ---------------------------------------------------------------------------------------
// Journal and SIGTERM
// ---------------------------------------------------------------------------------------

/// Synchronous, unbuffered record of every input line, so tests can see exactly what the
/// client sent even if the process is killed a moment later.
struct Journal {
    file: Option<File>,
}

impl Journal {
    fn create(path: Option<&Path>) -> io::Result<Self> {
        let file = path.map(File::create).transpose()?;
        Ok(Self { file })
    }

    fn record(&self, line: &[u8]) {
        let Some(file) = &self.file else { return };
        // One write_all per entry keeps an entry in one piece.
        let mut entry = Vec::with_capacity(line.len() + 1);
        entry.extend_from_slice(line);
        entry.push(b'\n');
        if let Err(err) = (&*file).write_all(&entry) {
            eprintln!("{SERVER_NAME}: journal write failed: {err}");
        }
    }
}

static SIGTERM_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_signal: libc::c_int) {
    // Only async-signal-safe work here: the runtime polls the flag.
    SIGTERM_RECEIVED.store(true, Ordering::SeqCst);
}

fn install_sigterm_flag() {
    let handler = on_sigterm as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to a static atomic, which is async-signal-safe.
    let previous = unsafe { libc::signal(libc::SIGTERM, handler as libc::sighandler_t) };
    if previous == libc::SIG_ERR {
        eprintln!(
            "{SERVER_NAME}: cannot install SIGTERM handler: {}",
            io::Error::last_os_error()
        );
    }
}

/// Journals each SIGTERM (signals arriving within one poll period coalesce) and
/// otherwise ignores it.
async fn watch_sigterm(journal: Rc<Journal>) {
    let mut tick = tokio::time::interval(SIGTERM_POLL);
    loop {
        tick.tick().await;
        if SIGTERM_RECEIVED.swap(false, Ordering::SeqCst) {
            eprintln!("{SERVER_NAME}: SIGTERM received and ignored");
            journal.record(b"#SIGTERM");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

enum Outgoing {
    /// One or more complete, newline-terminated JSON lines.
    Line(Vec<u8>),
    /// Acknowledged once everything queued before it has been flushed to stdout.
    Flush(oneshot::Sender<()>),
    /// Flush everything queued before it, then exit the process (the `crash` tool).
    Exit(i32),
}

fn spawn_thread(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map(drop)
}

/// Sole owner of stdout (runs on its own thread): drains whatever is queued into one
/// buffer and writes it with a single `write_all` + `flush`, so a burst of responses
/// costs one write.
fn write_loop(mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    let mut stdout = io::stdout().lock();
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut acks = Vec::new();
    // After a write error (client closed its end) output is discarded, but Flush and
    // Exit are still honoured so nobody waits forever.
    let mut broken = false;

    while let Some(first) = rx.blocking_recv() {
        let mut exit = None;
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outgoing::Line(line) => batch.extend_from_slice(&line),
                Outgoing::Flush(ack) => acks.push(ack),
                Outgoing::Exit(code) => {
                    exit = Some(code);
                    break;
                }
            }
            next = rx.try_recv().ok();
        }

        if !broken && !batch.is_empty() {
            if let Err(err) = stdout.write_all(&batch).and_then(|()| stdout.flush()) {
                eprintln!("{SERVER_NAME}: stdout write failed, discarding output: {err}");
                broken = true;
            }
        }
        batch.clear();
        if batch.capacity() > 8 * 1024 * 1024 {
            // Do not keep a `big`/`flood`-sized buffer around for the rest of the run.
            batch.shrink_to(64 * 1024);
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        if let Some(code) = exit {
            std::process::exit(code);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

type StdinChunk = io::Result<Vec<u8>>;

/// Starts the thread doing the blocking stdin reads. The channel closes at EOF; a read
/// error is forwarded and ends the stream.
fn spawn_stdin_reader() -> io::Result<mpsc::Receiver<StdinChunk>> {
    let (tx, rx) = mpsc::channel(STDIN_CHUNKS_IN_FLIGHT);
    spawn_thread("mcp-demo-stdin", move || {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0; STDIN_CHUNK];
        loop {
            let chunk = match stdin.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => Ok(buf[..n].to_vec()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => Err(err),
            };
            let failed = chunk.is_err();
            // Blocks while the reader task is behind (e.g. `pause_reading`).
            if tx.blocking_send(chunk).is_err() || failed {
                return;
            }
        }
    })?;
    Ok(rx)
}

/// Splits the raw stdin chunks into lines.
struct StdinLines {
    chunks: mpsc::Receiver<StdinChunk>,
    buf: Vec<u8>,
    /// Start of the not yet returned part of `buf`.
    pos: usize,
    /// `buf[pos..scanned]` is known to hold no newline.
    scanned: usize,
    eof: bool,
}

impl StdinLines {
    fn new(chunks: mpsc::Receiver<StdinChunk>) -> Self {
        Self {
            chunks,
            buf: Vec::with_capacity(STDIN_CHUNK),
            pos: 0,
            scanned: 0,
            eof: false,
        }
    }

    /// The next line without its `\n` (a final unterminated line is returned too), or
    /// `None` at EOF.
    async fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if let Some(offset) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let (start, end) = (self.pos, self.scanned + offset);
                self.pos = end + 1;
                self.scanned = self.pos;
                return Ok(Some(&self.buf[start..end]));
            }
            if self.eof {
                if self.pos == self.buf.len() {
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.buf.len();
                self.scanned = self.pos;
                return Ok(Some(&self.buf[start..]));
            }
            // Need more input: drop the consumed prefix, then append the next chunk.
            self.buf.drain(..self.pos);
            self.pos = 0;
            self.scanned = self.buf.len();
            match self.chunks.recv().await {
                Some(Ok(chunk)) if self.buf.is_empty() => self.buf = chunk,
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(err)) => return Err(err),
                None => self.eof = true,
            }
        }
    }
}

#[derive(Serialize)]
struct ResultMsg<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a Value,
}

#[derive(Serialize)]
struct ErrorMsg<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

/// Compact JSON plus the line terminator; empty if serialization fails (it cannot for
/// these types, but a failure must not take the server down).
fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    match serde_json::to_vec(message) {
        Ok(mut line) => {
            line.push(b'\n');
            line
        }
        Err(err) => {
            eprintln!("{SERVER_NAME}: cannot serialize message: {err}");
            Vec::new()
        }
    }
}

fn notification(method: &str, params: Value) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// A notification without `params` (the `list_changed` ones).
fn bare_notification(method: &str) -> Vec<u8> {
    encode(&json!({"jsonrpc": "2.0", "method": method}))
}

// ---------------------------------------------------------------------------------------
// Server state and dispatch
// ---------------------------------------------------------------------------------------

/// A JSON-RPC outcome: a result, or an error code and message.
type Reply = Result<Value, (i64, String)>;

/// What handling a request asks the reader to do.
enum Step {
    /// Answer now (instant handlers).
    Reply(Reply),
    /// Answer from a local task once `task` completes.
    Spawn {
        task: LocalBoxFuture<'static, Reply>,
        cancellable: bool,
    },
    /// Answer now, then stop reading stdin for a while.
    PauseReading(Reply, Duration),
    /// Flush stdout and exit with this code, without answering.
    Crash(i32),
}

/// What the reader does after a line.
enum Control {
    Continue,
    Pause(Duration),
    Halt,
}

#[derive(Default)]
struct Counters {
    requests: u64,
    responses: u64,
    cancels: u64,
    cancels_matched: u64,
    cancels_ahead: u64,
    cancels_unknown: u64,
    late_responses: u64,
    /// Client responses to a server request the server had already cancelled.
    client_responses_after_cancel: u64,
}

/// A request being answered by a spawned task.
struct Running {
    /// `None` for tasks that deliberately ignore cancellation (`late`).
    abort: Option<AbortHandle>,
    /// A cancel named this request (only visible on tasks that keep running).
    cancelled: bool,
}

#[derive(Default)]
struct State {
    counters: Counters,
    /// Keyed by the canonical JSON text of the request id, so `1` and `"1"` differ.
    running: HashMap<String, Running>,
    /// Every request id ever received, to tell "cancel too late" from "cancel too early".
    seen: HashSet<String>,
    /// Ids named by a cancel before any request used them, with the number of such cancels.
    cancelled_unseen: HashMap<String, u64>,
    /// Server-to-client requests (`srv-N`) waiting for the client's response.
    waiters: HashMap<String, oneshot::Sender<Value>>,
    next_srv_id: u64,
    initialized: bool,
    protocol_version: Option<String>,
    /// Server requests given up by `ask_client_then_cancel` (cancel already sent).
    srv_cancelled: HashSet<String>,
    /// Uris named by `resources/subscribe` and not unsubscribed since.
    subscriptions: BTreeSet<String>,
    /// Number of `demo://counter` reads so far.
    counter_reads: u64,
    log_level: LogLevel,
}

/// Index in `LOG_LEVELS` of the minimum level `log` lets through.
#[derive(Clone, Copy)]
struct LogLevel(usize);

impl Default for LogLevel {
    fn default() -> Self {
        Self(DEFAULT_LOG_LEVEL)
    }
}

impl LogLevel {
    fn parse(level: &str) -> Option<Self> {
        LOG_LEVELS
            .iter()
            .position(|known| *known == level)
            .map(Self)
    }

    fn name(self) -> &'static str {
        LOG_LEVELS.get(self.0).copied().unwrap_or("info")
    }
}

struct Server {
    cli: Cli,
    journal: Rc<Journal>,
    out: mpsc::UnboundedSender<Outgoing>,
    /// In HTTP mode: where each open request POST takes its messages (instead of stdout).
    #[cfg(feature = "http")]
    http: Option<RefCell<http::Routes>>,
    state: RefCell<State>,
    /// The `tools/list` result, built once.
    tools: Value,
}

impl Server {
    async fn read_loop(self: &Rc<Self>, stdin: mpsc::Receiver<StdinChunk>) -> ExitCode {
        let mut lines = StdinLines::new(stdin);
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("{SERVER_NAME}: stdin read failed: {err}");
                    return ExitCode::FAILURE;
                }
            };
            // Journal first: the record must exist even if handling the line kills us.
            self.journal.record(line);
            match self.handle_line(line) {
                Control::Continue => {}
                Control::Pause(duration) => tokio::time::sleep(duration).await,
                // The writer is about to exit the process; read nothing more.
                Control::Halt => std::future::pending::<()>().await,
            }
        }
    }

    fn handle_line(self: &Rc<Self>, line: &[u8]) -> Control {
        let message = match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(message)) => message,
            Ok(_) => {
                log_skipped("not a JSON object", line);
                return Control::Continue;
            }
            Err(err) => {
                log_skipped(&format!("invalid JSON ({err})"), line);
                return Control::Continue;
            }
        };
        let mut message = message;
        let id = message.remove("id").filter(|id| !id.is_null());
        match (message.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) => {
                let params = message.remove("params").unwrap_or(Value::Null);
                self.handle_request(id, &method, params)
            }
            (Some(Value::String(method)), None) => {
                self.handle_notification(&method, message.get("params"));
                Control::Continue
            }
            (None, Some(id)) if message.contains_key("result") || message.contains_key("error") => {
                message.insert("id".to_owned(), id);
                self.route_client_response(message);
                Control::Continue
            }
            _ => {
                log_skipped("not a JSON-RPC request, notification or response", line);
                Control::Continue
            }
        }
    }

    fn handle_request(self: &Rc<Self>, id: Value, method: &str, params: Value) -> Control {
        let key = id.to_string();
        let duplicate = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            state.counters.requests += 1;
            let duplicate = state.running.contains_key(&key);
            if !duplicate {
                if let Some(cancels) = state.cancelled_unseen.remove(&key) {
                    // A cancel overtook this request; count it, then serve it normally.
                    state.counters.cancels_ahead += 1;
                    state.counters.cancels_unknown -= cancels;
                }
                state.seen.insert(key.clone());
            }
            duplicate
        };
        if duplicate {
            let message = format!("request id {key} is already in use by a running request");
            self.respond(&id, &Err((INVALID_REQUEST, message)));
            return Control::Continue;
        }

        let step = match method {
            "initialize" if self.cli.era == Era::Modern => Step::Reply(Err((
                METHOD_NOT_FOUND,
                "method not found: initialize (this server speaks 2026-07-28)".to_owned(),
            ))),
            "initialize" => self.initialize(&params),
            "server/discover" if self.cli.era != Era::Legacy => Step::Reply(Ok(self.discover())),
            "ping" => Step::Reply(Ok(json!({}))),
            "tools/list" if self.unpaged(&params) => {
                // Serialized straight from the cache: no clone of the list per call.
                self.respond_result(&id, &self.tools);
                return Control::Continue;
            }
            "tools/list" => {
                let tools = self.tools.get("tools").and_then(Value::as_array);
                Step::Reply(self.paginate("tools", tools.map_or(&[], Vec::as_slice), &params))
            }
            "tools/call" => self.call_tool(params),
            "resources/list" => Step::Reply(self.paginate("resources", &resource_list(), &params)),
            "resources/templates/list" => {
                Step::Reply(self.paginate("resourceTemplates", &resource_template_list(), &params))
            }
            "resources/read" => match self.read_resource(&params) {
                Ok(result) => Step::Reply(Ok(result)),
                Err((code, message, data)) => {
                    self.respond_error(&id, code, &message, data.as_ref());
                    return Control::Continue;
                }
            },
            "resources/subscribe" => Step::Reply(self.subscribe(&params, true)),
            "resources/unsubscribe" => Step::Reply(self.subscribe(&params, false)),
            "prompts/list" => Step::Reply(self.paginate("prompts", &prompt_list(), &params)),
            "prompts/get" => Step::Reply(get_prompt(&params)),
            "completion/complete" => Step::Reply(complete(&params)),
            "logging/setLevel" => Step::Reply(self.set_log_level(&params)),
            _ => Step::Reply(Err((
                METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            ))),
        };

        match step {
            Step::Reply(reply) => {
                self.respond(&id, &reply);
                Control::Continue
            }
            Step::Spawn { task, cancellable } => {
                self.spawn_request(id, key, task, cancellable);
                Control::Continue
            }
            Step::PauseReading(reply, duration) => {
                self.respond(&id, &reply);
                Control::Pause(duration)
            }
            Step::Crash(code) => {
                eprintln!("{SERVER_NAME}: crash requested, exiting with code {code}");
                if self.out.send(Outgoing::Exit(code)).is_err() {
                    std::process::exit(code);
                }
                Control::Halt
            }
        }
    }

    fn handle_notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/initialized" => self.state.borrow_mut().initialized = true,
            "notifications/cancelled" => self.cancel(params),
            // JSON-RPC: unknown notifications are ignored, never answered.
            _ => {}
        }
    }

    fn cancel(&self, params: Option<&Value>) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.counters.cancels += 1;
        let Some(request_id) = params.and_then(|params| params.get("requestId")) else {
            eprintln!("{SERVER_NAME}: notifications/cancelled without requestId");
            return;
        };
        let key = request_id.to_string();
        match state.running.get_mut(&key) {
            Some(task) => {
                state.counters.cancels_matched += 1;
                task.cancelled = true;
                if let Some(abort) = &task.abort {
                    // Dropping the task means no response and no further progress.
                    abort.abort();
                    state.running.remove(&key);
                }
            }
            None if !state.seen.contains(&key) => {
                *state.cancelled_unseen.entry(key).or_insert(0) += 1;
                state.counters.cancels_unknown += 1;
            }
            // Already answered: the cancel lost the race, which is normal.
            None => {}
        }
    }

    /// Hands a client response to the `ping_client` / `ask_client` task waiting for it.
    fn route_client_response(&self, message: Map<String, Value>) {
        let mut after_cancel = false;
        let waiter = match message.get("id") {
            Some(Value::String(id)) if id.starts_with("srv-") => {
                let mut state = self.state.borrow_mut();
                if state.srv_cancelled.contains(id) {
                    state.counters.client_responses_after_cancel += 1;
                    after_cancel = true;
                }
                state.waiters.remove(id)
            }
            _ => None,
        };
        match waiter {
            // A send error only means the waiting task was cancelled meanwhile.
            Some(waiter) => drop(waiter.send(Value::Object(message))),
            None if after_cancel => eprintln!(
                "{SERVER_NAME}: ignoring response to cancelled request {}",
                message.get("id").unwrap_or(&Value::Null)
            ),
            None => eprintln!(
                "{SERVER_NAME}: ignoring response to unknown request {}",
                message.get("id").unwrap_or(&Value::Null)
            ),
        }
    }

    fn spawn_request(
        self: &Rc<Self>,
        id: Value,
        key: String,
        task: LocalBoxFuture<'static, Reply>,
        cancellable: bool,
    ) {
        let server = Rc::clone(self);
        let task_key = key.clone();
        let handle = spawn_local(async move {
            let reply = task.await;
            let finished = server.state.borrow_mut().running.remove(&task_key);
            if finished.is_some_and(|task| task.cancelled) {
                server.state.borrow_mut().counters.late_responses += 1;
            }
            server.respond(&id, &reply);
        });
        // The task cannot run before this insert: it is only polled once the reader yields.
        self.state.borrow_mut().running.insert(
            key,
            Running {
                abort: cancellable.then(|| handle.abort_handle()),
                cancelled: false,
            },
        );
    }

    /// Queues a response (or error) for a client request.
    fn respond(&self, id: &Value, reply: &Reply) {
        match reply {
            Ok(result) => self.respond_result(id, result),
            Err((code, message)) => self.respond_error(id, *code, message, None),
        }
    }

    fn respond_error(&self, id: &Value, code: i64, message: &str, data: Option<&Value>) {
        self.state.borrow_mut().counters.responses += 1;
        self.send(encode(&ErrorMsg {
            jsonrpc: "2.0",
            id,
            error: ErrorBody {
                code,
                message,
                data,
            },
        }));
    }

    fn respond_result(&self, id: &Value, result: &Value) {
        self.state.borrow_mut().counters.responses += 1;
        self.send(encode(&ResultMsg {
            jsonrpc: "2.0",
            id,
            result,
        }));
    }

    /// Queues raw lines for stdout (in HTTP mode: for the POSTs they answer).
    fn send(&self, lines: Vec<u8>) {
        #[cfg(feature = "http")]
        if let Some(routes) = &self.http {
            routes.borrow_mut().route(&lines);
            return;
        }
        // A send error means the writer is gone (stdout closed): nobody can read it anyway.
        if !lines.is_empty() {
            let _ = self.out.send(Outgoing::Line(lines));
        }
    }

    async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.out.send(Outgoing::Flush(ack)).is_ok() {
            let _ = done.await;
        }
    }

    // -----------------------------------------------------------------------------------
    // Methods
    // -----------------------------------------------------------------------------------

    fn initialize(self: &Rc<Self>, params: &Value) -> Step {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = match (&self.cli.protocol_version, requested) {
            (Some(forced), _) => forced.clone(),
            (None, Some(asked)) if SUPPORTED_VERSIONS.contains(&asked) => asked.to_owned(),
            _ => LATEST_VERSION.to_owned(),
        };
        let delay = self.cli.initialize_delay_ms;
        if delay == 0 {
            return Step::Reply(self.finish_initialize(version));
        }
        let server = Rc::clone(self);
        Step::Spawn {
            task: async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                server.finish_initialize(version)
            }
            .boxed_local(),
            cancellable: true,
        }
    }

    fn finish_initialize(&self, version: String) -> Reply {
        if self.cli.fail_initialize {
            return Err((INTERNAL_ERROR, "initialize refused".to_owned()));
        }
        self.state.borrow_mut().protocol_version = Some(version.clone());
        Ok(json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "prompts": {"listChanged": true},
                "logging": {},
                "completions": {},
            },
            "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
            "instructions": INSTRUCTIONS,
        }))
    }

    /// `server/discover` (2026-07-28): what `initialize` says, without a session.
    fn discover(&self) -> Value {
        let mut versions = vec![MODERN_VERSION];
        if self.cli.era == Era::Dual {
            versions.extend_from_slice(SUPPORTED_VERSIONS);
        }
        json!({
            "resultType": "complete",
            "supportedVersions": versions,
            "capabilities": {
                "tools": {},
                "resources": {},
                "prompts": {},
                "completions": {},
            },
            "instructions": INSTRUCTIONS,
            "ttlMs": 60_000,
            "cacheScope": "public",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
            },
        })
    }

    /// Whether a `tools/list` can be served whole from the cache: no paging, no cursor.
    fn unpaged(&self, params: &Value) -> bool {
        self.cli.page_size == 0
            && self.cli.cursor_mode == CursorMode::Normal
            && params.get("cursor").is_none_or(Value::is_null)
    }

    /// One page of a `*/list` result, `{<key>: [...], nextCursor?}`, as selected by
    /// `params.cursor` under `--page-size` and `--cursor-mode`.
    fn paginate(&self, key: &str, items: &[Value], params: &Value) -> Reply {
        let len = items.len();
        let size = match self.cli.page_size {
            0 => len.max(1),
            size => size,
        };
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(other) => {
                return Err((
                    INVALID_PARAMS,
                    format!("`cursor` must be a string, got {other}"),
                ))
            }
        };
        let invalid = |cursor: &str| (INVALID_PARAMS, format!("invalid cursor: {cursor:?}"));
        let (offset, next) = match (self.cli.cursor_mode, cursor) {
            (CursorMode::Normal, None) => (0, None),
            (CursorMode::Normal, Some(cursor)) => {
                // Only offsets this server could have handed out.
                let offset = cursor
                    .strip_prefix("page:")
                    .and_then(|offset| offset.parse::<usize>().ok())
                    .filter(|offset| *offset > 0 && *offset < len && *offset % size == 0)
                    .ok_or_else(|| invalid(cursor))?;
                (offset, None)
            }
            (CursorMode::Repeat, None) => (0, Some(REPEAT_CURSOR.to_owned())),
            (CursorMode::Repeat, Some(REPEAT_CURSOR)) => {
                (size.min(len), Some(REPEAT_CURSOR.to_owned()))
            }
            (CursorMode::Repeat, Some(cursor)) => return Err(invalid(cursor)),
            (CursorMode::Endless, None) => (0, Some("endless:1".to_owned())),
            (CursorMode::Endless, Some(cursor)) => {
                let next = cursor
                    .strip_prefix("endless:")
                    .and_then(|k| k.parse::<u64>().ok())
                    .filter(|k| *k > 0)
                    .and_then(|k| k.checked_add(1))
                    .ok_or_else(|| invalid(cursor))?;
                (0, Some(format!("endless:{next}")))
            }
        };
        let end = offset.saturating_add(size).min(len);
        let next = match self.cli.cursor_mode {
            CursorMode::Normal => (end < len).then(|| format!("page:{end}")),
            CursorMode::Repeat | CursorMode::Endless => next,
        };
        let mut page = Map::new();
        page.insert(key.to_owned(), Value::Array(items[offset..end].to_vec()));
        if let Some(next) = next {
            page.insert("nextCursor".to_owned(), Value::String(next));
        }
        Ok(Value::Object(page))
    }

    /// `resources/read`; the error carries `data` (the uri) for an unknown resource.
    fn read_resource(&self, params: &Value) -> Result<Value, (i64, String, Option<Value>)> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err((
                INVALID_PARAMS,
                "resources/read needs a string `uri`".to_owned(),
                None,
            ));
        };
        let content = if let Some(id) = uri.strip_prefix("demo://text/").filter(|id| !id.is_empty())
        {
            json!({"uri": uri, "mimeType": "text/plain", "text": format!("text {id}")})
        } else if uri == "demo://blob/1" {
            let bytes: Vec<u8> = (0..=255).collect();
            json!({"uri": uri, "mimeType": "application/octet-stream", "blob": base64(&bytes)})
        } else if uri == "demo://counter" {
            let mut state = self.state.borrow_mut();
            state.counter_reads += 1;
            let text = state.counter_reads.to_string();
            json!({"uri": uri, "mimeType": "text/plain", "text": text})
        } else {
            return Err((
                RESOURCE_NOT_FOUND,
                "resource not found".to_owned(),
                Some(json!({"uri": uri})),
            ));
        };
        Ok(json!({"contents": [content]}))
    }

    /// `resources/subscribe` (`subscribe`) or `resources/unsubscribe`. Any uri is accepted.
    fn subscribe(&self, params: &Value, subscribe: bool) -> Reply {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err((INVALID_PARAMS, "a string `uri` is required".to_owned()));
        };
        let mut state = self.state.borrow_mut();
        if subscribe {
            state.subscriptions.insert(uri.to_owned());
        } else {
            state.subscriptions.remove(uri);
        }
        Ok(json!({}))
    }

    fn set_log_level(&self, params: &Value) -> Reply {
        let level = params.get("level");
        let Some(parsed) = level.and_then(Value::as_str).and_then(LogLevel::parse) else {
            return Err((
                INVALID_PARAMS,
                format!(
                    "unknown log level {}, expected one of {}",
                    level.unwrap_or(&Value::Null),
                    LOG_LEVELS.join(", ")
                ),
            ));
        };
        self.state.borrow_mut().log_level = parsed;
        Ok(json!({}))
    }

    fn call_tool(self: &Rc<Self>, params: Value) -> Step {
        let Value::Object(mut params) = params else {
            return Step::Reply(Err((
                INVALID_PARAMS,
                "tools/call params must be an object".to_owned(),
            )));
        };
        let Some(Value::String(name)) = params.remove("name") else {
            return Step::Reply(Err((
                INVALID_PARAMS,
                "tools/call needs a string `name`".to_owned(),
            )));
        };
        let args = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args,
            Some(_) if !is_tool(&name) => Map::new(),
            Some(_) => return Step::Reply(Ok(tool_error("`arguments` must be an object"))),
        };
        let progress_token = params
            .get("_meta")
            .and_then(|meta| meta.get("progressToken"))
            .filter(|token| !token.is_null())
            .cloned();
        match self.run_tool(&name, &args, progress_token) {
            Ok(step) => step,
            // Bad arguments are a tool-level failure, reported to the model, not a protocol error.
            Err(problem) => Step::Reply(Ok(tool_error(&problem))),
        }
    }

    fn run_tool(
        self: &Rc<Self>,
        name: &str,
        args: &Map<String, Value>,
        progress_token: Option<Value>,
    ) -> Result<Step, String> {
        let step = match name {
            "echo" => Step::Reply(Ok(text_result(str_arg(args, "text")?))),
            "add" => {
                let sum = num_arg(args, "a")? + num_arg(args, "b")?;
                Step::Reply(Ok(structured_result(sum.to_string(), json!({"sum": sum}))))
            }
            "sleep" => {
                let ms = u64_arg(args, "ms", None)?;
                Step::Spawn {
                    task: sleep_tool(Rc::clone(self), ms, progress_token).boxed_local(),
                    cancellable: true,
                }
            }
            "late" => {
                let ms = u64_arg(args, "ms", None)?;
                Step::Spawn {
                    task: async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok(text_result(&format!("late {ms}")))
                    }
                    .boxed_local(),
                    // Deliberately answers after a cancel, to exercise the client's filtering.
                    cancellable: false,
                }
            }
            "stats" => {
                let stats = self.stats();
                Step::Reply(Ok(structured_result(stats.to_string(), stats)))
            }
            "pid" => {
                let pid = std::process::id();
                Step::Reply(Ok(structured_result(pid.to_string(), json!({"pid": pid}))))
            }
            "crash" => {
                let code = match args.get("code") {
                    None | Some(Value::Null) => 1,
                    Some(code) => code
                        .as_i64()
                        .and_then(|code| i32::try_from(code).ok())
                        .ok_or_else(|| format!("argument `code` must be an i32, got {code}"))?,
                };
                Step::Crash(code)
            }
            "flood" => {
                let count = u64_arg(args, "count", None)?;
                let size = size_arg(args, "size", Some(0))?;
                self.flood(count, size)?;
                Step::Reply(Ok(text_result(&format!("flooded {count}"))))
            }
            "big" => {
                let bytes = size_arg(args, "bytes", None)?;
                Step::Reply(Ok(text_result(&"x".repeat(bytes))))
            }
            "garbage" => {
                self.send(GARBAGE.as_bytes().to_vec());
                Step::Reply(Ok(text_result("garbage sent")))
            }
            "stderr" => {
                let text = str_arg(args, "text")?;
                let lines = u64_arg(args, "lines", Some(1))?;
                let mut stderr = io::stderr().lock();
                for _ in 0..lines {
                    let _ = writeln!(stderr, "{text}");
                }
                let _ = stderr.flush();
                Step::Reply(Ok(text_result(&format!("wrote {lines}"))))
            }
            "ping_client" => Step::Spawn {
                task: ask_client(Rc::clone(self), "ping".to_owned(), None).boxed_local(),
                cancellable: true,
            },
            "ask_client" => {
                let method = str_arg(args, "method")?.to_owned();
                let params = args.get("params").filter(|p| !p.is_null()).cloned();
                Step::Spawn {
                    task: ask_client(Rc::clone(self), method, params).boxed_local(),
                    cancellable: true,
                }
            }
            "cancel_foreign" => {
                let request_id = match args.get("request_id") {
                    Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
                    _ => return Err("argument `request_id` must be a number or a string".into()),
                };
                self.send(notification(
                    "notifications/cancelled",
                    json!({"requestId": request_id, "reason": "foreign"}),
                ));
                Step::Reply(Ok(text_result("sent")))
            }
            "pause_reading" => {
                let ms = u64_arg(args, "ms", None)?;
                Step::PauseReading(Ok(text_result("paused")), Duration::from_millis(ms))
            }
            "env" => {
                let name = str_arg(args, "name")?;
                // std may panic on such names; they can never be set anyway.
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(format!("invalid environment variable name: {name:?}"));
                }
                let value = std::env::var_os(name)
                    .map(|value| value.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Step::Reply(Ok(text_result(&value)))
            }
            "cwd" => {
                let cwd = std::env::current_dir()
                    .map_err(|err| format!("cannot read current directory: {err}"))?;
                Step::Reply(Ok(text_result(&cwd.display().to_string())))
            }
            "log" => {
                let level = str_arg(args, "level")?;
                let message = str_arg(args, "message")?;
                let parsed = LogLevel::parse(level).ok_or_else(|| {
                    format!(
                        "unknown log level {level:?}, expected one of {}",
                        LOG_LEVELS.join(", ")
                    )
                })?;
                let threshold = self.state.borrow().log_level;
                let outcome = if parsed.0 >= threshold.0 {
                    self.send(notification(
                        "notifications/message",
                        json!({"level": level, "logger": "demo", "data": message}),
                    ));
                    "logged"
                } else {
                    "filtered"
                };
                Step::Reply(Ok(text_result(outcome)))
            }
            "notify" => {
                let outcome = match str_arg(args, "kind")? {
                    kind @ ("tools" | "prompts" | "resources") => {
                        self.send(bare_notification(&format!(
                            "notifications/{kind}/list_changed"
                        )));
                        "sent"
                    }
                    "updated" => {
                        let uri = str_arg(args, "uri")?;
                        if self.state.borrow().subscriptions.contains(uri) {
                            self.send(notification(
                                "notifications/resources/updated",
                                json!({"uri": uri}),
                            ));
                            "sent"
                        } else {
                            "not subscribed"
                        }
                    }
                    kind => {
                        return Err(format!(
                            "unknown kind {kind:?}, expected tools, prompts, resources or updated"
                        ))
                    }
                };
                Step::Reply(Ok(text_result(outcome)))
            }
            "progress" => {
                let steps = u64_arg(args, "steps", None)?;
                if steps > MAX_PROGRESS_STEPS {
                    return Err(format!(
                        "argument `steps` must be at most {MAX_PROGRESS_STEPS}, got {steps}"
                    ));
                }
                let interval_ms = u64_arg(args, "interval_ms", None)?;
                let with_total = match args.get("total") {
                    None | Some(Value::Null) => true,
                    Some(Value::Bool(with_total)) => *with_total,
                    Some(other) => {
                        return Err(format!("argument `total` must be a boolean, got {other}"))
                    }
                };
                let task = progress_tool(
                    Rc::clone(self),
                    steps,
                    interval_ms,
                    with_total,
                    progress_token,
                );
                Step::Spawn {
                    task: task.boxed_local(),
                    cancellable: true,
                }
            }
            "ask_client_then_cancel" => {
                let method = str_arg(args, "method")?.to_owned();
                let params = args.get("params").filter(|p| !p.is_null()).cloned();
                let after_ms = u64_arg(args, "after_ms", None)?;
                let task = ask_client_then_cancel(Rc::clone(self), method, params, after_ms);
                Step::Spawn {
                    task: task.boxed_local(),
                    cancellable: true,
                }
            }
            "sample" => {
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    "maxTokens": 10,
                });
                let task = ask_client(
                    Rc::clone(self),
                    "sampling/createMessage".to_owned(),
                    Some(params),
                );
                Step::Spawn {
                    task: task.boxed_local(),
                    cancellable: true,
                }
            }
            _ => Step::Reply(Err((INVALID_PARAMS, format!("unknown tool: {name}")))),
        };
        Ok(step)
    }

    fn stats(&self) -> Value {
        let state = self.state.borrow();
        let counters = &state.counters;
        let pending = state
            .running
            .values()
            .filter(|task| !task.cancelled)
            .count();
        json!({
            "requests": counters.requests,
            "responses": counters.responses,
            "cancels": counters.cancels,
            "cancels_matched": counters.cancels_matched,
            "cancels_ahead": counters.cancels_ahead,
            "cancels_unknown": counters.cancels_unknown,
            "pending": pending,
            "late_responses": counters.late_responses,
            "client_responses_after_cancel": counters.client_responses_after_cancel,
            "initialized": state.initialized,
            "protocol_version": state.protocol_version,
            "log_level": state.log_level.name(),
            "subscriptions": state.subscriptions,
        })
    }

    /// Queues `count` log notifications ahead of the `flood` response.
    fn flood(&self, count: u64, size: usize) -> Result<(), String> {
        let line = notification(
            "notifications/message",
            json!({"level": "info", "logger": "flood", "data": "x".repeat(size)}),
        );
        let count = usize::try_from(count).map_err(|_| "`count` is too large".to_owned())?;
        let total = line
            .len()
            .checked_mul(count)
            .filter(|total| *total <= MAX_PAYLOAD)
            .ok_or_else(|| {
                format!("flood of {count} x {size} bytes exceeds {MAX_PAYLOAD} bytes")
            })?;
        // Chunked so the writer can start on the first part while the rest is built.
        const CHUNK: usize = 256 * 1024;
        let mut chunk = Vec::with_capacity(total.min(CHUNK + line.len()));
        for _ in 0..count {
            chunk.extend_from_slice(&line);
            if chunk.len() >= CHUNK {
                self.send(std::mem::take(&mut chunk));
            }
        }
        self.send(chunk);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Tools that run in their own task
// ---------------------------------------------------------------------------------------

async fn sleep_tool(server: Rc<Server>, ms: u64, progress_token: Option<Value>) -> Reply {
    let start = Instant::now();
    let end = deadline(start, ms);
    if let Some(token) = progress_token {
        let mut last = 0;
        let mut next = start + PROGRESS_INTERVAL;
        while next < end {
            tokio::time::sleep_until(next).await;
            let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            if elapsed >= ms {
                // Late wake-up: the final answer is due now, not another progress.
                break;
            }
            // Strictly increasing even if the clock reading were to repeat.
            let progress = elapsed.max(last + 1);
            last = progress;
            server.send(notification(
                "notifications/progress",
                json!({
                    "progressToken": &token,
                    "progress": progress,
                    "total": ms,
                    "message": format!("slept {progress} ms"),
                }),
            ));
            next += PROGRESS_INTERVAL;
        }
    }
    tokio::time::sleep_until(end).await;
    Ok(text_result(&format!("slept {ms} ms")))
}

/// `steps` progress notifications (when the call carries a progress token), one every
/// `interval_ms`, then the answer.
async fn progress_tool(
    server: Rc<Server>,
    steps: u64,
    interval_ms: u64,
    with_total: bool,
    progress_token: Option<Value>,
) -> Reply {
    let start = Instant::now();
    for step in 1..=steps {
        tokio::time::sleep_until(deadline(start, interval_ms.saturating_mul(step))).await;
        let Some(token) = &progress_token else {
            continue;
        };
        let mut params = Map::new();
        params.insert("progressToken".to_owned(), token.clone());
        params.insert("progress".to_owned(), json!(step));
        if with_total {
            params.insert("total".to_owned(), json!(steps));
        }
        params.insert("message".to_owned(), json!(format!("step {step}")));
        server.send(notification(
            "notifications/progress",
            Value::Object(params),
        ));
    }
    Ok(text_result(&format!("done {steps}")))
}

/// Sends a server-to-client request (`srv-N`) and returns its id and the receiver of
/// the client's response.
fn send_client_request(
    server: &Server,
    method: String,
    params: Option<Value>,
) -> (String, oneshot::Receiver<Value>) {
    let (waiter, response) = oneshot::channel();
    let srv_id = {
        let mut state = server.state.borrow_mut();
        state.next_srv_id += 1;
        let srv_id = format!("srv-{}", state.next_srv_id);
        state.waiters.insert(srv_id.clone(), waiter);
        srv_id
    };
    let mut request = json!({"jsonrpc": "2.0", "id": srv_id, "method": method});
    if let (Some(params), Value::Object(request)) = (params, &mut request) {
        request.insert("params".to_owned(), params);
    }
    server.send(encode(&request));
    (srv_id, response)
}

/// Sends a server-to-client request, cancels it after `after_ms` unless answered by
/// then, and answers with the client's response, or `null` if none came within
/// `CANCEL_GRACE` of the cancel.
async fn ask_client_then_cancel(
    server: Rc<Server>,
    method: String,
    params: Option<Value>,
    after_ms: u64,
) -> Reply {
    let (srv_id, mut response) = send_client_request(&server, method, params);
    let give_up = deadline(Instant::now(), after_ms);
    let response = match tokio::time::timeout_at(give_up, &mut response).await {
        // Answered in time: nothing to cancel.
        Ok(response) => response.ok(),
        Err(_elapsed) => {
            server
                .state
                .borrow_mut()
                .srv_cancelled
                .insert(srv_id.clone());
            server.send(notification(
                "notifications/cancelled",
                json!({"requestId": &srv_id, "reason": "server gave up"}),
            ));
            match tokio::time::timeout(CANCEL_GRACE, &mut response).await {
                Ok(response) => response.ok(),
                Err(_elapsed) => {
                    // A later response is only counted, never routed.
                    server.state.borrow_mut().waiters.remove(&srv_id);
                    None
                }
            }
        }
    };
    let response = response.unwrap_or(Value::Null);
    Ok(structured_result(
        response.to_string(),
        json!({"response": response}),
    ))
}

/// Sends a server-to-client request and answers with the client's whole response.
async fn ask_client(server: Rc<Server>, method: String, params: Option<Value>) -> Reply {
    let (_srv_id, response) = send_client_request(&server, method, params);
    match response.await {
        Ok(response) => Ok(structured_result(
            response.to_string(),
            json!({"response": response}),
        )),
        Err(_) => Ok(tool_error("no response from the client")),
    }
}

/// `start + ms`, saturating far in the future instead of overflowing `Instant`.
fn deadline(start: Instant, ms: u64) -> Instant {
    start
        .checked_add(Duration::from_millis(ms))
        .unwrap_or_else(|| start + Duration::from_secs(30 * 365 * 86_400))
}

// ---------------------------------------------------------------------------------------
// Resources, prompts, completion
// ---------------------------------------------------------------------------------------

const GREET_DESCRIPTION: &str = "Greet someone by name, casually or formally.";
const SUMMARIZE_DESCRIPTION: &str = "Ask for a summary of a text.";

fn resource_list() -> Vec<Value> {
    let mut resources: Vec<Value> = (1..=3)
        .map(|n| {
            json!({
                "uri": format!("demo://text/{n}"),
                "name": format!("text {n}"),
                "mimeType": "text/plain",
            })
        })
        .collect();
    resources.push(json!({
        "uri": "demo://blob/1",
        "name": "blob 1",
        "mimeType": "application/octet-stream",
    }));
    resources.push(json!({"uri": "demo://counter", "name": "counter", "mimeType": "text/plain"}));
    resources
}

fn resource_template_list() -> Vec<Value> {
    vec![json!({"uriTemplate": "demo://text/{id}", "name": "text by id", "mimeType": "text/plain"})]
}

fn prompt_list() -> Vec<Value> {
    vec![
        json!({
            "name": "greet",
            "description": GREET_DESCRIPTION,
            "arguments": [
                {"name": "name", "description": "Who to greet.", "required": true},
                {
                    "name": "style",
                    "description": "`formal` for a formal greeting.",
                    "required": false,
                },
            ],
        }),
        json!({
            "name": "summarize",
            "description": SUMMARIZE_DESCRIPTION,
            "arguments": [{"name": "text", "description": "Text to summarize.", "required": true}],
        }),
    ]
}

fn get_prompt(params: &Value) -> Reply {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((
            INVALID_PARAMS,
            "prompts/get needs a string `name`".to_owned(),
        ));
    };
    let no_arguments = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &no_arguments,
        Some(Value::Object(args)) => args,
        Some(other) => {
            return Err((
                INVALID_PARAMS,
                format!("prompt `arguments` must be an object, got {other}"),
            ))
        }
    };
    let (description, text) = match name {
        "greet" => {
            let who = required_prompt_arg(args, "name")?;
            let greeting = match prompt_arg(args, "style")? {
                Some("formal") => "Good day",
                _ => "Hello",
            };
            (GREET_DESCRIPTION, format!("{greeting} {who}"))
        }
        "summarize" => {
            let text = required_prompt_arg(args, "text")?;
            (SUMMARIZE_DESCRIPTION, format!("Summarize: {text}"))
        }
        _ => return Err((INVALID_PARAMS, format!("unknown prompt: {name}"))),
    };
    Ok(json!({
        "description": description,
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }))
}

fn prompt_arg<'a>(
    args: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, (i64, String)> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(other) => Err((
            INVALID_PARAMS,
            format!("prompt argument `{name}` must be a string, got {other}"),
        )),
    }
}

fn required_prompt_arg<'a>(
    args: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a str, (i64, String)> {
    prompt_arg(args, name)?.ok_or_else(|| {
        (
            INVALID_PARAMS,
            format!("missing required prompt argument `{name}`"),
        )
    })
}

/// `completion/complete`: the fixed candidates of the argument that start with its
/// current value.
fn complete(params: &Value) -> Reply {
    let invalid = |what: &str| (INVALID_PARAMS, format!("completion/complete needs {what}"));
    let reference = params
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("an object `ref`"))?;
    let argument = params
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("an object `argument`"))?;
    let name = argument
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("a string `argument.name`"))?;
    let value = argument.get("value").and_then(Value::as_str).unwrap_or("");
    let field = |key: &str| reference.get(key).and_then(Value::as_str);
    let style = params
        .pointer("/context/arguments/style")
        .and_then(Value::as_str);
    let candidates: &[&str] = match (field("type"), name) {
        (Some("ref/prompt"), "style") if field("name") == Some("greet") => {
            &["formal", "friendly", "funny"]
        }
        (Some("ref/prompt"), "name") if field("name") == Some("greet") => {
            if style == Some("formal") {
                &["Dr. Smith", "Ms. Jones"]
            } else {
                &["Alice", "Bob", "Bobby"]
            }
        }
        (Some("ref/resource"), "id") if field("uri") == Some("demo://text/{id}") => {
            &["1", "2", "3", "10"]
        }
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|candidate| candidate.starts_with(value))
        .collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

/// Standard base64 with padding (RFC 4648 section 4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let group = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        // A chunk of n bytes gives n + 1 digits, then `=` up to 4.
        for digit in 0..4 {
            if digit <= chunk.len() {
                let index = (group >> (18 - 6 * digit)) & 63;
                out.push(char::from(ALPHABET[index as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Helpers: tool results, arguments, tool list
// ---------------------------------------------------------------------------------------

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn structured_result(text: String, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured})
}

fn tool_error(problem: &str) -> Value {
    json!({"content": [{"type": "text", "text": problem}], "isError": true})
}

fn str_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(value)) => Ok(value),
        None | Some(Value::Null) => Err(format!("missing string argument `{name}`")),
        Some(other) => Err(format!("argument `{name}` must be a string, got {other}")),
    }
}

fn num_arg(args: &Map<String, Value>, name: &str) -> Result<f64, String> {
    match args.get(name) {
        Some(Value::Number(value)) => value
            .as_f64()
            .ok_or_else(|| format!("argument `{name}` is not a finite number")),
        None | Some(Value::Null) => Err(format!("missing number argument `{name}`")),
        Some(other) => Err(format!("argument `{name}` must be a number, got {other}")),
    }
}

/// A non-negative integer argument; `default` makes it optional.
fn u64_arg(args: &Map<String, Value>, name: &str, default: Option<u64>) -> Result<u64, String> {
    match args.get(name) {
        None | Some(Value::Null) => {
            default.ok_or_else(|| format!("missing integer argument `{name}`"))
        }
        Some(value) => value.as_u64().ok_or_else(|| {
            format!("argument `{name}` must be a non-negative integer, got {value}")
        }),
    }
}

/// A byte count, bounded by `MAX_PAYLOAD`.
fn size_arg(args: &Map<String, Value>, name: &str, default: Option<u64>) -> Result<usize, String> {
    let value = u64_arg(args, name, default)?;
    usize::try_from(value)
        .ok()
        .filter(|size| *size <= MAX_PAYLOAD)
        .ok_or_else(|| format!("argument `{name}` must be at most {MAX_PAYLOAD}, got {value}"))
}

fn log_skipped(why: &str, line: &[u8]) {
    let snippet = &line[..line.len().min(LOG_SNIPPET)];
    eprintln!(
        "{SERVER_NAME}: skipping input line, {why}: {}",
        String::from_utf8_lossy(snippet)
    );
}

const TOOL_NAMES: &[&str] = &[
    "echo",
    "add",
    "sleep",
    "late",
    "stats",
    "pid",
    "crash",
    "flood",
    "big",
    "garbage",
    "stderr",
    "ping_client",
    "ask_client",
    "cancel_foreign",
    "pause_reading",
    "env",
    "cwd",
    "log",
    "notify",
    "progress",
    "ask_client_then_cancel",
    "sample",
];

fn is_tool(name: &str) -> bool {
    TOOL_NAMES.contains(&name)
}

fn tool_list() -> Value {
    fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required},
        })
    }
    let integer =
        |description: &str| json!({"type": "integer", "minimum": 0, "description": description});
    let string = |description: &str| json!({"type": "string", "description": description});
    let tools = vec![
        tool(
            "echo",
            "Return the given text unchanged.",
            json!({"text": string("Text to echo back.")}),
            &["text"],
        ),
        tool(
            "add",
            "Add two numbers; the sum is also returned as structured content.",
            json!({
                "a": {"type": "number", "description": "First addend."},
                "b": {"type": "number", "description": "Second addend."},
            }),
            &["a", "b"],
        ),
        tool(
            "sleep",
            "Sleep for `ms` milliseconds, reporting progress every 100 ms when a progress token is given. Cancellable.",
            json!({"ms": integer("How long to sleep, in milliseconds.")}),
            &["ms"],
        ),
        tool(
            "late",
            "Sleep for `ms` milliseconds and answer even if the request was cancelled.",
            json!({"ms": integer("How long to sleep, in milliseconds.")}),
            &["ms"],
        ),
        tool(
            "stats",
            "Return the server's request, response and cancellation counters.",
            json!({}),
            &[],
        ),
        tool("pid", "Return the server's process id.", json!({}), &[]),
        tool(
            "crash",
            "Flush pending output and exit immediately with the given code, without answering.",
            json!({"code": {"type": "integer", "description": "Exit code (default 1)."}}),
            &[],
        ),
        tool(
            "flood",
            "Send `count` log notifications of `size` bytes each, then answer.",
            json!({
                "count": integer("Number of notifications."),
                "size": integer("Payload size of each notification, in bytes (default 0)."),
            }),
            &["count"],
        ),
        tool(
            "big",
            "Answer with a text of exactly `bytes` 'x' characters.",
            json!({"bytes": integer("Length of the text.")}),
            &["bytes"],
        ),
        tool(
            "garbage",
            "Write invalid and unsolicited lines to stdout, then answer.",
            json!({}),
            &[],
        ),
        tool(
            "stderr",
            "Write `text` to stderr `lines` times.",
            json!({
                "text": string("Line to write."),
                "lines": integer("How many times (default 1)."),
            }),
            &["text"],
        ),
        tool(
            "ping_client",
            "Send a ping request to the client and return its response.",
            json!({}),
            &[],
        ),
        tool(
            "ask_client",
            "Send an arbitrary request to the client and return its response.",
            json!({
                "method": string("Method of the request."),
                "params": {"type": "object", "description": "Params of the request."},
            }),
            &["method"],
        ),
        tool(
            "cancel_foreign",
            "Send the client a notifications/cancelled naming `request_id`.",
            json!({"request_id": {"type": ["integer", "string"], "description": "Request id to name."}}),
            &["request_id"],
        ),
        tool(
            "pause_reading",
            "Answer at once, then stop reading stdin for `ms` milliseconds.",
            json!({"ms": integer("Pause length, in milliseconds.")}),
            &["ms"],
        ),
        tool(
            "env",
            "Return the value of an environment variable (empty if unset).",
            json!({"name": string("Variable name.")}),
            &["name"],
        ),
        tool("cwd", "Return the server's current directory.", json!({}), &[]),
        tool(
            "log",
            "Send a notifications/message at `level` unless logging/setLevel filters it out; answers `logged` or `filtered`.",
            json!({
                "level": {"type": "string", "enum": LOG_LEVELS, "description": "RFC 5424 severity."},
                "message": string("Message (the notification's `data`)."),
            }),
            &["level", "message"],
        ),
        tool(
            "notify",
            "Send notifications/<kind>/list_changed (kind tools, prompts or resources), or notifications/resources/updated for a subscribed `uri` (kind updated), then answer.",
            json!({
                "kind": {
                    "type": "string",
                    "enum": ["tools", "prompts", "resources", "updated"],
                    "description": "Which notification to send.",
                },
                "uri": string("Resource uri, for kind `updated`."),
            }),
            &["kind"],
        ),
        tool(
            "progress",
            "Send `steps` progress notifications, one every `interval_ms` milliseconds, when a progress token is given, then answer. Cancellable.",
            json!({
                "steps": integer("Number of progress notifications."),
                "interval_ms": integer("Delay before each notification, in milliseconds."),
                "total": {"type": "boolean", "description": "Include `total` in the notifications (default true)."},
            }),
            &["steps", "interval_ms"],
        ),
        tool(
            "ask_client_then_cancel",
            "Send a request to the client, cancel it after `after_ms` milliseconds unless answered, wait 500 ms more, and return the response (or null).",
            json!({
                "method": string("Method of the request."),
                "params": {"type": "object", "description": "Params of the request."},
                "after_ms": integer("Delay before the cancel, in milliseconds."),
            }),
            &["method", "after_ms"],
        ),
        tool(
            "sample",
            "Send the client a sampling/createMessage request and return its response.",
            json!({}),
            &[],
        ),
    ];
    debug_assert_eq!(tools.len(), TOOL_NAMES.len());
    json!({"tools": tools})
}
