//! `${VAR}` expansion in configuration values.
//!
//! Every `${` starts a reference that ends at the next `}`; any other `$` is kept as written (so
//! `$$`, `$HOME` and a trailing `$` stay as they are, and `$${X}` is a `$` followed by `X`'s
//! value). Inside the braces:
//!
//! - `NAME`, `env:NAME` (VS Code's spelling): the variable's value; an error when it is unset;
//! - `NAME:-default`, `env:NAME:-default`: the value, or `default` when the variable is unset or
//!   empty (as in POSIX shells; the default is not expanded again);
//! - `input:ID` (VS Code's prompted inputs) and other `scheme:NAME` forms: an error saying they
//!   are not supported.

use std::fmt;

/// Why a value could not be expanded. `reference` is the `${...}` text as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ExpandError {
    /// The variable is not set and the reference has no default.
    Unset { reference: String, name: String },
    /// A VS Code `${input:ID}`: prompted inputs are not supported.
    Input { reference: String },
    /// `${config:...}`, `${command:...}` and other VS Code forms.
    Unsupported { reference: String },
    /// `${}` or `${:-x}`.
    EmptyName { reference: String },
    /// `${` without its `}`.
    Unterminated { reference: String },
}

/// VS Code's predefined variables: not environment variables, so named in the error.
const VS_CODE_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "userHome",
    "cwd",
    "file",
    "pathSeparator",
    "/",
];

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpandError::Unset { reference, name } => {
                write!(f, "{reference} is not set")?;
                if VS_CODE_VARIABLES.contains(&name.as_str()) {
                    write!(
                        f,
                        " (VS Code's predefined variables are not expanded here, only \
                         environment variables)"
                    )?;
                }
                Ok(())
            }
            ExpandError::Input { reference } => write!(
                f,
                "{reference}: VS Code input variables are not supported; put the value in an \
                 environment variable and write ${{env:NAME}}"
            ),
            ExpandError::Unsupported { reference } => write!(
                f,
                "{reference}: only environment variables can be expanded (${{NAME}}, \
                 ${{env:NAME}}, ${{NAME:-default}})"
            ),
            ExpandError::EmptyName { reference } => {
                write!(f, "{reference}: no variable name")
            }
            ExpandError::Unterminated { reference } => {
                write!(f, "{reference}: `${{` without its closing `}}`")
            }
        }
    }
}

/// `input` with every `${...}` reference replaced; `vars` says what a variable is set to.
pub(super) fn expand(
    input: &str,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unterminated {
                reference: rest[at..].to_owned(),
            });
        };
        let inner = &after[..end];
        let reference = format!("${{{inner}}}");
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let name = match name.strip_prefix("env:") {
            Some(name) => name,
            None if name.starts_with("input:") => return Err(ExpandError::Input { reference }),
            None if name.contains(':') => return Err(ExpandError::Unsupported { reference }),
            None => name,
        };
        if name.trim().is_empty() {
            return Err(ExpandError::EmptyName { reference });
        }
        match (vars(name), default) {
            (Some(value), Some(default)) if value.is_empty() => out.push_str(default),
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(ExpandError::Unset {
                    reference,
                    name: name.to_owned(),
                })
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "TOKEN" => Some("s3cr3t".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn ok(input: &str) -> String {
        expand(input, &vars).unwrap()
    }

    fn err(input: &str) -> String {
        expand(input, &vars).unwrap_err().to_string()
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(ok("npx -y server"), "npx -y server");
        assert_eq!(ok(""), "");
    }

    #[test]
    fn a_variable_is_replaced_anywhere_in_the_value() {
        assert_eq!(ok("${HOME}"), "/home/ada");
        assert_eq!(ok("Bearer ${TOKEN}"), "Bearer s3cr3t");
        assert_eq!(ok("${HOME}/x/${TOKEN}.txt"), "/home/ada/x/s3cr3t.txt");
    }

    #[test]
    fn vs_code_env_spelling_is_the_same_variable() {
        assert_eq!(ok("${env:HOME}/data"), "/home/ada/data");
        assert_eq!(ok("${env:NOPE:-fallback}"), "fallback");
    }

    #[test]
    fn a_default_is_used_when_the_variable_is_unset_or_empty() {
        assert_eq!(ok("${NOPE:-8080}"), "8080");
        assert_eq!(ok("${EMPTY:-x}"), "x");
        assert_eq!(ok("${NOPE:-}"), "");
        assert_eq!(ok("${TOKEN:-unused}"), "s3cr3t");
        // The default runs to the first `}` and is not expanded again.
        assert_eq!(ok("${NOPE:-a:-b}"), "a:-b");
        assert_eq!(ok("${NOPE:-$HOME}"), "$HOME");
    }

    #[test]
    fn an_empty_variable_without_default_is_empty() {
        assert_eq!(ok("[${EMPTY}]"), "[]");
    }

    #[test]
    fn a_dollar_not_followed_by_a_brace_stays() {
        assert_eq!(ok("$"), "$");
        assert_eq!(ok("$$"), "$$");
        assert_eq!(ok("a$b $HOME $5"), "a$b $HOME $5");
        assert_eq!(ok("cost: 5$"), "cost: 5$");
        assert_eq!(ok("$${TOKEN}"), "$s3cr3t");
        assert_eq!(ok("{TOKEN}"), "{TOKEN}");
    }

    #[test]
    fn an_unset_variable_names_itself_as_written() {
        assert_eq!(err("${API_KEY}"), "${API_KEY} is not set");
        assert_eq!(err("x ${env:API_KEY} y"), "${env:API_KEY} is not set");
        assert!(err("${workspaceFolder}/bin").contains("VS Code's predefined variables"));
    }

    #[test]
    fn vs_code_inputs_and_other_schemes_are_refused() {
        assert!(err("${input:api-key}").starts_with("${input:api-key}: VS Code input variables"));
        assert!(err("${config:foo}").contains("only environment variables"));
    }

    #[test]
    fn malformed_references_are_errors() {
        assert!(err("${}").contains("no variable name"));
        assert!(err("${:-x}").contains("no variable name"));
        assert!(err("abc ${HOME").starts_with("${HOME: `${` without"));
    }

    #[test]
    fn non_ascii_text_around_references_is_kept() {
        assert_eq!(ok("héllo ${TOKEN} wörld $"), "héllo s3cr3t wörld $");
    }
}
