//! Upstream `list_changed` made downstream ones: a task per server follows its connection's
//! notifications (and its next connection's, after a restart) and tells every downstream session
//! which list changed. A server that connects anew changes the tool list too: its tools come
//! (back).

use std::time::Duration;

use actix_mcp::{ServerNotification, Servers};
use tokio::sync::broadcast;

/// Which list changed: `tools`, `prompts` or `resources`.
pub type Changed = &'static str;

/// Follows every server of `servers`; the changes go to `tell`.
pub fn watch(servers: &Servers, tell: broadcast::Sender<Changed>) {
    for server in servers.status() {
        let (servers, tell) = (servers.clone(), tell.clone());
        actix_rt::spawn(async move {
            let mut first = true;
            loop {
                let Ok(client) = servers.client(&server.name).await else {
                    // Stopped, failed, disabled: looked at again in a while.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                if !first {
                    let _ = tell.send("tools");
                }
                first = false;
                let mut notifications = client.notifications();
                while let Some(notification) = notifications.next().await {
                    let changed = match notification {
                        ServerNotification::ToolsListChanged => "tools",
                        ServerNotification::PromptsListChanged => "prompts",
                        ServerNotification::ResourcesListChanged => "resources",
                        _ => continue,
                    };
                    let _ = tell.send(changed);
                }
                // The connection ended: the next one is followed once the server is back.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
}
