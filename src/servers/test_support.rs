//! A scripted server for the unit tests: in memory, it answers its handshake, `tools/list`
//! (the tools the test offers) and `tools/call` (the arguments back), sends the notifications
//! the test pushes, and answers nothing once told to fall silent.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{lock, Servers};
use crate::transport::memory::{self, MemoryPeer};

pub(super) struct Scripted {
    connects: AtomicUsize,
    tools: Mutex<Vec<String>>,
    /// The connections numbered up to this one answer nothing.
    silenced_upto: AtomicUsize,
    /// One per connection, the latest last.
    pushers: Mutex<Vec<mpsc::UnboundedSender<Value>>>,
}

impl Scripted {
    /// Adds server `name`, offering `tools`.
    pub(super) fn add(servers: &Servers, name: &str, tools: &[&str]) -> Arc<Self> {
        let script = Arc::new(Self {
            connects: AtomicUsize::new(0),
            tools: Mutex::new(Vec::new()),
            silenced_upto: AtomicUsize::new(0),
            pushers: Mutex::new(Vec::new()),
        });
        script.offer(tools);
        let served = script.clone();
        servers.add(name, move || {
            let number = served.connects.fetch_add(1, Ordering::SeqCst) + 1;
            let (transport, peer) = memory::pair();
            let (pusher, pushed) = mpsc::unbounded_channel();
            lock(&served.pushers).push(pusher);
            tokio::spawn(serve(served.clone(), number, peer, pushed));
            transport
        });
        script
    }

    /// Transports made so far: one per connect.
    pub(super) fn connects(&self) -> usize {
        self.connects.load(Ordering::SeqCst)
    }

    /// The tools `tools/list` answers from now on.
    pub(super) fn offer(&self, tools: &[&str]) {
        *lock(&self.tools) = tools.iter().map(|t| (*t).to_owned()).collect();
    }

    /// Sends notification `method` on the latest connection.
    pub(super) fn notify(&self, method: &str) {
        if let Some(pusher) = lock(&self.pushers).last() {
            let _ = pusher.send(json!({"jsonrpc": "2.0", "method": method}));
        }
    }

    /// The connections made so far answer nothing from now on (their process hangs); the
    /// next ones answer.
    pub(super) fn fall_silent(&self) {
        self.silenced_upto.store(self.connects(), Ordering::SeqCst);
    }

    /// Connection `number`'s answer to `message`, if any.
    fn answer(&self, number: usize, message: &Value) -> Option<Value> {
        if message["id"].is_null() || number <= self.silenced_upto.load(Ordering::SeqCst) {
            return None;
        }
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "scripted", "version": "0"},
            }),
            Some("tools/list") => {
                let tools: Vec<Value> = lock(&self.tools)
                    .iter()
                    .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                    .collect();
                json!({"tools": tools})
            }
            Some("tools/call") => json!({
                "content": [{"type": "text", "text": message["params"]["arguments"].to_string()}],
            }),
            _ => json!({}),
        };
        Some(json!({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    }
}

async fn serve(
    script: Arc<Scripted>,
    number: usize,
    mut peer: MemoryPeer,
    mut pushed: mpsc::UnboundedReceiver<Value>,
) {
    loop {
        tokio::select! {
            message = peer.recv() => {
                let Some(message) = message else { return };
                if let Some(answer) = script.answer(number, &message) {
                    peer.send(&answer);
                }
            }
            Some(notification) = pushed.recv() => peer.send(&notification),
        }
    }
}

/// Waits until `done` holds (a busy machine may take a while), failing after 10 s.
pub(super) async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}
