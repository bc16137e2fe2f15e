//! [`Servers`]: many MCP servers behind one handle.
//!
//! Each named server gets its own connection actor, started on first use and shared by every
//! caller after that; concurrent first callers share one connect. A connection that ended (the
//! server crashed, its session expired, it was closed) is replaced on the next use. A server that
//! cannot be reached is tried again only after a growing back-off (0.5 s doubling up to 30 s);
//! until then its callers get its last error at once, without spawning or dialling anything.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use backon::BackoffBuilder;
use futures::{
    future::{BoxFuture, Shared},
    FutureExt,
};
use serde_json::Value;

use crate::{
    client::{Client, ConnectOptions},
    error::Error,
    protocol::tools::{CallToolResult, Tool},
    transport::Transport,
};

type MakeTransport = Arc<dyn Fn() -> Box<dyn Transport> + Send + Sync>;
type Connecting = Shared<BoxFuture<'static, Result<Client, Error>>>;

/// Many named MCP servers, each connected on first use and reconnected after it ends.
///
/// ```no_run
/// # async fn run() -> Result<(), actix_mcp::Error> {
/// use actix_mcp::{Client, HttpTransport, Servers, StdioTransport};
/// use serde_json::json;
///
/// let servers = Servers::new(Client::builder());
/// servers.add("files", || StdioTransport::new("mcp-files").arg("/srv"));
/// servers.add("search", || HttpTransport::new("http://127.0.0.1:3001/mcp"));
/// let hits = servers.call_tool("search", "query", json!({"q": "actix"})).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Servers {
    inner: Arc<Inner>,
}

struct Inner {
    options: ConnectOptions,
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    make_transport: MakeTransport,
    state: State,
    backoff: backon::ExponentialBackoff,
    /// Connects started for this server (1 after the first use).
    connects: u64,
}

enum State {
    Idle,
    Connecting(Connecting),
    Ready(Client),
    Failed { error: Error, retry_at: Instant },
}

fn fresh_backoff() -> backon::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .without_max_times()
        .build()
}

impl Servers {
    /// Every server is connected with these options (client info, handlers, timeouts, era).
    pub fn new(options: ConnectOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                entries: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Nothing panics while holding the lock; a poisoned map is still consistent.
        self.inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds (or replaces) a server. `transport` describes how to reach it; it is called for each
    /// connect, so a crashed server is started afresh.
    pub fn add<T: Transport>(
        &self,
        name: impl Into<String>,
        transport: impl Fn() -> T + Send + Sync + 'static,
    ) {
        let entry = Entry {
            make_transport: Arc::new(move || Box::new(transport()) as Box<dyn Transport>),
            state: State::Idle,
            backoff: fresh_backoff(),
            connects: 0,
        };
        self.entries().insert(name.into(), entry);
    }

    /// Removes a server; its connection closes when the last handle to it is dropped.
    pub fn remove(&self, name: &str) -> bool {
        self.entries().remove(name).is_some()
    }

    /// The servers' names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.entries().keys().cloned().collect();
        names.sort();
        names
    }

    /// How many connects were started for this server (for monitoring restarts).
    pub fn connects(&self, name: &str) -> Option<u64> {
        self.entries().get(name).map(|e| e.connects)
    }

    /// The client of server `name`: the live one, or a new connection if there is none yet or
    /// the last one ended. During a back-off after failed connects, the last error.
    pub async fn client(&self, name: &str) -> Result<Client, Error> {
        let connecting = {
            let mut entries = self.entries();
            let entry = entries
                .get_mut(name)
                .ok_or_else(|| Error::UnknownServer(name.to_owned()))?;
            match &entry.state {
                State::Ready(client) if !client.is_closed() => return Ok(client.clone()),
                State::Connecting(connecting) => connecting.clone(),
                State::Failed { error, retry_at } if Instant::now() < *retry_at => {
                    return Err(error.clone())
                }
                _ => {
                    let options = self.inner.options.clone();
                    let transport = (entry.make_transport)();
                    let connecting = async move { options.connect(transport).await }
                        .boxed()
                        .shared();
                    entry.state = State::Connecting(connecting.clone());
                    entry.connects += 1;
                    connecting
                }
            }
        };
        let outcome = connecting.clone().await;
        let mut entries = self.entries();
        if let Some(entry) = entries.get_mut(name) {
            // Only the connect still on record may settle the state (not one replaced since).
            let current = matches!(&entry.state, State::Connecting(c) if c.ptr_eq(&connecting));
            if current {
                entry.state = match &outcome {
                    Ok(client) => {
                        entry.backoff = fresh_backoff();
                        State::Ready(client.clone())
                    }
                    Err(error) => {
                        let delay = entry.backoff.next().unwrap_or(Duration::from_secs(30));
                        State::Failed {
                            error: error.clone(),
                            retry_at: Instant::now() + delay,
                        }
                    }
                };
            }
        }
        outcome
    }

    /// `tools/call` on server `server`.
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<CallToolResult, Error> {
        self.client(server).await?.call_tool(tool, arguments).await
    }

    /// Every server's tools, listed concurrently: `(server, its tools or why not)`, by name.
    pub async fn tools(&self) -> Vec<(String, Result<Vec<Tool>, Error>)> {
        let lists = self.names().into_iter().map(|name| async move {
            let tools = match self.client(&name).await {
                Ok(client) => client.tools().await,
                Err(e) => Err(e),
            };
            (name, tools)
        });
        futures::future::join_all(lists).await
    }

    /// Shuts every live connection down (see [`Client::shutdown`]); the servers stay registered
    /// and reconnect on their next use.
    pub async fn shutdown(&self) {
        let clients: Vec<Client> = self
            .entries()
            .values_mut()
            .filter_map(
                |entry| match std::mem::replace(&mut entry.state, State::Idle) {
                    State::Ready(client) => Some(client),
                    _ => None,
                },
            )
            .collect();
        futures::future::join_all(clients.iter().map(Client::shutdown)).await;
    }
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servers")
            .field("names", &self.names())
            .finish()
    }
}
