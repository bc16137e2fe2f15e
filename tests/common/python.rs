//! A server written with the official Python SDK (`tests/data/python/server.py`), run by the
//! SDK pinned in a virtual environment under `target/py-mcp`. `.ci/run` creates it; the tests
//! create it themselves when it is missing (needs `python3` and PyPI).

use std::{path::PathBuf, process::Command, sync::OnceLock};

pub const PACKAGE: &str = "mcp==2.3.0";

/// `(python, script)`: run `python script` to start the server on stdio.
pub fn python_server() -> (PathBuf, PathBuf) {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = PYTHON
        .get_or_init(|| {
            let venv = root.join("target/py-mcp");
            let python = venv.join("bin/python");
            let installed = Command::new(&python)
                .args(["-c", "import mcp"])
                .status()
                .is_ok_and(|s| s.success());
            if !installed {
                let made = Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .expect("python3 is needed for the Python SDK server");
                assert!(made.success(), "python3 -m venv failed");
                let pip = Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", PACKAGE])
                    .status()
                    .expect("pip runs");
                assert!(pip.success(), "pip install {PACKAGE} failed");
            }
            python
        })
        .clone();
    (python, root.join("tests/data/python/server.py"))
}

/// OpenTelemetry's Python SDK, for the traced server.
pub const OTEL_SDK: &str = "opentelemetry-sdk==1.45.2";

/// `(python, script)` of the Python SDK server with OpenTelemetry's SDK: it writes the SDK's
/// server spans as JSON lines to the file in the `SPANS_FILE` environment variable.
pub fn traced_python_server() -> (PathBuf, PathBuf) {
    static READY: OnceLock<()> = OnceLock::new();
    let (python, script) = python_server();
    READY.get_or_init(|| {
        let installed = Command::new(&python)
            .args(["-c", "import opentelemetry.sdk.trace"])
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            let pip = python.with_file_name("pip");
            let done = Command::new(pip)
                .args(["install", "--quiet", OTEL_SDK])
                .status()
                .expect("pip runs");
            assert!(done.success(), "pip install {OTEL_SDK} failed");
        }
    });
    (python, script.with_file_name("traced_server.py"))
}
