//! Watching a ready connection: its end (supervision restarts it), its list changes (the
//! kept lists are dropped), and, when configured, its health. Nothing here keeps the
//! connection open: the watchers hold no client between probes, and stop with the manager
//! or with a newer connection (each knows its connection's generation).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use serde_json::Value;

use super::{config::HealthProbe, lock, spawn, Inner, Servers};
use crate::{
    client::{Client, NotificationStream},
    error::Error,
};

/// Watches connection `generation` of server `name`, ready as `client`.
pub(super) fn watch(servers: &Servers, name: &str, generation: u64, client: &Client) {
    let weak = Arc::downgrade(&servers.inner);
    watch_end(weak.clone(), name.to_owned(), generation, client);
    watch_lists(
        weak.clone(),
        name.to_owned(),
        generation,
        client.notifications(),
    );
    if let Some(probe) = servers.inner.config.probe {
        watch_health(weak, name.to_owned(), generation, probe);
    }
}

/// On the connection's end: what supervision answers.
fn watch_end(weak: Weak<Inner>, name: String, generation: u64, client: &Client) {
    let closed = client.closed();
    spawn(async move {
        let error = closed.await;
        ended(&weak, &name, generation, error);
    });
}

/// On each `list_changed`: the kept list it names is dropped.
fn watch_lists(
    weak: Weak<Inner>,
    name: String,
    generation: u64,
    mut notifications: NotificationStream,
) {
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
            entry.lists.forget(&notification);
        }
    });
}

/// Every `probe.interval`, a probe; the first unanswered one closes the connection, whose end
/// its watcher then reports.
fn watch_health(weak: Weak<Inner>, name: String, generation: u64, probe: HealthProbe) {
    spawn(async move {
        loop {
            tokio::time::sleep(probe.interval).await;
            let client = {
                let Some(inner) = weak.upgrade() else { return };
                let entries = lock(&inner.entries);
                match entries
                    .get(&name)
                    .and_then(|entry| entry.probed(generation))
                {
                    Some(client) => client,
                    None => return,
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
    answered(&answer)
}

/// Whether a probe's outcome shows a live server: an answer, an error answer included.
fn answered(outcome: &Result<(), Error>) -> bool {
    matches!(outcome, Ok(()) | Err(Error::Server { .. }))
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
    if !entry.is_ready_with(generation) {
        return; // stopped or restarted on purpose meanwhile, or already handled by a caller
    }
    tracing::warn!(server = %name, %error, "MCP server connection ended");
    let _ = servers.after_end(name, entry, error);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::test_support::{eventually, Scripted};

    #[test]
    fn any_answer_is_alive_an_error_one_included() {
        assert!(answered(&Ok(())));
        let refused = Error::Server {
            code: -32601,
            message: "no such method".into(),
            data: None,
        };
        assert!(answered(&Err(refused)));
        assert!(!answered(&Err(Error::Timeout {
            after: Duration::from_secs(1)
        })));
        assert!(!answered(&Err(Error::Protocol("garbled".into()))));
    }

    async fn tool_names(servers: &Servers) -> Vec<String> {
        let catalogue = servers.catalogue().await;
        catalogue.tools.into_iter().map(|t| t.qualified).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_that_ends_is_restarted() {
        let servers = Servers::new(Client::builder());
        let script = Scripted::add(&servers, "a", &["echo"]);
        let client = servers.client("a").await.expect("ready");
        client.close().await;
        eventually("restarted", || script.connects() == 2).await;
        let again = servers.client("a").await.expect("ready again");
        assert!(!again.is_closed());
        servers.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kept_tools_are_listed_again_after_their_list_changed() {
        let servers = Servers::new(Client::builder());
        let script = Scripted::add(&servers, "a", &["echo"]);
        assert_eq!(tool_names(&servers).await, ["a/echo"]);
        script.offer(&["echo", "add"]);
        assert_eq!(tool_names(&servers).await, ["a/echo"], "kept, not asked");
        script.notify("notifications/tools/list_changed");
        let mut listed = Vec::new();
        for _ in 0..500 {
            listed = tool_names(&servers).await;
            if listed.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(listed, ["a/echo", "a/add"]);
        assert_eq!(script.connects(), 1);
        servers.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_stops_answering_fails_its_probe_and_is_restarted() {
        let servers = Servers::new(Client::builder()).health_probe(HealthProbe {
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(50),
        });
        let script = Scripted::add(&servers, "a", &["echo"]);
        let client = servers.client("a").await.expect("ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!client.is_closed(), "answering: alive");
        script.fall_silent();
        eventually("closed by the probe", || client.is_closed()).await;
        eventually("restarted", || script.connects() == 2).await;
        servers.stop().await;
    }
}
