//! The servers by name: adding and removing them, their status, and the tasks around their
//! entries' decisions (see `entry`): a connect begun, settled, restarted after a back-off or
//! after its connection ended, stopped.

use std::{
    collections::BTreeMap,
    sync::{Arc, MutexGuard, Weak},
    time::Instant,
};

use super::{
    entry::{restart_timing, Conn, Entry, MakeTransport, Restart, ServerStatus, Settled},
    lock, spawn,
    start::Start,
    supervision::{Next, Status},
    watch::watch,
    Inner, Servers, ServersError,
};
use crate::{
    client::{Client, ConnectOptions},
    error::{CloseReason, Error},
    transport::Transport,
};

impl Servers {
    pub(super) fn entries(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
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
        let policy = self.inner.config.policy.clone();
        let entry = Entry::new(make_transport, options, policy, enabled);
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
            .map(|(name, entry)| entry.status(name))
            .collect()
    }

    /// The servers a catalogue asks: every one neither disabled nor stopped.
    pub(super) fn listed_names(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|(_, entry)| entry.is_listed())
            .map(|(name, _)| name.clone())
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
    pub(super) fn start_error(&self, name: &str, error: Error) -> ServersError {
        match self.entries().get(name).map(|e| e.supervision.status()) {
            Some(Status::Stopped) => ServersError::Stopped(name.to_owned()),
            _ => error.into(),
        }
    }

    /// Server `name`'s live client, else its start (begun now if need be).
    pub(super) fn connection(&self, name: &str) -> Result<Result<Client, Start>, ServersError> {
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
                    reason: CloseReason::ActorStopped,
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
    pub(super) fn after_end(&self, name: &str, entry: &mut Entry, error: Error) -> Option<Start> {
        let now = now();
        let next = entry.end(error, now);
        self.inner.observe(name, entry);
        match restart_timing(next, now) {
            Restart::At(at) => {
                schedule(Arc::downgrade(&self.inner), name.to_owned(), at);
                None
            }
            Restart::Now => self.begin(name, entry, false).ok(),
            Restart::Never => None,
        }
    }

    /// Begins a connect if supervision allows it (entry locked by the caller).
    fn begin(&self, name: &str, entry: &mut Entry, forced: bool) -> Result<Start, ServersError> {
        let generation = entry.admit(name, now(), forced)?;
        #[cfg(feature = "otel")]
        if let (Some(metrics), true) = (&self.inner.metrics, generation > 1) {
            metrics.restarted(name);
        }
        self.inner.observe(name, entry);
        let options = entry.connect_options(&self.inner.options, name);
        let transport = (entry.make_transport)();
        let weak = Arc::downgrade(&self.inner);
        let name = name.to_owned();
        // Settled inside the shared future, so whoever awaits a start sees the server's new
        // status; driven by a task of its own, so a caller who leaves does not stop it.
        let start = Start::new(self.inner.start_slots.clone(), async move {
            let outcome = async {
                if !still_wanted(&weak, &name, generation) {
                    // Stopped (or started again) while it waited for its slot.
                    return Err(Error::Closed {
                        reason: CloseReason::ClosedByClient,
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
}

/// Whether start `generation` of `name` is still the one its server wants.
fn still_wanted(weak: &Weak<Inner>, name: &str, generation: u64) -> bool {
    let Some(inner) = weak.upgrade() else {
        return false;
    };
    let entries = lock(&inner.entries);
    entries
        .get(name)
        .is_some_and(|entry| entry.wants(generation))
}

/// A connect ended: record it, watch the new connection, or schedule the next start.
async fn settled(weak: &Weak<Inner>, name: &str, generation: u64, outcome: Result<Client, Error>) {
    let Some(inner) = weak.upgrade() else {
        return;
    };
    let servers = Servers { inner };
    let (next, unwanted) = {
        let mut entries = servers.entries();
        let Some(entry) = entries.get_mut(name) else {
            return;
        };
        match entry.settle(generation, outcome, now()) {
            Settled::Ready(client) => {
                servers.inner.observe(name, entry);
                watch(&servers, name, generation, &client);
                (Next::Nothing, None)
            }
            Settled::Unwanted(client) => (Next::Nothing, Some(client)),
            Settled::Failed { error, next } => {
                tracing::warn!(server = %name, %error, "MCP server did not start");
                servers.inner.observe(name, entry);
                (next, None)
            }
            Settled::Nothing => (Next::Nothing, None),
        }
    };
    if let Some(client) = unwanted {
        client.shutdown().await;
    }
    if let Next::RestartAt(at) = next {
        schedule(Arc::downgrade(&servers.inner), name.to_owned(), at);
    }
}

/// Now, on tokio's clock: supervision's times follow a paused clock in tests, as the sleeps
/// that wait for them do.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Restarts `name` at `at` if supervision still wants it then.
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

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use super::*;
    use crate::servers::test_support::{eventually, Scripted};

    fn status_of(servers: &Servers, name: &str) -> &'static str {
        servers
            .status()
            .into_iter()
            .find(|s| s.name == name)
            .map_or("absent", |s| s.status.name())
    }

    /// A server whose transport cannot be made; counts the attempts.
    fn unreachable(servers: &Servers, name: &str, enabled: bool) -> Arc<AtomicUsize> {
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = attempts.clone();
        servers.add_with(name, None, enabled, move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Err(Error::Protocol("unreachable".into()))
        });
        attempts
    }

    #[tokio::test]
    async fn an_unknown_server_is_refused_by_name() {
        let servers = Servers::new(Client::builder());
        assert!(matches!(
            servers.client("nope").await,
            Err(ServersError::UnknownServer(name)) if name == "nope"
        ));
        assert!(matches!(
            servers.restart("nope").await,
            Err(ServersError::UnknownServer(_))
        ));
        assert!(matches!(
            servers.stop_server("nope").await,
            Err(ServersError::UnknownServer(_))
        ));
        assert_eq!(servers.connects("nope"), None);
        assert!(!servers.remove("nope"));
    }

    #[tokio::test]
    async fn a_disabled_server_is_never_started() {
        let servers = Servers::new(Client::builder());
        let attempts = unreachable(&servers, "off", false);
        assert!(matches!(
            servers.client("off").await,
            Err(ServersError::Disabled(_))
        ));
        servers.start_all().await;
        assert_eq!(attempts.load(Ordering::SeqCst), 0);
        assert_eq!(status_of(&servers, "off"), "disabled");
        assert!(servers.listed_names().is_empty());
        assert_eq!(servers.names(), ["off"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_start_is_retried_after_its_back_off_and_not_before() {
        let servers = Servers::new(Client::builder());
        let attempts = unreachable(&servers, "down", true);
        assert!(matches!(
            servers.client("down").await,
            Err(ServersError::Client(Error::Protocol(_)))
        ));
        assert_eq!(status_of(&servers, "down"), "backing-off");
        // Backing off: its callers get its error at once, nothing is made.
        assert!(servers.client("down").await.is_err());
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        // The default policy's first delay is 500 ms.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        assert_eq!(servers.connects("down"), Some(2));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_callers_share_one_connect() {
        let servers = Servers::new(Client::builder());
        let script = Scripted::add(&servers, "a", &["echo"]);
        let (first, second) = tokio::join!(servers.client("a"), servers.client("a"));
        assert!(first.is_ok() && second.is_ok());
        assert_eq!(script.connects(), 1);
        assert_eq!(servers.connects("a"), Some(1));
        assert_eq!(status_of(&servers, "a"), "ready");
        servers.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopped_server_refuses_calls_until_started_again() {
        let servers = Servers::new(Client::builder());
        let script = Scripted::add(&servers, "a", &["echo"]);
        let client = servers.client("a").await.expect("ready");
        servers.stop().await;
        assert!(client.is_closed());
        assert_eq!(status_of(&servers, "a"), "stopped");
        assert!(matches!(
            servers.client("a").await,
            Err(ServersError::Stopped(_))
        ));
        assert!(servers.listed_names().is_empty());
        servers.start_all().await;
        assert_eq!(status_of(&servers, "a"), "ready");
        assert_eq!(script.connects(), 2);
        servers.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_replaces_the_connection() {
        let servers = Servers::new(Client::builder());
        let script = Scripted::add(&servers, "a", &["echo"]);
        let old = servers.client("a").await.expect("ready");
        let new = servers.restart("a").await.expect("restarted");
        assert!(old.is_closed());
        assert!(!new.is_closed());
        assert_eq!(script.connects(), 2);
        eventually("the restart settled", || {
            status_of(&servers, "a") == "ready"
        })
        .await;
        servers.stop().await;
    }
}
