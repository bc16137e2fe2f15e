//! One downstream session: what each of its messages asks of the upstream servers. `initialize`
//! and `ping` are answered here; `tools/list` is the catalogue of every ready server under the
//! gateway's names (`names.rs`); `tools/call` is routed to its server's one shared connection,
//! with a token that a downstream `notifications/cancelled` (or the session's end) fires.
//! Answers go to `out` (`Answers`), in the order they are ready: stdio writes each as a line,
//! HTTP hands each to the POST that carried its request.

use std::{cell::RefCell, rc::Rc};

use crate::{in_flight::InFlight, names::Names};
use actix_mcp::{Error, Servers, ServersError};
use serde_json::{json, Value};

/// Where a session's answers go.
pub type Answers = Rc<dyn Fn(Value)>;

/// The protocol versions a downstream client may ask for (the first is offered otherwise).
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC: the method is not one the gateway serves.
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

pub struct Session {
    servers: Servers,
    out: Answers,
    state: Rc<RefCell<State>>,
}

#[derive(Default)]
struct State {
    in_flight: InFlight,
    /// The names of the last tool list (made on first use if no list was asked yet).
    names: Option<Rc<Names>>,
    /// The routed calls' tasks, to wait for at the end.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The downstream error for an upstream call that failed: the server's own JSON-RPC error as it
/// was, anything else an internal error naming what happened.
fn call_error(id: &Value, failure: &ServersError) -> Value {
    match failure.client_error() {
        Some(Error::Server {
            code,
            message,
            data,
        }) => {
            let mut object = json!({"code": code, "message": message});
            if let Some(data) = data {
                object["data"] = data.clone();
            }
            json!({"jsonrpc": "2.0", "id": id, "error": object})
        }
        _ => error(id, INTERNAL_ERROR, failure.to_string()),
    }
}

impl Session {
    pub fn new(servers: Servers, out: Answers) -> Self {
        Self {
            servers,
            out,
            state: Rc::default(),
        }
    }

    fn send(&self, message: &Value) {
        (self.out)(message.clone());
    }

    /// One message from the downstream client, taken in the order they come: a call is in
    /// flight (and a cancel that follows finds it) before anything is awaited; the work that
    /// waits (a list, an upstream call) runs as a task of its own.
    pub fn message(self: &Rc<Self>, message: Value) {
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned();
        match (method.as_deref(), id) {
            (Some(method), Some(id)) => self.request(method, id, &message["params"]),
            (Some("notifications/cancelled"), None) => {
                let params = &message["params"];
                let reason = params["reason"].as_str();
                let reason = reason.map_or_else(
                    || "cancelled by the downstream client".to_owned(),
                    |r| format!("cancelled by the downstream client: {r}"),
                );
                let cancelled = self
                    .state
                    .borrow_mut()
                    .in_flight
                    .cancel(&params["requestId"], Some(&reason));
                tracing::debug!(cancelled, "downstream cancel");
            }
            // Other notifications (initialized, roots) and answers: nothing to do yet.
            _ => {}
        }
    }

    fn request(self: &Rc<Self>, method: &str, id: Value, params: &Value) {
        let answer = match method {
            "initialize" => {
                let asked = params["protocolVersion"].as_str().unwrap_or_default();
                let version = VERSIONS
                    .iter()
                    .find(|v| **v == asked)
                    .unwrap_or(&VERSIONS[0]);
                result(
                    &id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": {"name": "actix-mcp-gateway", "version": env!("CARGO_PKG_VERSION")},
                    }),
                )
            }
            "ping" => result(&id, json!({})),
            "tools/list" => {
                let session = self.clone();
                self.spawn(async move {
                    let tools = session.tools().await;
                    session.send(&result(&id, tools));
                });
                return;
            }
            "tools/call" => return self.call(id, params),
            _ => error(
                &id,
                METHOD_NOT_FOUND,
                format!("the gateway does not serve {method}"),
            ),
        };
        self.send(&answer);
    }

    fn spawn(&self, work: impl std::future::Future<Output = ()> + 'static) {
        let task = actix_rt::spawn(work);
        let tasks = &mut self.state.borrow_mut().tasks;
        tasks.retain(|task| !task.is_finished());
        tasks.push(task);
    }

    /// The catalogue's tools under the gateway's names; the names are kept for routing.
    async fn tools(&self) -> Value {
        let catalogue = self.servers.catalogue().await;
        for (server, why) in &catalogue.unavailable {
            tracing::info!(%server, %why, "left out of the tool list");
        }
        let names = Names::new(
            catalogue
                .tools
                .iter()
                .map(|t| (t.server.as_str(), t.item.name.as_str())),
        );
        let tools: Vec<Value> = catalogue
            .tools
            .iter()
            .filter_map(|listed| {
                let name = names.name_of(&listed.server, &listed.item.name)?;
                let mut tool = serde_json::to_value(&listed.item).ok()?;
                tool["name"] = Value::String(name.to_owned());
                Some(tool)
            })
            .collect();
        self.state.borrow_mut().names = Some(Rc::new(names));
        json!({ "tools": tools })
    }

    /// Routes a `tools/call` to its server: in flight at once, answered when the upstream call
    /// ends, unless the downstream client cancelled it meanwhile.
    fn call(self: &Rc<Self>, id: Value, params: &Value) {
        let Some(name) = params["name"].as_str().map(str::to_owned) else {
            return self.send(&error(&id, INVALID_PARAMS, "tools/call needs a name"));
        };
        let Some(token) = self.state.borrow_mut().in_flight.begin(&id) else {
            return self.send(&error(
                &id,
                INVALID_PARAMS,
                "a request with this id is in flight",
            ));
        };
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let session = self.clone();
        self.spawn(async move {
            let names = session.names().await;
            let answer = match names.route(&name) {
                None => error(&id, INVALID_PARAMS, format!("no tool named {name:?}")),
                Some((server, tool)) => {
                    let call = session.servers.call_tool(server, tool, arguments);
                    match call.cancellation(&token).await {
                        Ok(value) => match serde_json::to_value(value) {
                            Ok(value) => result(&id, value),
                            Err(e) => error(&id, INTERNAL_ERROR, e.to_string()),
                        },
                        Err(failure) => call_error(&id, &failure),
                    }
                }
            };
            // A call cancelled downstream is owed no answer.
            if session.state.borrow_mut().in_flight.end(&id) {
                session.send(&answer);
            }
        });
    }

    /// The names of the last tool list, made now if none was asked for yet.
    async fn names(&self) -> Rc<Names> {
        if let Some(names) = self.state.borrow().names.clone() {
            return names;
        }
        let _ = self.tools().await;
        self.state.borrow().names.clone().unwrap_or_default()
    }

    /// The downstream client went away: every call it left in flight is cancelled upstream, and
    /// their tasks have ended (each cancel handed to its connection) when this returns.
    pub async fn end(&self, reason: &str) {
        let cancelled = self.state.borrow_mut().in_flight.cancel_all(reason);
        tracing::debug!(cancelled, "downstream session ended");
        let tasks = std::mem::take(&mut self.state.borrow_mut().tasks);
        for task in tasks {
            let _ = task.await;
        }
    }
}
