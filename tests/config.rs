//! Reading `mcp.json` files (Claude Desktop, Claude Code, Cursor, VS Code) into server
//! definitions, and connecting to a server defined in one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use actix_mcp::config::TransportConfig;
use actix_mcp::{config::DEFAULT_CALLBACK_PORT, Client, Config, ConfigError, ProtocolEra};
use serde_json::json;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/config")
        .join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(data(name)).expect("test data")
}

/// Parses test file `name` with these variables (and no others).
fn parse_with(name: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::parse(&text(name), name, &|var| vars.get(var).cloned())
}

fn parse_text(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "inline.json", &|_| None)
}

fn stdio(config: &Config, name: &str) -> (String, Vec<String>, BTreeMap<String, String>) {
    match &config.server(name).expect("server").transport {
        TransportConfig::Stdio {
            command, args, env, ..
        } => (command.clone(), args.clone(), env.clone()),
        other => panic!("{name} is not stdio: {other:?}"),
    }
}

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_claude_desktop_file_gives_its_servers_in_file_order() {
    let config = parse_with(
        "claude_desktop_config.json",
        &[("GITHUB_TOKEN", "ghp_secret")],
    )
    .unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["filesystem", "github", "linear", "notes", "legacy-events"]
    );
    assert_eq!(config.origin, "claude_desktop_config.json");

    let (command, args, env) = stdio(&config, "filesystem");
    assert_eq!(command, "npx");
    assert_eq!(
        args,
        [
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/Users/ada/Desktop",
            "/Users/ada/Downloads"
        ]
    );
    assert!(env.is_empty());
    let (_, _, env) = stdio(&config, "github");
    assert_eq!(env, map(&[("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_secret")]));
    assert_eq!(
        config.server("linear").unwrap().transport,
        TransportConfig::Http {
            url: "https://mcp.linear.app/mcp".into(),
            headers: BTreeMap::new(),
            socket: None,
        }
    );
    assert_eq!(
        config.server("notes").unwrap().transport,
        TransportConfig::Http {
            url: "http://127.0.0.1:3001/mcp".into(),
            headers: map(&[("X-Api-Key", "dev-key")]),
            socket: None,
        }
    );
    assert!(matches!(
        config.server("legacy-events").unwrap().transport,
        TransportConfig::Sse { .. }
    ));
    let server = config.server("filesystem").unwrap();
    assert!(server.enabled);
    assert_eq!(
        (
            server.request_timeout,
            server.connect_timeout,
            server.era,
            &server.auth
        ),
        (None, None, None, &None)
    );
    assert!(config.server("nope").is_none());
}

#[test]
fn an_unknown_top_level_field_is_a_warning_naming_file_and_field() {
    let config = parse_with(
        "claude_desktop_config.json",
        &[("GITHUB_TOKEN", "ghp_secret")],
    )
    .unwrap();
    assert_eq!(
        config.warnings,
        ["claude_desktop_config.json:34:21: unknown field \"globalShortcut\" (ignored)"]
    );
}

#[test]
fn a_vs_code_file_with_comments_and_trailing_commas_is_read() {
    let config = parse_with(
        "vscode_mcp.json",
        &[("PERPLEXITY_API_KEY", "pplx"), ("GITHUB_TOKEN", "gh")],
    )
    .unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["perplexity", "github", "fetch"]);
    let (command, args, env) = stdio(&config, "perplexity");
    assert_eq!(command, "npx");
    assert_eq!(args, ["-y", "server-perplexity-ask"]);
    assert_eq!(env, map(&[("PERPLEXITY_API_KEY", "pplx")]));
    assert_eq!(
        config.server("github").unwrap().transport,
        TransportConfig::Http {
            url: "https://api.githubcopilot.com/mcp/".into(),
            headers: map(&[("Authorization", "Bearer gh")]),
            socket: None,
        }
    );
    assert_eq!(stdio(&config, "fetch").1, ["mcp-server-fetch"]);
    // `inputs` is known (and ignored); `envFile` is not.
    assert_eq!(
        config.warnings,
        ["vscode_mcp.json:20:18: server \"perplexity\": unknown field \"envFile\" (ignored)"]
    );
}

#[test]
fn a_vs_code_input_variable_is_an_error_for_its_field() {
    let error = parse_with("vscode_input.json", &[]).unwrap_err();
    assert_eq!(error.line(), Some(16));
    let text = error.to_string();
    assert!(
        text.starts_with(
            "vscode_input.json:16:31: server \"perplexity\": env.PERPLEXITY_API_KEY: \
             ${input:perplexity-key}: VS Code input variables are not supported"
        ),
        "{text}"
    );
}

#[test]
fn both_sections_in_one_file_are_merged_in_file_order() {
    let config = parse_with("both_sections.json", &[]).unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fetch", "time", "memory"]);
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn a_name_in_both_sections_is_an_error_naming_it() {
    let error = parse_with("duplicate.json", &[]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "duplicate.json:7:14: server \"fetch\" is defined in both \"mcpServers\" and \
         \"servers\"; rename or remove one"
    );
}

#[test]
fn the_transport_is_inferred_from_command_or_url_and_type_is_checked() {
    let config = parse_text(
        r#"{"mcpServers": {
            "a": {"command": "srv"},
            "b": {"url": "https://b/mcp"},
            "c": {"type": "http", "url": "https://c/mcp"},
            "d": {"type": "streamable-http", "url": "https://d/mcp"},
            "e": {"type": "sse", "url": "https://e/sse"},
            "f": {"type": "stdio", "command": "srv"}
        }}"#,
    )
    .unwrap();
    let kinds: Vec<&str> = config
        .servers
        .iter()
        .map(|s| match s.transport {
            TransportConfig::Stdio { .. } => "stdio",
            TransportConfig::Http { .. } => "http",
            TransportConfig::Sse { .. } => "sse",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["stdio", "http", "http", "http", "sse", "stdio"]);

    for (server, expected) in [
        (
            r#""x": {"args": ["a"]}"#,
            "inline.json:1:22: server \"x\": has neither a command (stdio) nor a url (http)",
        ),
        (
            r#""x": {"type": "stdio", "url": "https://x"}"#,
            "inline.json:1:47: server \"x\": type \"stdio\" with a url (a stdio server is started with a command)",
        ),
        (
            r#""x": {"type": "http", "command": "srv"}"#,
            "inline.json:1:50: server \"x\": type \"http\" with a command (an HTTP server is reached at its url)",
        ),
        (
            r#""x": {"command": "srv", "url": "https://x"}"#,
            "inline.json:1:48: server \"x\": has both a command and a url; keep one",
        ),
        (
            r#""x": {"type": "ws", "url": "wss://x"}"#,
            "inline.json:1:31: server \"x\": type: unknown variant `ws`, expected one of `stdio`, `http`, `streamable-http`, `streamableHttp`, `sse`",
        ),
    ] {
        let error = parse_text(&format!(r#"{{"mcpServers": {{{server}}}}}"#)).unwrap_err();
        assert_eq!(error.to_string(), expected);
    }
}

#[test]
fn every_expansion_form_is_expanded() {
    let config = parse_with(
        "expansion.json",
        &[
            ("API_KEY", "k-123"),
            ("HOME", "/home/ada"),
            ("PROJECT_DIR", "/src/project"),
            ("EMPTY", ""),
        ],
    )
    .unwrap();
    assert_eq!(
        config.server("search").unwrap().transport,
        TransportConfig::Http {
            url: "https://search.example.com/mcp".into(),
            headers: map(&[
                ("Authorization", "Bearer k-123"),
                ("X-Price", "5$"),
                ("X-Literal", "$$HOME and $PATH"),
            ]),
            socket: None,
        }
    );
    assert_eq!(
        config.server("local").unwrap().transport,
        TransportConfig::Stdio {
            command: "/home/ada/bin/server".into(),
            args: vec![
                "--root".into(),
                "/src/project".into(),
                "--port=8080".into(),
                "$/home/ada".into()
            ],
            env: map(&[("LOG", "info"), ("MODE", "fallback"), ("RAW", "")]),
            cwd: Some(PathBuf::from("/src/project")),
        }
    );
}

#[test]
fn a_set_variable_wins_over_its_default() {
    let config = parse_with(
        "expansion.json",
        &[
            ("API_KEY", "k"),
            ("HOME", "/h"),
            ("PROJECT_DIR", "/p"),
            ("EMPTY", ""),
            ("SEARCH_URL", "http://localhost:9000"),
            ("PORT", "1"),
        ],
    )
    .unwrap();
    let TransportConfig::Http { url, .. } = &config.server("search").unwrap().transport else {
        panic!("http");
    };
    assert_eq!(url, "http://localhost:9000/mcp");
    assert_eq!(stdio(&config, "local").1[2], "--port=1");
}

#[test]
fn an_unset_variable_is_an_error_naming_server_field_and_line() {
    let error = parse_with(
        "expansion.json",
        &[("HOME", "/h"), ("PROJECT_DIR", "/p"), ("EMPTY", "")],
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "expansion.json:7:26: server \"search\": headers.Authorization: ${API_KEY} is not set"
    );
    assert_eq!((error.line(), error.column()), (Some(7), Some(26)));
    assert_eq!(error.origin(), "expansion.json");
    assert_eq!(
        error.message(),
        "server \"search\": headers.Authorization: ${API_KEY} is not set"
    );

    let error = parse_with(
        "expansion.json",
        &[("API_KEY", "k"), ("HOME", "/h"), ("EMPTY", "")],
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "expansion.json:14:26: server \"local\": args[1]: ${env:PROJECT_DIR} is not set"
    );
}

#[test]
fn unknown_fields_are_warnings_not_errors() {
    let config = parse_text(
        "{\n\"mcpServers\": {\"x\": {\"command\": \"srv\", \"autoApprove\": [\"a\"],\n\
         \"auth\": {}}, \"h\": {\"url\": \"https://h\", \"auth\": {\"audience\": \"x\"}, \"cwd\": \"/\"}},\n\
         \"theme\": \"dark\"\n}",
    )
    .unwrap();
    assert_eq!(config.servers.len(), 2);
    assert_eq!(
        config.warnings,
        [
            "inline.json:2:55: server \"x\": unknown field \"autoApprove\" (ignored)",
            "inline.json:3:9: server \"x\": auth: ignored for a stdio server",
            "inline.json:3:61: server \"h\": unknown field \"auth.audience\" (ignored)",
            "inline.json:3:74: server \"h\": cwd: ignored for an HTTP server",
            "inline.json:4:10: unknown field \"theme\" (ignored)",
        ]
    );
    assert_eq!(config.server("x").unwrap().auth, None);
}

#[test]
fn a_known_field_of_the_wrong_type_is_an_error_at_its_line() {
    let error = Config::load(data("wrong_type.json")).unwrap_err();
    assert_eq!((error.line(), error.column()), (Some(9), Some(15)));
    assert_eq!(
        error.message(),
        "server \"filesystem\": args: invalid type: string \"-y @modelcontextprotocol/server-filesystem /tmp\", expected a sequence"
    );
    assert!(error
        .to_string()
        .starts_with(&format!("{}:9:15: ", data("wrong_type.json").display())));

    for (server, expected) in [
        (
            r#""x": {"command": "srv", "args": ["a", 2]}"#,
            "1:55: server \"x\": args[1]: invalid type: integer `2`, expected a string",
        ),
        (
            r#""x": {"command": "srv", "env": {"A": true}}"#,
            "1:54: server \"x\": env.A: invalid type: boolean `true`, expected a string",
        ),
        (
            r#""x": {"url": "https://x", "headers": ["a"]}"#,
            "1:54: server \"x\": headers: invalid type: sequence, expected an object",
        ),
        (
            r#""x": {"command": "srv", "enabled": "no"}"#,
            "1:52: server \"x\": enabled: invalid type: string \"no\", expected a boolean",
        ),
        (
            r#""x": {"command": "srv", "timeout": "30s"}"#,
            "1:52: server \"x\": timeout: invalid type: string \"30s\", expected a whole number of milliseconds",
        ),
        (
            r#""x": {"command": "srv", "connectTimeoutMs": -1}"#,
            "1:61: server \"x\": connectTimeoutMs: invalid value: integer `-1`, expected a whole number of milliseconds",
        ),
        (
            r#""x": {"command": "srv", "era": "2026"}"#,
            "1:48: server \"x\": era: unknown variant `2026`, expected one of `auto`, `prefer-modern`, `legacy`, `modern`",
        ),
        (
            r#""x": {"url": "https://x", "auth": {"callbackPort": 70000}}"#,
            "1:68: server \"x\": auth.callbackPort: invalid value: integer `70000`, expected a port number from 1 to 65535",
        ),
        (
            r#""x": {"command": 5}"#,
            "1:34: server \"x\": command: invalid type: integer `5`, expected a string",
        ),
        (
            r#""x": ["srv"]"#,
            "1:22: server \"x\": invalid type: sequence, expected an object",
        ),
    ] {
        let error = parse_text(&format!(r#"{{"mcpServers": {{{server}}}}}"#)).unwrap_err();
        assert_eq!(error.to_string(), format!("inline.json:{expected}"));
    }
    let error = parse_text(r#"{"mcpServers": ["a"]}"#).unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline.json:1:16: mcpServers: invalid type: sequence, expected an object"
    );
    let error = parse_text("[]").unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline.json:1:1: expected an object with \"mcpServers\" or \"servers\", found an array"
    );
}

#[test]
fn invalid_json_is_one_error_with_line_and_column() {
    let error = Config::load(data("malformed.json")).unwrap_err();
    assert_eq!(error.line(), Some(6));
    assert_eq!(error.column(), Some(7));
    assert_eq!(
        error.to_string(),
        format!(
            "{}:6:7: invalid JSON: expected `,` or `}}`",
            data("malformed.json").display()
        )
    );
    let error = parse_text("{\"mcpServers\": {\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline.json:2:0: invalid JSON: EOF while parsing an object"
    );
}

#[test]
fn a_disabled_server_is_kept_and_its_unset_variables_are_warnings() {
    let config = parse_with(
        "options.json",
        &[("CRM_CLIENT_ID", "crm-app"), ("CRM_CLIENT_SECRET", "shh")],
    )
    .unwrap();
    let off = config.server("off").unwrap();
    assert!(!off.enabled);
    assert_eq!(stdio(&config, "off").1, ["--token", "${NEVER_SET}"]);
    assert!(!config.server("cline-style").unwrap().enabled);
    let enabled: Vec<&str> = config.enabled().map(|s| s.name.as_str()).collect();
    assert_eq!(enabled, ["slow", "crm", "docs"]);
    assert!(
        config.warnings.iter().any(|w| w
            == "options.json:11:27: server \"off\": args[1]: ${NEVER_SET} is not set \
                (the server is disabled; kept as written)"),
        "{:?}",
        config.warnings
    );

    let error =
        parse_text(r#"{"servers": {"x": {"command": "s", "enabled": true, "disabled": true}}}"#)
            .unwrap_err();
    assert!(error.to_string().contains("contradict"), "{error}");
}

#[test]
fn timeouts_era_and_auth_are_read() {
    let config = parse_with(
        "options.json",
        &[("CRM_CLIENT_ID", "crm-app"), ("CRM_CLIENT_SECRET", "shh")],
    )
    .unwrap();
    let slow = config.server("slow").unwrap();
    assert_eq!(slow.request_timeout, Some(Duration::from_secs(120)));
    assert_eq!(slow.connect_timeout, Some(Duration::from_secs(5)));
    assert_eq!(slow.era, Some(ProtocolEra::Legacy));

    let crm = config.server("crm").unwrap();
    assert_eq!(crm.request_timeout, Some(Duration::from_secs(30)));
    assert_eq!(crm.connect_timeout, None);
    assert_eq!(crm.era, Some(ProtocolEra::Modern));
    let auth = crm.auth.as_ref().unwrap();
    assert_eq!(auth.client_id.as_deref(), Some("crm-app"));
    assert_eq!(auth.client_secret.as_deref(), Some("shh"));
    assert_eq!(
        auth.client_metadata_url.as_deref(),
        Some("https://app.example.com/oauth/client.json")
    );
    assert_eq!(auth.scopes, ["crm.read", "crm.write"]);
    assert_eq!(auth.callback_port, 9123);
    assert_eq!(auth.sign_in_timeout, Some(Duration::from_secs(600)));
    assert!(!format!("{auth:?}").contains("shh"));

    let docs = config.server("docs").unwrap();
    assert_eq!(docs.era, Some(ProtocolEra::PreferModern));
    let auth = docs.auth.as_ref().unwrap();
    assert_eq!(auth.scopes, ["docs:read"]);
    assert_eq!(auth.callback_port, DEFAULT_CALLBACK_PORT);
    assert_eq!(auth.sign_in_timeout, None);
    assert_eq!(auth.client_id, None);
    // Scopes are kept but not requested: the file's reader is told.
    assert!(config
        .warnings
        .iter()
        .any(|w| w.contains("server \"docs\": auth.scopes: kept but not requested")));

    let error =
        parse_text(r#"{"servers": {"x": {"command": "s", "timeout": 1, "requestTimeoutMs": 2}}}"#)
            .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("requestTimeoutMs and timeout both set the request timeout"),
        "{error}"
    );
}

#[test]
fn an_auth_secret_variable_must_be_set() {
    let error = parse_with("options.json", &[("CRM_CLIENT_ID", "crm-app")]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "options.json:26:25: server \"crm\": auth.clientSecret: ${CRM_CLIENT_SECRET} is not set"
    );
}

#[test]
fn an_sse_server_has_no_transport() {
    let config = parse_with(
        "claude_desktop_config.json",
        &[("GITHUB_TOKEN", "ghp_secret")],
    )
    .unwrap();
    let error = config
        .server("legacy-events")
        .unwrap()
        .transport()
        .err()
        .expect("refused");
    assert!(
        matches!(error, actix_mcp::Error::Transport { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("HTTP+SSE transport"), "{error}");
}

#[cfg(feature = "http")]
#[test]
fn an_http_server_has_a_transport() {
    let config = parse_with(
        "options.json",
        &[("CRM_CLIENT_ID", "crm-app"), ("CRM_CLIENT_SECRET", "shh")],
    )
    .unwrap();
    assert!(config.server("crm").unwrap().transport().is_ok());
    #[cfg(feature = "auth")]
    {
        let store: std::sync::Arc<dyn actix_mcp::auth::CredentialStore> =
            std::sync::Arc::new(actix_mcp::auth::MemoryStore::default());
        let crm = config.server("crm").unwrap();
        assert!(crm.transport_with_store(store.clone()).is_ok());
        assert!(!crm.oauth(Some(store)).unwrap().is_authorized());
    }
}

#[actix::test]
async fn a_stdio_server_from_a_file_starts_with_its_args_env_and_cwd() {
    let dir = std::env::temp_dir().join(format!("actix-mcp-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = json!({
        "mcpServers": {
            "demo": {
                "command": &*common::DEMO_SERVER,
                "args": ["--journal", "${JOURNAL}"],
                "env": {"CONFIG_GREETING": "hello ${WHO:-world}", "CONFIG_KEY": "${KEY}"},
                "cwd": "${WORK_DIR}",
                "requestTimeoutMs": 10000
            }
        }
    })
    .to_string();
    let journal = dir.join("journal.jsonl");
    let vars = map(&[
        ("KEY", "k-42"),
        ("WORK_DIR", dir.to_str().unwrap()),
        ("JOURNAL", journal.to_str().unwrap()),
    ]);
    let config = Config::parse(&text, "demo.json", &|name| vars.get(name).cloned()).unwrap();
    let server = config.server("demo").unwrap();

    let client = server
        .connect_options(&Client::builder())
        .connect(server.transport().unwrap())
        .await
        .unwrap();
    let echo = client
        .call_tool("echo", json!({"text": "from a config"}))
        .await
        .unwrap();
    assert_eq!(echo.text(), "from a config");
    let greeting = client
        .call_tool("env", json!({"name": "CONFIG_GREETING"}))
        .await
        .unwrap();
    assert_eq!(greeting.text(), "hello world");
    let key = client
        .call_tool("env", json!({"name": "CONFIG_KEY"}))
        .await
        .unwrap();
    assert_eq!(key.text(), "k-42");
    let cwd = client.call_tool("cwd", json!({})).await.unwrap();
    assert_eq!(
        std::fs::canonicalize(cwd.text()).unwrap(),
        std::fs::canonicalize(&dir).unwrap()
    );
    // The args reached it: it journals what it reads.
    assert!(std::fs::read_to_string(&journal)
        .unwrap()
        .contains("from a config"));
    client.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn load_reads_the_file_and_names_it_as_the_origin() {
    let path = data("both_sections.json");
    let config = Config::load(&path).unwrap();
    assert_eq!(config.origin, path.display().to_string());
    assert_eq!(config.servers.len(), 3);
}
