//! The subcommands, run against one connected server: what the server must offer for each,
//! then one small function per subcommand, by family (a file each).

mod complete;
mod prompts;
mod resources;
mod server;
pub mod skills;
mod tasks;
mod tools;

use actix_mcp::{Cancellation, Client, Error};
use serde_json::{Map, Value};

use crate::args::{Cli, Command};
use crate::output::Printer;
use crate::{parse, usage, Failure};

/// What every subcommand works with: the connected client, the Ctrl-C that cancels its
/// requests, and how results are printed.
pub struct Session<'a> {
    client: &'a Client,
    interrupt: &'a Cancellation,
    out: Printer,
}

impl Session<'_> {
    /// The failure (exit 130) of a wait that Ctrl-C ended, where the wait is raced against
    /// Ctrl-C rather than given its token.
    fn interrupted(&self) -> Failure {
        Error::Cancelled {
            reason: self.interrupt.reason().map(str::to_owned),
        }
        .into()
    }
}

/// Runs the command line's subcommand on `client`.
pub async fn execute(client: &Client, cli: &Cli, interrupt: &Cancellation) -> Result<(), Failure> {
    offered(client, &cli.command)?;
    let session = Session {
        client,
        interrupt,
        out: Printer { json: cli.json },
    };
    match &cli.command {
        Command::Info => session.out.info(client),
        Command::Ping => server::ping(&session).await,
        Command::SetLevel { level } => server::set_level(&session, level).await,
        Command::Tools { all: true } => Err(usage("tools --all needs --config FILE")),
        Command::Tools { all: false } => tools::list(&session).await,
        Command::Servers => Err(usage("servers needs --config FILE")),
        Command::Call {
            name,
            args,
            tool_args,
            task,
            detach,
        } => {
            let mode = tools::CallMode::from_flags(*task, *detach);
            tools::call(&session, name, args, tool_args, mode).await
        }
        Command::Task { action, id } => tasks::act(&session, *action, id).await,
        Command::Resources => resources::list(&session).await,
        Command::ResourceTemplates => resources::templates(&session).await,
        Command::Read { uri } => resources::read(&session, uri).await,
        Command::Skills { all: true } => Err(usage("skills --all needs --config FILE")),
        Command::Skills { all: false } => skills::list(&session).await,
        Command::Skill { name, file } => skills::load(&session, name, file.as_deref()).await,
        Command::Prompts => prompts::list(&session).await,
        Command::Prompt { name, args } => prompts::get(&session, name, args).await,
        Command::Complete {
            prompt,
            resource,
            argument,
            value,
            context,
        } => {
            let reference = complete::reference(prompt.as_deref(), resource.as_deref())?;
            complete::complete(&session, reference, argument, value, context.as_deref()).await
        }
    }
}

/// Refuses a command that needs what the server did not declare in its capabilities (asking
/// anyway only earns a `-32601 Method not found`).
fn offered(client: &Client, command: &Command) -> Result<(), Failure> {
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
    if declared {
        return Ok(());
    }
    Err(Failure {
        message: format!("the server offers no {what} (its capabilities do not list them)"),
        code: 1,
    })
}

/// The command's own arguments, parsed once before connecting so that a usage error (exit 2)
/// never waits for a server; each subcommand parses them again.
pub fn check_arguments(command: &Command) -> Result<(), Failure> {
    match command {
        Command::Call {
            args, tool_args, ..
        } => {
            tools::arguments(args, tool_args)?;
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

/// A JSON object given on the command line; `what` names it in the error.
fn parse_object(text: &str, what: &str) -> Result<Map<String, Value>, Failure> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(usage(format!("{what} must be a JSON object"))),
        Err(e) => Err(usage(format!("{what} are not valid JSON: {e}"))),
    }
}
