//! The HTTP side of replicas (`--replicas`, `replicas/`): a session opened here is recorded
//! before its `initialize` is answered; a request naming a session this replica has no copy of
//! makes one from its record (its owner's only); every request pushes the record's expiry back,
//! and finds nothing once the session was closed anywhere; a cancel or an answer of the
//! client goes to the other replicas too, since the call or the request it names may be
//! theirs; a close ends every replica's copy.

use std::{sync::Arc, time::Instant};

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::{session::HttpSession, Exchange, Gateway};
use crate::{
    message::Incoming,
    owner::Caller,
    replicas::{record::SessionRecord, Envelope, Replicas},
};

/// Session `id` opened here by `initialize`: counted as its owner's across the replicas (a
/// user holds `per_owner` at most in all, `429` beyond), and recorded for every replica.
pub async fn opened(
    replicas: &Replicas,
    id: &str,
    caller: &Caller,
    initialize: &crate::message::Request,
    per_owner: usize,
) -> Result<(), HttpResponse> {
    let params = &initialize.params;
    if caller.owner != crate::owner::Owner::Anonymous {
        let counted = replicas.count_session(id, &caller.owner, per_owner).await;
        if !counted.map_err(unavailable)? {
            let full = super::table::Full::Owner(per_owner);
            return Err(super::too_many(&initialize.id, &full));
        }
    }
    let capabilities = serde_json::from_value(params["capabilities"].clone()).unwrap_or_default();
    let record = SessionRecord {
        owner: (&caller.owner).into(),
        protocol_version: params["protocolVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        capabilities,
        log_level: None,
        subscriptions: Default::default(),
    };
    replicas.put_session(id, &record).await.map_err(unavailable)
}

/// How often a replica looks at the shared record of a session it has a copy of, at most: a
/// request within that time of the last look is served at once, with no round trip to the
/// store. A close elsewhere is told on the bus; a look once a second catches one the bus lost.
const RECORD_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// `caller`'s exchange with session `id`: with this replica's copy, made now from the record
/// if there is none yet. `Err`: the answer instead (`404` for a session closed, expired, never
/// opened or another's).
pub async fn exchange(
    gateway: &Gateway,
    replicas: &Arc<Replicas>,
    id: &str,
    caller: &Arc<Caller>,
) -> Result<Exchange, HttpResponse> {
    // The copy's handle and whether its record is due, under one lock of the table.
    let begun = {
        let (mut table, now) = (gateway.table(), Instant::now());
        let handle = table.begin(id, &caller.owner, now);
        handle.map(|handle| (handle, table.due_for_record(id, now, RECORD_EVERY)))
    };
    if let Some((handle, due)) = begun {
        let exchange = Exchange {
            sessions: gateway.sessions.clone(),
            id: id.to_owned(),
            handle,
        };
        if due {
            let (replicas, sessions) = (replicas.clone(), gateway.sessions.clone());
            let (id, caller) = (id.to_owned(), caller.clone());
            actix_rt::spawn(async move { look_again(&replicas, &sessions, &id, &caller).await });
        }
        return Ok(exchange);
    }
    let record = match replicas.session(id).await {
        Ok(Some(record)) if record.owner.is(&caller.owner) => record,
        Ok(_) => return Err(super::not_found()),
        Err(e) => return Err(unavailable(e)),
    };
    let session = HttpSession::new(gateway.setup(caller.clone()), Some(&gateway.changes), None);
    let capabilities = serde_json::to_value(&record.capabilities).unwrap_or_default();
    session.session.restore(capabilities, followed(record));
    session.session.known_as(id);
    let handle = session.handle();
    let begun = gateway
        .table()
        .begin_copy(id, &caller.owner, handle, Instant::now());
    match begun {
        Ok(None) => Err(super::not_found()),
        Ok(Some((handle, made))) => {
            // Unless another request made the copy first (this one then goes with its handle).
            if made {
                session.live_here_as(id);
            }
            tracing::debug!(owner = %caller.owner, "a session opened on another replica is served here");
            Ok(Exchange {
                sessions: gateway.sessions.clone(),
                id: id.to_owned(),
                handle,
            })
        }
        Err(full) => Err(super::too_many(&Value::Null, &full)),
    }
}

/// What of `record` a copy follows.
fn followed(record: SessionRecord) -> crate::session::Followed {
    crate::session::Followed {
        log_level: record.log_level,
        subscriptions: record.subscriptions,
    }
}

/// Looks at session `id`'s record again: its expiry pushed back; gone (closed or expired
/// elsewhere), this replica's copy ends too; else the copy follows it.
async fn look_again(
    replicas: &Replicas,
    sessions: &std::sync::Mutex<super::table::Table<super::session::SessionHandle>>,
    id: &str,
    caller: &Caller,
) {
    let table = || {
        sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    match replicas.session(id).await {
        Ok(Some(record)) => {
            if caller.owner != crate::owner::Owner::Anonymous {
                if let Err(e) = replicas.session_used(id, &caller.owner).await {
                    tracing::warn!(error = %e, "a session's use was not counted");
                }
            }
            if let Some(handle) = table().relayed_to(id) {
                handle.follow(followed(record));
            }
        }
        Ok(None) => {
            let handle = table().close(id, &caller.owner);
            if let Some(handle) = handle {
                handle.end("the downstream session ended").await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "the replicas' store did not answer"),
    }
}

/// What of `message` the other replicas must see: a cancel (its call may be theirs), an answer
/// (what it answers may have been asked there), a log level or a subscription (written to the
/// record, which their copies follow).
pub fn tell_others(replicas: &Arc<Replicas>, session: &str, message: &Incoming) {
    let body = match message {
        Incoming::Notification { method, params } if method == "notifications/cancelled" => {
            json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
        }
        Incoming::Answer { message, .. } => message.to_string(),
        Incoming::Request(request) => {
            let Some(change) = Change::of(request) else {
                return;
            };
            let (replicas, session) = (replicas.clone(), session.to_owned());
            actix_rt::spawn(async move { record_change(&replicas, &session, change).await });
            return;
        }
        Incoming::Notification { .. } => return,
    };
    let envelope = Envelope::ToSession {
        from: replicas.me.to_string(),
        session: session.to_owned(),
        body,
    };
    let replicas = replicas.clone();
    actix_rt::spawn(async move {
        if let Err(e) = replicas.publish(&envelope).await {
            tracing::warn!(error = %e, "a message was not told to the other replicas");
        }
    });
}

/// A change of a session's record a request makes.
enum Change {
    LogLevel(Option<actix_mcp::LoggingLevel>),
    Subscribe(String),
    Unsubscribe(String),
}

impl Change {
    fn of(request: &crate::message::Request) -> Option<Self> {
        use crate::method::Method;
        let uri = || request.params["uri"].as_str().map(str::to_owned);
        match request.method {
            Method::SetLogLevel => Some(Self::LogLevel(
                serde_json::from_value(request.params["level"].clone()).ok(),
            )),
            Method::Subscribe => uri().map(Self::Subscribe),
            Method::Unsubscribe => uri().map(Self::Unsubscribe),
            _ => None,
        }
    }
}

/// The session's record takes `change`, and the other replicas' copies follow it.
///
/// A read, change and write: two changes of one session at once at two replicas may lose one
/// (a client's `logging/setLevel` and `resources/subscribe` follow one another).
async fn record_change(replicas: &Replicas, session: &str, change: Change) {
    let Ok(Some(mut record)) = replicas.session(session).await else {
        return;
    };
    match change {
        Change::LogLevel(level) => record.log_level = level,
        Change::Subscribe(uri) => {
            record.subscriptions.insert(uri);
        }
        Change::Unsubscribe(uri) => {
            record.subscriptions.remove(&uri);
        }
    }
    if let Err(e) = replicas.put_session(session, &record).await {
        return tracing::warn!(error = %e, "a session's change was not recorded");
    }
    let changed = Envelope::Changed {
        from: replicas.me.to_string(),
        session: session.to_owned(),
    };
    if let Err(e) = replicas.publish(&changed).await {
        tracing::warn!(error = %e, "a session's change was not told to the others");
    }
}

/// Where `message` of session `session` must be served, if at another replica: a request of a
/// task made there (its id names the replica).
pub fn served_elsewhere(
    replicas: &Replicas,
    session: &str,
    message: &Incoming,
) -> Option<(String, crate::replicas::Relay)> {
    let request = message.request()?;
    let crate::method::Method::Routed(crate::method::Routed::Task(_)) = request.method else {
        return None;
    };
    let task = request.params["taskId"].as_str()?;
    let to = crate::replicas::elsewhere(replicas, task)?.to_owned();
    let relay = crate::replicas::Relay::Request {
        session: session.to_owned(),
        body: super::relay::body_of(request),
    };
    Some((to, relay))
}

/// How long a close waits for the other replicas to end their copies, at most.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// `DELETE` of session `id` by `caller`: its record removed and every replica's copy ended
/// (what they left in flight cancelled) before it is answered, as a single gateway's close.
/// Whether it was theirs to close.
pub async fn close(
    gateway: &Gateway,
    replicas: &Replicas,
    id: &str,
    caller: &Caller,
) -> Result<bool, HttpResponse> {
    match replicas.session(id).await {
        Ok(Some(record)) if record.owner.is(&caller.owner) => {}
        Ok(_) => return Ok(false),
        Err(e) => return Err(unavailable(e)),
    }
    let removed = replicas.remove_session(id, &caller.owner).await;
    removed.map_err(unavailable)?;
    let (ack, mut acks) = gateway.relays.closing();
    let ended = Envelope::Ended {
        from: replicas.me.to_string(),
        session: id.to_owned(),
        ack,
    };
    match replicas.publish(&ended).await {
        Ok(others) => {
            let all = async {
                for _ in 0..others {
                    acks.recv().await;
                }
            };
            if tokio::time::timeout(CLOSE_WAIT, all).await.is_err() {
                tracing::warn!("a replica did not say it ended its copy of a closed session");
            }
        }
        Err(e) => tracing::warn!(error = %e, "a session's close was not told to the others"),
    }
    gateway.relays.closed(ack);
    Ok(true)
}

/// With replicas, this one's part: its lease, the bus, and what it tells delivered here.
pub fn run(gateway: &web::Data<Gateway>) {
    if let Some(replicas) = &gateway.replicas {
        let (tell, told) = tokio::sync::mpsc::channel(crate::replicas::QUEUE);
        replicas.run(tell);
        actix_rt::spawn(deliver(gateway.clone(), told));
    }
}

/// Hands what the other replicas tell to this one's sessions, as long as the gateway runs.
async fn deliver(gateway: web::Data<Gateway>, mut told: tokio::sync::mpsc::Receiver<Envelope>) {
    while let Some(envelope) = told.recv().await {
        match envelope {
            Envelope::ToSession { session, body, .. } => {
                let Some(handle) = gateway.table().relayed_to(&session) else {
                    continue;
                };
                if let Ok(message) = crate::message::parse(body.as_bytes()) {
                    handle.relayed(message);
                }
            }
            Envelope::Ended { from, session, ack } => {
                let handle = gateway.table().closed_elsewhere(&session);
                let Some(replicas) = gateway.replicas.clone() else {
                    continue;
                };
                actix_rt::spawn(async move {
                    if let Some(handle) = handle {
                        handle.end("the downstream session was closed").await;
                    }
                    let _ = replicas.publish_to(&from, &Envelope::Acked { ack }).await;
                });
            }
            Envelope::Acked { ack } => gateway.relays.acked(ack),
            Envelope::Changed { session, .. } => {
                let (Some(handle), Some(replicas)) = (
                    gateway.table().relayed_to(&session),
                    gateway.replicas.clone(),
                ) else {
                    continue;
                };
                actix_rt::spawn(async move {
                    if let Ok(Some(record)) = replicas.session(&session).await {
                        handle.follow(followed(record));
                    }
                });
            }
            Envelope::Relay { from, post, relay } => {
                if let Some(replicas) = gateway.replicas.clone() {
                    let serve = super::relay::serve(gateway.clone(), replicas, from, post, relay);
                    actix_rt::spawn(serve);
                }
            }
            Envelope::Relayed {
                post,
                json,
                answer,
                missing_capability,
                scope_needed,
            } => {
                let outgoing = crate::outbox::Outgoing {
                    json: json.into(),
                    answer,
                    missing_capability,
                    scope_needed: scope_needed.map(Into::into),
                };
                super::relay::relayed(&gateway, post, outgoing);
            }
            Envelope::Abandoned { from, post } => super::relay::abandoned(&gateway, from, post),
        }
    }
}

/// The shared store did not answer: `503`, to be tried again.
fn unavailable(e: crate::replicas::StoreError) -> HttpResponse {
    tracing::warn!(error = %e, "the replicas' store did not answer");
    HttpResponse::ServiceUnavailable()
        .insert_header(("retry-after", "1"))
        .body("the gateway's shared session store did not answer; try again")
}
