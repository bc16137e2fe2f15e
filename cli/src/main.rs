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

mod args;
mod commands;
mod connect;
mod many;
mod output;
mod parse;

use std::process::ExitCode;

use actix_mcp::{Cancellation, Error};
use actix_mcp_programs::{credentials, telemetry};
use clap::Parser;

use args::{Cli, Command};

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

/// A usage error: the command line itself is wrong (exit 2).
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

/// The command, run: on the one server the command line names, or on the servers of
/// `--config` for `servers`, `tools --all`, `skills --all` and `skill NAME`.
async fn run(cli: Cli) -> Result<(), Failure> {
    // A usage error is reported before any server is started.
    commands::check_arguments(&cli.command)?;

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

    // The many-server forms of --config start the file's servers, not one of them.
    if let Some(path) = cli.config.as_deref().filter(|_| many::spans_servers(&cli)) {
        return many::execute(&cli, path, &interrupt).await;
    }

    let client = connect::connect(&cli, &interrupt).await?;
    let outcome = commands::execute(&client, &cli, &interrupt).await;
    // Written before we exit: a cancel queued by Ctrl-C or a timeout, then EOF to the server.
    client.shutdown().await;
    outcome
}
