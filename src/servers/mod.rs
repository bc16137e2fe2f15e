//! [`Servers`]: many MCP servers behind one handle, supervised, with one catalogue.
//!
//! Each named server gets its own connection actor, started on first use (or by
//! [`Servers::start_all`]) and shared by every caller after that; concurrent first callers share
//! one connect. From then on the server is **supervised**: when its connection ends (the server
//! crashed, its session expired, a health probe failed) it is restarted after a growing
//! back-off, and a start that fails is retried the same way, until the restart cap
//! ([`RestartPolicy`]) is reached; the server is then `failed` until [`Servers::restart`].
//! While a server backs off or has failed, its callers get its last error at once, without
//! spawning or dialling anything. [`Servers::stop`] stops every server and waits until their
//! processes are gone; dropping the last handle closes every connection too.
//!
//! [`Servers::catalogue`] lists every server's tools, resources, templates and prompts
//! concurrently, each server within its own time limit, so a slow or dead server delays nobody.
//! The lists are kept per server and dropped by its `notifications/*/list_changed` and by a
//! reconnect. Names several servers share stay callable by their qualified name
//! (`server/tool`, see [`catalogue`]); [`Servers::call`] routes a call by either name, with
//! every guarantee of a direct call.
//!
//! [`ServersActor`] offers the same to an actix service as messages; the handle itself works
//! from plain tokio as well.
//!
//! The files, by job: `config` (set once, by [`ServersBuilder`] or the chain on
//! [`Servers::new`]), `entry` (one server's state and the decisions on it, no I/O),
//! `registry` (the servers by name, and the tasks that start them), `watch` (a ready
//! connection's end, list changes and health), `lists` (the kept lists and the catalogue),
//! `routed` (calls routed by name, and the inspector's view of them).

mod actor;
pub mod catalogue;
mod config;
mod entry;
mod error;
mod lists;
mod live;
mod registry;
mod routed;
#[cfg(feature = "skills")]
pub mod skills;
mod start;
mod supervision;
#[cfg(test)]
mod supervision_model;
#[cfg(test)]
mod test_support;
mod watch;

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError},
};

use tokio::sync::Semaphore;

pub use actor::{CallTool, GetCatalogue, GetStatus, ServersActor, StopAll};
pub use catalogue::{Catalogue, Listed};
pub use config::{HealthProbe, ServersBuilder, DEFAULT_LIST_TIMEOUT};
pub use entry::ServerStatus;
pub use error::ServersError;
pub use live::{CallInFlight, ToolStats, DURATIONS_KEPT};
pub use routed::{BeforeSend, RoutedCall, RoutedResult};
pub use start::DEFAULT_START_PARALLELISM;
pub use supervision::{RestartPolicy, Status};

use self::{config::ServersConfig, entry::Entry};
use crate::{
    client::ConnectOptions,
    config::{Config, ServerConfig},
    error::Error,
    transport::Transport,
};

/// Many named MCP servers, each connected on first use, supervised, and listed together.
///
/// ```no_run
/// # async fn run() -> Result<(), actix_mcp::servers::ServersError> {
/// use actix_mcp::{Client, HttpTransport, Servers, StdioTransport};
/// use serde_json::json;
///
/// let servers = Servers::new(Client::builder());
/// servers.add("files", || StdioTransport::new("mcp-files").arg("/srv"));
/// servers.add("search", || HttpTransport::new("http://127.0.0.1:3001/mcp"));
/// let hits = servers.call_tool("search", "query", json!({"q": "actix"})).await?;
/// // Or routed by name: "query" if only one server has it, else "search/query".
/// let again = servers.call("search/query", json!({"q": "actix"})).await?;
/// servers.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Servers {
    inner: Arc<Inner>,
}

struct Inner {
    options: ConnectOptions,
    /// Set while the manager is built, read without a lock after.
    config: ServersConfig,
    /// Free start slots: how many more servers may connect now.
    start_slots: Arc<Semaphore>,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Routed calls in flight, kept once `track_calls` is on (an inspector).
    live: OnceLock<live::Shared>,
    /// Restarts and state changes, when the options carry a meter (feature `otel`).
    #[cfg(feature = "otel")]
    metrics: Option<crate::client::Metrics>,
}

impl Servers {
    /// Every server is connected with these options (client info, handlers, timeouts, era),
    /// unless added with options of its own ([`add_with`](Self::add_with)). The default
    /// configuration; change it with [`builder`](Self::builder), or with the chain
    /// ([`restart_policy`](Self::restart_policy) ...) right here, before the handle is shared.
    pub fn new(options: ConnectOptions) -> Self {
        Self::configured(options, ServersConfig::default())
    }

    /// A manager with a configuration of its own, set once on the builder: its chain cannot
    /// meet a handle already shared.
    pub fn builder(options: ConnectOptions) -> ServersBuilder {
        ServersBuilder::new(options)
    }

    fn configured(options: ConnectOptions, config: ServersConfig) -> Self {
        #[cfg(feature = "otel")]
        let metrics = options
            .meter()
            .map(|meter| crate::client::Metrics::new(meter, None));
        Self {
            inner: Arc::new(Inner {
                options,
                start_slots: config.start_slots(),
                config,
                entries: Mutex::new(BTreeMap::new()),
                live: OnceLock::new(),
                #[cfg(feature = "otel")]
                metrics,
            }),
        }
    }

    /// Every server of a configuration file, each with its own options (timeouts, era) over
    /// `base`; disabled ones are kept as `disabled`. Nothing starts until first use or
    /// [`start_all`](Self::start_all). A server whose transport cannot be made (an `sse` one)
    /// fails its start with that error.
    pub fn from_config(config: &Config, base: ConnectOptions) -> Self {
        Self::from_config_with(config, base, ServerConfig::transport)
    }

    /// [`from_config`](Self::from_config), with the transports made by `transport` (e.g.
    /// `|server| server.transport_with_store(store.clone())` to keep OAuth credentials in a
    /// file).
    pub fn from_config_with(
        config: &Config,
        base: ConnectOptions,
        transport: impl Fn(&ServerConfig) -> Result<Box<dyn Transport>, Error>
            + Clone
            + Send
            + Sync
            + 'static,
    ) -> Self {
        Self::builder(base).build_from_config_with(config, transport)
    }

    /// Adds every server of `config`, each with its own options over the manager's.
    fn add_configured(
        &self,
        config: &Config,
        transport: impl Fn(&ServerConfig) -> Result<Box<dyn Transport>, Error>
            + Clone
            + Send
            + Sync
            + 'static,
    ) {
        for server in &config.servers {
            let options = server.connect_options(&self.inner.options);
            let make = transport.clone();
            let described = server.clone();
            self.add_with(
                server.name.clone(),
                Some(options),
                server.enabled,
                move || make(&described),
            );
        }
    }
}

impl Inner {
    /// Records server `name`'s state (feature `otel`, with a meter).
    fn observe(&self, name: &str, entry: &Entry) {
        #[cfg(feature = "otel")]
        if let Some(metrics) = &self.metrics {
            metrics.state_changed(name, entry.supervision.status().name());
        }
        #[cfg(not(feature = "otel"))]
        let _ = (name, entry);
    }
}

/// Runs `task` beside the caller: on the current actix arbiter when there is one (a connection
/// started there needs it), else on the tokio runtime.
fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    if actix_rt::Arbiter::try_current().is_some() {
        actix_rt::spawn(task);
    } else {
        tokio::spawn(task);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; a poisoned one is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
