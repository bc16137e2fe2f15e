//! The JSON layer of the reader: the text (JSON with comments and trailing commas, as VS Code
//! writes it) parsed by `jsonc-parser` into a tree whose every value knows its byte range, and
//! the type-checked reads of that tree, each refusal a [`ConfigError`] at the value's line and
//! column.

use std::{fmt, time::Duration};

use jsonc_parser::{
    ast::{ObjectPropName, Value},
    common::Ranged,
    errors::{ParseError, ParseErrorKind},
    parse_to_ast,
    tokens::Token,
    CollectOptions, ParseOptions, ParseStringErrorKind, Scanner, ScannerOptions,
};

use super::ConfigError;

/// A parsed value of the file.
pub(super) type Node<'t> = Value<'t>;

/// Strict JSON plus what VS Code's `mcp.json` allows: comments and trailing commas.
fn parse_options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

fn scanner_options() -> ScannerOptions {
    let options = parse_options();
    ScannerOptions {
        allow_single_quoted_strings: options.allow_single_quoted_strings,
        allow_hexadecimal_numbers: options.allow_hexadecimal_numbers,
        allow_unary_plus_numbers: options.allow_unary_plus_numbers,
        allow_bare_decimal_point_numbers: options.allow_bare_decimal_point_numbers,
        allow_non_finite_numbers: options.allow_non_finite_numbers,
        allow_extended_string_escapes: options.allow_extended_string_escapes,
    }
}

/// A line and a column, both from 1 (the column counts characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    pub(super) line: usize,
    pub(super) column: usize,
}

/// The file's text: what positions are counted in.
pub(super) struct Text<'t> {
    /// The file as given, a byte order mark included.
    whole: &'t str,
    /// Where the JSON starts in `whole` (after a byte order mark).
    body_start: usize,
    origin: &'t str,
}

impl<'t> Text<'t> {
    pub(super) fn new(whole: &'t str, origin: &'t str) -> Self {
        let body = whole.strip_prefix('\u{feff}').unwrap_or(whole);
        Self {
            whole,
            body_start: whole.len() - body.len(),
            origin,
        }
    }

    pub(super) fn origin(&self) -> &'t str {
        self.origin
    }

    fn body(&self) -> &'t str {
        self.whole.get(self.body_start..).unwrap_or_default()
    }

    /// The position of byte `offset` of the JSON (after a byte order mark).
    fn pos_of(&self, offset: usize) -> Pos {
        let offset = offset.saturating_add(self.body_start).min(self.whole.len());
        let before = self.whole.get(..offset).unwrap_or(self.whole);
        let line_start = before.rfind('\n').map_or(0, |at| at + 1);
        Pos {
            line: before.matches('\n').count() + 1,
            column: before.get(line_start..).unwrap_or_default().chars().count() + 1,
        }
    }

    /// Where `node` starts.
    pub(super) fn pos(&self, node: &impl Ranged) -> Pos {
        self.pos_of(node.start())
    }

    /// The end of the text, as `serde_json` reports it: the last line, its last character (0 on
    /// an empty line).
    fn end(&self) -> Pos {
        let end = self.pos_of(self.whole.len());
        Pos {
            column: end.column - 1,
            ..end
        }
    }

    pub(super) fn error(&self, at: Pos, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.origin, at.line, at.column, message.into())
    }

    /// `origin:line:column: message`, a warning's text.
    pub(super) fn located(&self, at: Pos, message: impl fmt::Display) -> String {
        format!("{}:{}:{}: {message}", self.origin, at.line, at.column)
    }

    /// The file's value (a text with none, only blanks and comments, is an error at its end).
    pub(super) fn parse(&self) -> Result<Node<'t>, ConfigError> {
        let body = self.body();
        let parsed = parse_to_ast(body, &CollectOptions::default(), &parse_options());
        // The first mistake in the text is the one reported, as a JSON parser would.
        let parsed = parsed.map_err(|error| {
            let start = error.range().start;
            self.control_character(start)
                .unwrap_or_else(|| self.syntax_error(&error))
        })?;
        if let Some(error) = self.control_character(usize::MAX) {
            return Err(error);
        }
        parsed
            .value
            .ok_or_else(|| self.error(self.end(), "invalid JSON: EOF while parsing a value"))
    }

    /// A syntax error where `serde_json` would put it, in its words where they are clearer than
    /// the parser's.
    fn syntax_error(&self, error: &ParseError) -> ConfigError {
        let eof = |what: &str| {
            self.error(
                self.end(),
                format!("invalid JSON: EOF while parsing {what}"),
            )
        };
        let start = error.range().start;
        match error.kind() {
            ParseErrorKind::UnterminatedObject => eof("an object"),
            ParseErrorKind::UnterminatedArray => eof("a list"),
            // A stray quote: the string it opens runs on past the end of its line.
            ParseErrorKind::String(ParseStringErrorKind::UnterminatedStringLiteral) => self
                .control_character_in(start, self.body().len())
                .unwrap_or_else(|| eof("a string")),
            ParseErrorKind::String(ParseStringErrorKind::InvalidEscape) => {
                // At the character after the backslash.
                self.error(self.pos_of(start + 1), "invalid JSON: invalid escape")
            }
            _ if self
                .body()
                .get(start..)
                .is_none_or(|rest| rest.trim().is_empty()) =>
            {
                eof("a value")
            }
            ParseErrorKind::ExpectedComma => self.missing_comma(start),
            ParseErrorKind::UnexpectedToken | ParseErrorKind::UnexpectedWord => {
                self.error(self.pos_of(start), "invalid JSON: expected value")
            }
            kind => self.error(
                self.pos_of(start),
                format!("invalid JSON: {}", lowercase(kind)),
            ),
        }
    }

    /// A missing comma, found at `offset` (the end of the value before it): reported at the
    /// token that came instead, naming the bracket that could have closed the container.
    fn missing_comma(&self, offset: usize) -> ConfigError {
        let mut scanner = Scanner::new(self.body(), &scanner_options());
        let mut open = Vec::new();
        while let Ok(Some(token)) = scanner.scan() {
            if scanner.token_start() >= offset
                && !matches!(token, Token::CommentLine(_) | Token::CommentBlock(_))
            {
                let close = if open.last() == Some(&Token::OpenBracket) {
                    ']'
                } else {
                    '}'
                };
                return self.error(
                    self.pos_of(scanner.token_start()),
                    format!("invalid JSON: expected `,` or `{close}`"),
                );
            }
            match token {
                Token::OpenBrace | Token::OpenBracket => open.push(token),
                Token::CloseBrace | Token::CloseBracket => {
                    open.pop();
                }
                _ => {}
            }
        }
        self.error(self.end(), "invalid JSON: EOF while parsing a value")
    }

    /// The first raw control character (a tab, a line break) in a string that starts before
    /// byte `before`: JSON strings cannot hold them, `jsonc-parser` lets them through.
    fn control_character(&self, before: usize) -> Option<ConfigError> {
        let mut scanner = Scanner::new(self.body(), &scanner_options());
        while let Ok(Some(token)) = scanner.scan() {
            let start = scanner.token_start();
            if start >= before {
                break;
            }
            let Token::String(_) = token else { continue };
            let error = self.control_character_in(start, scanner.token_end());
            if error.is_some() {
                return error;
            }
        }
        None
    }

    /// The first raw control character between bytes `start` and `end`, reported where a JSON
    /// parser stops: on the character before.
    fn control_character_in(&self, start: usize, end: usize) -> Option<ConfigError> {
        let raw = self.body().get(start..end)?;
        let at = raw.find(|c: char| c.is_ascii_control() && c != '\u{7f}')?;
        let at = self.pos_of(start + at);
        Some(self.error(
            Pos {
                column: at.column.saturating_sub(1),
                ..at
            },
            "invalid JSON: control character (\\u0000-\\u001F) found while parsing a string",
        ))
    }
}

/// The parser's description of a syntax error, as the middle of a sentence.
fn lowercase(kind: &ParseErrorKind) -> String {
    let text = kind.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// What kind of JSON value `node` is, in words.
pub(super) fn kind(node: &Node<'_>) -> &'static str {
    match node {
        Value::StringLit(_) => "a string",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::BooleanLit(_) => "a boolean",
        Value::NullKeyword(_) => "null",
        Value::NumberLit(_) => "a number",
    }
}

/// What a field holds, as its refusal says it.
#[derive(Debug, Clone, Copy)]
enum Expected {
    String,
    Object,
    Array,
    Boolean,
    Millis,
    Port,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::String => "a string",
            Expected::Object => "an object",
            Expected::Array => "an array",
            Expected::Boolean => "true or false",
            Expected::Millis => "a whole number of milliseconds",
            Expected::Port => "a port number from 1 to 65535",
        })
    }
}

/// The members of an object, in order.
pub(super) type Members<'n, 't> = Vec<(&'n str, &'n Node<'t>)>;

impl<'t> Text<'t> {
    /// `read(node)`, or an error saying `what` expects `expected` and found something else (a
    /// number as written when a number was expected).
    fn expect<'n, T>(
        &self,
        node: &'n Node<'t>,
        what: &str,
        expected: Expected,
        read: impl FnOnce(&'n Node<'t>) -> Option<T>,
    ) -> Result<T, ConfigError> {
        read(node).ok_or_else(|| {
            let found = match (node, expected) {
                (Value::NumberLit(number), Expected::Millis | Expected::Port) => number.value,
                _ => kind(node),
            };
            self.error(
                self.pos(node),
                format!("{what}: expected {expected}, found {found}"),
            )
        })
    }

    pub(super) fn string<'n>(
        &self,
        node: &'n Node<'t>,
        what: &str,
    ) -> Result<&'n str, ConfigError> {
        self.expect(node, what, Expected::String, |node| {
            node.as_string_lit().map(|string| string.value.as_ref())
        })
    }

    pub(super) fn boolean(&self, node: &Node<'t>, what: &str) -> Result<bool, ConfigError> {
        self.expect(node, what, Expected::Boolean, |node| {
            node.as_boolean_lit().map(|boolean| boolean.value)
        })
    }

    pub(super) fn millis(&self, node: &Node<'t>, what: &str) -> Result<Duration, ConfigError> {
        self.expect(node, what, Expected::Millis, |node| {
            number::<u64>(node).map(Duration::from_millis)
        })
    }

    pub(super) fn port(&self, node: &Node<'t>, what: &str) -> Result<u16, ConfigError> {
        self.expect(node, what, Expected::Port, |node| {
            number::<u16>(node).filter(|port| *port != 0)
        })
    }

    pub(super) fn array<'n>(
        &self,
        node: &'n Node<'t>,
        what: &str,
    ) -> Result<&'n [Node<'t>], ConfigError> {
        self.expect(node, what, Expected::Array, |node| {
            node.as_array().map(|array| array.elements.as_slice())
        })
    }

    /// An object's members; an error if a key appears twice (at its second value).
    pub(super) fn object<'n>(
        &self,
        node: &'n Node<'t>,
        what: &str,
    ) -> Result<Members<'n, 't>, ConfigError> {
        let object = self.expect(node, what, Expected::Object, Value::as_object)?;
        let mut members: Members<'n, 't> = Vec::with_capacity(object.properties.len());
        for property in &object.properties {
            let key = match &property.name {
                ObjectPropName::String(string) => string.value.as_ref(),
                ObjectPropName::Word(word) => word.value,
            };
            if members.iter().any(|(earlier, _)| *earlier == key) {
                return Err(self.error(
                    self.pos(&property.value),
                    format!("{what}: {key:?} appears twice"),
                ));
            }
            members.push((key, &property.value));
        }
        Ok(members)
    }

    /// A string that must be one of `choices`; else an error naming the `noun` and what it may
    /// be (`listed`).
    pub(super) fn one_of<T: Copy>(
        &self,
        node: &Node<'t>,
        what: &str,
        (noun, listed): (&str, &str),
        choices: &[(&str, T)],
    ) -> Result<T, ConfigError> {
        let text = self.string(node, what)?;
        let chosen = choices.iter().find(|(name, _)| *name == text);
        chosen.map(|(_, value)| *value).ok_or_else(|| {
            self.error(
                self.pos(node),
                format!("{what}: unknown {noun} {text:?} (expected {listed})"),
            )
        })
    }
}

/// A number as JSON reads it into `T` (`None`: not a number, or not one `T` holds).
fn number<T: serde::de::DeserializeOwned>(node: &Node<'_>) -> Option<T> {
    node.as_number_lit()
        .and_then(|number| serde_json::from_str(number.value).ok())
}

pub(super) fn is_null(node: &Node<'_>) -> bool {
    matches!(node, Value::NullKeyword(_))
}
