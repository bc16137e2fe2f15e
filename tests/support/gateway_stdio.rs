//! A downstream client of the gateway over stdio, as raw JSON-RPC lines: the handshake, a wait
//! until a tool is offered (the upstream server is listed once ready), one call, then end of
//! input and the gateway's exit (it writes what is owed and exports on the way out).

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout},
};

use serde_json::{json, Value};

pub struct Downstream {
    gateway: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Downstream {
    /// Initializes a session with `gateway` (spawned with piped stdin and stdout).
    pub fn start(mut gateway: Child) -> Self {
        let input = gateway.stdin.take().expect("stdin piped");
        let output = BufReader::new(gateway.stdout.take().expect("stdout piped"));
        let mut this = Self {
            gateway,
            input,
            output,
        };
        this.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        );
        this.answer(1);
        this.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        this
    }

    fn send(&mut self, message: Value) {
        writeln!(self.input, "{message}").expect("written");
    }

    /// The answer to request `id` (what comes before it is skipped).
    fn answer(&mut self, id: i64) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.output.read_line(&mut line).expect("read") > 0,
                "the gateway ended"
            );
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Waits (5 s at most) until `tool` is offered.
    pub fn until_offered(&mut self, tool: &str) {
        // A bound, not a timing: an upstream that signs in or refreshes first takes a while.
        let listed = (0..600).any(|_| {
            self.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
            let tools = self.answer(2);
            let offered = tools["result"]["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["name"] == tool));
            if !offered {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            offered
        });
        assert!(listed, "{tool} was never offered");
    }

    /// Calls `tool` with `params` (its `name` added): the answer.
    pub fn call(&mut self, tool: &str, mut params: Value) -> Value {
        params["name"] = json!(tool);
        self.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}));
        self.answer(3)
    }

    /// Ends the input and waits for the gateway to exit; whether it succeeded.
    pub fn finish(self) -> bool {
        let Self {
            mut gateway, input, ..
        } = self;
        drop(input);
        gateway.wait().expect("the gateway exits").success()
    }
}
