//! `subscriptions/listen` (2026-07-28): one long-lived request whose stream carries the
//! notifications its client opted into (`toolsListChanged`, `promptsListChanged`,
//! `resourcesListChanged`, `resourceSubscriptions`), each tagged with the listen's id in
//! `_meta`, after a first `notifications/subscriptions/acknowledged` naming what the gateway
//! honours. The resources listed are subscribed to upstream as a 2025-11-25 session's are; the
//! stream's end (the client closes it) leaves them.

use std::rc::Rc;

use serde_json::{json, Map, Value};

use super::Session;
use crate::replies::{error, INVALID_PARAMS};

/// The `_meta` key naming the listen a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The list-change flags a listen may ask for, and the list each names.
const LISTS: [(&str, &str); 3] = [
    ("toolsListChanged", "tools"),
    ("promptsListChanged", "prompts"),
    ("resourcesListChanged", "resources"),
];

/// What a listen asked for and was granted.
pub(super) struct Listen {
    id: Value,
    lists: Vec<&'static str>,
    uris: Vec<String>,
}

impl Session {
    /// `subscriptions/listen` request `id`: acknowledged, then open until its client goes.
    pub(super) fn listen(self: &Rc<Self>, id: Value, params: &Value) {
        let Some(token) = self.state.borrow_mut().in_flight.begin(&id) else {
            let why = "a request with this id is in flight";
            return self.send(error(&id, INVALID_PARAMS, why));
        };
        let asked = &params["notifications"];
        let lists: Vec<&'static str> = LISTS
            .into_iter()
            .filter(|(flag, _)| asked[*flag] == true)
            .map(|(_, list)| list)
            .collect();
        let wanted: Vec<String> = asked["resourceSubscriptions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|uri| uri.as_str().map(str::to_owned))
            .collect();
        let session = self.clone();
        self.spawn(async move {
            // Only the resources some server serves are honoured.
            let mut uris = Vec::new();
            for uri in wanted {
                if session.subscribe(&uri).await.is_ok() {
                    uris.push(uri);
                }
            }
            let mut granted: Map<String, Value> = LISTS
                .into_iter()
                .filter(|(_, list)| lists.contains(list))
                .map(|(flag, _)| (flag.to_owned(), json!(true)))
                .collect();
            if !uris.is_empty() {
                granted.insert("resourceSubscriptions".into(), json!(uris));
            }
            session.state.borrow_mut().listen = Some(Listen {
                id: id.clone(),
                lists,
                uris,
            });
            let ack = json!({"notifications": granted});
            session.tell(&id, "notifications/subscriptions/acknowledged", ack);
            token.cancelled().await;
            // The client closed the stream: what it listened to is left.
            session.state.borrow_mut().listen = None;
            session.leave_subscriptions();
        });
    }

    /// Whether this session listens to changes of `list` (and the listen's id).
    pub(super) fn listening_to_list(&self, list: &str) -> Option<Value> {
        let state = self.state.borrow();
        let listen = state.listen.as_ref()?;
        listen.lists.contains(&list).then(|| listen.id.clone())
    }

    /// Whether this session listens to updates of `uri` (or of a resource it is part of).
    pub(super) fn listening_to_resource(&self, uri: &str) -> Option<Value> {
        let state = self.state.borrow();
        let listen = state.listen.as_ref()?;
        let listened = listen.uris.iter().any(|to| uri.starts_with(to.as_str()));
        listened.then(|| listen.id.clone())
    }

    /// Notification `method` with `params` on listen `id`'s stream, tagged with it.
    pub(super) fn tell(&self, id: &Value, method: &str, mut params: Value) {
        params["_meta"] = json!({ SUBSCRIPTION_ID: id });
        let notification = json!({"jsonrpc": "2.0", "method": method, "params": params});
        (self.out)(notification.into(), Some(id));
    }
}
