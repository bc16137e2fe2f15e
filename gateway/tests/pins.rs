//! Pinned catalogues (`--pins FILE`) against a server that pulls the rug
//! (`data/rug_server.py`): its first catalogue is pinned; when it rewrites `echo`'s description
//! into an instruction and adds `exfiltrate`, the client keeps seeing the pinned `echo` and no
//! `exfiltrate`, the change is reported (stderr, the audit trail) and listed by
//! `actix-mcp-gateway pins list`; once approved there, the client is told its tools changed and
//! sees them as the server lists them. With `--pin-changes withhold` the changed tool is not
//! offered at all meanwhile.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod support;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{json, Value};
use support::*;

const HONEST: &str = "Echo the text back.";
const BOUND: Duration = Duration::from_secs(60);

/// The gateway over stdio before the rug server, pinning into `dir/pins.json`.
struct Pinned {
    upstreams: Upstreams,
    gateway: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Pinned {
    fn start(name: &str, more: &[&str]) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rug_server.py");
        let upstreams = Upstreams::of(name, json!({"v": {"command": "python3", "args": [script]}}));
        let pins = upstreams.dir.join("pins.json");
        let audit = upstreams.dir.join("audit.jsonl");
        let mut gateway = upstreams
            .gateway()
            .arg("--pins")
            .arg(&pins)
            .arg("--audit")
            .arg(&audit)
            .args(more)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the gateway starts");
        let stdin = gateway.stdin.take().unwrap();
        let stdout = gateway.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut pinned = Self {
            upstreams,
            gateway,
            stdin,
            lines,
            next_id: 1,
        };
        pinned.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "pins", "version": "1"}}),
        );
        pinned.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        pinned
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// The next message `wanted` takes, the others passed over.
    fn until(&self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.lines.recv_timeout(BOUND);
            let message = message.unwrap_or_else(|_| panic!("no {what} from the gateway"));
            if wanted(&message) {
                return message;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until(&format!("the answer to {method}"), |m| m["id"] == id)
    }

    /// The tools listed, by gateway name: their descriptions.
    fn tools(&mut self) -> Vec<(String, String)> {
        let listed = self.request("tools/list", json!({}));
        let tools = listed["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let pair = |t: &Value| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&t["name"]), text(&t["description"]))
        };
        tools.iter().map(pair).collect()
    }

    /// The rug is pulled, and the gateway told of it (its clients get `list_changed`, before
    /// or after the call's answer).
    fn pull_the_rug(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let call = json!({"name": "v__rug", "arguments": {}});
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call}));
        let (mut answered, mut told) = (false, false);
        while !(answered && told) {
            let message = self.until("the rug's answer and a list change", |_| true);
            answered |= message["id"] == id;
            told |= message["method"] == "notifications/tools/list_changed";
        }
    }

    fn pins_command(&self, action: &[&str]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_actix-mcp-gateway"))
            .arg("pins")
            .arg("--pins")
            .arg(self.upstreams.dir.join("pins.json"))
            .args(action)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = self.gateway.kill();
        let _ = self.gateway.wait();
    }
}

fn description<'a>(tools: &'a [(String, String)], name: &str) -> Option<&'a str> {
    tools
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d.as_str())
}

#[test]
fn a_pulled_rug_is_held_and_reported_until_an_operator_approves_it() {
    let mut pinned = Pinned::start("pins-keep", &[]);
    assert_eq!(description(&pinned.tools(), "v__echo"), Some(HONEST));
    pinned.pull_the_rug();

    let tools = pinned.tools();
    assert_eq!(
        description(&tools, "v__echo"),
        Some(HONEST),
        "the pinned form: {tools:?}"
    );
    assert_eq!(
        description(&tools, "v__exfiltrate"),
        None,
        "a new name waits: {tools:?}"
    );
    // The call still reaches the server's tool.
    let echoed = pinned.request(
        "tools/call",
        json!({"name": "v__echo", "arguments": {"text": "x"}}),
    );
    assert!(echoed["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains('x'));

    let listed = pinned.pins_command(&["list"]);
    assert!(
        listed.contains("tool/echo (changed)") && listed.contains("id_rsa"),
        "{listed}"
    );
    assert!(listed.contains("tool/exfiltrate (new)"), "{listed}");
    let audit = std::fs::read_to_string(pinned.upstreams.dir.join("audit.jsonl")).unwrap();
    let held: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["event"] == "pin")
        .collect();
    let items: Vec<&Value> = held.iter().map(|r| &r["item"]).collect();
    assert_eq!(
        items,
        [&json!("tool/echo"), &json!("tool/exfiltrate")],
        "{audit}"
    );
    assert!(
        held[0]["replaces"].is_string() && held[1]["replaces"].is_null(),
        "{audit}"
    );

    let approved = pinned.pins_command(&["approve", "v"]);
    assert!(approved.contains("approved tool/echo of v"), "{approved}");
    pinned.until("the list change of the approval", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let tools = pinned.tools();
    assert!(
        description(&tools, "v__echo").unwrap().contains("id_rsa"),
        "{tools:?}"
    );
    assert!(description(&tools, "v__exfiltrate").is_some(), "{tools:?}");
    assert!(pinned.pins_command(&["list"]).contains("nothing is held"));
}

#[test]
fn with_withhold_a_changed_tool_is_not_offered_meanwhile() {
    let mut pinned = Pinned::start("pins-withhold", &["--pin-changes", "withhold"]);
    assert_eq!(description(&pinned.tools(), "v__echo"), Some(HONEST));
    pinned.pull_the_rug();
    let tools = pinned.tools();
    assert_eq!(description(&tools, "v__echo"), None, "{tools:?}");
    let refused = pinned.request("tools/call", json!({"name": "v__echo", "arguments": {}}));
    assert!(refused["error"].is_object(), "{refused}");
    assert!(
        description(&tools, "v__rug").is_some(),
        "what did not change stays: {tools:?}"
    );
}
