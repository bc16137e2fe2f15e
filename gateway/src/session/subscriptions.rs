//! `resources/subscribe` and `unsubscribe` (2025-11-25 sessions): routed by the resource's URI
//! as a read is, one upstream subscription per server and URI whatever the number of sessions
//! (`subscriptions.rs`); an upstream `notifications/resources/updated` goes to the sessions
//! subscribed to that resource (or to one it is a part of). A session that ends leaves its
//! subscriptions.

use std::rc::Rc;

use serde_json::{json, Value};

use super::Session;
use crate::replies::{result, Refusal};

impl Session {
    /// `resources/subscribe` (`subscribe`) or `resources/unsubscribe`.
    pub(super) fn subscription(self: &Rc<Self>, id: Value, params: &Value, subscribe: bool) {
        let uri = params["uri"].as_str().map(str::to_owned);
        let session = self.clone();
        self.spawn(async move {
            let done = match uri {
                None => Err(Refusal::params("a subscription needs a uri")),
                Some(uri) if subscribe => session.subscribe(&uri).await,
                Some(uri) => {
                    session.unsubscribe(&uri).await;
                    Ok(())
                }
            };
            session.send(match done {
                Ok(()) => result(&id, json!({}), false),
                Err(refusal) => refusal.with_id(&id),
            });
        });
    }

    pub(super) async fn subscribe(&self, uri: &str) -> Result<(), Refusal> {
        if self.state.borrow().subscribed.contains_key(uri) {
            return Ok(());
        }
        let routes = self.routes().await;
        self.guard_uri(&routes, uri)?;
        let server = routes
            .resource_server(uri)
            .map(str::to_owned)
            .ok_or_else(|| Refusal::params(format!("no resource {uri:?}")))?;
        // One upstream subscription serves every session, on the gateway's own connection: a
        // per-user server's resources must not be followed with the gateway's grant.
        if self.upstream.users.per_user(&self.owner, &server) {
            let why = format!("resources of {server:?}, reached with each user's own grant, cannot be subscribed to through the gateway yet");
            return Err(Refusal(crate::replies::METHOD_NOT_FOUND, why, None));
        }
        let first = self.upstream.subscribers().join(&server, uri);
        self.state
            .borrow_mut()
            .subscribed
            .insert(uri.to_owned(), server.clone());
        if !first {
            return Ok(());
        }
        let asked = async {
            let client = self.upstream.servers.client(&server).await?;
            client.subscribe_resource(uri).await?;
            Ok::<_, actix_mcp::servers::ServersError>(())
        };
        if let Err(e) = asked.await {
            self.state.borrow_mut().subscribed.remove(uri);
            self.upstream.subscribers().leave(&server, uri);
            return Err(Refusal::from(e));
        }
        Ok(())
    }

    pub(super) async fn unsubscribe(&self, uri: &str) {
        let Some(server) = self.state.borrow_mut().subscribed.remove(uri) else {
            return;
        };
        self.upstream.release(&server, uri).await;
    }

    /// The session's end: what it was subscribed to is left (unsubscribed upstream when it was
    /// the last).
    pub(super) fn leave_subscriptions(&self) {
        let subscribed = std::mem::take(&mut self.state.borrow_mut().subscribed);
        for (uri, server) in subscribed {
            let upstream = self.upstream.clone();
            actix_rt::spawn(async move { upstream.release(&server, &uri).await });
        }
    }

    /// `uri` of `server` changed: the client is told if it is subscribed to it, or to a
    /// resource it is a part of.
    pub(super) fn resource_updated(&self, server: &str, uri: &str) {
        if self.modern.get() {
            if let Some(listen) = self.listening_to_resource(uri) {
                self.tell(
                    &listen,
                    "notifications/resources/updated",
                    json!({"uri": uri}),
                );
            }
            return;
        }
        let subscribed = self
            .state
            .borrow()
            .subscribed
            .iter()
            .any(|(to, on)| on == server && (uri == to || uri.starts_with(to.as_str())));
        if subscribed {
            let params = json!({"uri": uri});
            self.send(json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params}));
        }
    }
}
