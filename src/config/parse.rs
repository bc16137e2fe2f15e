//! Reading `mcp.json` into [`Config`]: serde reads the shapes (`shape.rs`); this file adds what
//! they cannot say: which fields go together and what contradicts what, `${VAR}` expansion, and
//! what is only a warning (unknown fields, fields for the other kind of server). Every refusal
//! and warning is placed at its value's line and column through the tree of `json.rs`.

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use jsonc_parser::common::Ranged;

use super::{
    expand::expand,
    json::{is_null, kind, locate, members, repeated_key, Node, Step, Text},
    shape::{
        AccessRuleShape, AuthShape, ExposureShape, FileShape, ItemsShape, Kind, Object, ServerShape,
    },
    Access, AccessRule, AuthConfig, Config, ConfigError, Exposure, Items, Patterns, ServerConfig,
    TransportConfig, DEFAULT_CALLBACK_PORT,
};

/// The two keys that hold servers: Claude Desktop, Claude Code, Cursor; VS Code.
const SECTIONS: [&str; 2] = ["mcpServers", "servers"];

/// Reads `text` (named `origin` in messages).
pub(super) fn parse(
    text: &str,
    origin: &str,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let text = Text::new(text, origin);
    let root = text.parse()?;
    let mut reader = Reader {
        text,
        root: &root,
        vars,
        warnings: Vec::new(),
    };
    let shape = reader.shape()?;
    let servers = reader.servers(shape)?;
    let mut warnings = reader.warnings;
    warnings.sort_by_key(|(offset, _)| *offset);
    for (_, warning) in &warnings {
        tracing::warn!("{warning}");
    }
    Ok(Config {
        servers,
        warnings: warnings.into_iter().map(|(_, warning)| warning).collect(),
        origin: origin.to_owned(),
    })
}

/// The reading of one file: its text and tree, the variables, the warnings so far (each with
/// the byte offset it is at, to be listed in file order).
struct Reader<'t, 'n> {
    text: Text<'t>,
    root: &'n Node<'t>,
    vars: &'t dyn Fn(&str) -> Option<String>,
    warnings: Vec<(usize, String)>,
}

/// A place in the file as messages name it: `mcpServers`, `server "name"`,
/// `server "name": auth.scopes[1]`.
fn describe(path: &[Step]) -> String {
    match in_server(path) {
        Some((name, [])) => format!("server {name:?}"),
        Some((name, rest)) => format!("server {name:?}: {}", dotted(rest)),
        None if path.is_empty() => "the file".to_owned(),
        None => dotted(path),
    }
}

/// The server a path is in, and the path within it.
fn in_server(path: &[Step]) -> Option<(&str, &[Step])> {
    match path {
        [Step::Key(section), Step::Key(name), rest @ ..]
            if SECTIONS.contains(&section.as_str()) =>
        {
            Some((name, rest))
        }
        _ => None,
    }
}

/// `auth.scopes[1]`.
fn dotted(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(key) if text.is_empty() => text.push_str(key),
            Step::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// `path` with `more` appended.
fn join(path: &[Step], more: &[&str]) -> Vec<Step> {
    let mut joined = path.to_vec();
    joined.extend(more.iter().map(|key| Step::Key((*key).to_owned())));
    joined
}

/// The path of a value serde refused.
fn refused_at(path: &serde_path_to_error::Path) -> Vec<Step> {
    use serde_path_to_error::Segment;
    let step = |segment: &Segment| match segment {
        Segment::Seq { index } => Some(Step::Index(*index)),
        Segment::Map { key } => Some(Step::Key(key.clone())),
        Segment::Enum { .. } | Segment::Unknown => None,
    };
    path.iter().filter_map(step).collect()
}

/// The path of a field serde skipped (it is not in the shapes).
fn skipped_at(path: &serde_ignored::Path<'_>, steps: &mut Vec<Step>) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            skipped_at(parent, steps);
            steps.push(Step::Index(*index));
        }
        Path::Map { parent, key } => {
            skipped_at(parent, steps);
            steps.push(Step::Key(key.clone()));
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => skipped_at(parent, steps),
    }
}

impl<'t, 'n> Reader<'t, 'n> {
    fn node(&self, path: &[Step]) -> &'n Node<'t> {
        locate(self.root, path)
    }

    /// Where the value at `path` starts.
    fn offset(&self, path: &[Step]) -> usize {
        self.node(path).start()
    }

    fn warn(&mut self, path: &[Step], message: impl fmt::Display) {
        let node = self.node(path);
        let warning = self.text.located(self.text.pos(node), message);
        self.warnings.push((node.start(), warning));
    }

    fn error(&self, path: &[Step], message: impl Into<String>) -> ConfigError {
        self.text.error(self.text.pos(self.node(path)), message)
    }

    /// The file read into its shapes, or the first refusal at its value; a warning for each field
    /// the shapes do not have.
    fn shape(&mut self) -> Result<FileShape, ConfigError> {
        let root = self.root;
        if root.as_object().is_none() {
            let found = kind(root);
            let message =
                format!("expected an object with \"mcpServers\" or \"servers\", found {found}");
            return Err(self.error(&[], message));
        }
        if let Some((mut path, _)) = repeated_key(root) {
            let key = match path.pop() {
                Some(Step::Key(key)) => key,
                _ => String::new(),
            };
            let at = join(&path, &[&key]);
            return Err(self.error(&at, format!("{}: {key:?} appears twice", describe(&path))));
        }
        let value = serde_json::Value::from(root.clone());
        let mut skipped = Vec::new();
        let mut note = |path: serde_ignored::Path<'_>| {
            let mut steps = Vec::new();
            skipped_at(&path, &mut steps);
            skipped.push(steps);
        };
        let shape =
            serde_path_to_error::deserialize(serde_ignored::Deserializer::new(&value, &mut note));
        let shape: FileShape = shape.map_err(|error| {
            let path = refused_at(error.path());
            self.error(&path, format!("{}: {}", describe(&path), error.inner()))
        })?;
        for path in skipped {
            self.unknown(&path);
        }
        Ok(shape)
    }

    /// The warning for a field the shapes do not have (`null` ones are as good as absent).
    fn unknown(&mut self, path: &[Step]) {
        if !matches!(path.last(), Some(Step::Key(_))) || is_null(self.node(path)) {
            return;
        }
        let message = match in_server(path) {
            Some((name, rest)) => format!(
                "server {name:?}: unknown field {:?} (ignored)",
                dotted(rest)
            ),
            None => format!("unknown field {:?} (ignored)", dotted(path)),
        };
        self.warn(path, message);
    }

    /// The servers of the file, section by section, each in file order.
    fn servers(&mut self, shape: FileShape) -> Result<Vec<ServerConfig>, ConfigError> {
        let mut sections = [shape.mcp_servers, shape.servers].map(|section| section.map(|o| o.0));
        let mut order: Vec<(usize, &str)> = Vec::new();
        for (at, section) in SECTIONS.into_iter().enumerate() {
            if sections[at].is_some() {
                order.push((self.offset(&join(&[], &[section])), section));
            }
        }
        order.sort_unstable();
        if order.is_empty() {
            self.warn(
                &[],
                "no \"mcpServers\" or \"servers\": no servers are configured",
            );
        }
        let mut servers = Vec::new();
        for (_, section) in &order {
            let at = SECTIONS
                .iter()
                .position(|name| name == section)
                .unwrap_or(0);
            let shapes = sections[at].take().unwrap_or_default();
            let first = order.first().map(|(_, first)| *first);
            self.section(section, shapes, first, &mut servers)?;
        }
        Ok(servers)
    }

    /// The servers of `section`, added to those of the section before it (`first`).
    fn section(
        &mut self,
        section: &str,
        mut shapes: BTreeMap<String, Object<ServerShape>>,
        first: Option<&str>,
        servers: &mut Vec<ServerConfig>,
    ) -> Result<(), ConfigError> {
        let node = self.node(&join(&[], &[section]));
        for (name, _) in members(node) {
            let path = join(&[], &[section, name]);
            if let Some(first) = first.filter(|first| *first != section) {
                if servers.iter().any(|server| server.name == name) {
                    let message = format!(
                        "server {name:?} is defined in both \"{first}\" and \"{section}\"; \
                         rename or remove one"
                    );
                    return Err(self.error(&path, message));
                }
            }
            let Some(Object(shape)) = shapes.remove(name) else {
                continue;
            };
            let server = self.server(&path, name, shape)?;
            if !server.enabled {
                let (origin, name) = (self.text.origin(), &server.name);
                tracing::info!(
                    "{origin}: server {name:?} is disabled in its configuration; not started"
                );
            }
            servers.push(server);
        }
        Ok(())
    }

    fn server(
        &mut self,
        at: &[Step],
        name: &str,
        shape: ServerShape,
    ) -> Result<ServerConfig, ConfigError> {
        if name.trim().is_empty() {
            return Err(self.error(at, "a server has an empty name"));
        }
        let request_timeout = self.request_timeout(at, &shape)?;
        let enabled = self.enabled(at, &shape)?;
        let kind = self.kind(at, &shape)?;
        let auth = self.auth(at, shape.auth.map(|o| o.0), kind, enabled)?;
        let (connect_timeout, era) = (shape.connect_timeout_ms, shape.era);
        let tools = self.exposure(at, "tools", shape.tools)?;
        let prompts = self.exposure(at, "prompts", shape.prompts)?;
        let access = self.access(at, shape.access)?;
        let transport = match kind {
            Kind::Stdio => {
                let set = [
                    ("headers", shape.headers.is_some()),
                    ("socket", shape.socket.is_some()),
                ];
                self.ignored(at, &set, "a stdio server");
                let env = shape.env.map(|o| o.0);
                self.stdio(at, shape.command, shape.args, env, shape.cwd, enabled)?
            }
            Kind::Http | Kind::Sse => {
                let set = [
                    ("args", shape.args.is_some()),
                    ("env", shape.env.is_some()),
                    ("cwd", shape.cwd.is_some()),
                ];
                self.ignored(at, &set, "an HTTP server");
                let headers = shape.headers.map(|o| o.0);
                let transport = self.http(at, shape.url, headers, kind, enabled)?;
                self.with_socket(at, transport, shape.socket, enabled)?
            }
        };
        Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            enabled,
            request_timeout,
            connect_timeout: connect_timeout.map(|millis| millis.0),
            era,
            auth,
            tools,
            prompts,
            access,
            shared: shape.shared.unwrap_or(false),
        })
    }

    /// A server's `access` rules, refused where a pattern is not one or a rule says nothing.
    fn access(
        &self,
        at: &[Step],
        shape: Option<Vec<Object<AccessRuleShape>>>,
    ) -> Result<Option<Access>, ConfigError> {
        let Some(rules) = shape else {
            return Ok(None);
        };
        let mut built = Vec::with_capacity(rules.len());
        for (n, Object(rule)) in rules.into_iter().enumerate() {
            let path = join(at, &["access"]);
            let refuse = |why: String| {
                let message = format!("{}: rule {}: {why}", describe(&path), n + 1);
                self.error(&path, message)
            };
            let items = |shape: Option<Object<ItemsShape>>| -> Result<Items, String> {
                let Some(Object(shape)) = shape else {
                    return Ok(Items::default());
                };
                let patterns = |list: Option<Vec<String>>| Patterns::new(list.unwrap_or_default());
                Ok(Items {
                    tools: patterns(shape.tools)?,
                    prompts: patterns(shape.prompts)?,
                    resources: patterns(shape.resources)?,
                })
            };
            let claims = rule
                .claims
                .map(|Object(claims)| claims.into_iter().map(|(k, v)| (k, v.into_vec())).collect());
            let rule_built = AccessRule {
                scopes: rule.scopes.unwrap_or_default(),
                claims: claims.unwrap_or_default(),
                allow: items(rule.allow).map_err(&refuse)?,
                deny: items(rule.deny).map_err(&refuse)?,
            };
            if rule_built.allow.is_empty() && rule_built.deny.is_empty() {
                return Err(refuse("it allows and denies nothing".into()));
            }
            built.push(rule_built);
        }
        Ok(Some(Access::new(built)))
    }

    /// A server's `tools` or `prompts` (`field`), refused if its parts contradict each other.
    fn exposure(
        &self,
        at: &[Step],
        field: &str,
        shape: Option<Object<ExposureShape>>,
    ) -> Result<Exposure, ConfigError> {
        let Some(Object(shape)) = shape else {
            return Ok(Exposure::default());
        };
        let exposure = Exposure {
            allow: shape.allow.map(|names| names.into_iter().collect()),
            deny: shape.deny.unwrap_or_default().into_iter().collect(),
            rename: shape.rename.map(|o| o.0).unwrap_or_default(),
        };
        match exposure.contradiction() {
            None => Ok(exposure),
            Some(problem) => {
                let path = join(at, &[field]);
                Err(self.error(&path, format!("{}: {problem}", describe(&path))))
            }
        }
    }

    /// `timeout` or `requestTimeoutMs`; an error (at the later) if both are set.
    fn request_timeout(
        &self,
        at: &[Step],
        shape: &ServerShape,
    ) -> Result<Option<Duration>, ConfigError> {
        match (shape.timeout, shape.request_timeout_ms) {
            (Some(_), Some(_)) => {
                let mut both = ["timeout", "requestTimeoutMs"];
                both.sort_by_key(|key| self.offset(&join(at, &[key])));
                let [first, second] = both;
                let message = format!(
                    "{}: {second} and {first} both set the request timeout; keep one",
                    describe(at)
                );
                Err(self.error(&join(at, &[second]), message))
            }
            (timeout, request_timeout) => Ok(timeout.or(request_timeout).map(|millis| millis.0)),
        }
    }

    /// `enabled`, or the opposite of Cline's `disabled`; `true` when neither is set.
    fn enabled(&self, at: &[Step], shape: &ServerShape) -> Result<bool, ConfigError> {
        match (shape.enabled, shape.disabled) {
            (Some(enabled), Some(disabled)) if enabled == disabled => {
                let message = format!(
                    "{}: enabled: {enabled} and disabled: {disabled} contradict each other",
                    describe(at)
                );
                Err(self.error(&join(at, &["disabled"]), message))
            }
            (Some(enabled), _) => Ok(enabled),
            (None, disabled) => Ok(!disabled.unwrap_or(false)),
        }
    }

    /// The transport: as `type` says, else stdio with a `command`, http with a `url`.
    fn kind(&self, at: &[Step], shape: &ServerShape) -> Result<Kind, ConfigError> {
        let (command, url) = (shape.command.is_some(), shape.url.is_some());
        let (field, problem) = match (shape.kind, command, url) {
            (Some(Kind::Stdio), _, true) => (
                "url",
                "type \"stdio\" with a url (a stdio server is started with a command)".to_owned(),
            ),
            (Some(Kind::Stdio), false, false) => {
                ("type", "type \"stdio\" without a command".to_owned())
            }
            (Some(kind), true, _) if kind != Kind::Stdio => (
                "command",
                format!(
                    "type \"{}\" with a command (an HTTP server is reached at its url)",
                    kind.name()
                ),
            ),
            (Some(kind), false, false) => {
                ("type", format!("type \"{}\" without a url", kind.name()))
            }
            (Some(kind), _, _) => return Ok(kind),
            (None, true, true) => ("url", "has both a command and a url; keep one".to_owned()),
            (None, true, false) => return Ok(Kind::Stdio),
            (None, false, true) => return Ok(Kind::Http),
            (None, false, false) => (
                "",
                "has neither a command (stdio) nor a url (http)".to_owned(),
            ),
        };
        let place = if field.is_empty() {
            at.to_vec()
        } else {
            join(at, &[field])
        };
        Err(self.error(&place, format!("{}: {problem}", describe(at))))
    }

    fn stdio(
        &mut self,
        at: &[Step],
        command: Option<String>,
        args: Option<Vec<String>>,
        env: Option<BTreeMap<String, String>>,
        cwd: Option<String>,
        strict: bool,
    ) -> Result<TransportConfig, ConfigError> {
        let command = self.not_empty(at, "command", command, strict)?;
        let args = args.unwrap_or_default();
        let args = args
            .iter()
            .enumerate()
            .map(|(index, arg)| {
                let mut path = join(at, &["args"]);
                path.push(Step::Index(index));
                self.expanded(&path, arg, strict)
            })
            .collect::<Result<_, _>>()?;
        let env = self.expanded_map(&join(at, &["env"]), env.unwrap_or_default(), strict)?;
        let cwd = cwd
            .map(|cwd| self.expanded(&join(at, &["cwd"]), &cwd, strict))
            .transpose()?;
        Ok(TransportConfig::Stdio {
            command,
            args,
            env,
            cwd: cwd.map(PathBuf::from),
        })
    }

    fn http(
        &mut self,
        at: &[Step],
        url: Option<String>,
        headers: Option<BTreeMap<String, String>>,
        kind: Kind,
        strict: bool,
    ) -> Result<TransportConfig, ConfigError> {
        let url = self.not_empty(at, "url", url, strict)?;
        let headers = headers.unwrap_or_default();
        let headers = self.expanded_map(&join(at, &["headers"]), headers, strict)?;
        Ok(if kind == Kind::Sse {
            TransportConfig::Sse { url, headers }
        } else {
            TransportConfig::Http {
                url,
                headers,
                socket: None,
            }
        })
    }

    /// An `http` server's `socket` (expanded), if it has one; an `sse` server cannot.
    fn with_socket(
        &mut self,
        at: &[Step],
        transport: TransportConfig,
        socket: Option<String>,
        strict: bool,
    ) -> Result<TransportConfig, ConfigError> {
        let Some(socket) = socket else {
            return Ok(transport);
        };
        let path = join(at, &["socket"]);
        let socket = self.not_empty(at, "socket", Some(socket), strict)?;
        let socket = self.expanded(&path, &socket, strict)?;
        match transport {
            TransportConfig::Http { url, headers, .. } => Ok(TransportConfig::Http {
                url,
                headers,
                socket: Some(PathBuf::from(socket)),
            }),
            _ => {
                let what = describe(&path);
                Err(self.error(&path, format!("{what}: only an http server has a socket")))
            }
        }
    }

    /// A warning for each of the fields that is set: they mean nothing for `server`.
    fn ignored(&mut self, at: &[Step], fields: &[(&str, bool)], server: &str) {
        for (name, set) in fields {
            if *set {
                let path = join(at, &[name]);
                let what = describe(&path);
                self.warn(&path, format_args!("{what}: ignored for {server}"));
            }
        }
    }

    /// String field `name`, expanded; an error (at the server if it is missing) if it is empty.
    fn not_empty(
        &mut self,
        at: &[Step],
        name: &str,
        value: Option<String>,
        strict: bool,
    ) -> Result<String, ConfigError> {
        let path = join(at, &[name]);
        let value = value
            .map(|value| self.expanded(&path, &value, strict))
            .transpose()?;
        match value {
            Some(value) if !value.trim().is_empty() => Ok(value),
            _ => Err(self.error(&path, format!("{}: {name} is empty", describe(at)))),
        }
    }

    /// A string with its `${...}` references expanded. When not `strict` (the server is
    /// disabled), a reference that cannot be expanded is a warning and the value is kept as
    /// written.
    fn expanded(&mut self, path: &[Step], text: &str, strict: bool) -> Result<String, ConfigError> {
        match expand(text, self.vars) {
            Ok(value) => Ok(value),
            Err(e) if strict => Err(self.error(path, format!("{}: {e}", describe(path)))),
            Err(e) => {
                let what = describe(path);
                self.warn(
                    path,
                    format_args!("{what}: {e} (the server is disabled; kept as written)"),
                );
                Ok(text.to_owned())
            }
        }
    }

    /// A check that `text` is an absolute URL (a warning only for a disabled server).
    #[cfg(feature = "auth")]
    fn url(&mut self, path: &[Step], text: &str, strict: bool) -> Result<(), ConfigError> {
        let Err(e) = url::Url::parse(text) else {
            return Ok(());
        };
        let message = format!("{}: {text:?} is not a URL: {e}", describe(path));
        if strict {
            return Err(self.error(path, message));
        }
        self.warn(path, format_args!("{message} (the server is disabled)"));
        Ok(())
    }

    /// An object of strings, each value expanded, in file order (so the first error is the
    /// first in the file).
    fn expanded_map(
        &mut self,
        at: &[Step],
        map: BTreeMap<String, String>,
        strict: bool,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut entries: Vec<_> = map.into_iter().collect();
        entries.sort_by_key(|(key, _)| self.offset(&join(at, &[key])));
        entries
            .into_iter()
            .map(|(key, value)| {
                let value = self.expanded(&join(at, &[&key]), &value, strict)?;
                Ok((key, value))
            })
            .collect()
    }

    /// The server's `auth`, for an HTTP server (for a stdio one it is ignored with a warning).
    fn auth(
        &mut self,
        at: &[Step],
        auth: Option<AuthShape>,
        kind: Kind,
        strict: bool,
    ) -> Result<Option<AuthConfig>, ConfigError> {
        let Some(auth) = auth else {
            return Ok(None);
        };
        if kind == Kind::Stdio {
            self.ignored(at, &[("auth", true)], "a stdio server");
            return Ok(None);
        }
        let expanded = |reader: &mut Self, field: &str, value: Option<String>| {
            let path = join(at, &["auth", field]);
            value
                .map(|value| reader.expanded(&path, &value, strict))
                .transpose()
        };
        let client_id = expanded(self, "clientId", auth.client_id)?;
        let client_secret = expanded(self, "clientSecret", auth.client_secret)?;
        let client_metadata_url = expanded(self, "clientMetadataUrl", auth.client_metadata_url)?;
        #[cfg(feature = "auth")]
        if let Some(url) = &client_metadata_url {
            self.url(&join(at, &["auth", "clientMetadataUrl"]), url, strict)?;
        }
        let scopes = auth.scopes.unwrap_or_default().0;
        if !scopes.is_empty() {
            let path = join(at, &["auth", "scopes"]);
            let what = describe(&path);
            self.warn(
                &path,
                format_args!(
                    "{what}: kept but not requested: the OAuth flow asks for the scopes the \
                     server's challenge or metadata names"
                ),
            );
        }
        Ok(Some(AuthConfig {
            client_id,
            client_secret,
            client_metadata_url,
            scopes,
            callback_port: auth
                .callback_port
                .map_or(DEFAULT_CALLBACK_PORT, |port| port.0),
            sign_in_timeout: auth.sign_in_timeout_ms.map(|millis| millis.0),
            token_exchange: auth.token_exchange.unwrap_or(false),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_vars(_: &str) -> Option<String> {
        None
    }

    fn read(text: &str) -> Result<Config, ConfigError> {
        parse(text, "f.json", &no_vars)
    }

    /// The error's `line:column: message`.
    fn error(text: &str) -> String {
        let error = read(text).unwrap_err();
        let (line, column) = (error.line().unwrap(), error.column().unwrap());
        format!("{line}:{column}: {}", error.message())
    }

    #[test]
    fn comments_anywhere_between_tokens_are_skipped() {
        let config = read(
            "/* a */ { // b\n \"mcpServers\" /* c */ : /* d */ {\n  \"a\" // e\n  : { \"command\" : \
             /* f */ \"x\" /* g */ , \"args\": [ /* h */ \"// not a comment\" // i\n ] } } }\n// j",
        )
        .unwrap();
        let TransportConfig::Stdio { command, args, .. } = &config.servers[0].transport else {
            panic!("stdio");
        };
        assert_eq!(
            (command.as_str(), args.as_slice()),
            ("x", &["// not a comment".to_owned()][..])
        );
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }

    #[test]
    fn a_comment_is_skipped_when_positions_are_counted() {
        let text = "{\"mcpServers\": {/* é\n é */ \"a\": {\"command\": /* x */ 5}}}";
        assert_eq!(
            error(text),
            "2:32: server \"a\": command: invalid type: integer `5`, expected a string"
        );
    }

    #[test]
    fn trailing_commas_are_accepted_at_every_level() {
        let config = read(
            "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": [\"1\", \"2\",], \"env\": {\"K\": \
             \"v\",},},},}",
        )
        .unwrap();
        assert_eq!(
            config.servers[0].transport,
            TransportConfig::Stdio {
                command: "x".into(),
                args: vec!["1".into(), "2".into()],
                env: BTreeMap::from([("K".into(), "v".into())]),
                cwd: None,
            }
        );
    }

    #[test]
    fn a_comma_without_a_value_before_it_stays_an_error() {
        for (text, at) in [
            ("[,]", "1:2"),
            ("{,}", "1:2"),
            ("{\"mcpServers\": [1,,]}", "1:19"),
        ] {
            let message = error(text);
            assert!(
                message.starts_with(&format!("{at}: invalid JSON")),
                "{text}: {message}"
            );
        }
    }

    #[test]
    fn a_missing_comma_names_the_closing_bracket_of_its_container() {
        assert_eq!(
            error("{\"mcpServers\": {\"a\": {\"args\": [\"x\" \"y\"]}}}"),
            "1:36: invalid JSON: expected `,` or `]`"
        );
        assert_eq!(
            error("{\"mcpServers\": {} /* c */ \"servers\": {}}"),
            "1:27: invalid JSON: expected `,` or `}`"
        );
    }

    #[test]
    fn a_wrong_type_deep_inside_is_reported_where_it_is() {
        let text = "{\n  \"servers\": {\n    \"docs\": {\n      \"url\": \"https://d\",\n      \
                    \"auth\": {\"scopes\": [\"a\",\n        7]}\n    }\n  }\n}";
        assert_eq!(
            error(text),
            "6:9: server \"docs\": auth.scopes[1]: invalid type: integer `7`, expected a string"
        );
    }

    #[test]
    fn access_rules_are_read_in_order_and_a_bad_one_is_refused_where_it_is() {
        let config = read(
            r#"{"servers": {"s": {"command": "x", "access": [
                {"allow": {"tools": ["echo", "demo_*"]}},
                {"scopes": ["admin"], "claims": {"groups": ["ops", "sre"], "tier": "gold"},
                 "deny": {"resources": ["file:///secret/*"]}}]}}}"#,
        )
        .unwrap();
        let access = config.servers[0].access.as_ref().expect("rules");
        assert_eq!(access.rules().len(), 2);
        assert!(access.rules()[0].allow.tools.matches("demo_x"));
        assert_eq!(access.rules()[1].claims["groups"], ["ops", "sre"]);
        assert_eq!(access.rules()[1].claims["tier"], ["gold"]);
        assert!(read(r#"{"servers": {"s": {"command": "x"}}}"#)
            .unwrap()
            .servers[0]
            .access
            .is_none());

        let empty = error(r#"{"servers": {"s": {"command": "x", "access": [{"scopes": ["a"]}]}}}"#);
        assert!(
            empty.contains("rule 1: it allows and denies nothing"),
            "{empty}"
        );
        let pattern = error(
            r#"{"servers": {"s": {"command": "x", "access": [{"allow": {"tools": ["["]}}]}}}"#,
        );
        assert!(pattern.contains("rule 1: \"[\""), "{pattern}");
        let shape = error(r#"{"servers": {"s": {"command": "x", "access": {"allow": {}}}}}"#);
        assert!(shape.contains("access"), "{shape}");
    }

    #[test]
    fn an_unknown_field_is_warned_about_where_its_value_is() {
        let config = read(
            "{\"servers\": {\n  \"h\": {\"url\": \"https://h\",\n    \"auth\": {\"clientId\": \"c\",\n      \
             \"audience\": \"x\"}}}}",
        )
        .unwrap();
        assert_eq!(
            config.warnings,
            ["f.json:4:19: server \"h\": unknown field \"auth.audience\" (ignored)"]
        );
    }

    #[test]
    fn an_auths_warnings_follow_its_fields_in_file_order() {
        let config = read(
            "{\"servers\": {\"h\": {\"url\": \"https://h\", \"auth\": {\"scopes\": \"a\", \
             \"audience\": \"x\"}}}}",
        )
        .unwrap();
        let warnings: Vec<&str> = config
            .warnings
            .iter()
            .map(|w| &w[w.find(" server").unwrap()..])
            .collect();
        assert!(
            warnings[0].contains("auth.scopes: kept but not requested"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("unknown field \"auth.audience\""),
            "{warnings:?}"
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        // "é" is 2 bytes, "😀" 4, "ｘ" 3: each one column.
        assert_eq!(
            error("{\"mcpServers\": {\"é😀ｘ\": {\"command\": \"x\", \"cwd\": 1}}}"),
            "1:48: server \"é😀ｘ\": cwd: invalid type: integer `1`, expected a string"
        );
        let err = read("{\"mcpServers\": {\n  \"é\": {\"command\": \"x\",\n   \"args\": 5}}}")
            .unwrap_err();
        assert_eq!((err.line(), err.column()), (Some(3), Some(12)));
    }

    // Found by the `config_parse` fuzz target: a syntax error's column counted bytes (as
    // serde_json does), so it fell past the end of a line with non-ASCII characters.
    #[test]
    fn a_syntax_error_column_counts_characters_regression() {
        let err = read("{\"mcpServers\": {\"ééé\": ").unwrap_err();
        assert_eq!((err.line(), err.column()), (Some(1), Some(23)));
        let err = read("{\"é\": x}").unwrap_err();
        assert_eq!((err.line(), err.column()), (Some(1), Some(7)));
    }

    #[test]
    fn a_raw_control_character_in_a_string_is_refused() {
        // Reported on the character before the tab, where a JSON parser stops.
        assert_eq!(
            error("{\"mcpServers\": {\"a\": {\"command\": \"x\ty\"}}}"),
            "1:35: invalid JSON: control character (\\u0000-\\u001F) found while parsing a string"
        );
        // A stray quote: the error is on its line, not at the end of the file.
        let message = error("{\"mcpServers\": {\"a\": {\"command\": \"x\"\"}}}\n\n\n");
        assert!(message.starts_with("1:"), "{message}");
    }

    #[cfg(feature = "auth")]
    #[test]
    fn a_client_metadata_url_that_is_not_a_url_is_refused_where_it_is() {
        let server = "{\"servers\": {\"h\": {\"url\": \"https://h\",\n \"auth\": {\"clientMetadataUrl\": \"c.json\"}}}}";
        assert_eq!(
            error(server),
            "2:32: server \"h\": auth.clientMetadataUrl: \"c.json\" is not a URL: relative URL without a base"
        );
        let disabled = server.replace("\"url\"", "\"enabled\": false, \"url\"");
        let config = read(&disabled).unwrap();
        assert!(
            config.warnings[0].contains("is not a URL"),
            "{:?}",
            config.warnings
        );
    }

    #[test]
    fn a_key_twice_is_an_error_at_its_second_value() {
        assert_eq!(
            error("{\"mcpServers\": {\"a\": {\"command\": \"x\", \"command\": \"y\"}}}"),
            "1:50: server \"a\": \"command\" appears twice"
        );
    }

    #[test]
    fn an_empty_text_is_an_error_at_its_end() {
        assert_eq!(error(""), "1:0: invalid JSON: EOF while parsing a value");
        assert_eq!(
            error("// only\n"),
            "2:0: invalid JSON: EOF while parsing a value"
        );
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let config = read("\u{feff}{\"mcpServers\": {}}").unwrap();
        assert!(config.servers.is_empty());
    }

    #[test]
    fn no_input_panics() {
        for text in [
            "",
            "{",
            "}",
            "[]",
            "null",
            "\"x\"",
            "{\"mcpServers\": 1}",
            "{\"mcpServers\": {\"a\": 1}}",
            "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": [1]}}}",
            "{\"mcpServers\": {\"a\": {\"url\": \"x\", \"headers\": []}}}",
            "/*",
            "//",
            "{\"a\": \"\\",
            "\"\\ud800\"",
            "\u{feff}",
            "\u{feff}\u{feff}",
            "\r\r\n\r",
            "{\"servers\": {\"\": {}}}",
            "{\"servers\": {\"a\": {\"command\": \"${\"}}}",
            "{\"servers\": {\"a\": {\"url\": \"h\", \"auth\": {\"callbackPort\": 1e999}}}}",
            &"[".repeat(100_000),
        ] {
            let _ = read(text);
        }
    }

    /// Pieces of `mcp.json` files and of mistakes in them.
    const PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"mcpServers\"",
        "\"servers\"",
        "\"a\"",
        "\"command\"",
        "\"url\"",
        "\"args\"",
        "\"env\"",
        "\"auth\"",
        "\"scopes\"",
        "\"type\"",
        "\"http\"",
        "\"enabled\"",
        "\"timeout\"",
        "\"callbackPort\"",
        "\"${X}\"",
        "\"${\"",
        "1",
        "-1",
        "1e999",
        "null",
        "true",
        "/*",
        "*/",
        "//",
        "\n",
        "\r",
        "\"é😀\"",
        "é",
        "\t",
        " ",
        "\\",
        "\"",
        "\u{feff}",
    ];

    proptest::proptest! {
        // The fuzz target's promise (fuzz/fuzz_targets/config_parse.rs), on text made of pieces:
        // no panic, and every error is positioned inside the text.
        #[test]
        fn every_error_is_positioned_inside_the_text(
            pieces in proptest::collection::vec(proptest::sample::select(PIECES), 0..40),
            wrapped: bool,
        ) {
            let body = pieces.concat();
            let text = if wrapped {
                format!("{{\"mcpServers\": {{\"a\": {{\"command\": \"x\", {body}}}}}}}")
            } else {
                body
            };
            if let Err(error) = read(&text) {
                let lines: Vec<&str> = text.split('\n').collect();
                let (line, column) = (error.line().unwrap(), error.column().unwrap());
                proptest::prop_assert!(line >= 1 && line <= lines.len(), "{error}");
                proptest::prop_assert!(column <= lines[line - 1].chars().count() + 1, "{error}");
                proptest::prop_assert_eq!(
                    error.to_string(),
                    format!("f.json:{line}:{column}: {}", error.message())
                );
            }
        }
    }
}
