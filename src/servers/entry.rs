//! One server's entry in the manager, and the decisions on it: whether a start may begin,
//! what a settled connect or an ended connection leaves to do, whether an event still belongs
//! to the current connection. Plain code: no task, no clock (time is passed in); the
//! registry and the watchers do the I/O these decisions ask for.

use std::{sync::Arc, time::Instant};

use futures::{future::BoxFuture, FutureExt};

use super::{
    lists::Lists,
    start::Start,
    supervision::{Next, RestartPolicy, Status, Supervision},
    ServersError,
};
use crate::{
    client::{Client, ConnectOptions},
    error::Error,
    transport::Transport,
};

pub(super) type MakeTransport = Arc<dyn Fn() -> Result<Box<dyn Transport>, Error> + Send + Sync>;

/// One server's state, as [`Servers::status`](super::Servers::status) reports it.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// Where it is.
    pub status: Status,
    /// Connects started so far (restarts included).
    pub starts: u64,
}

pub(super) struct Entry {
    pub(super) make_transport: MakeTransport,
    /// This server's options, when they differ from the manager's.
    options: Option<ConnectOptions>,
    pub(super) supervision: Supervision,
    pub(super) conn: Conn,
    /// Counts connects, so that a late event of an old connection is told apart.
    pub(super) generation: u64,
    pub(super) lists: Lists,
}

pub(super) enum Conn {
    None,
    Connecting(Start),
    Ready(Client),
}

/// What a settled connect leaves to do ([`Entry::settle`]).
pub(super) enum Settled {
    /// The connection is the server's now: watch it.
    Ready(Client),
    /// Nobody wants this connection (stopped meanwhile, or an older start's): shut it down.
    Unwanted(Client),
    /// The start failed: log it, and do what supervision answered.
    Failed { error: Error, next: Next },
    /// Nothing (an older start's failure, or one stopped meanwhile).
    Nothing,
}

/// When a restart supervision asked for begins ([`restart_timing`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Restart {
    Now,
    At(Instant),
    Never,
}

impl Entry {
    pub(super) fn new(
        make_transport: MakeTransport,
        options: Option<ConnectOptions>,
        policy: RestartPolicy,
        enabled: bool,
    ) -> Self {
        Self {
            make_transport,
            options,
            supervision: Supervision::new(policy, enabled),
            conn: Conn::None,
            generation: 0,
            lists: Lists::default(),
        }
    }

    pub(super) fn status(&self, name: &str) -> ServerStatus {
        ServerStatus {
            name: name.to_owned(),
            status: self.supervision.status().clone(),
            starts: self.supervision.starts(),
        }
    }

    /// Whether a catalogue asks this server: neither disabled nor stopped.
    pub(super) fn is_listed(&self) -> bool {
        !matches!(
            self.supervision.status(),
            Status::Disabled | Status::Stopped
        )
    }

    /// The options of this server's next connect.
    pub(super) fn connect_options(&self, manager: &ConnectOptions, name: &str) -> ConnectOptions {
        self.options
            .clone()
            .unwrap_or_else(|| manager.clone())
            .pooled_by_default()
            .name(name)
    }

    /// Begins start number `generation` (returned) if supervision allows it now; what it
    /// refused otherwise. The kept lists belong to the old connection: dropped.
    pub(super) fn admit(
        &mut self,
        name: &str,
        now: Instant,
        forced: bool,
    ) -> Result<u64, ServersError> {
        if !self.supervision.start(now, forced) {
            return Err(refusal(self.supervision.status(), name));
        }
        self.generation += 1;
        self.lists = Lists::default();
        Ok(self.generation)
    }

    /// Whether start `generation` is still the one this server wants (not stopped, not begun
    /// again while it waited for its slot).
    pub(super) fn wants(&self, generation: u64) -> bool {
        self.generation == generation && matches!(self.supervision.status(), Status::Starting)
    }

    /// Start `generation` ended with `outcome`: recorded; what is left to do is returned.
    pub(super) fn settle(
        &mut self,
        generation: u64,
        outcome: Result<Client, Error>,
        now: Instant,
    ) -> Settled {
        if self.generation != generation {
            return outcome.map_or(Settled::Nothing, Settled::Unwanted);
        }
        let starting = matches!(self.supervision.status(), Status::Starting);
        match outcome {
            Ok(client) if starting => {
                self.supervision.connected(now);
                self.conn = Conn::Ready(client.clone());
                Settled::Ready(client)
            }
            // Stopped while it was starting.
            Ok(client) => Settled::Unwanted(client),
            Err(error) if starting => {
                self.conn = Conn::None;
                let next = self.supervision.connect_failed(error.clone(), now);
                Settled::Failed { error, next }
            }
            Err(_) => Settled::Nothing,
        }
    }

    /// The ready connection ended: forgotten with its lists; supervision's answer.
    pub(super) fn end(&mut self, error: Error, now: Instant) -> Next {
        self.conn = Conn::None;
        self.lists = Lists::default();
        self.supervision.ended(error, now)
    }

    /// Whether connection `generation` is still this server's ready one (not stopped or
    /// restarted on purpose meanwhile, nor already handled by a caller).
    pub(super) fn is_ready_with(&self, generation: u64) -> bool {
        self.generation == generation && matches!(self.conn, Conn::Ready(_))
    }

    /// The client a health probe asks: connection `generation`, while it is ready and open.
    pub(super) fn probed(&self, generation: u64) -> Option<Client> {
        match &self.conn {
            Conn::Ready(client) if self.generation == generation && !client.is_closed() => {
                Some(client.clone())
            }
            _ => None,
        }
    }

    /// Stopped on purpose: no restart, lists dropped. What is left to wait for: the live
    /// client's shutdown, or the end of a start (one still waiting for its slot connects
    /// nothing; one under way is shut down as it ends).
    pub(super) fn stop(&mut self) -> Option<BoxFuture<'static, ()>> {
        self.supervision.stop();
        self.lists = Lists::default();
        match std::mem::replace(&mut self.conn, Conn::None) {
            Conn::Ready(client) => Some(async move { client.shutdown().await }.boxed()),
            Conn::Connecting(start) => Some(start.done().map(drop).boxed()),
            Conn::None => None,
        }
    }
}

/// When supervision's answer `next`, given `now`, restarts the server.
pub(super) fn restart_timing(next: Next, now: Instant) -> Restart {
    match next {
        Next::RestartAt(at) if at > now => Restart::At(at),
        Next::RestartAt(_) => Restart::Now,
        Next::Nothing => Restart::Never,
    }
}

/// Why supervision refused to start server `name` now.
pub(super) fn refusal(status: &Status, name: &str) -> ServersError {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn entry(enabled: bool) -> Entry {
        Entry::new(
            Arc::new(|| Err(Error::Protocol("no transport".into()))),
            None,
            RestartPolicy {
                max_restarts: 1,
                ..RestartPolicy::default()
            },
            enabled,
        )
    }

    fn gone() -> Error {
        Error::Protocol("gone".into())
    }

    fn listed(entry: &mut Entry) {
        entry.lists.tools = Some(Vec::new());
    }

    #[test]
    fn an_admitted_start_is_a_new_generation_without_the_old_lists() {
        let mut entry = entry(true);
        listed(&mut entry);
        assert_eq!(entry.admit("a", Instant::now(), false).ok(), Some(1));
        assert!(entry.lists.tools.is_none());
        assert!(entry.wants(1));
        assert!(!entry.wants(0));
    }

    #[test]
    fn a_refused_start_says_why_and_changes_nothing() {
        let mut disabled = entry(false);
        assert!(matches!(
            disabled.admit("d", Instant::now(), false),
            Err(ServersError::Disabled(name)) if name == "d"
        ));
        assert_eq!(disabled.generation, 0);

        let mut stopped = entry(true);
        stopped.stop();
        listed(&mut stopped);
        assert!(matches!(
            stopped.admit("s", Instant::now(), false),
            Err(ServersError::Stopped(_))
        ));
        assert!(stopped.lists.tools.is_some(), "a refusal keeps the lists");
        assert_eq!(stopped.admit("s", Instant::now(), true).ok(), Some(1));
    }

    #[test]
    fn a_failed_start_backs_off_then_gives_up() {
        let mut entry = entry(true);
        let t0 = Instant::now();
        let first = entry.admit("a", t0, false).expect("admitted");
        let Settled::Failed { next, .. } = entry.settle(first, Err(gone()), t0) else {
            panic!("not a failure");
        };
        let Next::RestartAt(at) = next else {
            panic!("no restart");
        };
        assert_eq!(restart_timing(Next::RestartAt(at), t0), Restart::At(at));
        assert!(matches!(
            entry.admit("a", t0, false),
            Err(ServersError::Client(_))
        ));
        let second = entry.admit("a", at, false).expect("admitted");
        let Settled::Failed { next, .. } = entry.settle(second, Err(gone()), at) else {
            panic!("not a failure");
        };
        assert_eq!(restart_timing(next, at), Restart::Never);
        assert!(matches!(
            entry.admit("a", at + Duration::from_secs(1), false),
            Err(ServersError::GaveUp { server, restarts: 2, .. }) if server == "a"
        ));
    }

    #[test]
    fn a_late_or_unwanted_failure_is_ignored() {
        let mut entry = entry(true);
        let t0 = Instant::now();
        let first = entry.admit("a", t0, false).expect("admitted");
        entry.stop();
        let second = entry.admit("a", t0, true).expect("admitted");
        assert!(matches!(
            entry.settle(first, Err(gone()), t0),
            Settled::Nothing
        ));
        assert!(matches!(entry.supervision.status(), Status::Starting));
        entry.stop();
        assert!(matches!(
            entry.settle(second, Err(gone()), t0),
            Settled::Nothing
        ));
        assert!(matches!(entry.supervision.status(), Status::Stopped));
    }

    #[test]
    fn only_the_current_ready_connection_counts() {
        let entry = entry(true);
        assert!(!entry.is_ready_with(0), "no connection");
        assert!(entry.probed(0).is_none());
    }

    #[test]
    fn a_restart_due_now_or_past_begins_at_once() {
        let now = Instant::now();
        assert_eq!(restart_timing(Next::RestartAt(now), now), Restart::Now);
        let later = now + Duration::from_millis(1);
        assert_eq!(
            restart_timing(Next::RestartAt(later), now),
            Restart::At(later)
        );
        assert_eq!(restart_timing(Next::Nothing, now), Restart::Never);
    }

    #[test]
    fn a_catalogue_skips_disabled_and_stopped_servers() {
        assert!(entry(true).is_listed());
        assert!(!entry(false).is_listed());
        let mut stopped = entry(true);
        stopped.stop();
        assert!(!stopped.is_listed());
        assert_eq!(stopped.status("s").status.name(), "stopped");
    }
}
