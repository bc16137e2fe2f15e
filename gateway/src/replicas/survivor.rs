//! Leases, and what survivors do for a replica that died. Each replica is listed among the
//! replicas and says it is alive every quarter of `--replica-lease`, the word kept for two
//! thirds of it (a replica stalled for more than 5/12 of a lease is taken as dead); on each
//! turn it also looks for listed replicas no longer alive. For each, one survivor (the first to
//! take its settling lock, itself a lease) reads what it owed (`OwedCall`s, recorded before
//! each call was written) and settles it at each upstream server: the call's
//! `notifications/cancelled` in the upstream session it was made in, then a `DELETE` of that
//! session (nobody will use it again). So a call left running upstream by a replica that died
//! is cancelled there within one lease: its word lapses at most 2/3 of a lease after its last
//! turn, and a survivor looks within a quarter more.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use super::{record::OwedCall, Replicas, StoreError};

/// An HTTP upstream server, as a survivor reaches it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub url: String,
    /// The config's headers for it.
    pub headers: BTreeMap<String, String>,
}

/// The reason the upstream server is given.
const REASON: &str = "the gateway replica that made this call stopped";

/// This replica's lease renewed, and the dead settled, for as long as the process lives.
pub async fn live(replicas: Arc<Replicas>) {
    let mut every = tokio::time::interval(replicas.turn());
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(e) = renew(&replicas).await {
            tracing::warn!(error = %e, "this replica's lease was not renewed");
        }
        if let Err(e) = settle_the_dead(&replicas).await {
            tracing::warn!(error = %e, "the replicas that died were not looked for");
        }
    }
}

async fn renew(replicas: &Replicas) -> Result<(), StoreError> {
    let mut redis = replicas.redis.clone();
    redis::pipe()
        .cmd("SET")
        .arg(replicas.name("alive", &replicas.me))
        .arg(1)
        .arg("PX")
        .arg(super::millis(replicas.lease * 2 / 3))
        .ignore()
        .cmd("SADD")
        .arg(replicas.name("replicas", "all"))
        .arg(&*replicas.me)
        .ignore()
        .query_async::<()>(&mut redis)
        .await?;
    Ok(())
}

async fn settle_the_dead(replicas: &Replicas) -> Result<(), StoreError> {
    let mut redis = replicas.redis.clone();
    let listed = replicas.name("replicas", "all");
    let members: Vec<String> = redis::cmd("SMEMBERS")
        .arg(&listed)
        .query_async(&mut redis)
        .await?;
    for other in members.iter().filter(|r| **r != *replicas.me) {
        let alive: bool = redis::cmd("EXISTS")
            .arg(replicas.name("alive", other))
            .query_async(&mut redis)
            .await?;
        if alive {
            continue;
        }
        // One survivor settles it: whoever takes its lock first.
        let took: Option<String> = redis::cmd("SET")
            .arg(replicas.name("settling", other))
            .arg(&*replicas.me)
            .arg("NX")
            .arg("PX")
            .arg(super::millis(replicas.lease))
            .query_async(&mut redis)
            .await?;
        if took.is_none() {
            continue;
        }
        let place = replicas.name("owed", other);
        let owed: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
            .arg(&place)
            .query_async(&mut redis)
            .await?;
        let calls: Vec<OwedCall> = (owed.values())
            .filter_map(|sealed| replicas.opened(&place, sealed).ok())
            .collect();
        tracing::info!(replica = %other, owed = calls.len(), "a replica died: settling what it owed");
        settle(replicas, &calls).await;
        redis::pipe()
            .cmd("DEL")
            .arg(&place)
            .arg(replicas.name("stream", other))
            .ignore()
            .cmd("SREM")
            .arg(&listed)
            .arg(other)
            .ignore()
            .query_async::<()>(&mut redis)
            .await?;
    }
    Ok(())
}

/// Each call's cancel in its upstream session, then each of those sessions ended.
async fn settle(replicas: &Replicas, calls: &[OwedCall]) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build();
    let Ok(http) = http else {
        return tracing::warn!("no HTTP client to settle a dead replica's calls");
    };
    let mut sessions = BTreeMap::new();
    for call in calls {
        let Some(endpoint) = replicas.endpoints.get(&call.server) else {
            continue;
        };
        let cancel = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call.request, "reason": REASON},
        });
        let sent = upstream(&http, reqwest::Method::POST, endpoint, call)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(cancel.to_string())
            .send()
            .await;
        if let Err(e) = sent {
            tracing::warn!(server = %call.server, error = %e, "a dead replica's cancel failed");
        }
        sessions.insert((call.server.clone(), call.session.clone()), call);
    }
    for call in sessions.into_values() {
        let Some(endpoint) = replicas.endpoints.get(&call.server) else {
            continue;
        };
        let _ = upstream(&http, reqwest::Method::DELETE, endpoint, call)
            .send()
            .await;
    }
}

/// A request to `endpoint` in `call`'s upstream session, with the config's headers.
fn upstream(
    http: &reqwest::Client,
    method: reqwest::Method,
    endpoint: &Endpoint,
    call: &OwedCall,
) -> reqwest::RequestBuilder {
    let mut request = http.request(method, &endpoint.url);
    for (name, value) in &endpoint.headers {
        request = request.header(name, value);
    }
    request
        .header("mcp-session-id", &*call.session)
        .header("mcp-protocol-version", &call.protocol_version)
}
