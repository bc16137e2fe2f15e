//! The official reference server, `@modelcontextprotocol/server-everything` (npm, pinned).
//! `.ci/run` installs it; the tests install it themselves into `target/npm-everything` when it is
//! missing (needs `npm` and the registry).

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::OnceLock,
};

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

/// The reference server in its `streamableHttp` mode, on 127.0.0.1 and a free port. Killed on drop.
pub struct HttpEverything {
    child: Child,
    pub url: String,
}

impl HttpEverything {
    pub fn start() -> Self {
        let preload =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/listen-on-localhost.cjs");
        let mut child = Command::new("node")
            .arg("-r")
            .arg(preload)
            .arg(server_script())
            .arg("streamableHttp")
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs the reference server");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the server reports its port before exiting")
                .expect("stderr is readable");
            if let Some(port) = line.strip_prefix("LISTENING ") {
                break port.trim().to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
