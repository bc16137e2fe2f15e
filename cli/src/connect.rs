//! Connecting to the server the command line names: `--stdio`, `--url` (with OAuth when the
//! server asks for it) or one server of `--config`, with the era, the timeouts and Ctrl-C.

use std::{sync::Arc, time::Duration};

use actix_mcp::auth::{CredentialStore, Loopback, OAuth, OAuthConfig};
use actix_mcp::{
    Cancellation, Client, ConnectOptions, Error, HttpTransport, StdioTransport, Transport,
};
use actix_mcp_programs::{credentials, telemetry};

use crate::args::{Cli, Era};
use crate::{many, parse, usage, Failure};

/// A client connected to the server the command line names (`--stdio`, `--url` or
/// `--config`).
pub async fn connect(cli: &Cli, interrupt: &Cancellation) -> Result<Client, Failure> {
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
    connected.map_err(|e| connect_failure(e, cli.era))
}

/// A failed connect, said to be one, with a hint when `--era modern` is the likely cause.
fn connect_failure(e: Error, era: Era) -> Failure {
    // A server that refuses `server/discover` is most likely one of the older era.
    let hint = match (&e, era) {
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
}

/// How to connect, whatever the transport: the era, the timeouts, Ctrl-C.
pub fn connect_options(cli: &Cli, interrupt: &Cancellation) -> Result<ConnectOptions, Failure> {
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

/// The transport the command line names: `--url <URL>` or `--stdio "<command>"`.
fn transport(cli: &Cli, store: Arc<dyn CredentialStore>) -> Result<Box<dyn Transport>, Failure> {
    let env = parse::env_vars(&cli.env)?;
    if let Some(url) = &cli.url {
        if !env.is_empty() {
            return Err(usage("--env is for --stdio servers, not --url"));
        }
        let http = http_transport(cli, url)?;
        let oauth = oauth(cli, store)?;
        return Ok(Box::new(http.auth(oauth)));
    }
    let Some(command_line) = &cli.stdio else {
        return Err(usage(
            "say which server to use: --stdio \"<command> [args]\" or --url <URL>",
        ));
    };
    Ok(Box::new(stdio_transport(cli, command_line, env)?))
}

/// `--url`: the endpoint, reached over TCP or `--socket`, with the `--header`s.
fn http_transport(cli: &Cli, url: &str) -> Result<HttpTransport, Failure> {
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
    Ok(http)
}

/// What `--url` does when the server answers 401: the browser flow on a loopback redirect,
/// tokens kept (`--credentials`) for the next run and for the other processes.
fn oauth(cli: &Cli, store: Arc<dyn CredentialStore>) -> Result<OAuth, Failure> {
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
    Ok(OAuth::new(Loopback::new(cli.callback_port), config))
}

/// `--stdio "<command>"`: the program spawned with its words as arguments (no shell) and the
/// `--env` variables.
fn stdio_transport(
    cli: &Cli,
    command_line: &str,
    env: Vec<(&str, &str)>,
) -> Result<StdioTransport, Failure> {
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
    Ok(stdio)
}
