//! The command line.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    Legacy,
    Modern,
    Dual,
}

/// Demo MCP server for actix-mcp (newline-delimited JSON-RPC over stdio).
#[derive(Parser, Debug)]
#[command(name = "mcp-demo-server", version)]
pub(crate) struct Cli {
    /// Append every stdin line, verbatim, to this file (plus `#EOF` / `#SIGTERM` markers).
    #[arg(long, value_name = "PATH")]
    pub(crate) journal: Option<PathBuf>,

    /// Answer `initialize` with this protocol version, whatever the client asked for.
    #[arg(long, value_name = "V")]
    pub(crate) protocol_version: Option<String>,

    /// Delay the `initialize` response by this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub(crate) initialize_delay_ms: u64,

    /// Answer `initialize` with a JSON-RPC error.
    #[arg(long)]
    pub(crate) fail_initialize: bool,

    /// Serve another `SKILL.md` than the one `skills/list` describes (its digest fails).
    #[arg(long)]
    pub(crate) tamper_skill: bool,

    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:0) instead of stdio; the bound port
    /// is printed to stderr as `LISTENING <port>`. `unix:PATH` serves on a Unix socket there
    /// (`LISTENING unix:PATH`).
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,

    /// With `--http`: sessions. `initialize` is answered with a new `Mcp-Session-Id`, every
    /// other POST must carry a known one (missing: 400, unknown: 404), GET opens the session's
    /// event stream (server notifications that belong to no request go there), DELETE ends the
    /// session. Without it, GET and DELETE get 405.
    #[arg(long)]
    pub(crate) sessions: bool,

    /// With `--sessions`: answer DELETE with 405, as the spec allows a server that does not end
    /// sessions on request (a call then stops only if its cancel arrives).
    #[arg(long, requires = "sessions")]
    pub(crate) refuse_delete: bool,

    /// Which protocol eras to speak: `legacy` (the handshake; `server/discover` is unknown),
    /// `modern` (2026-07-28 only: `server/discover`, and `initialize` is unknown) or `dual`.
    #[arg(long, value_enum, default_value_t = Era::Legacy)]
    pub(crate) era: Era,

    /// Catch SIGTERM, journal it and keep running.
    #[arg(long)]
    pub(crate) ignore_sigterm: bool,

    /// On stdin EOF, journal `#EOF` but keep running until killed.
    #[arg(long)]
    pub(crate) linger_after_eof: bool,

    /// Items per page of `tools/list`, `resources/list`, `resources/templates/list` and
    /// `prompts/list` (0: everything in one page, without `nextCursor`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) page_size: usize,

    /// How `nextCursor` behaves: `normal` pages through the list, `repeat` always
    /// answers `same-cursor` (a cycle), `endless` always answers a fresh cursor.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = CursorMode::Normal)]
    pub(crate) cursor_mode: CursorMode,

    /// Stamp `ttlMs` (this many milliseconds) and `cacheScope: "private"` on every page of
    /// the list methods, as a 2026-07-28 server may (0: no cache hints).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub(crate) list_ttl_ms: u64,

    /// Send `notifications/tasks/status` (the Task as params) at every step and status change
    /// of a task.
    #[arg(long)]
    pub(crate) task_status_notifications: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CursorMode {
    /// `nextCursor` = `page:<offset>` while items remain, then none.
    Normal,
    /// Every page, the last one too, has `nextCursor` `same-cursor`, which serves the
    /// second page again and again.
    Repeat,
    /// Every page has a new `nextCursor` (`endless:<k>`) and serves the first page again.
    Endless,
}
