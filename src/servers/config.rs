//! The manager's configuration (restart policy, health probe, list timeout, start
//! parallelism): set once, while the manager is built, then read without a lock. It used to
//! sit in four mutexes that every start, watch and listing took, for values nobody changes
//! once servers run.
//!
//! Two ways to set it, the same values either way: [`ServersBuilder`] (nothing to get wrong),
//! or the chain on a fresh [`Servers::new`], which still owns its only handle.

use std::{sync::Arc, time::Duration};

use tokio::sync::Semaphore;

use super::{start::DEFAULT_START_PARALLELISM, supervision::RestartPolicy, Inner, Servers};
use crate::{
    client::ConnectOptions,
    config::{Config, ServerConfig},
    error::Error,
    transport::Transport,
};

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

/// The configuration a [`Servers`] keeps for its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServersConfig {
    /// Every server's restart policy, those added later included.
    pub(super) policy: RestartPolicy,
    pub(super) probe: Option<HealthProbe>,
    /// How long the catalogue waits for one server.
    pub(super) list_timeout: Duration,
    /// At least one (see [`set_start_parallelism`](Self::set_start_parallelism)).
    start_parallelism: usize,
}

impl Default for ServersConfig {
    fn default() -> Self {
        Self {
            policy: RestartPolicy::default(),
            probe: None,
            list_timeout: DEFAULT_LIST_TIMEOUT,
            start_parallelism: DEFAULT_START_PARALLELISM,
        }
    }
}

impl ServersConfig {
    /// At most `servers` connect at once; zero counts as one, or no server would ever start.
    pub(super) fn set_start_parallelism(&mut self, servers: usize) {
        self.start_parallelism = servers.max(1);
    }

    /// Fresh start slots, one per server allowed to connect at once.
    pub(super) fn start_slots(&self) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(self.start_parallelism))
    }
}

/// Builds a [`Servers`] with its configuration set once: [`Servers::builder`].
///
/// ```no_run
/// use std::time::Duration;
/// use actix_mcp::{servers::HealthProbe, Client, Servers};
///
/// let servers = Servers::builder(Client::builder())
///     .list_timeout(Duration::from_secs(5))
///     .health_probe(HealthProbe {
///         interval: Duration::from_secs(30),
///         timeout: Duration::from_secs(5),
///     })
///     .build();
/// ```
#[must_use = "a ServersBuilder does nothing until built"]
pub struct ServersBuilder {
    options: ConnectOptions,
    config: ServersConfig,
}

impl ServersBuilder {
    pub(super) fn new(options: ConnectOptions) -> Self {
        Self {
            options,
            config: ServersConfig::default(),
        }
    }

    /// Every server's restart policy (default: [`RestartPolicy::default`]).
    pub fn restart_policy(mut self, policy: RestartPolicy) -> Self {
        self.config.policy = policy;
        self
    }

    /// Probes every ready server's health (off by default).
    pub fn health_probe(mut self, probe: HealthProbe) -> Self {
        self.config.probe = Some(probe);
        self
    }

    /// How long [`Servers::catalogue`] waits for one server (default [`DEFAULT_LIST_TIMEOUT`]).
    pub fn list_timeout(mut self, timeout: Duration) -> Self {
        self.config.list_timeout = timeout;
        self
    }

    /// How many servers connect at once, at most (default [`DEFAULT_START_PARALLELISM`]; see
    /// [`Servers::start_parallelism`]).
    pub fn start_parallelism(mut self, servers: usize) -> Self {
        self.config.set_start_parallelism(servers);
        self
    }

    /// The manager, with no server yet.
    pub fn build(self) -> Servers {
        Servers::configured(self.options, self.config)
    }

    /// The manager with every server of `config` (see [`Servers::from_config`]).
    pub fn build_from_config(self, config: &Config) -> Servers {
        self.build_from_config_with(config, ServerConfig::transport)
    }

    /// The manager with every server of `config`, their transports made by `transport` (see
    /// [`Servers::from_config_with`]).
    pub fn build_from_config_with(
        self,
        config: &Config,
        transport: impl Fn(&ServerConfig) -> Result<Box<dyn Transport>, Error>
            + Clone
            + Send
            + Sync
            + 'static,
    ) -> Servers {
        let servers = self.build();
        servers.add_configured(config, transport);
        servers
    }
}

/// The chain on a fresh manager: `Servers::new(..).restart_policy(..).list_timeout(..)`. Each
/// takes the handle by value, so it runs before anyone else holds it.
///
/// # Panics
///
/// Each panics when the handle is already shared: cloned, or a server started (its tasks
/// refer to the manager). The configuration is set once, before use; [`Servers::builder`]
/// cannot get there.
impl Servers {
    /// The restart policy of every server, those already added and those added later
    /// (default: [`RestartPolicy::default`]). Panics once the handle is shared (see
    /// [`builder`](Self::builder)).
    pub fn restart_policy(mut self, policy: RestartPolicy) -> Self {
        let inner = self.unshared("restart_policy");
        for entry in inner
            .entries
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values_mut()
        {
            entry.supervision.set_policy(policy.clone());
        }
        inner.config.policy = policy;
        self
    }

    /// Probes every ready server's health (off by default). Panics once the handle is shared
    /// (see [`builder`](Self::builder)).
    pub fn health_probe(mut self, probe: HealthProbe) -> Self {
        self.unshared("health_probe").config.probe = Some(probe);
        self
    }

    /// How long [`catalogue`](Self::catalogue) waits for one server (default
    /// [`DEFAULT_LIST_TIMEOUT`]). Panics once the handle is shared (see
    /// [`builder`](Self::builder)).
    pub fn list_timeout(mut self, timeout: Duration) -> Self {
        self.unshared("list_timeout").config.list_timeout = timeout;
        self
    }

    /// How many servers connect at once, at most (default [`DEFAULT_START_PARALLELISM`]): the
    /// others wait their turn, whatever started them ([`start_all`](Self::start_all), a first
    /// call, the catalogue, a restart). A server's connect timeout and list time limit count
    /// from its turn. Set before the first start: panics once the handle is shared (see
    /// [`builder`](Self::builder)).
    pub fn start_parallelism(mut self, servers: usize) -> Self {
        let inner = self.unshared("start_parallelism");
        inner.config.set_start_parallelism(servers);
        inner.start_slots = inner.config.start_slots();
        self
    }

    /// The manager's state, for a chain method: only while this is its only handle.
    fn unshared(&mut self, method: &str) -> &mut Inner {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner,
            None => panic!(
                "Servers::{method} on a shared manager: configure it before cloning or starting \
                 it, or use Servers::builder"
            ),
        }
    }

    /// The configuration, for the tests of the chain.
    #[cfg(test)]
    fn config(&self) -> &ServersConfig {
        &self.inner.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{client::Client, servers::lock};

    fn policy() -> RestartPolicy {
        RestartPolicy {
            max_restarts: 1,
            ..RestartPolicy::default()
        }
    }

    fn probe() -> HealthProbe {
        HealthProbe {
            interval: Duration::from_secs(1),
            timeout: Duration::from_millis(100),
        }
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let config = ServersConfig::default();
        assert_eq!(config.policy, RestartPolicy::default());
        assert_eq!(config.probe, None);
        assert_eq!(config.list_timeout, DEFAULT_LIST_TIMEOUT);
        assert_eq!(
            config.start_slots().available_permits(),
            DEFAULT_START_PARALLELISM
        );
    }

    #[test]
    fn a_start_parallelism_of_zero_still_starts_one() {
        let mut config = ServersConfig::default();
        config.set_start_parallelism(0);
        assert_eq!(config.start_slots().available_permits(), 1);
        config.set_start_parallelism(3);
        assert_eq!(config.start_slots().available_permits(), 3);
    }

    #[test]
    fn the_builder_and_the_chain_set_the_same_configuration() {
        let built = Servers::builder(Client::builder())
            .restart_policy(policy())
            .health_probe(probe())
            .list_timeout(Duration::from_secs(2))
            .start_parallelism(4)
            .build();
        let chained = Servers::new(Client::builder())
            .restart_policy(policy())
            .health_probe(probe())
            .list_timeout(Duration::from_secs(2))
            .start_parallelism(4);
        assert_eq!(built.config(), chained.config());
        assert_eq!(built.config().list_timeout, Duration::from_secs(2));
        assert_eq!(built.config().probe, Some(probe()));
        assert_eq!(built.inner.start_slots.available_permits(), 4);
        assert_eq!(chained.inner.start_slots.available_permits(), 4);
    }

    #[test]
    fn a_restart_policy_reaches_the_servers_added_before_it() {
        let servers = Servers::new(Client::builder());
        servers.add_with("before", None, true, || Err(Error::Protocol("no".into())));
        let servers = servers.restart_policy(policy());
        servers.add_with("after", None, true, || Err(Error::Protocol("no".into())));
        let entries = lock(&servers.inner.entries);
        for entry in entries.values() {
            assert_eq!(entry.supervision.policy(), &policy());
        }
    }

    #[test]
    #[should_panic(expected = "Servers::list_timeout on a shared manager")]
    fn the_chain_refuses_a_shared_manager() {
        let servers = Servers::new(Client::builder());
        let _other = servers.clone();
        let _ = servers.list_timeout(Duration::from_secs(1));
    }
}
