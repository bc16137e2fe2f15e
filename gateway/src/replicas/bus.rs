//! The replicas' bus: Redis pub/sub, each message sealed. On one channel every replica listens
//! to go the messages for whichever replica holds what they name (the others drop them); on
//! each replica's own channel, a request relayed to it and the messages of a request it
//! relayed. Redis delivers a message once to each replica listening when it is published: one
//! hop, nothing stored.
//! A replica whose queue of received messages is full drops the next (bounded like every
//! other buffer); one whose subscription breaks subscribes again, and what was published
//! meanwhile is lost to it (the session's record, in the store, is not).

use std::{sync::Arc, time::Duration};

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::Replicas;

/// What one replica tells the others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Envelope {
    /// A message of session `session`'s client that names something held elsewhere: the
    /// cancel of a call, the answer to a server's request. Its body as the client sent it.
    ToSession {
        from: String,
        session: String,
        body: String,
    },
    /// Session `session` was closed: each replica ends its copy (its calls cancelled), then
    /// says so to `from` with `ack`.
    Ended {
        from: String,
        session: String,
        ack: u64,
    },
    /// Session `session`'s record changed (a log level, a subscription): each replica with a
    /// copy follows it.
    Changed { from: String, session: String },
    /// A replica ended its copy of a session closed elsewhere ([`Envelope::Ended`]'s `ack`).
    Acked { ack: u64 },
    /// A request that must be served where what it names is (a waiting call, a task), for
    /// the POST `post` of replica `from` that waits for its messages.
    Relay {
        from: String,
        post: u64,
        relay: Relay,
    },
    /// One message for POST `post` of the replica that relayed its request; the answer is its
    /// last.
    Relayed {
        post: u64,
        json: String,
        answer: bool,
        #[serde(rename = "missingCapability")]
        missing_capability: bool,
        #[serde(rename = "scopeNeeded")]
        scope_needed: Option<String>,
    },
    /// The POST waiting for relayed request `post` of replica `from` went away before its
    /// answer: the request is abandoned (a 2026-07-28 call: cancelled).
    Abandoned { from: String, post: u64 },
}

/// What is relayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Relay {
    /// 2026-07-28: the retry (its body) of the call waiting for input under `state`, which
    /// only `owner` may retry.
    Retry {
        state: String,
        owner: super::record::OwnerRecord,
        body: String,
    },
    /// A request of session `session` (a task's), its body.
    Request { session: String, body: String },
}

impl Envelope {
    /// The replica that sent it, where it says.
    fn from(&self) -> Option<&str> {
        match self {
            Self::ToSession { from, .. }
            | Self::Ended { from, .. }
            | Self::Changed { from, .. }
            | Self::Relay { from, .. }
            | Self::Abandoned { from, .. } => Some(from),
            Self::Relayed { .. } | Self::Acked { .. } => None,
        }
    }
}

/// Received messages waiting for the gateway, at most.
pub const QUEUE: usize = 1024;

/// Listens to the bus for as long as the process lives, handing each message of another
/// replica to `deliver`.
pub async fn listen(replicas: Arc<Replicas>, deliver: mpsc::Sender<Envelope>) {
    loop {
        match subscribed(&replicas, &deliver).await {
            Ok(()) => tracing::warn!("the replicas' bus ended; subscribing again"),
            Err(e) => tracing::warn!(error = %e, "the replicas' bus failed; subscribing again"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn subscribed(
    replicas: &Replicas,
    deliver: &mpsc::Sender<Envelope>,
) -> Result<(), redis::RedisError> {
    let mut pubsub = replicas.client.get_async_pubsub().await?;
    pubsub.subscribe(replicas.name("bus", "all")).await?;
    pubsub.subscribe(replicas.name("bus", &replicas.me)).await?;
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        let channel = message.get_channel_name();
        let envelope: Envelope = match replicas.opened(channel, message.get_payload_bytes()) {
            Ok(envelope) => envelope,
            Err(e) => {
                tracing::warn!(error = %e, "a message on the replicas' bus was refused");
                continue;
            }
        };
        if envelope.from() == Some(&*replicas.me) {
            continue;
        }
        if deliver.try_send(envelope).is_err() {
            tracing::warn!("a message of the replicas' bus was dropped: its queue is full");
        }
    }
    Ok(())
}
