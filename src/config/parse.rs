//! Reading `mcp.json` into [`Config`]: the file's shape (its sections, each server's fields),
//! `${VAR}` expansion, and what is only a warning (unknown fields, fields for the other kind of
//! server). The JSON itself, positions and type checks are `json.rs`'s.

use std::{collections::BTreeMap, fmt, path::PathBuf};

use jsonc_parser::common::Ranged;

use super::{
    expand::expand,
    json::{is_null, kind, Members, Node, Text},
    AuthConfig, Config, ConfigError, ServerConfig, TransportConfig, DEFAULT_CALLBACK_PORT,
};
use crate::client::ProtocolEra;

/// The two keys that hold servers: Claude Desktop, Claude Code, Cursor; VS Code.
const SECTIONS: [&str; 2] = ["mcpServers", "servers"];

/// A server's fields; any other is warned about and ignored.
const SERVER_FIELDS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "enabled",
    "disabled",
    "timeout",
    "requestTimeoutMs",
    "connectTimeoutMs",
    "era",
    "auth",
];

/// The two spellings of the request timeout; a server may use one.
const REQUEST_TIMEOUT: [&str; 2] = ["timeout", "requestTimeoutMs"];

/// The fields of a server's `auth`.
const AUTH_FIELDS: &[&str] = &[
    "clientId",
    "clientSecret",
    "clientMetadataUrl",
    "scopes",
    "callbackPort",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http,
    Sse,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http => "http",
            Kind::Sse => "sse",
        }
    }
}

/// `type`'s values (Claude Code writes `streamable-http`).
const KINDS: &[(&str, Kind)] = &[
    ("stdio", Kind::Stdio),
    ("http", Kind::Http),
    ("streamable-http", Kind::Http),
    ("streamableHttp", Kind::Http),
    ("sse", Kind::Sse),
];
const KINDS_NAMED: (&str, &str) = ("transport", "\"stdio\", \"http\" or \"sse\"");

const ERAS: &[(&str, ProtocolEra)] = &[
    ("auto", ProtocolEra::Auto),
    ("legacy", ProtocolEra::Legacy),
    ("modern", ProtocolEra::Modern),
    ("prefer-modern", ProtocolEra::PreferModern),
];
const ERAS_NAMED: (&str, &str) = (
    "era",
    "\"auto\", \"legacy\", \"modern\" or \"prefer-modern\"",
);

/// The known fields of one object (a server, its `auth`) that are not `null`, in file order.
struct Fields<'n, 't> {
    /// Who they belong to in messages: `server "name"`.
    scope: String,
    /// Their names' prefix in messages: `auth.` for the fields of `auth`.
    path: &'static str,
    found: Members<'n, 't>,
}

impl<'n, 't> Fields<'n, 't> {
    fn get(&self, name: &str) -> Option<&'n Node<'t>> {
        self.found
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, node)| *node)
    }

    /// A field as messages name it: `server "name": auth.scopes`.
    fn what(&self, name: &str) -> String {
        format!("{}: {}{name}", self.scope, self.path)
    }
}

/// The reading of one file: its text, the variables, the warnings so far (each with the byte
/// offset it is at).
struct Reader<'t> {
    text: Text<'t>,
    vars: &'t dyn Fn(&str) -> Option<String>,
    warnings: Vec<(usize, String)>,
}

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
        vars,
        warnings: Vec::new(),
    };
    let servers = reader.file(&root)?;
    Ok(Config {
        servers,
        warnings: reader
            .warnings
            .into_iter()
            .map(|(_, warning)| warning)
            .collect(),
        origin: origin.to_owned(),
    })
}

impl<'t> Reader<'t> {
    fn warn(&mut self, node: &Node<'t>, message: impl fmt::Display) {
        let warning = self.text.located(self.text.pos(node), message);
        tracing::warn!("{warning}");
        self.warnings.push((node.start(), warning));
    }

    fn error(&self, node: &Node<'t>, message: impl Into<String>) -> ConfigError {
        self.text.error(self.text.pos(node), message)
    }

    /// The servers of the file, section by section in file order.
    fn file(&mut self, root: &Node<'t>) -> Result<Vec<ServerConfig>, ConfigError> {
        if root.as_object().is_none() {
            return Err(self.error(
                root,
                format!(
                    "expected an object with \"mcpServers\" or \"servers\", found {}",
                    kind(root)
                ),
            ));
        }
        let mut servers = Vec::new();
        let mut first_section = None;
        for (key, value) in self.text.object(root, "the file")? {
            if let Some(section) = SECTIONS.into_iter().find(|section| *section == key) {
                if !is_null(value) {
                    self.section(section, value, first_section, &mut servers)?;
                    first_section.get_or_insert(section);
                }
            } else if key == "inputs" {
                // VS Code's prompted inputs: not supported; a `${input:..}` that uses one is an
                // error for its field. Only its shape is checked.
                if !is_null(value) {
                    self.text.array(value, "inputs")?;
                }
            } else {
                self.warn(value, format_args!("unknown field {key:?} (ignored)"));
            }
        }
        if first_section.is_none() {
            self.warn(
                root,
                "no \"mcpServers\" or \"servers\": no servers are configured",
            );
        }
        Ok(servers)
    }

    /// The servers of `section`, added to those of an earlier section (`first`).
    fn section(
        &mut self,
        section: &str,
        node: &Node<'t>,
        first: Option<&str>,
        servers: &mut Vec<ServerConfig>,
    ) -> Result<(), ConfigError> {
        for (name, node) in self.text.object(node, section)? {
            if let Some(first) = first.filter(|first| *first != section) {
                if servers.iter().any(|server| server.name == name) {
                    return Err(self.error(
                        node,
                        format!(
                            "server {name:?} is defined in both \"{first}\" and \"{section}\"; \
                             rename or remove one"
                        ),
                    ));
                }
            }
            let server = self.server(name, node)?;
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

    /// The members of object `node` (named `what` if it is not one) that are `known` and not
    /// `null`; a warning for each other one that is not `null`.
    fn fields<'n>(
        &mut self,
        node: &'n Node<'t>,
        what: &str,
        (scope, path): (&str, &'static str),
        known: &[&str],
    ) -> Result<Fields<'n, 't>, ConfigError> {
        let mut found = self.text.object(node, what)?;
        found.retain(|(_, value)| !is_null(value));
        for (key, value) in &found {
            if !known.contains(key) {
                self.warn(
                    value,
                    format_args!(
                        "{scope}: unknown field {:?} (ignored)",
                        format!("{path}{key}")
                    ),
                );
            }
        }
        found.retain(|(key, _)| known.contains(key));
        Ok(Fields {
            scope: scope.to_owned(),
            path,
            found,
        })
    }

    /// Field `name` read by `read` (given the field's node and its name for messages), if set.
    fn read<'n, T>(
        &mut self,
        fields: &Fields<'n, 't>,
        name: &str,
        read: impl FnOnce(&mut Self, &'n Node<'t>, &str) -> Result<T, ConfigError>,
    ) -> Result<Option<T>, ConfigError> {
        fields
            .get(name)
            .map(|node| read(self, node, &fields.what(name)))
            .transpose()
    }

    fn server(&mut self, name: &str, node: &Node<'t>) -> Result<ServerConfig, ConfigError> {
        if name.trim().is_empty() {
            return Err(self.error(node, "a server has an empty name"));
        }
        let scope = format!("server {name:?}");
        let fields = self.fields(node, &scope, (&scope, ""), SERVER_FIELDS)?;
        let request_timeout = self.request_timeout_field(&fields)?;
        let enabled = self.enabled(&fields)?;
        let kind = self.kind(&fields, node)?;
        let transport = match kind {
            Kind::Stdio => self.stdio(&fields, node, enabled)?,
            Kind::Http | Kind::Sse => self.http(&fields, node, kind, enabled)?,
        };
        let millis = |reader: &mut Self, node, what: &str| reader.text.millis(node, what);
        let request_timeout = match request_timeout {
            Some(key) => self.read(&fields, key, millis)?,
            None => None,
        };
        Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            enabled,
            request_timeout,
            connect_timeout: self.read(&fields, "connectTimeoutMs", millis)?,
            era: self.read(&fields, "era", |reader, node, what| {
                reader.text.one_of(node, what, ERAS_NAMED, ERAS)
            })?,
            auth: self.auth(&fields, kind, enabled)?,
        })
    }

    /// Which spelling of the request timeout the server uses; an error if it uses both.
    fn request_timeout_field<'n>(
        &self,
        fields: &Fields<'n, 't>,
    ) -> Result<Option<&'n str>, ConfigError> {
        let mut set = fields
            .found
            .iter()
            .filter(|(key, _)| REQUEST_TIMEOUT.contains(key));
        match (set.next(), set.next()) {
            (Some((first, _)), Some((second, node))) => Err(self.error(
                node,
                format!(
                    "{}: {second} and {first} both set the request timeout; keep one",
                    fields.scope
                ),
            )),
            (first, _) => Ok(first.map(|(key, _)| *key)),
        }
    }

    /// `enabled`, or the opposite of Cline's `disabled`; `true` when neither is set.
    fn enabled(&mut self, fields: &Fields<'_, 't>) -> Result<bool, ConfigError> {
        let boolean = |reader: &mut Self, node, what: &str| reader.text.boolean(node, what);
        let enabled = self.read(fields, "enabled", boolean)?;
        let disabled = self.read(fields, "disabled", boolean)?;
        match (enabled, disabled, fields.get("disabled")) {
            (Some(enabled), Some(disabled), Some(node)) if enabled == disabled => Err(self.error(
                node,
                format!(
                    "{}: enabled: {enabled} and disabled: {disabled} contradict each other",
                    fields.scope
                ),
            )),
            (Some(enabled), _, _) => Ok(enabled),
            (None, disabled, _) => Ok(!disabled.unwrap_or(false)),
        }
    }

    /// The transport: as `type` says, else stdio with a `command`, http with a `url`.
    fn kind(&mut self, fields: &Fields<'_, 't>, server: &Node<'t>) -> Result<Kind, ConfigError> {
        let declared = fields.get("type");
        let declared = declared
            .map(|node| {
                let kind = self
                    .text
                    .one_of(node, &fields.what("type"), KINDS_NAMED, KINDS)?;
                Ok::<_, ConfigError>((kind, node))
            })
            .transpose()?;
        let (at, problem) = match (declared, fields.get("command"), fields.get("url")) {
            (Some((Kind::Stdio, _)), _, Some(url)) => (
                url,
                "type \"stdio\" with a url (a stdio server is started with a command)".to_owned(),
            ),
            (Some((Kind::Stdio, node)), None, None) => {
                (node, "type \"stdio\" without a command".to_owned())
            }
            (Some((kind, _)), Some(command), _) if kind != Kind::Stdio => (
                command,
                format!(
                    "type \"{}\" with a command (an HTTP server is reached at its url)",
                    kind.name()
                ),
            ),
            (Some((kind, node)), None, None) => {
                (node, format!("type \"{}\" without a url", kind.name()))
            }
            (Some((kind, _)), _, _) => return Ok(kind),
            (None, Some(_), Some(url)) => {
                (url, "has both a command and a url; keep one".to_owned())
            }
            (None, Some(_), None) => return Ok(Kind::Stdio),
            (None, None, Some(_)) => return Ok(Kind::Http),
            (None, None, None) => (
                server,
                "has neither a command (stdio) nor a url (http)".to_owned(),
            ),
        };
        Err(self.error(at, format!("{}: {problem}", fields.scope)))
    }

    fn stdio(
        &mut self,
        fields: &Fields<'_, 't>,
        server: &Node<'t>,
        strict: bool,
    ) -> Result<TransportConfig, ConfigError> {
        self.ignored(fields, &["headers"], "a stdio server");
        let command = self.not_empty(fields, "command", server, strict)?;
        let args = self.read(fields, "args", |reader, node, what| {
            reader.expanded_list(node, what, strict)
        })?;
        let env = self.read(fields, "env", |reader, node, what| {
            reader.expanded_map(node, what, strict)
        })?;
        let cwd = self.read(fields, "cwd", |reader, node, what| {
            reader.expanded(node, what, strict)
        })?;
        Ok(TransportConfig::Stdio {
            command,
            args: args.unwrap_or_default(),
            env: env.unwrap_or_default(),
            cwd: cwd.map(PathBuf::from),
        })
    }

    fn http(
        &mut self,
        fields: &Fields<'_, 't>,
        server: &Node<'t>,
        kind: Kind,
        strict: bool,
    ) -> Result<TransportConfig, ConfigError> {
        self.ignored(fields, &["args", "env", "cwd"], "an HTTP server");
        let url = self.not_empty(fields, "url", server, strict)?;
        let headers = self
            .read(fields, "headers", |reader, node, what| {
                reader.expanded_map(node, what, strict)
            })?
            .unwrap_or_default();
        Ok(if kind == Kind::Sse {
            TransportConfig::Sse { url, headers }
        } else {
            TransportConfig::Http { url, headers }
        })
    }

    /// A warning for each of the fields `names` that is set: they mean nothing for `server`.
    fn ignored(&mut self, fields: &Fields<'_, 't>, names: &[&str], server: &str) {
        for name in names {
            if let Some(node) = fields.get(name) {
                let what = fields.what(name);
                self.warn(node, format_args!("{what}: ignored for {server}"));
            }
        }
    }

    /// String field `name`, expanded; an error (at the server if it is missing) if it is empty.
    fn not_empty(
        &mut self,
        fields: &Fields<'_, 't>,
        name: &str,
        server: &Node<'t>,
        strict: bool,
    ) -> Result<String, ConfigError> {
        let value = self.read(fields, name, |reader, node, what| {
            reader.expanded(node, what, strict)
        })?;
        match value {
            Some(value) if !value.trim().is_empty() => Ok(value),
            _ => Err(self.error(
                fields.get(name).unwrap_or(server),
                format!("{}: {name} is empty", fields.scope),
            )),
        }
    }

    /// A string with its `${...}` references expanded. When not `strict` (the server is
    /// disabled), a reference that cannot be expanded is a warning and the value is kept as
    /// written.
    fn expanded(
        &mut self,
        node: &Node<'t>,
        what: &str,
        strict: bool,
    ) -> Result<String, ConfigError> {
        let text = self.text.string(node, what)?;
        match expand(text, self.vars) {
            Ok(value) => Ok(value),
            Err(e) if strict => Err(self.error(node, format!("{what}: {e}"))),
            Err(e) => {
                self.warn(
                    node,
                    format_args!("{what}: {e} (the server is disabled; kept as written)"),
                );
                Ok(text.to_owned())
            }
        }
    }

    /// An array of strings, each expanded.
    fn expanded_list(
        &mut self,
        node: &Node<'t>,
        what: &str,
        strict: bool,
    ) -> Result<Vec<String>, ConfigError> {
        let items = self.text.array(node, what)?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.expanded(item, &format!("{what}[{i}]"), strict))
            .collect()
    }

    /// An object of strings, each value expanded.
    fn expanded_map(
        &mut self,
        node: &Node<'t>,
        what: &str,
        strict: bool,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let members = self.text.object(node, what)?;
        members
            .into_iter()
            .map(|(key, value)| {
                let value = self.expanded(value, &format!("{what}.{key}"), strict)?;
                Ok((key.to_owned(), value))
            })
            .collect()
    }

    /// The server's `auth`, for an HTTP server (for a stdio one it is ignored with a warning).
    fn auth(
        &mut self,
        fields: &Fields<'_, 't>,
        kind: Kind,
        strict: bool,
    ) -> Result<Option<AuthConfig>, ConfigError> {
        let Some(node) = fields.get("auth") else {
            return Ok(None);
        };
        if kind == Kind::Stdio {
            self.ignored(fields, &["auth"], "a stdio server");
            return Ok(None);
        }
        let what = fields.what("auth");
        let warned = self.warnings.len();
        let auth = self.fields(node, &what, (&fields.scope, "auth."), AUTH_FIELDS)?;
        let expanded = |reader: &mut Self, node, what: &str| reader.expanded(node, what, strict);
        let auth = AuthConfig {
            client_id: self.read(&auth, "clientId", expanded)?,
            client_secret: self.read(&auth, "clientSecret", expanded)?,
            client_metadata_url: self.read(&auth, "clientMetadataUrl", expanded)?,
            scopes: self
                .read(&auth, "scopes", Self::scopes)?
                .unwrap_or_default(),
            callback_port: self
                .read(&auth, "callbackPort", |reader, node, what| {
                    reader.text.port(node, what)
                })?
                .unwrap_or(DEFAULT_CALLBACK_PORT),
        };
        // Its warnings in file order, wherever its fields are read.
        if let Some(new) = self.warnings.get_mut(warned..) {
            new.sort_by_key(|(offset, _)| *offset);
        }
        Ok(Some(auth))
    }

    /// `auth.scopes`: an array of strings or one space-separated string. Kept, with a warning
    /// that they are not requested.
    fn scopes(&mut self, node: &Node<'t>, what: &str) -> Result<Vec<String>, ConfigError> {
        let scopes = match node.as_string_lit() {
            Some(scopes) => scopes.value.split_whitespace().map(str::to_owned).collect(),
            None => {
                let items = self.text.array(node, what)?;
                let item = |(i, item)| self.text.string(item, &format!("{what}[{i}]"));
                items
                    .iter()
                    .enumerate()
                    .map(|entry| item(entry).map(str::to_owned))
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        if !scopes.is_empty() {
            self.warn(
                node,
                format_args!(
                    "{what}: kept but not requested: the OAuth flow asks for the scopes the \
                     server's challenge or metadata names"
                ),
            );
        }
        Ok(scopes)
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
            "2:32: server \"a\": command: expected a string, found a number"
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
            "6:9: server \"docs\": auth.scopes[1]: expected a string, found a number"
        );
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
            "1:48: server \"é😀ｘ\": cwd: expected a string, found a number"
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
