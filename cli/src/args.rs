//! The command line: its options and subcommands, as clap parses them. Their doc comments are
//! the `--help` text.

use actix_mcp::ProtocolEra;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "actix-mcp", version, about = "Talk to an MCP server")]
pub struct Cli {
    /// The server to spawn, as a command line (no shell): "program arg1 arg2".
    #[arg(long, value_name = "COMMAND")]
    pub stdio: Option<String>,
    /// An environment variable for the --stdio server, KEY=VALUE (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
    #[arg(long, value_name = "URL", conflicts_with = "stdio")]
    pub url: Option<String>,
    /// Reach the --url endpoint over this Unix socket instead of TCP (the URL still names the
    /// endpoint: e.g. --url http://localhost/mcp --socket /run/mcp.sock).
    #[arg(long, value_name = "PATH", requires = "url")]
    pub socket: Option<std::path::PathBuf>,
    /// A header for every HTTP request, "name: value" (repeatable; with --url).
    #[arg(long = "header", value_name = "HEADER", requires = "url")]
    pub headers: Vec<String>,
    /// OAuth: a client id registered with the server's authorization server (else the client
    /// metadata URL, else dynamic registration).
    #[arg(long, value_name = "ID", requires = "url")]
    pub client_id: Option<String>,
    /// OAuth: the secret of --client-id. Better from the environment (ACTIX_MCP_CLIENT_SECRET)
    /// or --client-secret-file: a command line is visible to every user in `ps`.
    #[arg(
        long,
        value_name = "SECRET",
        requires = "client_id",
        env = "ACTIX_MCP_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub client_secret: Option<String>,
    /// OAuth: a file holding the secret of --client-id (its first line).
    #[arg(
        long,
        value_name = "FILE",
        requires = "client_id",
        conflicts_with = "client_secret"
    )]
    pub client_secret_file: Option<std::path::PathBuf>,
    /// OAuth: the https URL of this client's metadata document (CIMD), used as its client id
    /// where the authorization server supports it.
    #[arg(long, value_name = "URL", requires = "url")]
    pub client_metadata_url: Option<url::Url>,
    /// OAuth: how long to wait for the sign-in in the browser, in seconds (default 300). The
    /// connect and request timeouts do not count this wait.
    #[arg(long, value_name = "SECONDS", requires = "url")]
    pub sign_in_timeout: Option<f64>,
    /// OAuth: the loopback port the browser is sent back to (http://127.0.0.1:PORT/callback).
    #[arg(long, value_name = "PORT", default_value_t = 8976, requires = "url")]
    pub callback_port: u16,
    /// Where OAuth credentials are kept: a file (default
    /// $XDG_CONFIG_HOME/actix-mcp/credentials.json), or redis://HOST:PORT/DB, shared by every
    /// process given ACTIX_MCP_CREDENTIALS_KEY (64 hex digits; ACTIX_MCP_CREDENTIALS_PREFIX
    /// names the keys). One refresh per expiry across all of them.
    #[arg(long, global = true, value_name = "FILE|redis://HOST:PORT/DB")]
    pub credentials: Option<String>,
    /// An mcp.json file (Claude Desktop's `mcpServers` or VS Code's `servers`): its servers
    /// are used by name with --server, or all together by `servers` and `tools --all`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["stdio", "url"])]
    pub config: Option<std::path::PathBuf>,
    /// The server of --config to use (needed when it has more than one enabled).
    #[arg(long, value_name = "NAME", requires = "config")]
    pub server: Option<String>,
    /// Print JSON instead of human-readable text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Give up on each request after this many seconds (default 60; the request is cancelled
    /// on the server). Exits 124.
    #[arg(long, global = true, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Give up on connecting (starting the server, the handshake) after this many seconds
    /// (default 30); each request of a sign-in to an authorization server too (not the wait
    /// for the browser: --sign-in-timeout). Exits 124.
    #[arg(long, global = true, value_name = "SECONDS")]
    pub connect_timeout: Option<f64>,
    /// The largest message accepted from a --stdio or --url server, in bytes (default 32 MiB).
    #[arg(long, global = true, value_name = "BYTES")]
    pub max_message_size: Option<usize>,
    /// The protocol era to speak.
    #[arg(long, global = true, value_enum, value_name = "ERA", default_value_t = Era::Auto)]
    pub era: Era,
    #[command(subcommand)]
    pub command: Command,
}

/// `--era`: which MCP protocol revisions to try.
#[derive(Clone, Copy, ValueEnum)]
pub enum Era {
    /// The 2025-11-25 handshake (`initialize`), then the 2026-07-28 era if the server refuses
    /// it the way a 2026-07-28-only server does.
    Auto,
    /// Only the `initialize` handshake (2025-11-25 and earlier revisions).
    Legacy,
    /// Only the 2026-07-28 era (`server/discover`, no handshake).
    Modern,
}

impl From<Era> for ProtocolEra {
    fn from(era: Era) -> Self {
        match era {
            Era::Auto => ProtocolEra::Auto,
            Era::Legacy => ProtocolEra::Legacy,
            Era::Modern => ProtocolEra::Modern,
        }
    }
}

/// What `task` does.
#[derive(Clone, Copy, ValueEnum, Debug)]
pub enum TaskAction {
    /// The task's state (tasks/get).
    Get,
    /// Waits for the task's end and prints its result (tasks/result).
    Result,
    /// Cancels it (tasks/cancel) and prints the state it ends in.
    Cancel,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Server name, version, protocol, capabilities and instructions.
    Info,
    /// List the tools (with --config --all: every server's).
    Tools {
        /// Every ready server of --config, each tool once per server (server/tool).
        #[arg(long)]
        all: bool,
    },
    /// Start every server of --config and report each one's status.
    Servers,
    /// Call a tool.
    ///
    /// Its arguments come as a JSON object, as --tool-arg KEY=VALUE entries, or both (the
    /// entries then replace the object's same-named keys).
    #[command(after_help = "Examples:\n  \
        actix-mcp --stdio SERVER call add '{\"a\":2,\"b\":3}'\n  \
        actix-mcp --stdio SERVER call add --tool-arg a=2 --tool-arg b=3\n  \
        actix-mcp --stdio SERVER call echo --tool-arg \"text=hello world\"")]
    Call {
        /// The tool's name.
        name: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
        /// One argument, KEY=VALUE (repeatable). VALUE is JSON when it parses as JSON
        /// (n=3 is a number, flag=true a boolean, obj={"a":1} an object, s="3" a string), else
        /// the text itself as a string (text=hello world).
        #[arg(long = "tool-arg", value_name = "KEY=VALUE")]
        tool_args: Vec<String>,
        /// Run the call as a task (for tools whose taskSupport is "optional"; "required" ones
        /// always are): its status messages show in the progress bar, Ctrl-C sends tasks/cancel.
        #[arg(long)]
        task: bool,
        /// Start the task and print its id instead of waiting (implies --task); follow it with
        /// `task get|result|cancel ID`.
        #[arg(long)]
        detach: bool,
    },
    /// A task on the server, by id: `get` (its state), `result` (waits for it), `cancel`.
    Task {
        /// get, result or cancel.
        #[arg(value_enum)]
        action: TaskAction,
        /// The task's id.
        id: String,
    },
    /// Check that the server answers; prints the round trip in milliseconds.
    Ping,
    /// Ask the server for log messages at LEVEL and above.
    ///
    /// Sends logging/setLevel. In the 2026-07-28 era, which has no such method, the level only
    /// rides on this client's later requests, so nothing is sent.
    SetLevel {
        /// debug, info, notice, warning, error, critical, alert or emergency.
        level: String,
    },
    /// List the resources.
    Resources,
    /// List the resource templates.
    ResourceTemplates,
    /// Read a resource.
    Read { uri: String },
    /// List the skills (SEP-2640): each one's name and description, nothing fetched (with
    /// --config --all: every server's).
    Skills {
        /// Every server of --config FILE, each skill with its server.
        #[arg(long)]
        all: bool,
    },
    /// Load a skill: print its SKILL.md, or one of its files, each verified (size, digest;
    /// SKILL.md's frontmatter against the listing) before anything is printed. With --config
    /// and no --server, from the one server that lists a skill of that name.
    Skill {
        /// The skill's name.
        name: String,
        /// A file of the skill (its path inside the skill, or its URI); default SKILL.md.
        file: Option<String>,
    },
    /// List the prompts.
    Prompts,
    /// Get a prompt.
    Prompt {
        name: String,
        /// Arguments as a JSON object of strings.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Complete an argument of a prompt (--prompt) or resource template (--resource).
    Complete {
        #[arg(
            long,
            conflicts_with = "resource",
            required_unless_present = "resource"
        )]
        prompt: Option<String>,
        #[arg(long)]
        resource: Option<String>,
        /// The argument's name.
        argument: String,
        /// What was typed so far.
        #[arg(default_value = "")]
        value: String,
        /// Arguments already chosen, as a JSON object.
        #[arg(long)]
        context: Option<String>,
    },
}
