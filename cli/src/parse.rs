//! Parsing the command line's own little formats: `KEY=VALUE` pairs, tool arguments, logging
//! levels. Every error is a one-line usage [`Failure`] (exit 2).

use actix_mcp::LoggingLevel;
use serde_json::{Map, Value};

use super::{usage, Failure};

/// The logging levels, least severe first, as `set-level` takes them.
pub const LEVELS: [LoggingLevel; 8] = [
    LoggingLevel::Debug,
    LoggingLevel::Info,
    LoggingLevel::Notice,
    LoggingLevel::Warning,
    LoggingLevel::Error,
    LoggingLevel::Critical,
    LoggingLevel::Alert,
    LoggingLevel::Emergency,
];

/// `KEY=VALUE` split at the first `=`; `flag` names the option in the error.
pub fn key_value<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str), Failure> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key, value)),
        Some(_) => Err(usage(format!("{flag} {text:?}: the key is empty"))),
        None => Err(usage(format!("{flag} {text:?}: expected KEY=VALUE"))),
    }
}

/// `--env KEY=VALUE` entries, in order.
pub fn env_vars(entries: &[String]) -> Result<Vec<(&str, &str)>, Failure> {
    entries
        .iter()
        .map(|entry| {
            let (key, value) = key_value(entry, "--env")?;
            if key.contains('\0') || value.contains('\0') {
                return Err(usage(format!("--env {entry:?}: contains a NUL byte")));
            }
            Ok((key, value))
        })
        .collect()
}

/// `--tool-arg key=value` entries as a JSON object: the value is JSON when it parses as JSON
/// (`3`, `true`, `{"a":1}`, `"quoted"`), else the text itself as a string. A later entry with
/// the same key wins.
pub fn tool_args(entries: &[String]) -> Result<Map<String, Value>, Failure> {
    let mut args = Map::new();
    for entry in entries {
        let (key, value) = key_value(entry, "--tool-arg")?;
        let value = serde_json::from_str::<Value>(value)
            .unwrap_or_else(|_| Value::String(value.to_owned()));
        args.insert(key.to_owned(), value);
    }
    Ok(args)
}

/// A logging level by name (`debug` … `emergency`).
pub fn level(name: &str) -> Result<LoggingLevel, Failure> {
    LEVELS
        .into_iter()
        .find(|level| level.as_str() == name)
        .ok_or_else(|| {
            let valid: Vec<&str> = LEVELS.iter().map(|l| l.as_str()).collect();
            usage(format!(
                "unknown logging level {name:?}; valid levels: {}",
                valid.join(", ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn tool_args_are_json_when_they_parse_and_strings_otherwise() {
        let args = tool_args(&strings(&[
            "n=3",
            "flag=true",
            r#"obj={"a":1}"#,
            "text=hello world",
            "empty=",
            r#"quoted="7""#,
            "eq=a=b",
        ]))
        .unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(
            Value::Object(args),
            json!({
                "n": 3,
                "flag": true,
                "obj": {"a": 1},
                "text": "hello world",
                "empty": "",
                "quoted": "7",
                "eq": "a=b",
            })
        );
    }

    #[test]
    fn malformed_pairs_are_usage_errors() {
        for bad in ["novalue", "=value"] {
            let failure = tool_args(&strings(&[bad])).expect_err(bad);
            assert_eq!(failure.code, 2);
            let failure = env_vars(&strings(&[bad])).expect_err(bad);
            assert_eq!(failure.code, 2);
            assert!(!failure.message.contains('\n'));
        }
        assert_eq!(
            env_vars(&strings(&["A=1", "B="])).ok(),
            Some(vec![("A", "1"), ("B", "")])
        );
    }

    #[test]
    fn levels_parse_by_name_and_an_unknown_one_lists_the_valid_ones() {
        for l in LEVELS {
            assert_eq!(level(l.as_str()).ok(), Some(l));
        }
        let failure = level("loud").expect_err("unknown");
        assert_eq!(failure.code, 2);
        assert!(failure.message.contains("debug") && failure.message.contains("emergency"));
    }
}
