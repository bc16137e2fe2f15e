//! What the upstream servers tell outside any request, carried to every downstream session: a
//! task per server follows its connection's notifications (and its next connection's, after a
//! restart). A `list_changed` is passed on as it is (a server that connects anew changes the
//! tool list too: its tools come back); a log message goes to the sessions that asked for logs at
//! its level; a resource update to the sessions subscribed to it. A new connection is asked for
//! logs at the level the sessions asked for, and for the subscriptions of the last.

use std::time::Duration;

use actix_mcp::{protocol::notifications::LogMessage, ServerNotification};
use tokio::sync::broadcast;

use crate::upstream::Upstream;

/// Something an upstream server said.
#[derive(Clone, Debug)]
pub enum Event {
    /// Which list changed: `tools`, `prompts` or `resources`.
    ListChanged(&'static str),
    /// A log message (`notifications/message`) of `server`.
    Log { server: String, message: LogMessage },
    /// A resource of `server` changed (`notifications/resources/updated`).
    ResourceUpdated { server: String, uri: String },
    /// `owner` finished signing in upstream (the URL elicitation `elicitation`).
    SignedIn {
        owner: crate::owner::Owner,
        elicitation: String,
    },
}

/// Follows every server of `upstream`; what they say goes to `tell`.
pub fn watch(upstream: &Upstream, tell: broadcast::Sender<Event>) {
    for server in upstream.servers.status() {
        let (upstream, tell) = (upstream.clone(), tell.clone());
        actix_rt::spawn(async move {
            let mut first = true;
            loop {
                let Ok(client) = upstream.servers.client(&server.name).await else {
                    // Stopped, failed, disabled: looked at again in a while.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                // Its tools are in the catalogue now (a server that was down at the start too).
                upstream.catalogue_changed();
                if let Some(level) = upstream.log_floor() {
                    let _ = client.set_logging_level(level).await;
                }
                if !first {
                    let _ = tell.send(Event::ListChanged("tools"));
                    // A new connection knows nothing of the subscriptions made on the last.
                    let subscribed = upstream.subscribers().of(&server.name);
                    for uri in subscribed {
                        let _ = client.subscribe_resource(&uri).await;
                    }
                }
                first = false;
                let mut notifications = client.notifications();
                while let Some(notification) = notifications.next().await {
                    let event = match notification {
                        ServerNotification::ToolsListChanged
                        | ServerNotification::PromptsListChanged
                        | ServerNotification::ResourcesListChanged => {
                            upstream.catalogue_changed();
                            match notification {
                                ServerNotification::ToolsListChanged => Event::ListChanged("tools"),
                                ServerNotification::PromptsListChanged => {
                                    Event::ListChanged("prompts")
                                }
                                _ => Event::ListChanged("resources"),
                            }
                        }
                        ServerNotification::Log(message) => Event::Log {
                            server: server.name.clone(),
                            message,
                        },
                        ServerNotification::ResourceUpdated { uri } => Event::ResourceUpdated {
                            server: server.name.clone(),
                            uri,
                        },
                        _ => continue,
                    };
                    let _ = tell.send(event);
                }
                // The connection ended: its tools leave the catalogue, and the next connection
                // is followed once the server is back.
                upstream.catalogue_changed();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
}

/// With pins, looks at their file every second: an approval makes the catalogue anew, and every
/// session is told its lists changed.
pub fn watch_pins(upstream: &Upstream, tell: broadcast::Sender<Event>) {
    let Some(pins) = upstream.pins.clone() else {
        return;
    };
    let upstream = upstream.clone();
    actix_rt::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            let looked = pins.clone();
            let came = tokio::task::spawn_blocking(move || looked.approvals_came()).await;
            match came {
                Ok(Ok(true)) => {
                    upstream.catalogue_changed();
                    for list in ["tools", "prompts", "resources"] {
                        let _ = tell.send(Event::ListChanged(list));
                    }
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::error!("the pins cannot be read: {e}"),
                Err(_) => return,
            }
        }
    });
}
