//! `actix-mcp-gateway`: the servers of an `mcp.json` behind one MCP endpoint.
//!
//! ```text
//! actix-mcp-gateway --config mcp.json --listen 127.0.0.1:8080   # serves http://127.0.0.1:8080/mcp
//! actix-mcp-gateway --config mcp.json --stdio                    # one downstream client over stdio
//! actix-mcp-gateway pins --pins pins.json list                   # what the pins hold
//! actix-mcp-gateway pins --pins pins.json approve SERVER         # approve it
//! ```
//!
//! One upstream connection per server (the library's `Servers`: supervised, shared by every
//! downstream call); one catalogue of their tools under names valid by the spec's rules
//! (`server__tool`); each `tools/call` routed to its server, cancellable end to end: a
//! downstream `notifications/cancelled`, or a downstream client that goes away, cancels the
//! upstream call with the library's guarantees (nothing sent for a call not yet written; the
//! cancel after its write for one written). At the end, owed cancels are written before the
//! servers stop.

mod audit;
mod authorization;
mod changes;
mod dpop;
mod http;
mod in_flight;
mod keys;
mod message;
mod method;
mod names;
mod origin;
mod outbound;
mod outbox;
mod owner;
mod pins;
mod pins_command;
mod pins_file;
mod replicas;
mod replies;
mod routes;
mod server_requests;
mod session;
mod stdio;
mod subscriptions;
mod tasks;
mod upstream;
mod users;

/// Small blocks come and go with every call: mimalloc keeps them per thread.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::{path::PathBuf, process::ExitCode};

use actix_mcp::Config;
use actix_mcp_programs::credentials;
use clap::Parser;

#[derive(Parser)]
#[command(
    version,
    about = "Many MCP servers behind one endpoint, every cancellation carried end to end",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
struct Args {
    /// The mcp.json of the upstream servers (Claude Desktop's `mcpServers` or VS Code's
    /// `servers`).
    #[arg(long, value_name = "FILE", required = true)]
    config: Option<PathBuf>,
    /// Pinned catalogues: each server's tools, prompts and resources recorded in FILE the
    /// first time they are seen; a changed definition or a new name is held until approved
    /// (`actix-mcp-gateway pins approve`).
    #[arg(long, value_name = "FILE")]
    pins: Option<PathBuf>,
    /// What a held change serves meanwhile: the pinned definition, or nothing.
    #[arg(long, value_enum, default_value_t = pins::OnChange::Keep, requires = "pins")]
    pin_changes: pins::OnChange,
    #[command(subcommand)]
    command: Option<Command>,
    /// Serve Streamable HTTP at http://ADDR/mcp (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    listen: Option<std::net::SocketAddr>,
    /// Serve one downstream client over stdio.
    #[arg(long)]
    stdio: bool,
    /// Serve the live inspector at http://ADDR/inspector/ too (each upstream server's state,
    /// the tool calls in flight, a button that cancels one). Anyone who reaches it can cancel
    /// calls: keep the gateway on loopback or behind your own authorization.
    #[arg(long, requires = "listen")]
    inspector: bool,
    /// Require a bearer token signed by this OAuth authorization server (its issuer URL; its
    /// keys are found through its metadata) and issued for this gateway (see --resource).
    #[arg(long, value_name = "ISSUER", requires = "listen")]
    authorization_server: Option<String>,
    /// The gateway's URL as its clients reach it: the audience their tokens must name (default
    /// http://ADDR/mcp, the address it listens on).
    #[arg(long, value_name = "URL", requires = "authorization_server")]
    resource: Option<String>,
    /// A scope tokens must grant, told to clients in the protected resource metadata (one per
    /// flag).
    #[arg(
        long = "scope",
        value_name = "SCOPE",
        requires = "authorization_server"
    )]
    scopes: Vec<String>,
    /// Where the gateway keeps its own OAuth credentials for the upstream servers that ask for
    /// them: a file, or `redis://HOST:PORT/DB` shared by replicas (key in
    /// ACTIX_MCP_CREDENTIALS_KEY, 64 hex digits; prefix in ACTIX_MCP_CREDENTIALS_PREFIX). The
    /// default is the file the `actix-mcp` command uses, so a grant signed in to there serves
    /// here. A refresh is made once across every process sharing the store.
    #[arg(long, value_name = "FILE|URL")]
    credentials: Option<String>,
    /// Run as one of several replicas sharing this Redis (`redis://HOST:PORT/DB`): any replica
    /// serves any session, and what a replica that dies left running upstream is cancelled by
    /// another. Records are sealed with ACTIX_MCP_CREDENTIALS_KEY (64 hex digits, the same on
    /// every replica), under ACTIX_MCP_CREDENTIALS_PREFIX.
    #[arg(long, value_name = "URL", requires = "listen")]
    replicas: Option<String>,
    /// With --replicas: what a replica that dies left running at HTTP upstream servers is
    /// cancelled by another within this. Each says it is alive every quarter of it; one
    /// stalled for more than 5/12 of it is taken as dead.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10,
        requires = "replicas"
    )]
    replica_lease: u64,
    /// How tools and prompts are named: `qualified` (`server__tool`, always) or `plain` (the
    /// tool's own name, `server__tool` only where a server listed earlier has one of that name).
    #[arg(long, value_enum, default_value_t = names::Naming::Qualified)]
    names: names::Naming,
    /// How long a 2026-07-28 call answered `input_required` (an upstream server asked for
    /// sampling, elicitation or roots) waits for the client's retry before it is cancelled
    /// upstream.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        requires = "listen"
    )]
    input_wait: u64,
    /// How far a token's `exp`, `nbf` and `iat` may be off the gateway's clock.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60,
        requires = "authorization_server"
    )]
    clock_leeway: u64,
    /// A proxy in front of the gateway whose `X-Forwarded-For` is believed (one per flag);
    /// from anyone else forwarded headers are ignored.
    #[arg(long = "trusted-proxy", value_name = "ADDR", requires = "listen")]
    trusted_proxies: Vec<std::net::IpAddr>,
    /// A 2025-11-25 session with no request for this long is ended (its calls cancelled).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1800,
        requires = "listen"
    )]
    session_idle: u64,
    /// Sessions at once, in all (beyond: `503`).
    #[arg(long, value_name = "N", default_value_t = 10_000, requires = "listen")]
    max_sessions: usize,
    /// Sessions at once of one user of the --authorization-server (beyond: `429`).
    #[arg(long, value_name = "N", default_value_t = 100, requires = "listen")]
    max_sessions_per_user: usize,
    /// What may wait unread for one client's stream, in bytes: a reader that falls further
    /// behind has its stream ended.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, requires = "listen")]
    stream_buffer: usize,
    /// The largest POST body taken, in bytes (beyond: `413`).
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, requires = "listen")]
    max_body: usize,
    /// How long a POST's body may take to arrive (beyond: `408`).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30,
        requires = "listen"
    )]
    body_timeout: u64,
    /// Connections at once (default: what the file limit allows, two descriptors each).
    #[arg(long, value_name = "N", requires = "listen")]
    max_connections: Option<usize>,
    /// The audit trail: one JSON line per routed request (who, what, how it ended; never a
    /// token or an argument), appended to FILE, or `-` for stdout (HTTP only).
    #[arg(long, value_name = "FILE|-")]
    audit: Option<String>,
    /// Per-user upstream connections (an HTTP server with `auth`, reached with each user's
    /// own grant), in all.
    #[arg(long, value_name = "N", default_value_t = 1_000, requires = "listen")]
    max_user_connections: usize,
    /// A per-user upstream connection unused this long is closed.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        requires = "listen"
    )]
    user_connection_idle: u64,
    /// HTTP workers (default: one per core).
    #[arg(long, value_name = "N", requires = "listen")]
    workers: Option<usize>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// What the pins hold for approval, and approving it.
    Pins {
        /// The pins file the gateway runs with (`--pins`).
        #[arg(long, value_name = "FILE")]
        pins: PathBuf,
        #[command(subcommand)]
        action: pins_command::Action,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Pins { pins, action }) = &args.command {
        return pins_command::run(pins, action);
    }
    let prepared = match prepare(&args) {
        Ok(prepared) => prepared,
        Err(message) => {
            eprintln!("actix-mcp-gateway: {message}");
            return ExitCode::from(2);
        }
    };
    let program = actix_mcp_programs::telemetry::Program {
        name: "actix-mcp-gateway",
        target: "actix_mcp_gateway",
    };
    let telemetry = match actix_mcp_programs::telemetry::Telemetry::start(program) {
        Ok(telemetry) => telemetry,
        Err(message) => {
            eprintln!("actix-mcp-gateway: {message}");
            return ExitCode::from(2);
        }
    };
    // After the telemetry: the audit trail's records are log records too when it exports.
    let audit = match prepared.audit.map(audit::Audit::start).transpose() {
        Ok(audit) => audit.unwrap_or_default(),
        Err(e) => {
            eprintln!("actix-mcp-gateway: --audit: {e}");
            return ExitCode::from(2);
        }
    };
    let (config, pins) = (prepared.config, prepared.pins);
    let served = actix_rt::System::new().block_on(serve(args, config, pins, audit));
    // What is left of the spans and metrics is exported before the process ends.
    telemetry.finish();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("actix-mcp-gateway: {message}");
            ExitCode::from(code)
        }
    }
}

/// What the arguments name, read before anything starts (each refusal a usage error).
struct Prepared {
    config: Config,
    pins: Option<std::sync::Arc<pins_file::PinsFile>>,
    audit: Option<audit::Sink>,
}

fn prepare(args: &Args) -> Result<Prepared, String> {
    let config_path = args.config.as_ref().ok_or("--config FILE is required")?;
    if !args.stdio && args.listen.is_none() {
        return Err("say how to serve: --listen ADDR or --stdio".into());
    }
    if args.stdio && args.audit.as_deref() == Some("-") {
        return Err("--audit -: stdout carries the protocol with --stdio; name a file".into());
    }
    let pins = match &args.pins {
        None => None,
        Some(path) => {
            let pins = pins_file::PinsFile::open(path.clone(), args.pin_changes);
            Some(std::sync::Arc::new(
                pins.map_err(|e| format!("--pins: {e}"))?,
            ))
        }
    };
    let config = Config::load(config_path).map_err(|e| e.to_string())?;
    for warning in &config.warnings {
        eprintln!("actix-mcp-gateway: warning: {warning}");
    }
    let audit = args.audit.as_deref().map(audit::Sink::parse);
    Ok(Prepared {
        config,
        pins,
        audit,
    })
}

/// The upstream servers started, then the gateway served until it is stopped; every owed
/// cancel is written before the servers are closed.
async fn serve(
    args: Args,
    config: Config,
    pins: Option<std::sync::Arc<pins_file::PinsFile>>,
    audit: audit::Audit,
) -> Result<(), (u8, String)> {
    let store = match credentials::open(args.credentials.as_deref()).await {
        Ok(store) => store,
        Err(e) => {
            let code = match e {
                credentials::CredentialsError::Usage(_) => 2,
                credentials::CredentialsError::Unavailable(_) => 1,
            };
            return Err((code, e.to_string()));
        }
    };
    let mut upstream = upstream::Upstream::from_config(&config, store, args.names);
    upstream.audit = audit;
    upstream.pins = pins;
    upstream.replicas = replicas(&args, &config).await?;
    let servers = upstream.servers.clone();
    let replicas = upstream.replicas.clone();
    servers.start_all().await;
    let (changes, _) = tokio::sync::broadcast::channel(64);
    changes::watch(&upstream, changes.clone());
    changes::watch_pins(&upstream, changes.clone());
    let served = match args.listen {
        Some(listen) => http::serve(upstream, listen, http_options(args), changes).await,
        None => stdio::serve(upstream, changes).await,
    };
    servers.stop().await;
    if let Some(replicas) = replicas {
        if let Err(e) = replicas.leave().await {
            eprintln!("actix-mcp-gateway: --replicas: {e}: a survivor will settle what is left");
        }
    }
    served.map_err(|e| (1, e.to_string()))
}

/// With `--replicas`, this replica's part in the shared store.
async fn replicas(
    args: &Args,
    config: &Config,
) -> Result<Option<std::sync::Arc<replicas::Replicas>>, (u8, String)> {
    let Some(url) = &args.replicas else {
        return Ok(None);
    };
    let key =
        credentials::key_from_env(&format!("--replicas {url}")).map_err(|e| (2, e.to_string()))?;
    let endpoints = config
        .servers
        .iter()
        .filter_map(|server| match &server.transport {
            actix_mcp::config::TransportConfig::Http {
                url,
                headers,
                socket: None,
            } => {
                let endpoint = replicas::Endpoint {
                    url: url.clone(),
                    headers: headers.clone(),
                };
                Some((server.name.clone(), endpoint))
            }
            _ => None,
        });
    let settings = replicas::Settings {
        url: url.clone(),
        key,
        prefix: format!("{}gateway:", credentials::prefix_from_env()),
        idle: std::time::Duration::from_secs(args.session_idle),
        lease: std::time::Duration::from_secs(args.replica_lease.max(1)),
        endpoints: endpoints.collect(),
    };
    let connected = replicas::Replicas::connect(settings).await;
    let replicas = connected.map_err(|e| (1, format!("--replicas {url}: {e}")))?;
    Ok(Some(replicas))
}

/// The HTTP side's options, from the arguments.
fn http_options(args: Args) -> http::Options {
    let seconds = std::time::Duration::from_secs;
    http::Options {
        inspector: args.inspector,
        authorization_server: args.authorization_server,
        resource: args.resource,
        scopes: args.scopes,
        clock_leeway: seconds(args.clock_leeway),
        trusted_proxies: args.trusted_proxies,
        input_wait: seconds(args.input_wait),
        sessions: http::Limits {
            idle: seconds(args.session_idle),
            sessions: args.max_sessions,
            per_owner: args.max_sessions_per_user,
        },
        body: http::BodyLimits {
            max: args.max_body,
            timeout: seconds(args.body_timeout),
        },
        stream_buffer: args.stream_buffer,
        max_connections: args.max_connections,
        workers: args.workers,
        user_connections: http::UserLimits {
            max: args.max_user_connections,
            idle: seconds(args.user_connection_idle),
        },
    }
}
