//! Reading the text: JSON (with comments and trailing commas, as VS Code writes it) into
//! [`Config`], with the position of every value.
//!
//! The file is read into borrowed [`RawValue`]s, level by level, so every value is a slice of
//! the text and its line and column are known exactly: a wrong-typed field, an unset variable or
//! an unknown field is reported where it is.

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{
    expand::expand, AuthConfig, Config, ConfigError, ServerConfig, TransportConfig,
    DEFAULT_CALLBACK_PORT,
};
use crate::client::ProtocolEra;

/// The two keys that hold servers: Claude Desktop, Claude Code, Cursor; VS Code.
const SECTIONS: [&str; 2] = ["mcpServers", "servers"];

/// A line and a column, both from 1 (the column counts characters).
#[derive(Debug, Clone, Copy)]
struct Pos {
    line: usize,
    column: usize,
}

/// The members of a JSON object, in order, each value still as text.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'de RawValue = map.next_value()?;
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// What kind of JSON value `raw` is, in words.
fn kind(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

/// The file being read, and what reading it found so far.
struct Doc<'a> {
    /// The text parsed: the file with comments, trailing commas and a BOM blanked out (same
    /// length, same byte offsets).
    text: &'a str,
    /// The file as given (for columns).
    original: &'a str,
    origin: &'a str,
    vars: &'a dyn Fn(&str) -> Option<String>,
    warnings: Vec<String>,
}

/// A server's known fields, as found (`null` counts as absent).
#[derive(Default)]
struct Fields<'a> {
    kind: Option<&'a RawValue>,
    command: Option<&'a RawValue>,
    args: Option<&'a RawValue>,
    env: Option<&'a RawValue>,
    cwd: Option<&'a RawValue>,
    url: Option<&'a RawValue>,
    headers: Option<&'a RawValue>,
    enabled: Option<&'a RawValue>,
    disabled: Option<&'a RawValue>,
    request_timeout: Option<(&'static str, &'a RawValue)>,
    connect_timeout: Option<&'a RawValue>,
    era: Option<&'a RawValue>,
    auth: Option<&'a RawValue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http,
    Sse,
}

impl<'a> Doc<'a> {
    /// Where `raw` (a slice of the text) starts.
    fn pos(&self, raw: &RawValue) -> Pos {
        let start = self.text.as_ptr() as usize;
        let offset = (raw.get().as_ptr() as usize)
            .checked_sub(start)
            .filter(|offset| *offset <= self.text.len())
            .unwrap_or(0);
        let before = self
            .original
            .get(..offset)
            .or_else(|| self.text.get(..offset))
            .unwrap_or_default();
        let line_start = before.rfind('\n').map_or(0, |at| at + 1);
        Pos {
            line: before.matches('\n').count() + 1,
            column: before.get(line_start..).unwrap_or_default().chars().count() + 1,
        }
    }

    fn error(&self, at: Pos, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.origin, at.line, at.column, message.into())
    }

    fn warn(&mut self, at: Pos, message: impl fmt::Display) {
        let warning = format!("{}:{}:{}: {message}", self.origin, at.line, at.column);
        tracing::warn!("{warning}");
        self.warnings.push(warning);
    }

    /// `raw` as an object's members; an error naming `what` if it is not one, or if a key
    /// appears twice.
    fn object(
        &self,
        raw: &'a RawValue,
        what: &str,
    ) -> Result<Vec<(String, &'a RawValue)>, ConfigError> {
        let at = self.pos(raw);
        if !raw.get().starts_with('{') {
            return Err(self.error(
                at,
                format!("{what}: expected an object, found {}", kind(raw)),
            ));
        }
        let text: &'a str = raw.get();
        let Entries(entries) = serde_json::from_str::<Entries<'a>>(text)
            .map_err(|e| self.error(at, format!("{what}: {e}")))?;
        for (i, (key, value)) in entries.iter().enumerate() {
            if entries[..i].iter().any(|(earlier, _)| earlier == key) {
                return Err(self.error(self.pos(value), format!("{what}: {key:?} appears twice")));
            }
        }
        Ok(entries)
    }

    fn array(&self, raw: &'a RawValue, what: &str) -> Result<Vec<&'a RawValue>, ConfigError> {
        let at = self.pos(raw);
        if !raw.get().starts_with('[') {
            return Err(self.error(
                at,
                format!("{what}: expected an array, found {}", kind(raw)),
            ));
        }
        let text: &'a str = raw.get();
        serde_json::from_str::<Vec<&'a RawValue>>(text)
            .map_err(|e| self.error(at, format!("{what}: {e}")))
    }

    fn string(&self, raw: &RawValue, what: &str) -> Result<String, ConfigError> {
        let at = self.pos(raw);
        if !raw.get().starts_with('"') {
            return Err(self.error(
                at,
                format!("{what}: expected a string, found {}", kind(raw)),
            ));
        }
        serde_json::from_str::<String>(raw.get())
            .map_err(|e| self.error(at, format!("{what}: {e}")))
    }

    fn boolean(&self, raw: &RawValue, what: &str) -> Result<bool, ConfigError> {
        match raw.get() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.error(
                self.pos(raw),
                format!("{what}: expected true or false, found {}", kind(raw)),
            )),
        }
    }

    fn millis(&self, raw: &RawValue, what: &str) -> Result<Duration, ConfigError> {
        serde_json::from_str::<u64>(raw.get())
            .map(Duration::from_millis)
            .map_err(|_| {
                let found = match kind(raw) {
                    "a number" => raw.get().to_owned(),
                    other => other.to_owned(),
                };
                self.error(
                    self.pos(raw),
                    format!("{what}: expected a whole number of milliseconds, found {found}"),
                )
            })
    }

    /// A string field with its `${...}` references expanded. For a disabled server a reference
    /// that cannot be expanded is a warning, and the value is kept as written.
    fn expanded(
        &mut self,
        raw: &RawValue,
        what: &str,
        strict: bool,
    ) -> Result<String, ConfigError> {
        let text = self.string(raw, what)?;
        match expand(&text, self.vars) {
            Ok(value) => Ok(value),
            Err(e) if strict => Err(self.error(self.pos(raw), format!("{what}: {e}"))),
            Err(e) => {
                let at = self.pos(raw);
                self.warn(
                    at,
                    format!("{what}: {e} (the server is disabled; kept as written)"),
                );
                Ok(text)
            }
        }
    }

    /// An array of strings, each expanded.
    fn expanded_list(
        &mut self,
        raw: &'a RawValue,
        what: &str,
        strict: bool,
    ) -> Result<Vec<String>, ConfigError> {
        let mut out = Vec::new();
        for (i, item) in self.array(raw, what)?.into_iter().enumerate() {
            out.push(self.expanded(item, &format!("{what}[{i}]"), strict)?);
        }
        Ok(out)
    }

    /// An object of strings, each value expanded.
    fn expanded_map(
        &mut self,
        raw: &'a RawValue,
        what: &str,
        strict: bool,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut out = BTreeMap::new();
        for (key, value) in self.object(raw, what)? {
            let value = self.expanded(value, &format!("{what}.{key}"), strict)?;
            out.insert(key, value);
        }
        Ok(out)
    }

    fn server(&mut self, name: &str, raw: &'a RawValue) -> Result<ServerConfig, ConfigError> {
        let at = self.pos(raw);
        let ctx = format!("server {name:?}");
        if name.trim().is_empty() {
            return Err(self.error(at, "a server has an empty name"));
        }
        let mut fields = Fields::default();
        for (key, value) in self.object(raw, &ctx)? {
            if is_null(value) {
                continue;
            }
            let slot = match key.as_str() {
                "type" => &mut fields.kind,
                "command" => &mut fields.command,
                "args" => &mut fields.args,
                "env" => &mut fields.env,
                "cwd" => &mut fields.cwd,
                "url" => &mut fields.url,
                "headers" => &mut fields.headers,
                "enabled" => &mut fields.enabled,
                "disabled" => &mut fields.disabled,
                "connectTimeoutMs" => &mut fields.connect_timeout,
                "era" => &mut fields.era,
                "auth" => &mut fields.auth,
                "timeout" | "requestTimeoutMs" => {
                    let key: &'static str = if key == "timeout" {
                        "timeout"
                    } else {
                        "requestTimeoutMs"
                    };
                    if let Some((other, _)) = fields.request_timeout {
                        return Err(self.error(
                            self.pos(value),
                            format!(
                                "{ctx}: {key} and {other} both set the request timeout; keep one"
                            ),
                        ));
                    }
                    fields.request_timeout = Some((key, value));
                    continue;
                }
                _ => {
                    let at = self.pos(value);
                    self.warn(at, format!("{ctx}: unknown field {key:?} (ignored)"));
                    continue;
                }
            };
            *slot = Some(value);
        }

        let enabled = match fields.enabled {
            Some(raw) => Some(self.boolean(raw, &format!("{ctx}: enabled"))?),
            None => None,
        };
        let disabled = match fields.disabled {
            Some(raw) => Some(self.boolean(raw, &format!("{ctx}: disabled"))?),
            None => None,
        };
        let enabled = match (enabled, disabled) {
            (Some(enabled), Some(disabled)) if enabled == disabled => {
                let raw = fields.disabled.unwrap_or(raw);
                return Err(self.error(
                    self.pos(raw),
                    format!(
                        "{ctx}: enabled: {enabled} and disabled: {disabled} contradict each other"
                    ),
                ));
            }
            (Some(enabled), _) => enabled,
            (None, Some(disabled)) => !disabled,
            (None, None) => true,
        };
        let strict = enabled;

        let declared = match fields.kind {
            Some(raw) => {
                let what = format!("{ctx}: type");
                match self.string(raw, &what)?.as_str() {
                    "stdio" => Some((Kind::Stdio, raw)),
                    "http" | "streamable-http" | "streamableHttp" => Some((Kind::Http, raw)),
                    "sse" => Some((Kind::Sse, raw)),
                    other => {
                        return Err(self.error(
                            self.pos(raw),
                            format!(
                                "{what}: unknown transport {other:?} (expected \"stdio\", \
                                 \"http\" or \"sse\")"
                            ),
                        ))
                    }
                }
            }
            None => None,
        };
        let kind = match (declared, fields.command, fields.url) {
            (Some((Kind::Stdio, _)), _, Some(url)) => {
                return Err(self.error(
                    self.pos(url),
                    format!(
                    "{ctx}: type \"stdio\" with a url (a stdio server is started with a command)"
                ),
                ))
            }
            (Some((Kind::Stdio, raw)), None, None) => {
                return Err(self.error(
                    self.pos(raw),
                    format!("{ctx}: type \"stdio\" without a command"),
                ))
            }
            (Some((kind, _)), Some(command), _) if kind != Kind::Stdio => {
                return Err(self.error(
                    self.pos(command),
                    format!(
                        "{ctx}: type \"{}\" with a command (an HTTP server is reached at its url)",
                        if kind == Kind::Sse { "sse" } else { "http" }
                    ),
                ))
            }
            (Some((kind, raw)), None, None) => {
                return Err(self.error(
                    self.pos(raw),
                    format!(
                        "{ctx}: type \"{}\" without a url",
                        if kind == Kind::Sse { "sse" } else { "http" }
                    ),
                ))
            }
            (Some((kind, _)), _, _) => kind,
            (None, Some(_), Some(url)) => {
                return Err(self.error(
                    self.pos(url),
                    format!("{ctx}: has both a command and a url; keep one"),
                ))
            }
            (None, Some(_), None) => Kind::Stdio,
            (None, None, Some(_)) => Kind::Http,
            (None, None, None) => {
                return Err(self.error(
                    at,
                    format!("{ctx}: has neither a command (stdio) nor a url (http)"),
                ))
            }
        };

        let transport = match kind {
            Kind::Stdio => {
                for (field, raw) in [("headers", fields.headers)] {
                    if let Some(raw) = raw {
                        let at = self.pos(raw);
                        self.warn(at, format!("{ctx}: {field}: ignored for a stdio server"));
                    }
                }
                let command = match fields.command {
                    Some(raw) => self.expanded(raw, &format!("{ctx}: command"), strict)?,
                    None => String::new(),
                };
                if command.trim().is_empty() {
                    let raw = fields.command.unwrap_or(raw);
                    return Err(self.error(self.pos(raw), format!("{ctx}: command is empty")));
                }
                let args = match fields.args {
                    Some(raw) => self.expanded_list(raw, &format!("{ctx}: args"), strict)?,
                    None => Vec::new(),
                };
                let env = match fields.env {
                    Some(raw) => self.expanded_map(raw, &format!("{ctx}: env"), strict)?,
                    None => BTreeMap::new(),
                };
                let cwd = match fields.cwd {
                    Some(raw) => Some(PathBuf::from(self.expanded(
                        raw,
                        &format!("{ctx}: cwd"),
                        strict,
                    )?)),
                    None => None,
                };
                TransportConfig::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                }
            }
            Kind::Http | Kind::Sse => {
                for (field, raw) in [
                    ("args", fields.args),
                    ("env", fields.env),
                    ("cwd", fields.cwd),
                ] {
                    if let Some(raw) = raw {
                        let at = self.pos(raw);
                        self.warn(at, format!("{ctx}: {field}: ignored for an HTTP server"));
                    }
                }
                let url = match fields.url {
                    Some(raw) => self.expanded(raw, &format!("{ctx}: url"), strict)?,
                    None => String::new(),
                };
                if url.trim().is_empty() {
                    let raw = fields.url.unwrap_or(raw);
                    return Err(self.error(self.pos(raw), format!("{ctx}: url is empty")));
                }
                let headers = match fields.headers {
                    Some(raw) => self.expanded_map(raw, &format!("{ctx}: headers"), strict)?,
                    None => BTreeMap::new(),
                };
                if kind == Kind::Sse {
                    TransportConfig::Sse { url, headers }
                } else {
                    TransportConfig::Http { url, headers }
                }
            }
        };

        let request_timeout = match fields.request_timeout {
            Some((key, raw)) => Some(self.millis(raw, &format!("{ctx}: {key}"))?),
            None => None,
        };
        let connect_timeout = match fields.connect_timeout {
            Some(raw) => Some(self.millis(raw, &format!("{ctx}: connectTimeoutMs"))?),
            None => None,
        };
        let era = match fields.era {
            Some(raw) => {
                let what = format!("{ctx}: era");
                Some(match self.string(raw, &what)?.as_str() {
                    "auto" => ProtocolEra::Auto,
                    "legacy" => ProtocolEra::Legacy,
                    "modern" => ProtocolEra::Modern,
                    "prefer-modern" => ProtocolEra::PreferModern,
                    other => {
                        return Err(self.error(
                            self.pos(raw),
                            format!(
                                "{what}: unknown era {other:?} (expected \"auto\", \"legacy\", \
                                 \"modern\" or \"prefer-modern\")"
                            ),
                        ))
                    }
                })
            }
            None => None,
        };
        let auth = match fields.auth {
            Some(raw) if kind == Kind::Stdio => {
                let at = self.pos(raw);
                self.warn(at, format!("{ctx}: auth: ignored for a stdio server"));
                None
            }
            Some(raw) => Some(self.auth(raw, &ctx, strict)?),
            None => None,
        };
        Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            enabled,
            request_timeout,
            connect_timeout,
            era,
            auth,
        })
    }

    fn auth(
        &mut self,
        raw: &'a RawValue,
        ctx: &str,
        strict: bool,
    ) -> Result<AuthConfig, ConfigError> {
        let mut auth = AuthConfig {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
            callback_port: DEFAULT_CALLBACK_PORT,
        };
        for (key, value) in self.object(raw, &format!("{ctx}: auth"))? {
            if is_null(value) {
                continue;
            }
            let what = format!("{ctx}: auth.{key}");
            match key.as_str() {
                "clientId" => auth.client_id = Some(self.expanded(value, &what, strict)?),
                "clientSecret" => auth.client_secret = Some(self.expanded(value, &what, strict)?),
                "clientMetadataUrl" => {
                    auth.client_metadata_url = Some(self.expanded(value, &what, strict)?)
                }
                "scopes" => {
                    auth.scopes = if value.get().starts_with('"') {
                        self.string(value, &what)?
                            .split_whitespace()
                            .map(str::to_owned)
                            .collect()
                    } else {
                        let mut scopes = Vec::new();
                        for (i, item) in self.array(value, &what)?.into_iter().enumerate() {
                            scopes.push(self.string(item, &format!("{what}[{i}]"))?);
                        }
                        scopes
                    };
                    if !auth.scopes.is_empty() {
                        let at = self.pos(value);
                        self.warn(
                            at,
                            format!(
                                "{what}: kept but not requested: the OAuth flow asks for the \
                                 scopes the server's challenge or metadata names"
                            ),
                        );
                    }
                }
                "callbackPort" => {
                    auth.callback_port = serde_json::from_str::<u16>(value.get())
                        .ok()
                        .filter(|port| *port != 0)
                        .ok_or_else(|| {
                            self.error(
                                self.pos(value),
                                format!(
                                    "{what}: expected a port number from 1 to 65535, found {}",
                                    match kind(value) {
                                        "a number" => value.get(),
                                        other => other,
                                    }
                                ),
                            )
                        })?;
                }
                _ => {
                    let at = self.pos(value);
                    self.warn(at, format!("{ctx}: unknown field \"auth.{key}\" (ignored)"));
                }
            }
        }
        Ok(auth)
    }
}

/// The file with what JSON does not allow but VS Code's `mcp.json` does (`//` and `/* */`
/// comments, trailing commas) and a leading byte order mark replaced by spaces: the same length,
/// so every position stays where it was.
fn blank_extensions(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in out.iter_mut().take(to).skip(from) {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut i = 0;
    if text.starts_with('\u{feff}') {
        blank(&mut out, 0, 3);
        i = 3;
    }
    let mut in_string = false;
    // The last comma outside strings with nothing but blanks and comments after it, and the
    // last significant byte before it.
    let mut comma: Option<usize> = None;
    let mut previous = b' ';
    while let Some(&byte) = bytes.get(i) {
        if in_string {
            match byte {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (byte, bytes.get(i + 1)) {
            (b'/', Some(b'/')) => {
                let end = text
                    .get(i..)
                    .and_then(|rest| rest.find('\n'))
                    .map_or(bytes.len(), |at| i + at);
                blank(&mut out, i, end);
                i = end;
                continue;
            }
            (b'/', Some(b'*')) => {
                let Some(end) = text.get(i + 2..).and_then(|rest| rest.find("*/")) else {
                    // Unterminated: left for the JSON parser to refuse.
                    break;
                };
                let end = i + 2 + end + 2;
                blank(&mut out, i, end);
                i = end;
                continue;
            }
            (b' ' | b'\t' | b'\r' | b'\n', _) => {}
            (b',', _) => {
                // `[,` `{,` `,,` stay errors.
                comma = (!matches!(previous, b'[' | b'{' | b',')).then_some(i);
                previous = byte;
            }
            (b'}' | b']', _) => {
                if let Some(at) = comma.take() {
                    blank(&mut out, at, at + 1);
                }
                previous = byte;
            }
            _ => {
                in_string = byte == b'"';
                comma = None;
                previous = byte;
            }
        }
        i += 1;
    }
    // Only ASCII bytes and whole comments (which start and end at ASCII) were replaced.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// A syntax error of `serde_json`, at its position, without the position repeated in the text.
/// `serde_json` counts a line's bytes; a position here counts characters (of `text`).
fn syntax_error(origin: &str, text: &str, error: &serde_json::Error) -> ConfigError {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = message.strip_suffix(&suffix).unwrap_or(&message).to_owned();
    let row = text
        .split('\n')
        .nth(error.line().saturating_sub(1))
        .unwrap_or_default();
    let mut end = error.column().min(row.len());
    while !row.is_char_boundary(end) {
        end += 1;
    }
    let column = row.get(..end).map_or(error.column(), |r| r.chars().count());
    ConfigError::at(
        origin,
        error.line(),
        column,
        format!("invalid JSON: {message}"),
    )
}

/// Reads `text` (named `origin` in messages).
pub(super) fn parse(
    text: &str,
    origin: &str,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let cleaned = blank_extensions(text);
    let root: &RawValue =
        serde_json::from_str(&cleaned).map_err(|e| syntax_error(origin, text, &e))?;
    let mut doc = Doc {
        text: &cleaned,
        original: text,
        origin,
        vars,
        warnings: Vec::new(),
    };
    if !root.get().starts_with('{') {
        return Err(doc.error(
            doc.pos(root),
            format!(
                "expected an object with \"mcpServers\" or \"servers\", found {}",
                kind(root)
            ),
        ));
    }
    let top = doc.object(root, "the file")?;
    let mut servers: Vec<ServerConfig> = Vec::new();
    let mut found_section: Option<&str> = None;
    for (key, value) in top {
        if let Some(section) = SECTIONS.iter().copied().find(|s| *s == key) {
            if is_null(value) {
                continue;
            }
            for (name, raw) in doc.object(value, section)? {
                if let Some(first) = found_section.filter(|first| *first != section) {
                    if servers.iter().any(|s| s.name == name) {
                        return Err(doc.error(
                            doc.pos(raw),
                            format!(
                                "server {name:?} is defined in both \"{first}\" and \"{section}\"; \
                                 rename or remove one"
                            ),
                        ));
                    }
                }
                let server = doc.server(&name, raw)?;
                if !server.enabled {
                    tracing::info!(
                        "{origin}: server {name:?} is disabled in its configuration; not started"
                    );
                }
                servers.push(server);
            }
            found_section = Some(found_section.unwrap_or(section));
        } else if key == "inputs" {
            // VS Code's prompted inputs: not supported; a `${input:..}` that uses one is an
            // error for its field. Only its shape is checked.
            if !is_null(value) {
                doc.array(value, "inputs")?;
            }
        } else {
            let at = doc.pos(value);
            doc.warn(at, format!("unknown field {key:?} (ignored)"));
        }
    }
    if found_section.is_none() {
        let at = doc.pos(root);
        doc.warn(
            at,
            "no \"mcpServers\" or \"servers\": no servers are configured",
        );
    }
    Ok(Config {
        servers,
        warnings: doc.warnings,
        origin: origin.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_vars(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn comments_and_trailing_commas_are_blanked_in_place() {
        let text = "{ // a comment\n  \"a\": [1, 2,], /* x\n y */ \"b\": \"// not a comment,\",\n}";
        let cleaned = blank_extensions(text);
        assert_eq!(cleaned.len(), text.len());
        assert_eq!(cleaned.matches('\n').count(), text.matches('\n').count());
        let value: serde_json::Value = serde_json::from_str(&cleaned).unwrap();
        assert_eq!(value["a"], serde_json::json!([1, 2]));
        assert_eq!(value["b"], "// not a comment,");
    }

    #[test]
    fn a_comma_without_a_value_before_it_stays_an_error() {
        for text in ["[,]", "{,}", "[1,,]"] {
            assert!(serde_json::from_str::<serde_json::Value>(&blank_extensions(text)).is_err());
        }
    }

    #[test]
    fn escaped_quotes_do_not_end_a_string() {
        let text = r#"{"a": "x\" // y", "b": 1,}"#;
        let value: serde_json::Value = serde_json::from_str(&blank_extensions(text)).unwrap();
        assert_eq!(value["a"], "x\" // y");
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let config = parse("\u{feff}{\"mcpServers\": {}}", "bom.json", &no_vars).unwrap();
        assert!(config.servers.is_empty());
    }

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let err = parse(
            "{\"mcpServers\": {\n  \"é\": {\"command\": \"x\",\n   \"args\": 5}}}",
            "f.json",
            &no_vars,
        )
        .unwrap_err();
        assert_eq!((err.line(), err.column()), (Some(3), Some(12)));
    }

    // Found by the `config_parse` fuzz target: a syntax error's column counted bytes (as
    // serde_json does), so it fell past the end of a line with non-ASCII characters.
    #[test]
    fn a_syntax_error_column_counts_characters_regression() {
        let err = parse("{\"mcpServers\": {\"ééé\": ", "f.json", &no_vars).unwrap_err();
        assert_eq!((err.line(), err.column()), (Some(1), Some(23)));
        let err = parse("{\"é\": x}", "f.json", &no_vars).unwrap_err();
        assert_eq!((err.line(), err.column()), (Some(1), Some(7)));
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
            "\u{feff}",
            "{\"servers\": {\"\": {}}}",
            "{\"servers\": {\"a\": {\"command\": \"${\"}}}",
        ] {
            let _ = parse(text, "fuzz.json", &no_vars);
        }
    }
}
