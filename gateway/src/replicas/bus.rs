//! The replicas' bus: one Redis pub/sub channel every replica listens to, each message sealed.
//! A message is for whichever replica holds what it names; the others drop it. Redis delivers
//! a message once to each replica listening when it is published: one hop, nothing stored.
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
    /// Session `session` was closed: each replica ends its copy (its calls cancelled).
    Ended { from: String, session: String },
}

impl Envelope {
    fn from(&self) -> &str {
        match self {
            Self::ToSession { from, .. } | Self::Ended { from, .. } => from,
        }
    }
}

/// Received messages waiting for the gateway, at most.
pub const QUEUE: usize = 1024;

/// Listens to the bus for as long as the process lives, handing each message of another
/// replica to `deliver`.
pub async fn listen(replicas: Arc<Replicas>, deliver: mpsc::Sender<Envelope>) {
    let channel = replicas.name("bus", "all");
    loop {
        match subscribed(&replicas, &channel, &deliver).await {
            Ok(()) => tracing::warn!("the replicas' bus ended; subscribing again"),
            Err(e) => tracing::warn!(error = %e, "the replicas' bus failed; subscribing again"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn subscribed(
    replicas: &Replicas,
    channel: &str,
    deliver: &mpsc::Sender<Envelope>,
) -> Result<(), redis::RedisError> {
    let mut pubsub = replicas.client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        let envelope: Envelope = match replicas.opened(channel, message.get_payload_bytes()) {
            Ok(envelope) => envelope,
            Err(e) => {
                tracing::warn!(error = %e, "a message on the replicas' bus was refused");
                continue;
            }
        };
        if envelope.from() == &*replicas.me {
            continue;
        }
        if deliver.try_send(envelope).is_err() {
            tracing::warn!("a message of the replicas' bus was dropped: its queue is full");
        }
    }
    Ok(())
}
