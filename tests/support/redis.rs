//! Debian's `redis-server` on 127.0.0.1 and a free port, for the tests and the benchmark:
//! installed with apt when missing (as the other peers are installed on first use), started
//! without persistence, killed on drop.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where `program` is: on `PATH`, else in `/usr/sbin` or `/usr/bin`.
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.exists())
}

/// Debian's `program` (of `package`), installed from Debian's packages if missing.
pub fn debian(program: &str, package: &str) -> PathBuf {
    if let Some(found) = find(program) {
        return found;
    }
    let install = format!("apt-get install -y --no-install-recommends {package}");
    let status = Command::new("sh")
        .args(["-c", &format!("apt-get update -qq && {install}")])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "{program} is needed: `{install}` failed (it needs root and Debian's repositories)"
    );
    find(program).unwrap_or_else(|| panic!("{program} after installing {package}"))
}

/// The `redis-server` binary, installed from Debian's packages if missing.
pub fn binary() -> PathBuf {
    debian("redis-server", "redis-server")
}

/// Starts a server and waits until it answers `PING`.
pub fn start() -> Redis {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(binary())
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let redis = Redis { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if ping(port) {
            return redis;
        }
        assert!(Instant::now() < deadline, "redis-server never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut answer = [0; 5];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut answer).is_ok()
        && &answer == b"+PONG"
}
