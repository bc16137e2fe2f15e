//! Server definitions from the `mcp.json` files MCP apps write.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use actix_mcp::{config::Config, Client};
//!
//! let config = Config::load("claude_desktop_config.json")?;
//! for warning in &config.warnings {
//!     eprintln!("{warning}");
//! }
//! for server in config.enabled() {
//!     let options = server.connect_options(&Client::builder());
//!     let client = options.connect(server.transport()?).await?;
//!     println!("{}: {} tools", server.name, client.tools().await?.len());
//! }
//! # Ok(()) }
//! ```
//!
//! # The format
//!
//! Claude Desktop, Claude Code and Cursor keep servers under `mcpServers`; VS Code under
//! `servers` (its `inputs` are not supported, see below). A file may have both: they are read
//! in file order, and a name defined in both is an error.
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"] },
//!     "search": {
//!       "type": "http",
//!       "url": "https://search.example.com/mcp",
//!       "headers": { "Authorization": "Bearer ${SEARCH_API_KEY}" },
//!       "requestTimeoutMs": 120000
//!     }
//!   }
//! }
//! ```
//!
//! Each server's fields:
//!
//! | field | meaning |
//! |---|---|
//! | `type` | `"stdio"`, `"http"` (also Claude Code's `"streamable-http"`) or `"sse"`. Absent: `stdio` with a `command`, `http` with a `url`. |
//! | `command` | stdio: the program, a path or a name looked up in `PATH`. |
//! | `args` | stdio: its arguments, an array of strings. |
//! | `env` | stdio: variables set for it on top of the inherited environment (an object of strings). |
//! | `cwd` | stdio: its working directory (a relative one is relative to this program's, not the file's). |
//! | `url` | http, sse: the endpoint. |
//! | `headers` | http, sse: headers sent with every request (an object of strings). |
//! | `enabled` | `false`: the server is kept in [`Config::servers`] but is not to be started. Default `true`. Cline's `disabled: true` means the same. |
//! | `timeout`, `requestTimeoutMs` | the default timeout of every request, in milliseconds (one of the two); `0`: none. |
//! | `connectTimeoutMs` | the bound on connecting (the handshake), in milliseconds; `0`: none. |
//! | `era` | which protocol era to speak: `"auto"`, `"legacy"` (2025-11-25 and older), `"modern"` (only 2026-07-28), `"prefer-modern"`; see [`ProtocolEra`]. |
//! | `tools`, `prompts` | what a catalogue (the gateway's) offers of them: `allow` (only these names), `deny` (never these), `rename` (an object: the server's name → the name offered), e.g. `"tools": {"deny": ["delete_repo"], "rename": {"search": "find"}}`. A name both allowed and denied, two renamed to one, or a rename of what is not offered is an error. See [`Exposure`]. |
//! | `auth` | http: OAuth when the server answers `401` (an empty `{}` turns it on with dynamic registration). Its fields: `clientId` and `clientSecret` (a pre-registered client), `clientMetadataUrl` (the URL of this client's metadata document, CIMD), `scopes` (an array or a space-separated string; kept in [`AuthConfig::scopes`] but not requested yet: the flow asks for the scopes the server names), `callbackPort` (the loopback port of the browser's redirect, default [`DEFAULT_CALLBACK_PORT`]), `signInTimeoutMs` (how long the sign-in in the browser may take, default 5 min; the waiting requests' own timeouts are paused meanwhile). |
//!
//! `null` counts as absent. A field meant for the other kind of server (`headers` on a stdio
//! server; `args`, `env`, `cwd` or `auth` on an HTTP one) is ignored with a warning.
//!
//! # Variables
//!
//! `command`, `args`, `env` values, `cwd`, `url`, `headers` values and `auth`'s `clientId`,
//! `clientSecret` and `clientMetadataUrl` expand `${NAME}` and `${env:NAME}` (VS Code's spelling)
//! to the variable's value, and `${NAME:-default}` to the default when the variable is unset or
//! empty. Any other `$` is kept as written (`$$`, `$HOME`, a trailing `$`; `$${X}` is `$`
//! followed by `X`'s value). An unset variable without a default is an error naming the server
//! and the field: `server "search": headers.Authorization: ${API_KEY} is not set`. VS Code's
//! `${input:ID}` (a prompted value) and its other `${scheme:...}` forms are errors too. For a
//! disabled server these are warnings instead, and the value is kept as written.
//!
//! # Mistakes
//!
//! A field this crate does not know, at the top level, in a server or in `auth`, never fails the
//! load: it is a warning naming the file, the position, the server and the field, collected in
//! [`Config::warnings`] and logged with `tracing::warn!`. Anything else that is wrong is one
//! [`ConfigError`], shown as `path:line:column: message`: text that is not JSON (comments and
//! trailing commas, which VS Code allows, are accepted), a known field of the wrong type, a
//! server with neither `command` nor `url`, a `type` that contradicts them, an unset variable.
//! A configuration file is untrusted input: no content makes the reader panic.

mod access;
mod expand;
mod exposure;
mod json;
mod parse;
mod shape;

use std::{collections::BTreeMap, fmt, io, path::Path, path::PathBuf, sync::Arc, time::Duration};

pub use access::{Access, AccessRule, Caller, Decision, ItemKind, Items, Patterns};
pub use exposure::Exposure;

#[cfg(feature = "auth")]
use crate::auth::{CredentialStore, Loopback, OAuth, OAuthConfig};
#[cfg(feature = "http")]
use crate::transport::HttpTransport;
use crate::{
    client::{ConnectOptions, ProtocolEra},
    error::Error,
    transport::{StdioTransport, Transport},
};

/// The loopback port the browser is sent back to after authorizing
/// (`http://127.0.0.1:8976/callback`) when `auth.callbackPort` is not given; the CLI's too.
pub const DEFAULT_CALLBACK_PORT: u16 = 8976;

/// The servers of one configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Every server, disabled ones too, in file order (`mcpServers` and `servers` in the order
    /// they appear).
    pub servers: Vec<ServerConfig>,
    /// What was ignored (unknown fields, fields for the other kind of server, ...), one line
    /// each: `path:line:column: server "name": ...`.
    pub warnings: Vec<String>,
    /// Where the configuration came from (the path given to [`Config::load`], or the origin given
    /// to [`Config::parse`]).
    pub origin: String,
}

impl Config {
    /// Reads the file at `path`, expanding `${VAR}` from the process environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: origin.clone(),
            position: None,
            message: format!("cannot read the file: {e}"),
            io: Some(Arc::new(e)),
        })?;
        Self::parse(&text, &origin, &|name| std::env::var(name).ok())
    }

    /// Reads `text`, named `origin` in errors and warnings; `vars` gives the value of a variable
    /// (`None`: unset), e.g. `&|name| std::env::var(name).ok()`.
    pub fn parse(
        text: &str,
        origin: &str,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        parse::parse(text, origin, vars)
    }

    /// The server named `name` (enabled or not).
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|server| server.name == name)
    }

    /// The servers to start: the enabled ones, in file order.
    pub fn enabled(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|server| server.enabled)
    }
}

/// One server of a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name (the key in `mcpServers` or `servers`).
    pub name: String,
    /// How to reach it.
    pub transport: TransportConfig,
    /// `false`: configured but not to be started (`"enabled": false` or `"disabled": true`).
    pub enabled: bool,
    /// The default timeout of every request (`timeout` / `requestTimeoutMs`); zero: none.
    /// `None`: not configured, the caller's default holds.
    pub request_timeout: Option<Duration>,
    /// The bound on connecting (`connectTimeoutMs`); zero: none. `None`: not configured.
    pub connect_timeout: Option<Duration>,
    /// The protocol era to speak (`era`). `None`: not configured.
    pub era: Option<ProtocolEra>,
    /// OAuth for an HTTP server (`auth`). Always `None` for stdio servers.
    pub auth: Option<AuthConfig>,
    /// Which of its tools a catalogue offers, and as what (`tools`).
    pub tools: Exposure,
    /// Which of its prompts a catalogue offers, and as what (`prompts`).
    pub prompts: Exposure,
    /// Who may use what of it (`access`); `None`: every caller everything.
    pub access: Option<Access>,
    /// `shared: true`: a program serving many users (the gateway) reaches it with one grant of
    /// its own for all of them, instead of each user's own.
    pub shared: bool,
}

/// How to reach a server, with every `${VAR}` expanded.
///
/// `Debug` shows the names of `env` variables and headers but not their values (they often hold
/// keys and tokens).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportConfig {
    /// A program speaking MCP on its stdin and stdout.
    Stdio {
        /// The program (a path, or a name looked up in `PATH`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, on top of the inherited environment.
        env: BTreeMap<String, String>,
        /// Its working directory; `None`: this program's.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
        /// The Unix socket the endpoint is reached over (`socket`), instead of TCP.
        socket: Option<PathBuf>,
    },
    /// An endpoint of the deprecated HTTP+SSE transport (2024-11-05), which this crate does not
    /// implement: [`ServerConfig::transport`] refuses it.
    Sse {
        /// The SSE endpoint's URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// Map values replaced by `<redacted>` in `Debug`.
struct Redacted<'a>(&'a BTreeMap<String, String>);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|key| (key, "<redacted>")))
            .finish()
    }
}

impl fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Redacted(env))
                .field("cwd", cwd)
                .finish(),
            TransportConfig::Http {
                url,
                headers,
                socket,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .field("socket", socket)
                .finish(),
            TransportConfig::Sse { url, headers } => f
                .debug_struct("Sse")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .finish(),
        }
    }
}

/// OAuth settings of an HTTP server (its `auth` object). `Debug` does not show the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// `clientId`: a client registered with the authorization server (else CIMD, else dynamic
    /// registration).
    pub client_id: Option<String>,
    /// `clientSecret`: the registered client's secret.
    pub client_secret: Option<String>,
    /// `clientMetadataUrl`: the https URL of this client's metadata document (CIMD).
    pub client_metadata_url: Option<String>,
    /// `scopes`: as configured. Not requested yet: the flow asks for the scopes the server's
    /// challenge or metadata names (a warning says so when scopes are configured).
    pub scopes: Vec<String>,
    /// `callbackPort`: the loopback port of the browser's redirect ([`DEFAULT_CALLBACK_PORT`]
    /// when not given).
    pub callback_port: u16,
    /// `signInTimeoutMs`: how long the sign-in in the browser may take (5 min when not given).
    pub sign_in_timeout: Option<Duration>,
    /// `tokenExchange`: a multi-user service (the gateway) gets each user's token for this
    /// server by exchanging the user's own token (RFC 8693) with this client's id and secret,
    /// instead of signing the user in.
    pub token_exchange: bool,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("callback_port", &self.callback_port)
            .field("sign_in_timeout", &self.sign_in_timeout)
            .finish()
    }
}

/// A refusal of a transport this build cannot make (the HTTP+SSE transport; HTTP without the
/// `http` feature).
fn unsupported(server: &str, what: &str) -> Error {
    Error::Transport {
        context: format!("server {server:?}"),
        source: Arc::new(io::Error::new(io::ErrorKind::Unsupported, what.to_owned())),
    }
}

impl ServerConfig {
    /// The transport to connect with: a [`StdioTransport`] with the `args`, `env` and `cwd`; an
    /// `HttpTransport` with the headers and, when the server has an `auth` object (feature
    /// `auth`), OAuth as `ServerConfig::oauth` makes it with credentials kept in memory (use
    /// `ServerConfig::transport_with_store` to keep them elsewhere).
    ///
    /// Fails with [`Error::Transport`] (an [`io::ErrorKind::Unsupported`] source) for `sse`
    /// servers: the deprecated HTTP+SSE transport is not implemented by this crate. Likewise for
    /// `http` servers when the crate is built without the `http` feature. The `enabled` flag is
    /// not looked at: not starting disabled servers is the caller's decision.
    pub fn transport(&self) -> Result<Box<dyn Transport>, Error> {
        self.build(
            #[cfg(feature = "auth")]
            None,
        )
    }

    /// [`ServerConfig::transport`], with OAuth credentials (for servers with `auth`) kept in
    /// `store`, e.g. one [`FileStore`](crate::auth::FileStore) shared by every server of a
    /// configuration (credentials are kept per authorization server and resource).
    #[cfg(feature = "auth")]
    pub fn transport_with_store(
        &self,
        store: Arc<dyn CredentialStore>,
    ) -> Result<Box<dyn Transport>, Error> {
        self.build(Some(store))
    }

    /// The OAuth of this server: its `auth` settings (or none: dynamic registration), the browser
    /// sent back to the loopback `callbackPort` ([`Loopback`]), credentials kept in `store`
    /// (`None`: in memory). For HTTP servers without an `auth` object too, to attach yourself with
    /// `HttpTransport::auth`. [`Error::Misuse`] if `clientMetadataUrl` is not a URL (a file
    /// read by [`Config::load`] cannot have one).
    #[cfg(feature = "auth")]
    pub fn oauth(&self, store: Option<Arc<dyn CredentialStore>>) -> Result<OAuth, Error> {
        let port = self
            .auth
            .as_ref()
            .map_or(DEFAULT_CALLBACK_PORT, |a| a.callback_port);
        Ok(OAuth::new(Loopback::new(port), self.oauth_config(store)?))
    }

    /// This server reached for one user of a multi-user service: its OAuth never opens a
    /// browser (a connection without a grant in `store` fails with
    /// [`AuthErrorKind::InteractionRequired`](crate::AuthErrorKind::InteractionRequired); the
    /// service signs the user in itself with [`OAuth::begin`] and [`OAuth::complete`] through
    /// [`oauth_for_user`](Self::oauth_for_user) and its `redirect_uri`).
    #[cfg(feature = "auth")]
    /// With `subject_token` (the user's own access token at the service) and `tokenExchange`
    /// set, the user's token for this server is that one exchanged (RFC 8693): no sign-in.
    pub fn transport_for_user(
        &self,
        store: Arc<dyn CredentialStore>,
        redirect_uri: &str,
        subject_token: Option<&str>,
    ) -> Result<Box<dyn Transport>, Error> {
        let exchange = self.auth.as_ref().is_some_and(|auth| auth.token_exchange);
        let oauth = match subject_token.filter(|_| exchange) {
            Some(subject) => {
                let config = self.oauth_config(Some(store))?.token_exchange(subject);
                OAuth::new(crate::auth::Application::new(redirect_uri), config)
            }
            None => self.oauth_for_user(store, redirect_uri)?,
        };
        self.build_with(Some(oauth))
    }

    /// The OAuth of this server for one user of a multi-user service (see
    /// [`transport_for_user`](Self::transport_for_user)): credentials in `store`, the person
    /// sent back to the service's `redirect_uri`.
    #[cfg(feature = "auth")]
    pub fn oauth_for_user(
        &self,
        store: Arc<dyn CredentialStore>,
        redirect_uri: &str,
    ) -> Result<OAuth, Error> {
        let agent = crate::auth::Application::new(redirect_uri);
        Ok(OAuth::new(agent, self.oauth_config(Some(store))?))
    }

    /// The OAuth settings of its `auth` (a client of its own, CIMD, the bounds).
    #[cfg(feature = "auth")]
    fn oauth_config(&self, store: Option<Arc<dyn CredentialStore>>) -> Result<OAuthConfig, Error> {
        let mut config = OAuthConfig::default();
        if let Some(store) = store {
            config = config.shared_store(store);
        }
        // The machine's steps of a sign-in are bounded as connecting is.
        if let Some(timeout) = self.connect_timeout.filter(|t| !t.is_zero()) {
            config = config.request_timeout(timeout);
        }
        if let Some(auth) = &self.auth {
            if let Some(id) = &auth.client_id {
                config = config.client_id(id);
            }
            if let Some(secret) = &auth.client_secret {
                config = config.client_secret(secret);
            }
            if let Some(url) = &auth.client_metadata_url {
                let url = url::Url::parse(url).map_err(|e| {
                    Error::Misuse(format!(
                        "server {:?}: clientMetadataUrl {url:?}: {e}",
                        self.name
                    ))
                })?;
                config = config.client_metadata_url(url);
            }
            if let Some(bound) = auth.sign_in_timeout {
                config = config.sign_in_timeout(bound);
            }
        }
        Ok(config)
    }

    fn build(
        &self,
        #[cfg(feature = "auth")] store: Option<Arc<dyn CredentialStore>>,
    ) -> Result<Box<dyn Transport>, Error> {
        #[cfg(feature = "auth")]
        let oauth = match &self.auth {
            Some(_) => Some(self.oauth(store)?),
            None => None,
        };
        self.build_with(
            #[cfg(feature = "auth")]
            oauth,
        )
    }

    /// The transport, with `oauth` for an HTTP server.
    fn build_with(
        &self,
        #[cfg(feature = "auth")] oauth: Option<OAuth>,
    ) -> Result<Box<dyn Transport>, Error> {
        match &self.transport {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut stdio = StdioTransport::new(command).args(args);
                for (key, value) in env {
                    stdio = stdio.env(key, value);
                }
                if let Some(cwd) = cwd {
                    stdio = stdio.current_dir(cwd.clone());
                }
                Ok(Box::new(stdio))
            }
            #[cfg(feature = "http")]
            TransportConfig::Http {
                url,
                headers,
                socket,
            } => {
                let mut http = HttpTransport::new(url);
                for (name, value) in headers {
                    http = http.header(name, value);
                }
                if let Some(socket) = socket {
                    #[cfg(unix)]
                    {
                        http = http.unix_socket(socket);
                    }
                    #[cfg(not(unix))]
                    return Err(unsupported(
                        &self.name,
                        &format!("a Unix socket ({}) on this platform", socket.display()),
                    ));
                }
                #[cfg(feature = "auth")]
                if let Some(oauth) = oauth {
                    http = http.auth(oauth);
                }
                Ok(Box::new(http))
            }
            #[cfg(not(feature = "http"))]
            TransportConfig::Http { .. } => Err(unsupported(
                &self.name,
                "the Streamable HTTP transport needs actix-mcp's `http` feature",
            )),
            TransportConfig::Sse { .. } => Err(unsupported(
                &self.name,
                "the HTTP+SSE transport (type \"sse\", deprecated since 2025-03-26) is not \
                 implemented by actix-mcp; use the server's Streamable HTTP endpoint (type \"http\")",
            )),
        }
    }

    /// `base` with this server's timeouts and era applied (what the file does not set stays as
    /// in `base`; a zero timeout means none).
    pub fn connect_options(&self, base: &ConnectOptions) -> ConnectOptions {
        let mut options = base.clone();
        options = match self.request_timeout {
            Some(timeout) if timeout.is_zero() => options.no_request_timeout(),
            Some(timeout) => options.request_timeout(timeout),
            None => options,
        };
        options = match self.connect_timeout {
            Some(timeout) if timeout.is_zero() => options.no_connect_timeout(),
            Some(timeout) => options.connect_timeout(timeout),
            None => options,
        };
        if let Some(era) = self.era {
            options = options.era(era);
        }
        options
    }
}

/// Why a configuration could not be read: `path:line:column: message` (`path: message` when
/// the file could not be read at all).
#[derive(Debug, Clone)]
pub struct ConfigError {
    origin: String,
    position: Option<(usize, usize)>,
    message: String,
    io: Option<Arc<io::Error>>,
}

impl ConfigError {
    fn at(origin: &str, line: usize, column: usize, message: String) -> Self {
        Self {
            origin: origin.to_owned(),
            position: Some((line, column)),
            message,
            io: None,
        }
    }

    /// The file (or the origin given to [`Config::parse`]).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The line of the mistake, from 1; `None` when the file could not be read.
    pub fn line(&self) -> Option<usize> {
        self.position.map(|(line, _)| line)
    }

    /// The column of the mistake, from 1 (0 at the end of the text); `None` when the file could
    /// not be read.
    pub fn column(&self) -> Option<usize> {
        self.position.map(|(_, column)| column)
    }

    /// What is wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => {
                write!(f, "{}:{line}:{column}: {}", self.origin, self.message)
            }
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "mcp.json", &|name| match name {
            "TOKEN" => Some("t0k3n".into()),
            _ => None,
        })
    }

    #[test]
    fn connect_options_apply_only_what_the_file_sets() {
        let config = parse(
            r#"{"mcpServers": {
                "a": {"command": "x", "requestTimeoutMs": 1500, "connectTimeoutMs": 0, "era": "legacy"},
                "b": {"command": "x"}
            }}"#,
        )
        .unwrap();
        let base = ConnectOptions::default().era(ProtocolEra::Modern);
        let a = format!("{:?}", config.servers[0].connect_options(&base));
        assert!(a.contains("timeout: None"), "{a}");
        assert!(a.contains("request_timeout: Some(1.5s)"), "{a}");
        assert!(a.contains("era: Legacy"), "{a}");
        let b = format!("{:?}", config.servers[1].connect_options(&base));
        assert_eq!(b, format!("{base:?}"));
    }

    #[test]
    fn tools_and_prompts_say_what_is_offered_and_contradictions_are_errors() {
        let config = parse(
            r#"{"mcpServers": {"a": {"command": "x",
                "tools": {"allow": ["echo", "sleep"], "deny": ["stats"], "rename": {"echo": "say"}},
                "prompts": {"deny": ["secret"]}}}}"#,
        )
        .unwrap();
        let a = &config.servers[0];
        assert!(a.tools.offers("sleep") && !a.tools.offers("stats") && !a.tools.offers("other"));
        assert_eq!(a.tools.offered_name("echo"), "say");
        assert!(!a.prompts.offers("secret") && a.prompts.offers("greet"));
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);

        let both = parse(
            r#"{"mcpServers": {"a": {"command": "x", "tools": {"allow": ["e"], "deny": ["e"]}}}}"#,
        );
        let error = both.unwrap_err().to_string();
        assert!(
            error.contains("server \"a\": tools: allow and deny both name \"e\""),
            "{error}"
        );
        let wrong = parse(r#"{"mcpServers": {"a": {"command": "x", "tools": {"rename": ["e"]}}}}"#);
        assert!(wrong.is_err(), "a rename is an object");
    }

    #[test]
    fn debug_hides_secrets() {
        let config = parse(
            r#"{"mcpServers": {
                "a": {"command": "x", "env": {"API_KEY": "${TOKEN}"}},
                "b": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                      "auth": {"clientSecret": "${TOKEN}"}}
            }}"#,
        )
        .unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("t0k3n"), "{shown}");
        assert!(shown.contains("API_KEY") && shown.contains("Authorization"));
    }

    #[test]
    fn sse_servers_are_refused_with_a_clear_error() {
        let config =
            parse(r#"{"mcpServers": {"old": {"type": "sse", "url": "https://h/sse"}}}"#).unwrap();
        let error = config.servers[0].transport().err().unwrap();
        let text = error.to_string();
        assert!(text.contains("HTTP+SSE transport"), "{text}");
        assert!(text.contains("\"old\""), "{text}");
    }

    #[test]
    fn an_unreadable_file_names_it_without_a_position() {
        let error = Config::load("/nonexistent/dir/mcp.json").unwrap_err();
        assert_eq!(error.line(), None);
        assert!(error
            .to_string()
            .starts_with("/nonexistent/dir/mcp.json: cannot read the file"));
        assert!(std::error::Error::source(&error).is_some());
    }
}
