//! `--config FILE`: the servers of an `mcp.json`. `servers` starts them all and reports each
//! one's status; `tools --all` and `skills --all` list the catalogue of every ready server;
//! `skill NAME` loads a skill from the one server listing it; `--server NAME` connects to one
//! of them for any other subcommand.

use std::{path::Path, sync::Arc};

use actix_mcp::config::TransportConfig;
use actix_mcp::visible::Visible;
use actix_mcp::{
    auth::CredentialStore, Cancellation, Client, Config, ConnectOptions, Error, ServerConfig,
    Servers, ServersError, Status, Transport,
};
use actix_mcp_programs::credentials;
use serde_json::{json, Value};

use crate::args::{Cli, Command};
use crate::commands::skills::skill_text;
use crate::{connect, output::Printer, usage, Failure};

/// Whether the command is one of the many-server forms of `--config`: `servers`,
/// `tools --all`, `skills --all`, or `skill NAME` with no `--server`. The others connect to one
/// server of the file.
pub fn spans_servers(cli: &Cli) -> bool {
    let all = matches!(
        cli.command,
        Command::Servers | Command::Tools { all: true } | Command::Skills { all: true }
    );
    let any_server = cli.server.is_none() && matches!(cli.command, Command::Skill { .. });
    all || any_server
}

/// Runs a many-server form (see [`spans_servers`]) on the servers of the file at `path`.
pub async fn execute(cli: &Cli, path: &Path, interrupt: &Cancellation) -> Result<(), Failure> {
    let config = load(path)?;
    let out = Printer { json: cli.json };
    let base = connect::connect_options(cli, interrupt)?;
    let store = credentials::open(cli.credentials.as_deref()).await?;
    match &cli.command {
        Command::Servers => servers(&config, base, store, &out).await,
        Command::Skills { .. } => all_skills(&config, base, store, &out).await,
        Command::Skill { name, file } => {
            let wanted = (name.as_str(), file.as_deref());
            skill_anywhere(&config, base, store, wanted, &out).await
        }
        _ => all_tools(&config, base, store, &out).await,
    }
}

/// Reads the configuration file, warnings to stderr.
pub fn load(path: &Path) -> Result<Config, Failure> {
    let config = Config::load(path).map_err(|e| Failure {
        message: e.to_string(),
        code: 1,
    })?;
    for warning in &config.warnings {
        eprintln!("actix-mcp: warning: {warning}");
    }
    Ok(config)
}

/// The transport of a configured server; OAuth credentials in `store` (`--credentials`).
pub fn transport(
    store: Arc<dyn CredentialStore>,
) -> impl Fn(&ServerConfig) -> Result<Box<dyn Transport>, Error> + Clone + Send + Sync + 'static {
    move |server| server.transport_with_store(store.clone())
}

/// The server `--server NAME` names, or the only enabled one.
pub fn pick<'c>(config: &'c Config, name: Option<&str>) -> Result<&'c ServerConfig, Failure> {
    let names = || {
        config
            .servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let server = match name {
        Some(name) => config.server(name).ok_or_else(|| {
            usage(format!(
                "{}: no server named {name:?} (it has: {})",
                config.origin,
                names()
            ))
        })?,
        None => {
            let mut enabled = config.enabled();
            match (enabled.next(), enabled.next()) {
                (Some(only), None) => only,
                _ => {
                    return Err(usage(format!(
                        "say which server: --server NAME (one of: {})",
                        names()
                    )))
                }
            }
        }
    };
    if !server.enabled {
        return Err(Failure {
            message: format!("server {:?} is disabled in {}", server.name, config.origin),
            code: 1,
        });
    }
    Ok(server)
}

/// One configured server, connected with its own options over the command line's.
pub async fn connect(
    server: &ServerConfig,
    base: &ConnectOptions,
    store: Arc<dyn CredentialStore>,
) -> Result<Client, Error> {
    server
        .connect_options(base)
        .connect(transport(store)(server)?)
        .await
}

fn kind(server: &ServerConfig) -> &'static str {
    match server.transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::Http { .. } => "http",
        TransportConfig::Sse { .. } => "sse",
        _ => "other",
    }
}

/// `servers`: starts every enabled server, reports each, stops them all. A server that cannot
/// start is `failed` with its error; the others are reported all the same.
pub async fn servers(
    config: &Config,
    base: ConnectOptions,
    store: Arc<dyn CredentialStore>,
    out: &Printer,
) -> Result<(), Failure> {
    let servers = Servers::from_config_with(config, base, transport(store));
    servers.start_all().await;
    let mut rows = Vec::new();
    for status in servers.status() {
        let transport = config.server(&status.name).map_or("?", kind);
        let (word, error) = match &status.status {
            // A start that failed is reported as failed, whatever supervision does next.
            Status::BackingOff { error, .. } | Status::Failed { last: error, .. } => {
                ("failed", Some(error.to_string()))
            }
            other => (other.name(), None),
        };
        let mut row = json!({"name": status.name, "transport": transport, "status": word});
        if let Some(error) = error {
            row["error"] = Value::from(error);
        }
        if word == "ready" {
            if let Ok(client) = servers.client(&status.name).await {
                row["server"] = json!({
                    "name": client.server_info().name,
                    "version": client.server_info().version,
                });
                row["protocol"] = Value::from(client.protocol_version());
            }
        }
        rows.push(row);
    }
    servers.stop().await;
    out.servers(&rows)
}

/// `tools --all`: every ready server's tools, each once per server.
pub async fn all_tools(
    config: &Config,
    base: ConnectOptions,
    store: Arc<dyn CredentialStore>,
    out: &Printer,
) -> Result<(), Failure> {
    let servers = Servers::from_config_with(config, base, transport(store));
    let catalogue = servers.catalogue().await;
    servers.stop().await;
    left_out(&catalogue.unavailable);
    out.catalogue_tools(&catalogue.tools)
}

/// `skills --all`: every ready server's skills, each with its server; nothing of them fetched.
pub async fn all_skills(
    config: &Config,
    base: ConnectOptions,
    store: Arc<dyn CredentialStore>,
    out: &Printer,
) -> Result<(), Failure> {
    let servers = Servers::from_config_with(config, base, transport(store));
    let catalogue = servers.skills().await;
    servers.stop().await;
    left_out(&catalogue.unavailable);
    out.catalogue_skills(&catalogue.skills)
}

/// `skill NAME [FILE]` with no `--server`: from the one server that lists a skill `NAME`
/// (several: say which; none: not found).
pub async fn skill_anywhere(
    config: &Config,
    base: ConnectOptions,
    store: Arc<dyn CredentialStore>,
    (name, file): (&str, Option<&str>),
    out: &Printer,
) -> Result<(), Failure> {
    let servers = Servers::from_config_with(config, base, transport(store));
    let catalogue = servers.skills().await;
    let mut named = catalogue
        .skills
        .iter()
        .filter(|(_, skill)| skill.name() == Some(name));
    let text = match (named.next(), named.next()) {
        (Some((_, skill)), None) => skill_text(skill, file).await,
        (None, _) => {
            left_out(&catalogue.unavailable);
            Err(Failure {
                message: format!("no server lists a skill named {}", Visible(name)),
                code: 1,
            })
        }
        (Some(first), Some(second)) => {
            let mut holders = vec![first.0.as_str(), second.0.as_str()];
            holders.extend(named.map(|(server, _)| server.as_str()));
            Err(usage(format!(
                "several servers list a skill named {}: say which: --server NAME (one of: {})",
                Visible(name),
                holders.join(", ")
            )))
        }
    };
    servers.stop().await;
    out.skill_file(&text?)
}

/// Says on stderr which servers a catalogue lacks, and why.
fn left_out(unavailable: &[(String, ServersError)]) {
    for (server, error) in unavailable {
        eprintln!("actix-mcp: server {server:?} left out: {error}");
    }
}
