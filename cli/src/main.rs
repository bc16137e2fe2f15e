//! `actix-mcp`: talk to any MCP server from the command line.
//!
//! ```text
//! actix-mcp --stdio "npx -y @modelcontextprotocol/server-everything" tools
//! actix-mcp --stdio "my-server --flag" call echo '{"text":"hi"}' --json
//! actix-mcp --stdio "my-server" -e API_KEY=secret call add --tool-arg a=2 --tool-arg b=3
//! actix-mcp --url http://127.0.0.1:3001/mcp --era modern ping
//! ```
//!
//! Human output by default, `--json` for scripts. A long call shows a progress bar fed by the
//! server's progress notifications; Ctrl-C cancels the call on the server (the
//! `notifications/cancelled` goes out before we exit) and exits 130. Errors are one line on
//! stderr and a non-zero exit.

mod many;
mod output;
mod parse;
mod tasks;

use actix_mcp_programs::{credentials, telemetry};
use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use std::sync::Arc;

use actix_mcp::auth::{CredentialStore, Loopback, OAuth, OAuthConfig};
use actix_mcp::{
    Cancellation, Client, CompletionReference, ConnectOptions, Error, HttpTransport, Progress,
    ProtocolEra, StdioTransport, Transport,
};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{Map, Value};

#[derive(Parser)]
#[command(name = "actix-mcp", version, about = "Talk to an MCP server")]
struct Cli {
    /// The server to spawn, as a command line (no shell): "program arg1 arg2".
    #[arg(long, value_name = "COMMAND")]
    stdio: Option<String>,
    /// An environment variable for the --stdio server, KEY=VALUE (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// A Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
    #[arg(long, value_name = "URL", conflicts_with = "stdio")]
    url: Option<String>,
    /// Reach the --url endpoint over this Unix socket instead of TCP (the URL still names the
    /// endpoint: e.g. --url http://localhost/mcp --socket /run/mcp.sock).
    #[arg(long, value_name = "PATH", requires = "url")]
    socket: Option<std::path::PathBuf>,
    /// A header for every HTTP request, "name: value" (repeatable; with --url).
    #[arg(long = "header", value_name = "HEADER", requires = "url")]
    headers: Vec<String>,
    /// OAuth: a client id registered with the server's authorization server (else the client
    /// metadata URL, else dynamic registration).
    #[arg(long, value_name = "ID", requires = "url")]
    client_id: Option<String>,
    /// OAuth: the secret of --client-id. Better from the environment (ACTIX_MCP_CLIENT_SECRET)
    /// or --client-secret-file: a command line is visible to every user in `ps`.
    #[arg(
        long,
        value_name = "SECRET",
        requires = "client_id",
        env = "ACTIX_MCP_CLIENT_SECRET",
        hide_env_values = true
    )]
    client_secret: Option<String>,
    /// OAuth: a file holding the secret of --client-id (its first line).
    #[arg(
        long,
        value_name = "FILE",
        requires = "client_id",
        conflicts_with = "client_secret"
    )]
    client_secret_file: Option<std::path::PathBuf>,
    /// OAuth: the https URL of this client's metadata document (CIMD), used as its client id
    /// where the authorization server supports it.
    #[arg(long, value_name = "URL", requires = "url")]
    client_metadata_url: Option<url::Url>,
    /// OAuth: how long to wait for the sign-in in the browser, in seconds (default 300). The
    /// connect and request timeouts do not count this wait.
    #[arg(long, value_name = "SECONDS", requires = "url")]
    sign_in_timeout: Option<f64>,
    /// OAuth: the loopback port the browser is sent back to (http://127.0.0.1:PORT/callback).
    #[arg(long, value_name = "PORT", default_value_t = 8976, requires = "url")]
    callback_port: u16,
    /// Where OAuth credentials are kept: a file (default
    /// $XDG_CONFIG_HOME/actix-mcp/credentials.json), or redis://HOST:PORT/DB, shared by every
    /// process given ACTIX_MCP_CREDENTIALS_KEY (64 hex digits; ACTIX_MCP_CREDENTIALS_PREFIX
    /// names the keys). One refresh per expiry across all of them.
    #[arg(long, global = true, value_name = "FILE|redis://HOST:PORT/DB")]
    credentials: Option<String>,
    /// An mcp.json file (Claude Desktop's `mcpServers` or VS Code's `servers`): its servers
    /// are used by name with --server, or all together by `servers` and `tools --all`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["stdio", "url"])]
    config: Option<std::path::PathBuf>,
    /// The server of --config to use (needed when it has more than one enabled).
    #[arg(long, value_name = "NAME", requires = "config")]
    server: Option<String>,
    /// Print JSON instead of human-readable text.
    #[arg(long, global = true)]
    json: bool,
    /// Give up on each request after this many seconds (default 60; the request is cancelled
    /// on the server). Exits 124.
    #[arg(long, global = true, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Give up on connecting (starting the server, the handshake) after this many seconds
    /// (default 30); each request of a sign-in to an authorization server too (not the wait
    /// for the browser: --sign-in-timeout). Exits 124.
    #[arg(long, global = true, value_name = "SECONDS")]
    connect_timeout: Option<f64>,
    /// The largest message accepted from a --stdio or --url server, in bytes (default 32 MiB).
    #[arg(long, global = true, value_name = "BYTES")]
    max_message_size: Option<usize>,
    /// The protocol era to speak.
    #[arg(long, global = true, value_enum, value_name = "ERA", default_value_t = Era::Auto)]
    era: Era,
    #[command(subcommand)]
    command: Command,
}

/// `--era`: which MCP protocol revisions to try.
#[derive(Clone, Copy, ValueEnum)]
enum Era {
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
enum TaskAction {
    /// The task's state (tasks/get).
    Get,
    /// Waits for the task's end and prints its result (tasks/result).
    Result,
    /// Cancels it (tasks/cancel) and prints the state it ends in.
    Cancel,
}

#[derive(Subcommand, Debug)]
enum Command {
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

/// A failure, as one line, with its exit code.
struct Failure {
    message: String,
    code: u8,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        use actix_mcp::auth::AuthErrorKind;
        let code = match e {
            Error::Cancelled { .. } => 130,
            Error::Timeout { .. } => 124,
            Error::Unauthorized {
                kind: AuthErrorKind::SignInTimedOut | AuthErrorKind::TimedOut,
                ..
            } => 124,
            _ => 1,
        };
        // The CLI bounds each request to an authorization server by its connect timeout.
        let bound = match e {
            Error::Unauthorized {
                kind: AuthErrorKind::TimedOut,
                ..
            } => ", bounded by --connect-timeout",
            _ => "",
        };
        Failure {
            message: format!("{e}{bound}"),
            code,
        }
    }
}

impl From<credentials::CredentialsError> for Failure {
    fn from(e: credentials::CredentialsError) -> Self {
        let code = match e {
            credentials::CredentialsError::Usage(_) => 2,
            credentials::CredentialsError::Unavailable(_) => 1,
        };
        Failure {
            message: e.to_string(),
            code,
        }
    }
}

/// `skill`'s text: SKILL.md, or `file` of the skill, verified.
pub(crate) async fn skill_text(
    skill: &actix_mcp::client::skills::Skill,
    file: Option<&str>,
) -> Result<String, Failure> {
    Ok(match file {
        None => skill.load().await.map_err(skill_failure)?,
        Some(file) => {
            let bytes = skill.read(file).await.map_err(skill_failure)?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    })
}

/// A skill refused or unread: the library's error as any other, a verification failure as
/// itself (exit 1).
fn skill_failure(e: actix_mcp::client::skills::SkillError) -> Failure {
    match e {
        actix_mcp::client::skills::SkillError::Client(e) => e.into(),
        refused => Failure {
            message: format!("refused: {refused}"),
            code: 1,
        },
    }
}

pub(crate) fn usage(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        code: 2,
    }
}

/// The span the command runs in (disabled when nothing is exported), a child of
/// `TRACEPARENT`'s when it is set, to join a caller's trace.
fn command_span(command: &str) -> tracing::Span {
    let span = tracing::info_span!(
        target: "actix_mcp_cli",
        "actix-mcp",
        "otel.name" = format!("actix-mcp {command}"),
    );
    if let Ok(parent) = std::env::var("TRACEPARENT") {
        let state = std::env::var("TRACESTATE").ok();
        telemetry::join_remote(&span, &parent, state.as_deref());
    }
    span
}

fn main() -> ExitCode {
    use tracing::Instrument;
    let cli = Cli::parse();
    let program = telemetry::Program {
        name: "actix-mcp",
        target: "actix_mcp_cli",
    };
    let telemetry = match telemetry::Telemetry::start(program) {
        Ok(telemetry) => telemetry,
        Err(message) => {
            eprintln!("actix-mcp: {message}");
            return ExitCode::from(2);
        }
    };
    let span = command_span(&command_name(&cli.command));
    let system = actix_rt::System::new();
    let outcome = system.block_on(run(cli).instrument(span));
    // Every span is exported before the process ends.
    telemetry.finish();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("actix-mcp: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// The subcommand's name, for the command's span (`call`, `tools`, ...).
fn command_name(command: &Command) -> String {
    let debug = format!("{command:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_lowercase()
}

async fn run(cli: Cli) -> Result<(), Failure> {
    // A usage error is reported before any server is started.
    check_arguments(&cli.command)?;

    // Ctrl-C cancels whatever is running, on the server too.
    let interrupt = Cancellation::new();
    actix_rt::spawn({
        let interrupt = interrupt.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupt.cancel_with_reason("interrupted (Ctrl-C)");
            }
        }
    });

    // The many-server forms of --config.
    if let Some(path) = &cli.config {
        let all = matches!(
            cli.command,
            Command::Servers | Command::Tools { all: true } | Command::Skills { all: true }
        );
        let any_server = cli.server.is_none() && matches!(cli.command, Command::Skill { .. });
        if all || any_server {
            let config = many::load(path)?;
            let out = output::Printer { json: cli.json };
            let base = connect_options(&cli, &interrupt)?;
            let store = credentials::open(cli.credentials.as_deref()).await?;
            return match &cli.command {
                Command::Servers => many::servers(&config, base, store, &out).await,
                Command::Skills { .. } => many::all_skills(&config, base, store, &out).await,
                Command::Skill { name, file } => {
                    let wanted = (name.as_str(), file.as_deref());
                    many::skill_anywhere(&config, base, store, wanted, &out).await
                }
                _ => many::all_tools(&config, base, store, &out).await,
            };
        }
    }

    let client = connect(&cli, &interrupt).await?;
    let outcome = execute(&client, &cli, &interrupt).await;
    // Written before we exit: a cancel queued by Ctrl-C or a timeout, then EOF to the server.
    client.shutdown().await;
    outcome
}

/// A client connected to the server the command line names (`--stdio` or `--url`).
async fn connect(cli: &Cli, interrupt: &Cancellation) -> Result<Client, Failure> {
    let options = connect_options(cli, interrupt)?;
    let store = credentials::open(cli.credentials.as_deref()).await?;
    let connected = match &cli.config {
        Some(path) => {
            if !cli.env.is_empty() {
                return Err(usage(
                    "--env is for --stdio servers; set env in the config file",
                ));
            }
            let config = many::load(path)?;
            let server = many::pick(&config, cli.server.as_deref())?;
            many::connect(server, &options, store).await
        }
        None => options.connect(transport(cli, store)?).await,
    };
    connected.map_err(|e| {
        // A server that refuses `server/discover` is most likely one of the older era.
        let hint = match (&e, cli.era) {
            (Error::Server { .. } | Error::Protocol(_), Era::Modern) => {
                " (with --era modern only 2026-07-28 is spoken; a server of 2025-11-25 or \
                 older needs --era auto)"
            }
            _ => "",
        };
        let failure = Failure::from(e);
        Failure {
            message: format!("connecting: {}{hint}", failure.message),
            ..failure
        }
    })
}

/// How to connect, whatever the transport: the era, the timeouts, Ctrl-C.
fn connect_options(cli: &Cli, interrupt: &Cancellation) -> Result<ConnectOptions, Failure> {
    // Skills (SEP-2640): this host reads them (`skills`, `skill NAME`).
    let skills = actix_mcp::client::skills::EXTENSION;
    let mut options = Client::builder()
        .cancellation(interrupt)
        .era(cli.era.into())
        .extension(skills, serde_json::json!({}));
    if let Some(timeout) = seconds(cli.timeout, "--timeout")? {
        options = options.request_timeout(timeout);
    }
    if let Some(timeout) = seconds(cli.connect_timeout, "--connect-timeout")? {
        options = options.connect_timeout(timeout);
    }
    if let Some(meter) = telemetry::meter() {
        options = options.metrics(meter);
    }
    Ok(options)
}

/// A number of seconds given to `flag`, checked.
fn seconds(value: Option<f64>, flag: &str) -> Result<Option<Duration>, Failure> {
    match value {
        Some(s) if s.is_finite() && s > 0.0 => Duration::try_from_secs_f64(s)
            .map(Some)
            .map_err(|_| usage(format!("{flag} is too large"))),
        Some(_) => Err(usage(format!(
            "{flag} must be a positive number of seconds"
        ))),
        None => Ok(None),
    }
}

/// The client secret: `--client-secret` (or its variable), or the first line of
/// `--client-secret-file`.
fn client_secret(cli: &Cli) -> Result<Option<String>, Failure> {
    let Some(path) = &cli.client_secret_file else {
        return Ok(cli.client_secret.clone());
    };
    let text = std::fs::read_to_string(path).map_err(|e| Failure {
        message: format!("--client-secret-file {}: {e}", path.display()),
        code: 2,
    })?;
    let secret = text.lines().next().unwrap_or_default().trim();
    if secret.is_empty() {
        return Err(usage("--client-secret-file: the file is empty"));
    }
    Ok(Some(secret.to_owned()))
}

/// The transport the command line names: `--stdio "<command>"` or `--url <URL>`.
fn transport(cli: &Cli, store: Arc<dyn CredentialStore>) -> Result<Box<dyn Transport>, Failure> {
    let env = parse::env_vars(&cli.env)?;
    if let Some(url) = &cli.url {
        if !env.is_empty() {
            return Err(usage("--env is for --stdio servers, not --url"));
        }
        let mut http = HttpTransport::new(url);
        if let Some(socket) = &cli.socket {
            http = http.unix_socket(socket);
        }
        if let Some(limit) = cli.max_message_size {
            http = http.max_frame_bytes(limit);
        }
        for header in &cli.headers {
            let (name, value) = header
                .split_once(':')
                .ok_or_else(|| usage("--header takes \"name: value\""))?;
            http = http.header(name.trim(), value.trim());
        }
        // When the server answers 401: the browser flow on a loopback redirect, tokens kept
        // (`--credentials`) for the next run and for the other processes.
        let mut config = OAuthConfig::default()
            .client_name("actix-mcp CLI")
            .shared_store(store);
        if let Some(id) = &cli.client_id {
            config = config.client_id(id);
        }
        if let Some(secret) = client_secret(cli)? {
            config = config.client_secret(secret);
        }
        if let Some(url) = &cli.client_metadata_url {
            config = config.client_metadata_url(url.clone());
        }
        if let Some(bound) = seconds(cli.sign_in_timeout, "--sign-in-timeout")? {
            config = config.sign_in_timeout(bound);
        }
        // The machine's steps (discovery, registration, the code exchange) are bounded as
        // connecting is; only the person's wait by the sign-in timeout.
        if let Some(bound) = seconds(cli.connect_timeout, "--connect-timeout")? {
            config = config.request_timeout(bound);
        }
        let oauth = OAuth::new(Loopback::new(cli.callback_port), config);
        return Ok(Box::new(http.auth(oauth)));
    }
    let Some(command_line) = &cli.stdio else {
        return Err(usage(
            "say which server to use: --stdio \"<command> [args]\" or --url <URL>",
        ));
    };
    let mut words =
        shlex::split(command_line).ok_or_else(|| usage("--stdio: unbalanced quotes"))?;
    if words.is_empty() {
        return Err(usage("--stdio: empty command"));
    }
    let program = words.remove(0);
    // The CLI is exiting when it closes: the cancels and EOF are written first, then a server
    // that lingers gets SIGTERM soon, not after the library's 2 s default.
    let mut stdio = StdioTransport::new(program)
        .args(words)
        .shutdown_grace(Duration::from_millis(300));
    if let Some(limit) = cli.max_message_size {
        stdio = stdio.max_frame_bytes(limit);
    }
    for (key, value) in env {
        stdio = stdio.env(key, value);
    }
    Ok(Box::new(stdio))
}

/// What the command needs that the server did not declare in its capabilities (asking anyway
/// only earns a `-32601 Method not found`).
fn not_offered(client: &Client, command: &Command) -> Option<&'static str> {
    let offered = client.capabilities();
    let (declared, what) = match command {
        Command::Tools { .. } | Command::Call { .. } => (offered.tools.is_some(), "tools"),
        Command::Resources | Command::ResourceTemplates | Command::Read { .. } => {
            (offered.resources.is_some(), "resources")
        }
        Command::Prompts | Command::Prompt { .. } => (offered.prompts.is_some(), "prompts"),
        Command::Complete { .. } => (offered.completions.is_some(), "completions"),
        Command::SetLevel { .. } => (offered.logging.is_some(), "logging"),
        _ => (true, ""),
    };
    (!declared).then_some(what)
}

async fn execute(client: &Client, cli: &Cli, interrupt: &Cancellation) -> Result<(), Failure> {
    let out = output::Printer { json: cli.json };
    if let Some(what) = not_offered(client, &cli.command) {
        return Err(Failure {
            message: format!("the server offers no {what} (its capabilities do not list them)"),
            code: 1,
        });
    }
    match &cli.command {
        Command::Info => out.info(client),
        Command::Tools { all: true } => Err(usage("tools --all needs --config FILE")),
        Command::Tools { all: false } => out.tools(&client.tools().cancellation(interrupt).await?),
        Command::Servers => Err(usage("servers needs --config FILE")),
        Command::Call {
            name,
            args,
            tool_args,
            task,
            detach,
        } => {
            let mut args = parse_object(args, "arguments")?;
            args.extend(parse::tool_args(tool_args)?);
            // The tool list carries the tools' output schemas: the result is checked against
            // its tool's. A server that cannot list its tools is still called, but not one that
            // let the list time out: the call would make the user wait a second --timeout.
            let tools = match client.tools().cancellation(interrupt).await {
                Ok(tools) => tools,
                Err(e @ Error::Timeout { .. }) => {
                    let failure = Failure::from(e);
                    return Err(Failure {
                        message: format!("listing the tools: {}", failure.message),
                        ..failure
                    });
                }
                Err(_) => Vec::new(),
            };
            let required = tools.iter().any(|t| {
                t.name == *name
                    && t.execution.as_ref().and_then(|e| e.task_support.as_deref())
                        == Some("required")
            });
            if *detach {
                let handle = client
                    .call_tool(name, Value::Object(args))
                    .cancellation(interrupt)
                    .start_task()
                    .await?;
                return out.task_started(handle.id());
            }
            if *task || required {
                return tasks::follow(client, name, args, interrupt, &out).await;
            }
            let bar = output::ProgressBar::new(!cli.json);
            let progress = bar.clone();
            let result = client
                .call_tool(name, Value::Object(args))
                .cancellation(interrupt)
                .on_progress(move |p: Progress| progress.update(&p))
                .await;
            bar.finish();
            out.tool_result(&result?)
        }
        Command::Task { action, id } => {
            let handle = client.task(id.clone());
            match action {
                TaskAction::Get => out.task(&handle.get().await?),
                TaskAction::Cancel => out.task(&handle.cancel().await?),
                TaskAction::Result => {
                    let result = tokio::select! {
                        result = handle.wait() => result?,
                        () = interrupt.cancelled() => {
                            return Err(Error::Cancelled { reason: interrupt.reason().map(str::to_owned) }.into())
                        }
                    };
                    out.tool_result(&result)
                }
            }
        }
        Command::Ping => {
            let start = Instant::now();
            client.ping().cancellation(interrupt).await?;
            out.pong(start.elapsed())
        }
        Command::SetLevel { level } => {
            let level = parse::level(level)?;
            // `set_logging_level` takes no cancellation token: Ctrl-C is raced here.
            tokio::select! {
                result = client.set_logging_level(level) => result?,
                () = interrupt.cancelled() => {
                    return Err(Error::Cancelled {
                        reason: interrupt.reason().map(str::to_owned),
                    }
                    .into())
                }
            }
            out.level_set(level)
        }
        Command::Resources => out.resources(&client.resources().cancellation(interrupt).await?),
        Command::ResourceTemplates => {
            out.resource_templates(&client.resource_templates().cancellation(interrupt).await?)
        }
        Command::Read { uri } => {
            out.read(&client.read_resource(uri).cancellation(interrupt).await?)
        }
        Command::Skills { all: true } => Err(usage("skills --all needs --config FILE")),
        Command::Skills { all: false } => out.skills(&client.skills().await?),
        Command::Skill { name, file } => {
            let skills = client.skills().await?;
            let skill = skills
                .iter()
                .find(|s| s.name() == Some(name.as_str()))
                .ok_or_else(|| Failure {
                    message: format!("no skill named {}", actix_mcp::visible::Visible(name)),
                    code: 1,
                })?;
            out.skill_file(&skill_text(skill, file.as_deref()).await?)
        }
        Command::Prompts => out.prompts(&client.prompts().cancellation(interrupt).await?),
        Command::Prompt { name, args } => {
            let args = parse_object(args, "arguments")?;
            out.prompt(
                &client
                    .get_prompt(name, args)
                    .cancellation(interrupt)
                    .await?,
            )
        }
        Command::Complete {
            prompt,
            resource,
            argument,
            value,
            context,
        } => {
            let reference = match (prompt, resource) {
                (Some(p), _) => CompletionReference::prompt(p),
                (None, Some(r)) => CompletionReference::resource(r),
                (None, None) => return Err(usage("complete needs --prompt or --resource")),
            };
            let context = context
                .as_deref()
                .map(|c| parse_object(c, "--context"))
                .transpose()?;
            let result = client
                .complete(reference, argument, value, context)
                .cancellation(interrupt)
                .await?;
            out.completion(&result)
        }
    }
}

/// The command's own arguments, parsed once before connecting so that a usage error (exit 2)
/// never waits for a server; `execute` parses them again.
fn check_arguments(command: &Command) -> Result<(), Failure> {
    match command {
        Command::Call {
            args, tool_args, ..
        } => {
            parse_object(args, "arguments")?;
            parse::tool_args(tool_args)?;
        }
        Command::Prompt { args, .. } => {
            parse_object(args, "arguments")?;
        }
        Command::Complete {
            context: Some(context),
            ..
        } => {
            parse_object(context, "--context")?;
        }
        Command::SetLevel { level } => {
            parse::level(level)?;
        }
        _ => {}
    }
    Ok(())
}

fn parse_object(text: &str, what: &str) -> Result<Map<String, Value>, Failure> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(usage(format!("{what} must be a JSON object"))),
        Err(e) => Err(usage(format!("{what} are not valid JSON: {e}"))),
    }
}
