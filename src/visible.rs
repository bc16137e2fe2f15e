//! Server-supplied text made safe to show a person: every control character and every
//! direction override written out as an escape (`\u{1b}`), so that a server cannot erase a line,
//! move the cursor, recolour the terminal or reorder what is shown. `Display` of
//! [`Error`](crate::Error) uses it for every server-supplied part; `Debug` keeps the text exact.
//!
//! ```
//! use actix_mcp::visible::Visible;
//!
//! let hostile = "failed\n\u{1b}[1A\u{1b}[2Kok: success";
//! assert_eq!(Visible(hostile).to_string(), "failed\\n\\u{1b}[1A\\u{1b}[2Kok: success");
//! ```

use std::fmt::{self, Write as _};

/// One line: every control character escaped, line breaks and tabs included.
#[derive(Debug, Clone, Copy)]
pub struct Visible<'a>(pub &'a str);

/// Text of several lines (a tool's text result): line breaks and tabs kept, every other control
/// character escaped (a carriage return too: it would overwrite its line).
#[derive(Debug, Clone, Copy)]
pub struct VisibleLines<'a>(pub &'a str);

impl fmt::Display for Visible<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_visible(f, self.0, |_| false)
    }
}

impl fmt::Display for VisibleLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_visible(f, self.0, |c| c == '\n' || c == '\t')
    }
}

/// Whether `c` can change how a terminal shows what follows: C0 and C1 controls, DEL, and the
/// bidirectional embeddings, overrides and isolates.
fn hidden_effect(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn write_visible(
    f: &mut fmt::Formatter<'_>,
    text: &str,
    kept: impl Fn(char) -> bool,
) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| hidden_effect(c) && !kept(c)) {
        f.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        match c {
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            _ => write!(f, "\\u{{{:x}}}", u32::from(c))?,
        }
        rest = &rest[at + c.len_utf8()..];
    }
    f.write_str(rest)
}

/// `text` as [`Visible`] shows it.
pub fn visible(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let _ = write!(shown, "{}", Visible(text));
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_written_out_and_other_text_is_kept() {
        let text = "é 😀 ok\u{7}\u{1b}[31m\u{9b}\u{202e}evil\u{2066}\r";
        assert_eq!(
            Visible(text).to_string(),
            "é 😀 ok\\u{7}\\u{1b}[31m\\u{9b}\\u{202e}evil\\u{2066}\\r"
        );
    }

    #[test]
    fn lines_keep_their_breaks_and_tabs_but_not_carriage_returns() {
        let text = "a\tb\nc\rfake\u{1b}[2K";
        assert_eq!(VisibleLines(text).to_string(), "a\tb\nc\\rfake\\u{1b}[2K");
        assert_eq!(Visible(text).to_string(), "a\\tb\\nc\\rfake\\u{1b}[2K");
    }

    proptest::proptest! {
        #[test]
        fn nothing_shown_has_a_hidden_effect(text in ".*") {
            let shown = visible(&text);
            proptest::prop_assert!(!shown.chars().any(hidden_effect), "{shown:?}");
            let lines = VisibleLines(&text).to_string();
            proptest::prop_assert!(
                !lines.chars().any(|c| hidden_effect(c) && c != '\n' && c != '\t'),
                "{lines:?}"
            );
        }
    }
}
