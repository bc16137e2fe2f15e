//! The workspace's programs (the demo server, the CLI, the conformance client) for the root
//! package's tests, benchmark and examples, built on first use.
//!
//! `CARGO_BIN_EXE_<name>` only names programs of the package being built, and these live in
//! packages of their own. So the first call runs `cargo build` for them (once per process) with
//! the cargo that runs us, into the target directory and profile we were built in (found from our
//! own path: `<target dir>/<profile>/{deps,examples}/<us>`, so `CARGO_TARGET_DIR` and
//! `build.target-dir` are respected), and returns where the programs are. When nothing changed,
//! that build is a no-op.
//!
//! Included with `#[path]` by `tests/common/mod.rs`, `benches/compare/main.rs` and the examples.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

/// A program of the workspace: its package and its binary's name.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    pub package: &'static str,
    pub bin: &'static str,
}

pub const DEMO_SERVER: Program = Program {
    package: "actix-mcp-demo-server",
    bin: "mcp-demo-server",
};
pub const CLI: Program = Program {
    package: "actix-mcp-cli",
    bin: "actix-mcp",
};
pub const CONFORMANCE_CLIENT: Program = Program {
    package: "actix-mcp-conformance-client",
    bin: "mcp-conformance-client",
};
pub const GATEWAY: Program = Program {
    package: "actix-mcp-gateway",
    bin: "actix-mcp-gateway",
};
/// What the tests build: all of them in one `cargo build`, whichever test asks first, so every
/// test binary gets the same build (one feature resolution, no rebuilds between them).
pub const ALL: &[Program] = &[DEMO_SERVER, CLI, CONFORMANCE_CLIENT, GATEWAY];

/// Builds `programs` (on the first call in this process; later calls must ask for the same
/// ones or a subset) and returns the path of `wanted`'s binary. `quiet` hides cargo's progress.
pub fn try_program(programs: &[Program], wanted: Program, quiet: bool) -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(|| build(programs, quiet)) {
        Ok(dir) => Ok(dir.join(format!("{}{}", wanted.bin, std::env::consts::EXE_SUFFIX))),
        Err(e) => Err(format!("cannot build {}: {e}", wanted.bin)),
    }
}

/// [`try_program`], failing the caller (a test) if the build fails.
pub fn program(programs: &[Program], wanted: Program, quiet: bool) -> PathBuf {
    try_program(programs, wanted, quiet).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `cargo build` for `programs`; returns the directory their binaries are in.
fn build(programs: &[Program], quiet: bool) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    // A test is in `<profile>/deps`, an example in `<profile>/examples`, a program (the demo)
    // in `<profile>` itself.
    let in_dir = exe.parent();
    let nested = in_dir
        .and_then(Path::file_name)
        .is_some_and(|name| name == "deps" || name == "examples");
    let profile_dir = in_dir
        .and_then(|dir| if nested { dir.parent() } else { Some(dir) })
        .ok_or_else(|| format!("{} is not in a cargo target directory", exe.display()))?;
    let target_dir = profile_dir
        .parent()
        .ok_or_else(|| format!("{} has no parent", profile_dir.display()))?;
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        // `release` (also where `cargo bench` builds), or a custom profile's own directory.
        Some(name) => name,
        None => return Err(format!("no profile in {}", profile_dir.display())),
    };
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(OsString::from))
        .unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(&cargo);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--profile", profile]);
    for program in programs {
        command.args(["-p", program.package, "--bin", program.bin]);
    }
    if quiet {
        command.arg("--quiet");
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run {cargo:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{command:?} failed: {status}"));
    }
    Ok(profile_dir.to_owned())
}
