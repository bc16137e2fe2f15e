//! Requests served at another replica (`--replicas`): a 2026-07-28 retry whose call waits for
//! its input there (its `requestState` names the replica), a request of a task made there (its
//! id names it). The replica the request reached relays it over the bus to that one, which
//! serves it as its own and sends each message for the request's POST back, the answer last;
//! the POST waits here as for any request, bounded as any. A relayed 2026-07-28 call whose
//! POST goes away is abandoned there, which cancels it upstream.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
};

use actix_web::HttpResponse;
use serde_json::{json, Value};

use super::{session::SessionHandle, Gateway};
use crate::{
    message::{Incoming, Request},
    outbox::{self, Inbox, Outbox, Outgoing},
    replicas::{Envelope, Relay, Replicas},
    replies::{error, INVALID_PARAMS},
};

/// This replica's relayed requests, both ways.
#[derive(Default)]
pub struct Relays {
    next: AtomicU64,
    /// The POSTs here waiting for what another replica serves, by number.
    waiting: Mutex<HashMap<u64, Outbox>>,
    /// The 2026-07-28 calls served here for another replica's POST, by (replica, number): to
    /// abandon if that POST goes away.
    serving: Mutex<HashMap<(String, u64), (SessionHandle, Value)>>,
    /// The closes of a session here waiting for the other replicas to end their copies, by
    /// number: told of each that did.
    closing: Mutex<HashMap<u64, tokio::sync::mpsc::UnboundedSender<()>>>,
}

impl Relays {
    /// A number for a close, and where the other replicas' acks come.
    pub fn closing(&self) -> (u64, tokio::sync::mpsc::UnboundedReceiver<()>) {
        let ack = self.next.fetch_add(1, Ordering::Relaxed);
        let (acked, acks) = tokio::sync::mpsc::unbounded_channel();
        locked(&self.closing).insert(ack, acked);
        (ack, acks)
    }

    /// Close `ack` waits no more.
    pub fn closed(&self, ack: u64) {
        locked(&self.closing).remove(&ack);
    }

    /// Another replica ended its copy for close `ack`.
    pub fn acked(&self, ack: u64) {
        if let Some(acked) = locked(&self.closing).get(&ack) {
            let _ = acked.send(());
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A POST waiting for a request served at replica `to`: dropped, it waits no more (and a
/// relayed call not yet answered is abandoned there, when `cancels`).
pub struct RelayedPost {
    relays: Arc<Relays>,
    replicas: Arc<Replicas>,
    to: String,
    post: u64,
    cancels: bool,
}

impl RelayedPost {
    pub fn abandon(&self) {
        locked(&self.relays.waiting).remove(&self.post);
        if !self.cancels {
            return;
        }
        let abandoned = Envelope::Abandoned {
            from: self.replicas.me.to_string(),
            post: self.post,
        };
        let (replicas, to) = (self.replicas.clone(), self.to.clone());
        actix_rt::spawn(async move {
            let _ = replicas.publish_to(&to, &abandoned).await;
        });
    }

    /// The answer came: nothing to abandon.
    pub fn release(&self) {
        locked(&self.relays.waiting).remove(&self.post);
    }
}

/// Relays `relay` to replica `to`: the messages of the POST that waits for it, and the POST's
/// part in it. `Err`: the answer instead (the bus did not take it).
///
/// If `to` is not listening, or stops saying it is alive before the answer, the POST is
/// answered an error under `answer_id`: what that replica held fails at its client.
pub async fn ask(
    gateway: &Gateway,
    replicas: &Arc<Replicas>,
    to: &str,
    relay: Relay,
    cancels: bool,
    answer_id: Value,
) -> Result<(Inbox, RelayedPost), HttpResponse> {
    let relays = gateway.relays.clone();
    let post = relays.next.fetch_add(1, Ordering::Relaxed);
    let (outbox, inbox) = outbox::channel(gateway.stream_buffer);
    locked(&relays.waiting).insert(post, outbox);
    let waiting = RelayedPost {
        relays,
        replicas: replicas.clone(),
        to: to.to_owned(),
        post,
        cancels,
    };
    let asked = Envelope::Relay {
        from: replicas.me.to_string(),
        post,
        relay,
    };
    match replicas.publish_to(to, &asked).await {
        Ok(true) => {
            let relays = gateway.relays.clone();
            let watching = watch(relays, replicas.clone(), to.to_owned(), post, answer_id);
            actix_rt::spawn(watching);
        }
        Ok(false) => gone(&gateway.relays, post, &answer_id),
        Err(e) => {
            waiting.release();
            tracing::warn!(error = %e, "a request was not relayed to its replica");
            return Err(HttpResponse::ServiceUnavailable()
                .insert_header(("retry-after", "1"))
                .body("the gateway's replicas could not be reached; try again"));
        }
    }
    Ok((inbox, waiting))
}

/// Watches replica `to` while POST `post` waits for it: once `to` no longer says it is alive,
/// the POST is answered an error.
async fn watch(
    relays: Arc<Relays>,
    replicas: Arc<Replicas>,
    to: String,
    post: u64,
    answer_id: Value,
) {
    let mut every = tokio::time::interval(replicas.turn());
    loop {
        every.tick().await;
        if !locked(&relays.waiting).contains_key(&post) {
            return;
        }
        if let Ok(false) = replicas.alive(&to).await {
            return gone(&relays, post, &answer_id);
        }
    }
}

/// The replica serving POST `post`'s request is gone: the POST is answered an error.
fn gone(relays: &Relays, post: u64, answer_id: &Value) {
    let why = "the gateway replica serving this request stopped";
    let answer = error(answer_id, crate::replies::INTERNAL_ERROR, why);
    if let Some(outbox) = locked(&relays.waiting).remove(&post) {
        let _ = outbox.send(&answer.into());
    }
}

/// The JSON text of `request`, to relay.
pub fn body_of(request: &Request) -> String {
    json!({"jsonrpc": "2.0", "id": request.id, "method": request.name, "params": request.params})
        .to_string()
}

/// A message another replica served for a POST waiting here.
pub fn relayed(gateway: &Gateway, post: u64, outgoing: Outgoing) {
    let mut waiting = locked(&gateway.relays.waiting);
    let answer = outgoing.answer;
    let delivered = waiting
        .get(&post)
        .map(|outbox| outbox.send_outgoing(outgoing));
    if answer || matches!(delivered, Some(Err(outbox::Overflow))) {
        waiting.remove(&post);
    }
}

/// The POST `post` of replica `from` went away: its relayed call here is abandoned.
pub fn abandoned(gateway: &Gateway, from: String, post: u64) {
    let serving = locked(&gateway.relays.serving).remove(&(from, post));
    if let Some((session, id)) = serving {
        session.abandon(id, "the downstream client aborted the request");
    }
}

/// Serves `relay` here for POST `post` of replica `from`, sending each of its messages back.
pub async fn serve(
    gateway: actix_web::web::Data<Gateway>,
    replicas: Arc<Replicas>,
    from: String,
    post: u64,
    relay: Relay,
) {
    let messages = match relay {
        Relay::Retry { state, owner, body } => {
            retried(&gateway, &from, post, &state, &owner.owner(), &body).await
        }
        Relay::Request { session, body } => requested(&gateway, &session, &body),
    };
    let mut messages = match messages {
        Ok(messages) => messages,
        Err(answer) => {
            let outgoing = Outgoing::of(&answer.into());
            return send_back(&replicas, &from, post, outgoing).await;
        }
    };
    while let Some(outgoing) = messages.recv().await {
        let answer = outgoing.answer;
        send_back(&replicas, &from, post, outgoing).await;
        if answer {
            break;
        }
    }
    locked(&gateway.relays.serving).remove(&(from, post));
}

/// The retry of the call parked here under `state`, if `owner`'s.
async fn retried(
    gateway: &Gateway,
    from: &str,
    post: u64,
    state: &str,
    owner: &crate::owner::Owner,
    body: &str,
) -> Result<Inbox, Value> {
    let Ok(Incoming::Request(retry)) = crate::message::parse(body.as_bytes()) else {
        return Err(error(&Value::Null, INVALID_PARAMS, "not a request"));
    };
    let retry_id = retry.id.clone();
    let Some(super::parking::Parked { session, id }) = gateway.parking.take(state, owner) else {
        let why = "the requestState names no call waiting for input (answered or expired)";
        return Err(error(&retry_id, INVALID_PARAMS, why));
    };
    let serving = (session.clone(), id.clone());
    locked(&gateway.relays.serving).insert((from.to_owned(), post), serving);
    session
        .resume(id, retry)
        .await
        .map_err(|super::session::Gone| {
            error(
                &retry_id,
                INVALID_PARAMS,
                "the call waiting for input ended",
            )
        })
}

/// A request of session `session`, served by this replica's copy of it.
fn requested(gateway: &Gateway, session: &str, body: &str) -> Result<Inbox, Value> {
    let message = crate::message::parse(body.as_bytes())?;
    let id = message.request().map(|r| r.id.clone()).unwrap_or_default();
    let handle = gateway.table().relayed_to(session);
    let handle = handle.ok_or_else(|| error(&id, INVALID_PARAMS, "the session ended"))?;
    let messages = handle.relayed_request(message);
    messages.ok_or_else(|| error(&id, INVALID_PARAMS, "the session ended"))
}

async fn send_back(replicas: &Replicas, to: &str, post: u64, outgoing: Outgoing) {
    let envelope = Envelope::Relayed {
        post,
        json: String::from_utf8_lossy(&outgoing.json).into_owned(),
        answer: outgoing.answer,
        missing_capability: outgoing.missing_capability,
        scope_needed: outgoing.scope_needed.map(String::from),
    };
    if let Err(e) = replicas.publish_to(to, &envelope).await {
        tracing::warn!(error = %e, "a relayed request's message was not sent back");
    }
}

/// `tasks/list` of session `session` with replicas: the tasks its copy here made, then those
/// every other replica's copy made (a task is reached where it was made), in one answer.
pub async fn list_tasks(
    gateway: &Gateway,
    replicas: &Arc<Replicas>,
    session: &str,
    here: Inbox,
    request: &Request,
) -> Inbox {
    let mut tasks = answered_tasks(here).await;
    for other in replicas.others().await.unwrap_or_default() {
        let relay = Relay::Request {
            session: session.to_owned(),
            body: body_of(request),
        };
        let asked = ask(gateway, replicas, &other, relay, false, request.id.clone()).await;
        if let Ok((messages, post)) = asked {
            tasks.extend(answered_tasks(messages).await);
            post.release();
        }
    }
    let (outbox, inbox) = outbox::channel(gateway.stream_buffer);
    let answer = json!({"jsonrpc": "2.0", "id": request.id, "result": {"tasks": tasks}});
    let _ = outbox.send(&answer.into());
    inbox
}

/// The tasks a `tasks/list`'s answer among `messages` lists (none if it is an error).
async fn answered_tasks(mut messages: Inbox) -> Vec<Value> {
    while let Some(outgoing) = messages.recv().await {
        if !outgoing.answer {
            continue;
        }
        let answer: Value = serde_json::from_slice(&outgoing.json).unwrap_or_default();
        return match answer["result"]["tasks"].as_array() {
            Some(tasks) => tasks.clone(),
            None => Vec::new(),
        };
    }
    Vec::new()
}
