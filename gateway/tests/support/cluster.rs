//! Gateway replicas behind a real load balancer: Debian's `redis-server` and `haproxy`
//! (installed with apt when missing), three gateways sharing the Redis (`--replicas`), and
//! HAProxy spreading every request over them in turn, with no affinity. Each response names the
//! replica that served it (`x-replica`, set by HAProxy, not by the gateway). Upstream: server
//! `a`, a demo server over Streamable HTTP with sessions shared by every replica (its journal
//! is what it read, from all of them), and `b`, a demo server each replica runs over stdio.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::{
    io::BufRead as _,
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::json;

use super::{redis, workspace_bins, Upstreams};

/// The replicas' shared key (64 hex digits).
pub const KEY: &str = "5f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100";

/// A lease short enough for a test to see a dead replica's calls settled.
pub const LEASE_SECONDS: &str = "2";

pub struct Cluster {
    pub upstreams: Upstreams,
    /// The load balancer's `/mcp` URL.
    pub url: String,
    pub replicas: Vec<Replica>,
    balancer: Killed,
    upstream_a: Killed,
    redis: Option<redis::Redis>,
}

/// One gateway replica.
pub struct Replica {
    /// Its name at the load balancer (`x-replica`).
    pub name: String,
    pub port: u16,
    pub process: Killed,
}

/// A child process killed (and reaped) on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl Cluster {
    /// `replicas` gateways behind HAProxy, named `test` (its directory).
    pub fn start(test: &str, replicas: usize) -> Self {
        Self::start_with(test, replicas, &[])
    }

    /// [`start`](Self::start), each gateway given `more` arguments too (`{url}` in one is the
    /// load balancer's URL: the gateways' resource).
    pub fn start_with(test: &str, replicas: usize, more: &[&str]) -> Self {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let more: Vec<String> = more.iter().map(|arg| arg.replace("{url}", &url)).collect();
        let upstreams = Upstreams::of(&format!("replicas-{test}"), json!({}));
        let (upstream_a, a_url) = http_demo_server(&upstreams.dir.join("a.jsonl"));
        let demo = workspace_bins::program(
            &[workspace_bins::DEMO_SERVER],
            workspace_bins::DEMO_SERVER,
            true,
        );
        let servers = json!({
            "a": {"url": a_url},
            "b": {"command": demo, "args": ["--journal", upstreams.dir.join("b.jsonl")]},
        });
        let config = json!({ "mcpServers": servers }).to_string();
        std::fs::write(&upstreams.config, config).expect("the config is written");
        let redis = redis::start();
        let replicas: Vec<Replica> = (0..replicas)
            .map(|n| {
                let (process, port) = gateway(&upstreams, &redis.url(), &more);
                Replica {
                    name: format!("g{n}"),
                    port,
                    process,
                }
            })
            .collect();
        let ports: Vec<(String, u16)> = replicas.iter().map(|r| (r.name.clone(), r.port)).collect();
        let balancer = haproxy(&upstreams.dir, port, &ports);
        Self {
            upstreams,
            url,
            replicas,
            balancer,
            upstream_a,
            redis: Some(redis),
        }
    }

    /// The replicas' Redis (`redis://…`).
    pub fn redis_url(&self) -> String {
        self.redis
            .as_ref()
            .map(redis::Redis::url)
            .unwrap_or_default()
    }

    /// Stops the replicas' Redis.
    pub fn stop_redis(&mut self) {
        self.redis = None;
    }

    /// SIGKILLs replica `name`: no chance to say or settle anything.
    pub fn kill(&mut self, name: &str) {
        let replica = self.replicas.iter_mut().find(|r| r.name == name);
        let replica = replica.expect("a replica of that name");
        let _ = replica.process.0.kill();
        let _ = replica.process.0.wait();
    }
}

/// The demo server over Streamable HTTP with sessions, journalling to `journal`: its process and
/// its URL.
fn http_demo_server(journal: &std::path::Path) -> (Killed, String) {
    let demo = workspace_bins::program(
        &[workspace_bins::DEMO_SERVER],
        workspace_bins::DEMO_SERVER,
        true,
    );
    let mut child = Command::new(demo)
        .args(["--http", "127.0.0.1:0", "--sessions", "--journal"])
        .arg(journal)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the demo server starts");
    let stderr = child.stderr.take().expect("its stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("the demo server says where")
            .expect("a line");
        if let Some(port) = line.strip_prefix("LISTENING ") {
            break port.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (Killed(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// A gateway replica before `upstreams`, sharing `redis`: its process and port.
fn gateway(upstreams: &Upstreams, redis: &str, more: &[String]) -> (Killed, u16) {
    let mut child = upstreams
        .gateway_with(&["--listen", "127.0.0.1:0", "--replicas", redis])
        .args(["--replica-lease", LEASE_SECONDS])
        .args(more)
        .env("ACTIX_MCP_CREDENTIALS_KEY", KEY)
        .env(
            "ACTIX_MCP_CREDENTIALS_PREFIX",
            format!("test-{}:", std::process::id()),
        )
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let stderr = child.stderr.take().expect("its stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("the gateway says where")
            .expect("a line");
        if let Some(url) = line.trim().strip_prefix("actix-mcp-gateway: listening on ") {
            let authority = url.trim_start_matches("http://").split('/').next();
            let port = authority.and_then(|a| a.rsplit(':').next());
            break port.and_then(|p| p.parse().ok()).expect("a port");
        }
    };
    std::thread::spawn(move || {
        lines.for_each(|line| {
            if let Ok(line) = line {
                if std::env::var_os("REPLICA_LOGS").is_some() {
                    eprintln!("[gateway {port}] {line}");
                }
            }
        })
    });
    (Killed(child), port)
}

/// HAProxy on `port`, sending each request to the next of `gateways` in turn (a down one
/// skipped: it checks each every 100 ms, takes one as down after three failed checks, so that
/// a busy machine's slow answer does not take a replica out of turn, and sends a request
/// refused by a dead one to another meanwhile).
fn haproxy(dir: &std::path::Path, port: u16, gateways: &[(String, u16)]) -> Killed {
    let servers: String = gateways
        .iter()
        .map(|(name, port)| {
            format!("  server {name} 127.0.0.1:{port} check inter 100ms fall 3 rise 2\n")
        })
        .collect();
    let config = format!(
        "global\n  maxconn 2000\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n  option redispatch\n  retries 3\n\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend gateways\n\
         backend gateways\n  balance roundrobin\n  http-response set-header x-replica %[srv_name]\n{servers}"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).expect("the HAProxy config is written");
    let child = Command::new(redis::debian("haproxy", "haproxy"))
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "haproxy never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Killed(child)
}
