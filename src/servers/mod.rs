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

mod actor;
pub mod catalogue;
mod error;
mod live;
#[cfg(feature = "skills")]
pub mod skills;
mod start;
mod supervision;
#[cfg(test)]
mod supervision_model;

use std::{
    collections::BTreeMap,
    future::{Future, IntoFuture},
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
    time::{Duration, Instant},
};

use futures::{future::BoxFuture, FutureExt};
use serde_json::Value;
use tokio::sync::Semaphore;

pub use actor::{CallTool, GetCatalogue, GetStatus, ServersActor, StopAll};
pub use catalogue::{Catalogue, Listed};
pub use error::ServersError;
pub use live::{CallInFlight, ToolStats, DURATIONS_KEPT};
pub use start::DEFAULT_START_PARALLELISM;
pub use supervision::{RestartPolicy, Status};

use self::{
    start::Start,
    supervision::{Next, Supervision},
};
use crate::{
    cancellation::Cancellation,
    client::{Client, ConnectOptions},
    config::{Config, ServerConfig},
    error::Error,
    protocol::{
        notifications::ServerNotification,
        prompts::Prompt,
        resources::{Resource, ResourceTemplate},
        tools::{CallToolResult, Tool},
    },
    transport::Transport,
};

type MakeTransport = Arc<dyn Fn() -> Result<Box<dyn Transport>, Error> + Send + Sync>;

/// How long [`Servers::catalogue`] waits for one server's lists by default.
pub const DEFAULT_LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// An optional health probe: every `interval`, each ready server is asked something cheap
/// (`ping`; `server/discover` in the 2026-07-28 era); no answer within `timeout` ends the
/// connection, which supervision then restarts. Any answer, an error one included, is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthProbe {
    /// Time between probes.
    pub interval: Duration,
    /// How long a probe may take.
    pub timeout: Duration,
}

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
    policy: Mutex<RestartPolicy>,
    probe: Mutex<Option<HealthProbe>>,
    list_timeout: Mutex<Duration>,
    /// Free start slots: how many more servers may connect now.
    start_slots: Mutex<Arc<Semaphore>>,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Routed calls in flight, kept once `track_calls` is on (an inspector).
    live: Mutex<Option<live::Shared>>,
    /// Restarts and state changes, when the options carry a meter (feature `otel`).
    #[cfg(feature = "otel")]
    metrics: Option<crate::client::Metrics>,
}

struct Entry {
    make_transport: MakeTransport,
    /// This server's options, when they differ from the manager's.
    options: Option<ConnectOptions>,
    supervision: Supervision,
    conn: Conn,
    /// Counts connects, so that a late event of an old connection is told apart.
    generation: u64,
    lists: Lists,
}

impl Entry {
    /// Stopped on purpose: no restart, lists dropped. What is left to wait for: the live
    /// client's shutdown, or the end of a start (one still waiting for its slot connects
    /// nothing; one under way is shut down as it ends).
    fn stop(&mut self) -> Option<BoxFuture<'static, ()>> {
        self.supervision.stop();
        self.lists = Lists::default();
        match std::mem::replace(&mut self.conn, Conn::None) {
            Conn::Ready(client) => Some(async move { client.shutdown().await }.boxed()),
            Conn::Connecting(start) => Some(start.done().map(drop).boxed()),
            Conn::None => None,
        }
    }
}

enum Conn {
    None,
    Connecting(Start),
    Ready(Client),
}

/// What the server listed, kept until its `list_changed` or a reconnect.
#[derive(Default, Clone)]
struct Lists {
    tools: Option<Vec<Tool>>,
    resources: Option<Vec<Resource>>,
    resource_templates: Option<Vec<ResourceTemplate>>,
    prompts: Option<Vec<Prompt>>,
}

/// One server's state, as [`Servers::status`] reports it.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// Where it is.
    pub status: Status,
    /// Connects started so far (restarts included).
    pub starts: u64,
}

impl Servers {
    /// Every server is connected with these options (client info, handlers, timeouts, era),
    /// unless added with options of its own ([`add_with`](Self::add_with)).
    pub fn new(options: ConnectOptions) -> Self {
        #[cfg(feature = "otel")]
        let metrics = options
            .meter()
            .map(|meter| crate::client::Metrics::new(meter, None));
        Self {
            inner: Arc::new(Inner {
                options,
                policy: Mutex::new(RestartPolicy::default()),
                probe: Mutex::new(None),
                list_timeout: Mutex::new(DEFAULT_LIST_TIMEOUT),
                start_slots: Mutex::new(Arc::new(Semaphore::new(DEFAULT_START_PARALLELISM))),
                entries: Mutex::new(BTreeMap::new()),
                live: Mutex::new(None),
                #[cfg(feature = "otel")]
                metrics,
            }),
        }
    }

    /// Keeps the routed calls ([`call`](Self::call), [`call_tool`](Self::call_tool)) in flight
    /// from now on, for [`calls_in_flight`](Self::calls_in_flight) and
    /// [`cancel_call`](Self::cancel_call): an inspector turns it on. Each such call then asks
    /// its server for progress (a progress token), and the last progress is kept.
    pub fn track_calls(&self) {
        lock(&self.inner.live).get_or_insert_with(live::Shared::default);
    }

    /// The routed calls in flight, oldest first (empty unless [`track_calls`](Self::track_calls)
    /// is on).
    pub fn calls_in_flight(&self) -> Vec<CallInFlight> {
        match lock(&self.inner.live).as_ref() {
            Some(shared) => live::snapshot(shared),
            None => Vec::new(),
        }
    }

    /// Per server and tool, the routed calls that ended since [`track_calls`](Self::track_calls)
    /// was turned on: how many, failed, cancelled, and their durations' p50 and p99 (over the
    /// last [`DURATIONS_KEPT`] of each). Empty unless it is on.
    pub fn tool_stats(&self) -> Vec<ToolStats> {
        match lock(&self.inner.live).as_ref() {
            Some(shared) => live::tool_stats(shared),
            None => Vec::new(),
        }
    }

    /// Cancels routed call `id` as its own token would: its caller gets [`Error::Cancelled`]
    /// with `reason`, and the server its cancel. `false` if no such call is in flight.
    pub fn cancel_call(&self, id: u64, reason: &str) -> bool {
        let shared = lock(&self.inner.live).clone();
        shared.is_some_and(|shared| live::cancel(&shared, id, reason))
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
        let servers = Self::new(base.clone());
        for server in &config.servers {
            let options = server.connect_options(&base);
            let make = transport.clone();
            let described = server.clone();
            servers.add_with(
                server.name.clone(),
                Some(options),
                server.enabled,
                move || make(&described),
            );
        }
        servers
    }

    /// The restart policy of every server, those already added and those added later
    /// (default: [`RestartPolicy::default`]).
    pub fn restart_policy(self, policy: RestartPolicy) -> Self {
        for entry in self.entries().values_mut() {
            entry.supervision.set_policy(policy.clone());
        }
        *lock(&self.inner.policy) = policy;
        self
    }

    /// Probes every ready server's health (off by default).
    pub fn health_probe(self, probe: HealthProbe) -> Self {
        *lock(&self.inner.probe) = Some(probe);
        self
    }

    /// How long [`catalogue`](Self::catalogue) waits for one server (default
    /// [`DEFAULT_LIST_TIMEOUT`]).
    pub fn list_timeout(self, timeout: Duration) -> Self {
        *lock(&self.inner.list_timeout) = timeout;
        self
    }

    /// How many servers connect at once, at most (default [`DEFAULT_START_PARALLELISM`]): the
    /// others wait their turn, whatever started them ([`start_all`](Self::start_all), a first
    /// call, the catalogue, a restart). A server's connect timeout and list time limit count
    /// from its turn. Set it before the first start.
    pub fn start_parallelism(self, servers: usize) -> Self {
        *lock(&self.inner.start_slots) = Arc::new(Semaphore::new(servers.max(1)));
        self
    }

    fn entries(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        lock(&self.inner.entries)
    }

    /// Adds (or replaces) a server. `transport` describes how to reach it; it is called for each
    /// connect, so a crashed server is started afresh.
    pub fn add<T: Transport>(
        &self,
        name: impl Into<String>,
        transport: impl Fn() -> T + Send + Sync + 'static,
    ) {
        self.insert(
            name.into(),
            Arc::new(move || Ok(Box::new(transport()) as Box<dyn Transport>)),
            None,
            true,
        );
    }

    /// Adds (or replaces) a server with options of its own and a transport that may fail to
    /// build (its error is then the server's start error). `enabled: false` keeps it listed
    /// as `disabled`, never started.
    pub fn add_with(
        &self,
        name: impl Into<String>,
        options: Option<ConnectOptions>,
        enabled: bool,
        transport: impl Fn() -> Result<Box<dyn Transport>, Error> + Send + Sync + 'static,
    ) {
        self.insert(name.into(), Arc::new(transport), options, enabled);
    }

    fn insert(
        &self,
        name: String,
        make_transport: MakeTransport,
        options: Option<ConnectOptions>,
        enabled: bool,
    ) {
        let policy = lock(&self.inner.policy).clone();
        let entry = Entry {
            make_transport,
            options,
            supervision: Supervision::new(policy, enabled),
            conn: Conn::None,
            generation: 0,
            lists: Lists::default(),
        };
        self.entries().insert(name, entry);
    }

    /// Removes a server; its connection closes when the last handle to it is dropped.
    pub fn remove(&self, name: &str) -> bool {
        self.entries().remove(name).is_some()
    }

    /// The servers' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries().keys().cloned().collect()
    }

    /// How many connects were started for this server (for monitoring restarts).
    pub fn connects(&self, name: &str) -> Option<u64> {
        self.entries().get(name).map(|e| e.supervision.starts())
    }

    /// Every server's status, by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.entries()
            .iter()
            .map(|(name, entry)| ServerStatus {
                name: name.clone(),
                status: entry.supervision.status().clone(),
                starts: entry.supervision.starts(),
            })
            .collect()
    }

    /// The client of server `name`: the live one, or a new connection if there is none yet or
    /// the last one ended. During a back-off, and once the server has failed, its last error.
    pub async fn client(&self, name: &str) -> Result<Client, ServersError> {
        match self.connection(name)? {
            Ok(client) => Ok(client),
            Err(start) => start.done().await.map_err(|e| self.start_error(name, e)),
        }
    }

    /// A start's error as its callers see it: stopped meanwhile, [`ServersError::Stopped`].
    fn start_error(&self, name: &str, error: Error) -> ServersError {
        match self.entries().get(name).map(|e| e.supervision.status()) {
            Some(Status::Stopped) => ServersError::Stopped(name.to_owned()),
            _ => error.into(),
        }
    }

    /// Server `name`'s live client, else its start (begun now if need be).
    fn connection(&self, name: &str) -> Result<Result<Client, Start>, ServersError> {
        let mut entries = self.entries();
        let entry = entries
            .get_mut(name)
            .ok_or_else(|| ServersError::UnknownServer(name.to_owned()))?;
        let start = match &entry.conn {
            Conn::Ready(client) if !client.is_closed() => return Ok(Ok(client.clone())),
            Conn::Connecting(start) => start.clone(),
            Conn::Ready(client) => {
                // Ended, and its watcher has not run yet: what it would do, now.
                let error = client.close_reason().unwrap_or(Error::Closed {
                    reason: crate::error::CloseReason::ActorStopped,
                });
                match self.after_end(name, entry, error) {
                    Some(restarted) => restarted,
                    // Backing off or failed: its error.
                    None => self.begin(name, entry, false)?,
                }
            }
            Conn::None => self.begin(name, entry, false)?,
        };
        Ok(Err(start))
    }

    /// Starts every enabled server that is not running (idle, stopped), and waits for each
    /// start to end; the outcomes are in [`status`](Self::status).
    pub async fn start_all(&self) {
        let starts: Vec<_> = {
            let mut entries = self.entries();
            entries
                .iter_mut()
                .filter_map(|(name, entry)| match &entry.conn {
                    Conn::Connecting(start) => Some(start.done()),
                    Conn::Ready(c) if !c.is_closed() => None,
                    _ => {
                        let forced = matches!(entry.supervision.status(), Status::Stopped);
                        self.begin(name, entry, forced).ok().map(|s| s.done())
                    }
                })
                .collect()
        };
        futures::future::join_all(starts).await;
    }

    /// Starts server `name` again now, whatever its state (failed, stopped, backing off),
    /// forgetting its past failures. Its current connection, if any, is closed first.
    pub async fn restart(&self, name: &str) -> Result<Client, ServersError> {
        let (old, connecting) = {
            let mut entries = self.entries();
            let entry = entries
                .get_mut(name)
                .ok_or_else(|| ServersError::UnknownServer(name.to_owned()))?;
            let old = match std::mem::replace(&mut entry.conn, Conn::None) {
                Conn::Ready(client) => Some(client),
                _ => None,
            };
            entry.supervision.stop();
            (old, self.begin(name, entry, true)?)
        };
        if let Some(old) = old {
            old.shutdown().await;
        }
        Ok(connecting.done().await?)
    }

    /// Stops server `name`: no restart until [`restart`](Self::restart) or
    /// [`start_all`](Self::start_all); waits until its process is gone.
    pub async fn stop_server(&self, name: &str) -> Result<(), ServersError> {
        let stopping = {
            let mut entries = self.entries();
            let entry = entries
                .get_mut(name)
                .ok_or_else(|| ServersError::UnknownServer(name.to_owned()))?;
            entry.stop()
        };
        if let Some(stopping) = stopping {
            stopping.await;
        }
        Ok(())
    }

    /// Stops every server (see [`stop_server`](Self::stop_server)) and waits until their
    /// processes are gone. Calls fail with [`ServersError::Stopped`] until a server is
    /// started again.
    pub async fn stop(&self) {
        let stopping: Vec<_> = self
            .entries()
            .values_mut()
            .filter_map(Entry::stop)
            .collect();
        futures::future::join_all(stopping).await;
    }

    /// A ready connection ended (entry locked by the caller): supervision decides; a restart
    /// due now begins at once (its connect is returned), a later one is scheduled.
    fn after_end(&self, name: &str, entry: &mut Entry, error: Error) -> Option<Start> {
        entry.conn = Conn::None;
        entry.lists = Lists::default();
        let now = now();
        let next = entry.supervision.ended(error, now);
        self.inner.observe(name, entry);
        match next {
            Next::RestartAt(at) if at > now => {
                schedule(Arc::downgrade(&self.inner), name.to_owned(), at);
                None
            }
            Next::RestartAt(_) => self.begin(name, entry, false).ok(),
            Next::Nothing => None,
        }
    }

    /// Begins a connect if supervision allows it (entry locked by the caller).
    fn begin(&self, name: &str, entry: &mut Entry, forced: bool) -> Result<Start, ServersError> {
        let now = now();
        if !entry.supervision.start(now, forced) {
            return Err(refusal(entry.supervision.status(), name));
        }
        entry.generation += 1;
        #[cfg(feature = "otel")]
        if let (Some(metrics), true) = (&self.inner.metrics, entry.generation > 1) {
            metrics.restarted(name);
        }
        self.inner.observe(name, entry);
        entry.lists = Lists::default();
        let generation = entry.generation;
        let options = entry
            .options
            .clone()
            .unwrap_or_else(|| self.inner.options.clone())
            .pooled_by_default()
            .name(name);
        let transport = (entry.make_transport)();
        let weak = Arc::downgrade(&self.inner);
        let name = name.to_owned();
        // Settled inside the shared future, so whoever awaits a start sees the server's new
        // status; driven by a task of its own, so a caller who leaves does not stop it.
        let slots = lock(&self.inner.start_slots).clone();
        let start = Start::new(slots, async move {
            let outcome = async {
                if !still_wanted(&weak, &name, generation) {
                    // Stopped (or started again) while it waited for its slot.
                    return Err(Error::Closed {
                        reason: crate::error::CloseReason::ClosedByClient,
                    });
                }
                options.connect(transport?).await
            }
            .await;
            settled(&weak, &name, generation, outcome.clone()).await;
            outcome
        });
        entry.conn = Conn::Connecting(start.clone());
        let drive = start.done();
        spawn(async move {
            let _ = drive.await;
        });
        Ok(start)
    }

    /// `tools/call` of `tool` on server `server`. Set a token and a timeout on the returned
    /// call as on a direct one; cancelling before the server is connected sends nothing.
    pub fn call_tool(&self, server: &str, tool: &str, arguments: Value) -> RoutedCall {
        RoutedCall {
            servers: self.clone(),
            server: Some(server.to_owned()),
            tool: tool.to_owned(),
            arguments,
            cancellation: None,
            timeout: None,
            meta: None,
            progress: None,
        }
    }

    /// `tools/call` routed by the tool's name: a qualified `server/tool`, or a bare name that
    /// one server offers. Set a token and a timeout on the returned call as on a direct one;
    /// cancelling before the server is found sends nothing.
    pub fn call(&self, tool: &str, arguments: Value) -> RoutedCall {
        RoutedCall {
            servers: self.clone(),
            server: None,
            tool: tool.to_owned(),
            arguments,
            cancellation: None,
            timeout: None,
            meta: None,
            progress: None,
        }
    }

    /// Which server and tool a name routes to (see [`call`](Self::call)).
    pub async fn route(&self, tool: &str) -> Result<(String, String), ServersError> {
        let names = self.names();
        if let Some((server, tool)) =
            catalogue::split_qualified(tool, names.iter().map(String::as_str))
        {
            return Ok((server.to_owned(), tool.to_owned()));
        }
        let tools = self.catalogue_of(Kinds::TOOLS).await.tools;
        catalogue::route(tool, &names, &tools)
    }

    /// Every server's tools, listed concurrently: `(server, its tools or why not)`, by name.
    pub async fn tools(&self) -> Vec<(String, Result<Vec<Tool>, ServersError>)> {
        let names = self.names();
        let lists = names.into_iter().map(|name| async move {
            let tools = self
                .lists_of(&name, Kinds::TOOLS)
                .await
                .map(|l| l.tools.unwrap_or_default());
            (name, tools)
        });
        futures::future::join_all(lists).await
    }

    /// Every enabled server's tools, resources, resource templates and prompts, listed
    /// concurrently (servers not yet started are started); see [`Catalogue`].
    pub async fn catalogue(&self) -> Catalogue {
        self.catalogue_of(Kinds::ALL).await
    }

    /// The servers a catalogue asks: every one neither disabled nor stopped.
    fn listed_names(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|(_, e)| !matches!(e.supervision.status(), Status::Disabled | Status::Stopped))
            .map(|(name, _)| name.clone())
            .collect()
    }

    async fn catalogue_of(&self, kinds: Kinds) -> Catalogue {
        let names = self.listed_names();
        let lists = futures::future::join_all(names.into_iter().map(|name| async move {
            let lists = self.lists_of(&name, kinds).await;
            (name, lists)
        }))
        .await;
        let mut catalogue = Catalogue::default();
        let (mut tools, mut resources, mut templates, mut prompts) =
            (vec![], vec![], vec![], vec![]);
        for (name, lists) in lists {
            match lists {
                Ok(lists) => {
                    tools.push((name.clone(), lists.tools.unwrap_or_default()));
                    resources.push((name.clone(), lists.resources.unwrap_or_default()));
                    templates.push((name.clone(), lists.resource_templates.unwrap_or_default()));
                    prompts.push((name, lists.prompts.unwrap_or_default()));
                }
                Err(e) => catalogue.unavailable.push((name, e)),
            }
        }
        catalogue.tools = catalogue::entries(tools, |t| t.name.as_str());
        catalogue.resources = catalogue::entries(resources, |r| r.uri.as_str());
        catalogue.resource_templates = catalogue::entries(templates, |t| t.uri_template.as_str());
        catalogue.prompts = catalogue::entries(prompts, |p| p.name.as_str());
        catalogue
    }

    /// One server's lists of `kinds`: kept ones, else fetched (what the server does not offer
    /// is empty), all within the list timeout from the server's start slot (waiting for a
    /// slot behind other servers is not this one's slowness).
    async fn lists_of(&self, name: &str, kinds: Kinds) -> Result<Lists, ServersError> {
        let limit = *lock(&self.inner.list_timeout);
        let connection = self.connection(name)?;
        if let Err(start) = &connection {
            start.slot_taken().await;
        }
        let work = async {
            let client = match connection {
                Ok(client) => client,
                Err(start) => start.done().await.map_err(|e| self.start_error(name, e))?,
            };
            let (kept, generation) = {
                let entries = self.entries();
                let entry = entries
                    .get(name)
                    .ok_or_else(|| ServersError::UnknownServer(name.to_owned()))?;
                (entry.lists.clone(), entry.generation)
            };
            let capabilities = client.capabilities();
            let mut lists = kept;
            if kinds.tools && lists.tools.is_none() {
                lists.tools = Some(match capabilities.tools {
                    Some(_) => client.tools().await?,
                    None => Vec::new(),
                });
            }
            if kinds.others && lists.resources.is_none() {
                lists.resources = Some(match capabilities.resources {
                    Some(_) => client.resources().await?,
                    None => Vec::new(),
                });
            }
            if kinds.others && lists.resource_templates.is_none() {
                lists.resource_templates = Some(match capabilities.resources {
                    Some(_) => client.resource_templates().await?,
                    None => Vec::new(),
                });
            }
            if kinds.others && lists.prompts.is_none() {
                lists.prompts = Some(match capabilities.prompts {
                    Some(_) => client.prompts().await?,
                    None => Vec::new(),
                });
            }
            // Kept unless the server reconnected or a list changed meanwhile (the notification
            // dropped what it named: keep only what is still unset there).
            let mut entries = self.entries();
            if let Some(entry) = entries.get_mut(name) {
                if entry.generation == generation {
                    let kept = &mut entry.lists;
                    if kept.tools.is_none() && lists.tools.is_some() {
                        kept.tools.clone_from(&lists.tools);
                    }
                    if kept.resources.is_none() && lists.resources.is_some() {
                        kept.resources.clone_from(&lists.resources);
                        kept.resource_templates
                            .clone_from(&lists.resource_templates);
                    }
                    if kept.prompts.is_none() && lists.prompts.is_some() {
                        kept.prompts.clone_from(&lists.prompts);
                    }
                }
            }
            Ok(lists)
        };
        match tokio::time::timeout(limit, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::Timeout { after: limit }.into()),
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

/// Which lists a catalogue needs.
#[derive(Clone, Copy)]
struct Kinds {
    tools: bool,
    others: bool,
}

impl Kinds {
    const TOOLS: Kinds = Kinds {
        tools: true,
        others: false,
    };
    const ALL: Kinds = Kinds {
        tools: true,
        others: true,
    };
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

/// Why supervision refused to start server `name` now.
fn refusal(status: &Status, name: &str) -> ServersError {
    match status {
        Status::BackingOff { error, .. } => error.clone().into(),
        Status::Failed {
            restarts,
            window,
            last,
        } => ServersError::GaveUp {
            server: name.to_owned(),
            restarts: *restarts,
            window: *window,
            last: last.clone(),
        },
        Status::Disabled => ServersError::Disabled(name.to_owned()),
        _ => ServersError::Stopped(name.to_owned()),
    }
}

/// Whether start `generation` of `name` is still the one its server wants.
fn still_wanted(weak: &Weak<Inner>, name: &str, generation: u64) -> bool {
    let Some(inner) = weak.upgrade() else {
        return false;
    };
    let entries = lock(&inner.entries);
    entries.get(name).is_some_and(|entry| {
        entry.generation == generation && matches!(entry.supervision.status(), Status::Starting)
    })
}

/// A connect ended: record it, watch the new connection, or schedule the next start.
async fn settled(weak: &Weak<Inner>, name: &str, generation: u64, outcome: Result<Client, Error>) {
    let Some(inner) = weak.upgrade() else {
        return;
    };
    let servers = Servers { inner };
    let now = now();
    let (next, unwanted) = {
        let mut entries = servers.entries();
        let Some(entry) = entries.get_mut(name) else {
            return;
        };
        if entry.generation != generation {
            (Next::Nothing, outcome.ok())
        } else {
            match outcome {
                Ok(client) if matches!(entry.supervision.status(), Status::Starting) => {
                    entry.supervision.connected(now);
                    servers.inner.observe(name, entry);
                    entry.conn = Conn::Ready(client.clone());
                    watch(&servers, name, generation, &client);
                    (Next::Nothing, None)
                }
                // Stopped while it was starting.
                Ok(client) => (Next::Nothing, Some(client)),
                Err(error) if matches!(entry.supervision.status(), Status::Starting) => {
                    entry.conn = Conn::None;
                    tracing::warn!(server = %name, %error, "MCP server did not start");
                    let next = entry.supervision.connect_failed(error, now);
                    servers.inner.observe(name, entry);
                    (next, None)
                }
                Err(_) => (Next::Nothing, None),
            }
        }
    };
    if let Some(client) = unwanted {
        client.shutdown().await;
    }
    if let Next::RestartAt(at) = next {
        schedule(Arc::downgrade(&servers.inner), name.to_owned(), at);
    }
}

/// Restarts `name` at `at` if supervision still wants it then.
/// Now, on tokio's clock: supervision's times follow a paused clock in tests, as the sleeps
/// that wait for them do.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

fn schedule(weak: Weak<Inner>, name: String, at: Instant) {
    spawn(async move {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let servers = Servers { inner };
        let mut entries = servers.entries();
        if let Some(entry) = entries.get_mut(&name) {
            if matches!(entry.conn, Conn::None) {
                // Refused (stopped, failed, a caller started it already): nothing to do.
                let _ = servers.begin(&name, entry, false);
            }
        }
    });
}

/// Watches a ready connection: its end (restart), its list changes (drop kept lists), and,
/// when configured, its health. Nothing here keeps the connection open: the watchers hold no
/// client, and stop with the manager.
fn watch(servers: &Servers, name: &str, generation: u64, client: &Client) {
    let weak = Arc::downgrade(&servers.inner);
    let closed = client.closed();
    {
        let weak = weak.clone();
        let name = name.to_owned();
        spawn(async move {
            let error = closed.await;
            ended(&weak, &name, generation, error);
        });
    }
    let mut notifications = client.notifications();
    {
        let weak = weak.clone();
        let name = name.to_owned();
        spawn(async move {
            while let Some(notification) = notifications.next().await {
                let Some(inner) = weak.upgrade() else { return };
                let mut entries = lock(&inner.entries);
                let Some(entry) = entries.get_mut(&name) else {
                    return;
                };
                if entry.generation != generation {
                    return;
                }
                match notification {
                    ServerNotification::ToolsListChanged => entry.lists.tools = None,
                    ServerNotification::PromptsListChanged => entry.lists.prompts = None,
                    ServerNotification::ResourcesListChanged => {
                        entry.lists.resources = None;
                        entry.lists.resource_templates = None;
                    }
                    _ => {}
                }
            }
        });
    }
    if let Some(probe) = *lock(&servers.inner.probe) {
        let name = name.to_owned();
        spawn(async move {
            loop {
                tokio::time::sleep(probe.interval).await;
                let client = {
                    let Some(inner) = weak.upgrade() else { return };
                    let entries = lock(&inner.entries);
                    match entries.get(&name) {
                        Some(Entry {
                            conn: Conn::Ready(client),
                            generation: g,
                            ..
                        }) if *g == generation && !client.is_closed() => client.clone(),
                        _ => return,
                    }
                };
                if !alive(&client, probe.timeout).await {
                    tracing::warn!(server = %name, "MCP server failed its health probe; restarting it");
                    client.close().await;
                    return;
                }
            }
        });
    }
}

/// One health probe: any answer within `timeout`, an error one included, is alive.
async fn alive(client: &Client, timeout: Duration) -> bool {
    let answer = if client.is_modern() {
        client
            .request::<Value>("server/discover", ())
            .timeout(timeout)
            .await
            .map(drop)
    } else {
        client.ping().timeout(timeout).await.map(drop)
    };
    matches!(answer, Ok(()) | Err(Error::Server { .. }))
}

/// A ready connection ended by itself: schedule its restart.
fn ended(weak: &Weak<Inner>, name: &str, generation: u64, error: Error) {
    let Some(inner) = weak.upgrade() else {
        return;
    };
    let servers = Servers { inner };
    let mut entries = servers.entries();
    let Some(entry) = entries.get_mut(name) else {
        return;
    };
    if entry.generation != generation || !matches!(entry.conn, Conn::Ready(_)) {
        return; // stopped or restarted on purpose meanwhile, or already handled by a caller
    }
    tracing::warn!(server = %name, %error, "MCP server connection ended");
    let _ = servers.after_end(name, entry, error);
}

/// A `tools/call` routed by name ([`Servers::call`]): set a token and a timeout, then await.
#[must_use = "a RoutedCall does nothing until it is awaited"]
pub struct RoutedCall {
    servers: Servers,
    /// The server named by the caller ([`Servers::call_tool`]); `None`: routed by the name.
    server: Option<String>,
    tool: String,
    arguments: Value,
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    meta: Option<serde_json::Map<String, Value>>,
    progress: Option<crate::protocol::notifications::ProgressCallback>,
}

impl RoutedCall {
    /// Calls `callback` with each progress update of the call, as
    /// [`Call::on_progress`](crate::Call::on_progress) (the inspector still sees them too).
    pub fn on_progress(
        mut self,
        callback: impl FnMut(crate::protocol::notifications::Progress) + Send + 'static,
    ) -> Self {
        self.progress = Some(Box::new(callback));
        self
    }

    /// The call's progress as a stream, as [`Call::progress_stream`](crate::Call::progress_stream).
    pub fn progress_stream(self) -> (Self, crate::client::ProgressStream) {
        let (callback, stream) = crate::client::ProgressStream::new();
        (self.on_progress(callback), stream)
    }

    /// Adds `_meta` entries to the request's params, as [`Call::meta`](crate::Call::meta).
    pub fn meta(mut self, meta: serde_json::Map<String, Value>) -> Self {
        self.meta.get_or_insert_with(Default::default).extend(meta);
        self
    }

    /// Cancels the call when `token` is cancelled (on the server, once it was sent).
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    /// The call's timeout, as [`Call::timeout`](crate::Call::timeout) (finding the server
    /// is not counted).
    pub fn timeout(mut self, after: Duration) -> Self {
        self.timeout = Some(after);
        self
    }
}

impl IntoFuture for RoutedCall {
    type Output = Result<CallToolResult, ServersError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let mut this = self;
            let tracked = lock(&this.servers.inner.live).clone();
            let Some(live) = tracked else {
                return this.run(None).await;
            };
            // The call's own token: cancelled by the caller's, or from the inspector.
            let stop = Cancellation::new();
            let registration = live::register(&live, &this.tool, stop.clone());
            let theirs = this.cancellation.replace(stop.clone());
            let call = this.run(Some(&registration));
            let outcome = match theirs {
                None => call.await,
                Some(theirs) => {
                    let mut call = std::pin::pin!(call);
                    tokio::select! {
                        outcome = &mut call => outcome,
                        () = theirs.cancelled() => {
                            stop.cancel_inner_with(theirs.reason_owned());
                            call.await
                        }
                    }
                }
            };
            registration.finished(match &outcome {
                Ok(result) => live::Outcome::Answered {
                    tool_error: result.is_error == Some(true),
                },
                Err(e) if e.is_cancelled() => live::Outcome::Cancelled,
                Err(ServersError::Client(Error::Timeout { .. })) => live::Outcome::Cancelled,
                Err(_) => live::Outcome::Failed,
            });
            outcome
        })
    }
}

impl RoutedCall {
    async fn run(self, live: Option<&live::Registration>) -> Result<CallToolResult, ServersError> {
        {
            let token = self.cancellation.clone();
            let find = async {
                let (server, tool) = match &self.server {
                    Some(server) => (server.clone(), self.tool.clone()),
                    None => self.servers.route(&self.tool).await?,
                };
                if let Some(live) = live {
                    live.routed_to(&server, &tool);
                }
                let client = self.servers.client(&server).await?;
                Ok::<_, ServersError>((client, tool))
            };
            // A cancel while the server is being found: nothing was sent, nothing is.
            let (client, tool) = match &token {
                Some(token) => {
                    if token.is_cancelled() {
                        return Err(Error::cancelled(token.reason_owned()).into());
                    }
                    tokio::select! {
                        found = find => found?,
                        () = token.cancelled() => return Err(Error::cancelled(token.reason_owned()).into()),
                    }
                }
                None => find.await?,
            };
            let mut call = client
                .call_tool(&tool, self.arguments)
                .cancellation_opt(token.as_ref());
            if let Some(after) = self.timeout {
                call = call.timeout(after);
            }
            if let Some(meta) = self.meta {
                call = call.meta(meta);
            }
            let mut theirs = self.progress;
            match (live.map(live::Registration::progress_keeper), theirs.take()) {
                (Some(mut keep), Some(mut theirs)) => {
                    call = call.on_progress(move |progress| {
                        keep(progress.clone());
                        theirs(progress);
                    });
                }
                (Some(keep), None) => call = call.on_progress(keep),
                (None, Some(theirs)) => call = call.on_progress(theirs),
                (None, None) => {}
            }
            Ok(call.await?)
        }
    }
}
