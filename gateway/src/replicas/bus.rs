//! The replicas' bus: two Redis streams each replica reads, each message sealed. On the one
//! every replica reads go the messages for whichever replica holds what they name (the others
//! drop them); on each replica's own, a request relayed to it and the messages of a request it
//! relayed. One hop. Each replica reads from the last entry it read, so a connection to Redis
//! that breaks loses nothing: it reads on from there once it is back. The streams are trimmed
//! to their last `KEPT` entries; a replica whose queue of received messages is full drops the
//! next (bounded like every other buffer).

use std::{sync::Arc, time::Duration};

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

/// The entries a stream keeps, about (`MAXLEN ~`): what a replica away that long can still read.
pub const KEPT: usize = 10_000;

/// How long one read waits for an entry before it reads again, in milliseconds.
const BLOCK_MS: usize = 5_000;

/// Reads the bus for as long as the process lives, handing each message of another replica to
/// `deliver`, from where it stopped whenever its connection broke.
pub async fn listen(replicas: Arc<Replicas>, deliver: mpsc::Sender<Envelope>) {
    let streams = [
        replicas.name("stream", "all"),
        replicas.name("stream", &replicas.me),
    ];
    let mut read_to: Option<Vec<String>> = None;
    loop {
        match reading(&replicas, &streams, &mut read_to, &deliver).await {
            Ok(()) => tracing::warn!("the replicas' bus ended; reading on"),
            Err(e) => tracing::warn!(error = %e, "the replicas' bus failed; reading on"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Reads `streams` from `read_to` (the last entries read; at first, the last there are) on a
/// connection of its own (a read blocks it).
async fn reading(
    replicas: &Replicas,
    streams: &[String; 2],
    read_to: &mut Option<Vec<String>>,
    deliver: &mpsc::Sender<Envelope>,
) -> Result<(), redis::RedisError> {
    let mut redis = replicas.client.get_multiplexed_async_connection().await?;
    if read_to.is_none() {
        let mut last = Vec::with_capacity(streams.len());
        for stream in streams {
            last.push(last_entry(&mut redis, stream).await?);
        }
        *read_to = Some(last);
    }
    loop {
        let Some(from) = read_to.as_mut() else {
            return Ok(());
        };
        let options = redis::streams::StreamReadOptions::default()
            .block(BLOCK_MS)
            .count(256);
        let read: Option<redis::streams::StreamReadReply> = redis::AsyncCommands::xread_options(
            &mut redis,
            streams.as_slice(),
            from.as_slice(),
            &options,
        )
        .await?;
        for stream in read.map(|r| r.keys).unwrap_or_default() {
            let Some(at) = streams.iter().position(|s| *s == stream.key) else {
                continue;
            };
            for entry in stream.ids {
                from[at] = entry.id.clone();
                let sealed: Option<Vec<u8>> = entry.get("m");
                let opened = sealed.map(|m| replicas.opened::<Envelope>(&stream.key, &m));
                match opened {
                    Some(Ok(envelope)) => hand_over(replicas, envelope, deliver),
                    Some(Err(e)) => tracing::warn!(error = %e, "a message of the bus was refused"),
                    None => {}
                }
            }
        }
    }
}

/// The id of `stream`'s last entry (`0-0` if it has none).
async fn last_entry(
    redis: &mut redis::aio::MultiplexedConnection,
    stream: &str,
) -> Result<String, redis::RedisError> {
    let last: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(stream)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(redis)
        .await?;
    Ok(last
        .ids
        .first()
        .map_or_else(|| "0-0".to_owned(), |e| e.id.clone()))
}

fn hand_over(replicas: &Replicas, envelope: Envelope, deliver: &mpsc::Sender<Envelope>) {
    if envelope.from() == Some(&*replicas.me) {
        return;
    }
    if deliver.try_send(envelope).is_err() {
        tracing::warn!("a message of the replicas' bus was dropped: its queue is full");
    }
}
