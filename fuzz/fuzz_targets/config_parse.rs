//! The mcp.json parser (`Config::parse`): text in, a `Config` or a positioned `ConfigError` out;
//! `${VAR}` expansion through the lookup closure. Never a panic; an error's position is inside
//! the text and its display is `origin:line:column: message`.
#![no_main]

use actix_mcp::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first line is the value every variable has (none if it is empty): an unset variable,
    // and values with `${`, quotes or newlines, all reach the expansion.
    let (value, text) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&data[..0], data),
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let value = String::from_utf8_lossy(value).replace("\\n", "\n");
    let vars = |name: &str| (!value.is_empty() && name != "UNSET").then(|| value.clone());
    match Config::parse(text, "fuzz.json", &vars) {
        Ok(config) => {
            assert_eq!(config.origin, "fuzz.json");
            for server in &config.servers {
                let _ = server.transport();
            }
        }
        Err(error) => {
            assert_eq!(error.origin(), "fuzz.json");
            let (Some(line), Some(column)) = (error.line(), error.column()) else {
                panic!("a parse error without a position: {error}");
            };
            let lines: Vec<&str> = text.split('\n').collect();
            assert!(
                line >= 1 && line <= lines.len(),
                "line {line} outside the text's {} lines: {error}",
                lines.len()
            );
            let chars = lines[line - 1].chars().count();
            assert!(
                column <= chars + 1,
                "column {column} past the end of line {line} ({chars} characters): {error}"
            );
            assert_eq!(
                error.to_string(),
                format!("fuzz.json:{line}:{column}: {}", error.message())
            );
        }
    }
});
