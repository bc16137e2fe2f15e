//! The official reference server, `@modelcontextprotocol/server-everything` (npm, pinned).
//! `.ci/run` installs it; the tests install it themselves into `target/npm-everything` when it is
//! missing (needs `npm` and the registry).

use std::{path::PathBuf, process::Command, sync::OnceLock};

pub const PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";

pub fn server_script() -> PathBuf {
    static SCRIPT: OnceLock<PathBuf> = OnceLock::new();
    SCRIPT
        .get_or_init(|| {
            let prefix = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/npm-everything");
            let script =
                prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
            if !script.exists() {
                let status = Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&prefix)
                    .arg(PACKAGE)
                    .status()
                    .expect("npm is needed to install the reference server");
                assert!(status.success(), "npm install {PACKAGE} failed");
            }
            script
        })
        .clone()
}

/// The reference server in its `streamableHttp` mode, on 127.0.0.1 and a free port (a preloaded
/// script makes it bind there and print the port).
pub fn http_everything() -> super::HttpProcess {
    let preload =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/listen-on-localhost.cjs");
    let mut command = Command::new("node");
    command
        .arg("-r")
        .arg(preload)
        .arg(server_script())
        .arg("streamableHttp")
        .env("PORT", "0");
    super::HttpProcess::start(command)
}
