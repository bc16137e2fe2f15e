//! The JSON layer of the reader: the text (JSON with comments and trailing commas, as VS Code
//! writes it) parsed by `jsonc-parser` into a tree whose every value knows its byte range, so
//! that whatever is refused or warned about is reported at its line and column.

use std::fmt;

use jsonc_parser::{
    ast::{ObjectProp, ObjectPropName, Value},
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

/// One step down the file's tree: a member of an object or an element of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

/// The value at `path` below `node`, or the deepest one on the way that exists (a path from
/// serde always exists; this keeps a wrong one from failing).
pub(super) fn locate<'n, 't>(node: &'n Node<'t>, path: &[Step]) -> &'n Node<'t> {
    let Some((step, rest)) = path.split_first() else {
        return node;
    };
    let child = match (node, step) {
        (Value::Object(object), Step::Key(key)) => object
            .properties
            .iter()
            .rev()
            .find(|property| key_of(&property.name) == key)
            .map(|property| &property.value),
        (Value::Array(array), Step::Index(index)) => array.elements.get(*index),
        _ => None,
    };
    child.map_or(node, |child| locate(child, rest))
}

/// The members of `node` (if it is an object), in file order.
pub(super) fn members<'n, 't>(node: &'n Node<'t>) -> Vec<(&'n str, &'n Node<'t>)> {
    node.as_object()
        .map(|object| {
            let member = |property: &'n ObjectProp<'t>| (key_of(&property.name), &property.value);
            object.properties.iter().map(member).collect()
        })
        .unwrap_or_default()
}

fn key_of<'n>(name: &'n ObjectPropName<'_>) -> &'n str {
    match name {
        ObjectPropName::String(string) => string.value.as_ref(),
        ObjectPropName::Word(word) => word.value,
    }
}

/// The first key that appears twice in one object, in file order: the path of its object and
/// its second value (JSON leaves a repeated key's meaning open; a config must not).
pub(super) fn repeated_key<'n, 't>(node: &'n Node<'t>) -> Option<(Vec<Step>, &'n Node<'t>)> {
    let mut path = Vec::new();
    repeated_below(node, &mut path).map(|second| (path, second))
}

fn repeated_below<'n, 't>(node: &'n Node<'t>, path: &mut Vec<Step>) -> Option<&'n Node<'t>> {
    let children: Vec<(Step, &'n Node<'t>)> = match node {
        Value::Object(_) => {
            let members = members(node);
            for (at, (key, value)) in members.iter().enumerate() {
                if members[..at].iter().any(|(earlier, _)| earlier == key) {
                    path.push(Step::Key((*key).to_owned()));
                    return Some(value);
                }
            }
            let step = |(key, value): (&str, _)| (Step::Key(key.to_owned()), value);
            members.into_iter().map(step).collect()
        }
        Value::Array(array) => array
            .elements
            .iter()
            .enumerate()
            .map(|(i, value)| (Step::Index(i), value))
            .collect(),
        _ => return None,
    };
    for (step, child) in children {
        path.push(step);
        if let Some(found) = repeated_below(child, path) {
            return Some(found);
        }
        path.pop();
    }
    None
}

pub(super) fn is_null(node: &Node<'_>) -> bool {
    matches!(node, Value::NullKeyword(_))
}
