//! A user's sign-in to an upstream server, through the gateway. A call without the user's
//! grant gets a ticket (`/oauth/start/<ticket>`, random, for that user and server, for 10
//! minutes). The person who opens it first signs in to the gateway's own authorization server
//! (the gateway as an OAuth client of itself): the token it gets must be the ticket's user's,
//! so a link sent to someone else cannot tie their upstream account to the sender. Then the
//! person signs in at the upstream server's authorization server, and the grant is kept in the
//! user's own part of the credential store. Both come back to `/oauth/callback`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use actix_mcp::auth::{
    Callback, CredentialStore, Credentials, Lease, MemoryStore, OAuth, OAuthConfig, StoreFuture,
    Stored,
};
use url::Url;

use super::Users;
use crate::{authorization::Authorization, owner::Owner};

/// Where a sign-in starts (the ticket follows) and where authorization servers send it back.
pub const START: &str = "/oauth/start/";
pub const CALLBACK: &str = "/oauth/callback";

/// How long a ticket, then each step of its sign-in, may wait.
const LIFETIME: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct SignIns {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tickets: HashMap<String, Ticket>,
    /// Authorization requests sent, by their `state`.
    pending: HashMap<String, Pending>,
    /// Calls waiting for a ticket's sign-in to end, by ticket.
    waiting: HashMap<String, Vec<tokio::sync::oneshot::Sender<()>>>,
}

#[derive(Clone)]
struct Ticket {
    owner: Owner,
    server: String,
    expires: Instant,
}

struct Pending {
    ticket: String,
    step: Step,
    expires: Instant,
}

enum Step {
    /// The person signs in to the gateway: who they are.
    Identity(OAuth, Arc<Captured>),
    /// The user signs in at the upstream server.
    Upstream(OAuth),
}

/// What a sign-in page answers.
pub enum Page {
    /// On to an authorization server.
    Redirect(Url),
    /// Done: `owner`'s grant for `server` is kept; `ticket` was the elicitation's id.
    Done {
        owner: Owner,
        server: String,
        ticket: String,
    },
    /// Refused or failed, with a status and why (no token, no secret in it).
    Refused(u16, String),
}

impl SignIns {
    /// A ticket for `owner` to sign in at `server` (the one still valid, if there is one).
    pub fn ticket(&self, owner: &Owner, server: &str) -> String {
        let mut state = self.lock();
        let now = Instant::now();
        state.tickets.retain(|_, t| t.expires > now);
        state.pending.retain(|_, p| p.expires > now);
        let tickets: Vec<String> = state.tickets.keys().cloned().collect();
        state.waiting.retain(|ticket, _| tickets.contains(ticket));
        let same = |t: &Ticket| t.owner == *owner && t.server == server;
        if let Some((id, _)) = state.tickets.iter().find(|(_, t)| same(t)) {
            return id.clone();
        }
        // 244 random bits.
        let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let id = format!("{}{}", a.simple(), b.simple());
        let ticket = Ticket {
            owner: owner.clone(),
            server: server.to_owned(),
            expires: now + LIFETIME,
        };
        state.tickets.insert(id.clone(), ticket);
        id
    }

    /// Told when the sign-in of `ticket` is done (dropped unsent if it expires first).
    pub fn when_done(&self, ticket: &str) -> tokio::sync::oneshot::Receiver<()> {
        let (done, when) = tokio::sync::oneshot::channel();
        let mut state = self.lock();
        state
            .waiting
            .entry(ticket.to_owned())
            .or_default()
            .push(done);
        when
    }

    /// The sign-in of `ticket` is done: whoever waits goes on.
    fn done(&self, ticket: &str) {
        let mut state = self.lock();
        state.tickets.remove(ticket);
        for waiter in state.waiting.remove(ticket).unwrap_or_default() {
            let _ = waiter.send(());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, url: &Url, ticket: &str, step: Step) {
        let state = url.query_pairs().find(|(k, _)| k == "state");
        let Some((_, state)) = state else { return };
        let pending = Pending {
            ticket: ticket.to_owned(),
            step,
            expires: Instant::now() + LIFETIME,
        };
        self.lock().pending.insert(state.into_owned(), pending);
    }
}

/// `GET /oauth/start/<ticket>`: the person is sent to sign in to the gateway first.
pub async fn start(users: &Users, ticket_id: &str) -> Page {
    let Some(serving) = users.serving() else {
        return Page::Refused(404, "no sign-ins here".into());
    };
    let ticket = users.sign_ins.lock().tickets.get(ticket_id).cloned();
    let Some(_ticket) = ticket.filter(|t| t.expires > Instant::now()) else {
        return Page::Refused(
            404,
            "this sign-in link is unknown or has expired; ask again".into(),
        );
    };
    let captured = Arc::new(Captured::default());
    let redirect = format!("{}{CALLBACK}", serving.origin);
    let config = OAuthConfig::default().shared_store(captured.clone());
    let oauth = OAuth::new(actix_mcp::auth::Application::new(redirect), config);
    match oauth.begin(&serving.resource).await {
        Ok(url) => {
            users
                .sign_ins
                .remember(&url, ticket_id, Step::Identity(oauth, captured));
            Page::Redirect(url)
        }
        Err(e) => Page::Refused(502, format!("the gateway's sign-in could not begin: {e}")),
    }
}

/// `GET /oauth/callback`: an authorization server sent the person back (`redirect`, the URL
/// with its query).
pub async fn callback(users: &Users, authorization: &Authorization, redirect: &Url) -> Page {
    let state = redirect.query_pairs().find(|(k, _)| k == "state");
    let state = state.map(|(_, v)| v.into_owned()).unwrap_or_default();
    let pending = users.sign_ins.lock().pending.remove(&state);
    let Some(pending) = pending.filter(|p| p.expires > Instant::now()) else {
        return Page::Refused(
            400,
            "no sign-in of the gateway's is waiting for this answer".into(),
        );
    };
    let ticket = users.sign_ins.lock().tickets.get(&pending.ticket).cloned();
    let Some(ticket) = ticket else {
        return Page::Refused(400, "this sign-in has expired; ask again".into());
    };
    let callback = match Callback::from_redirect(redirect) {
        Ok(callback) => callback,
        Err(e) => return Page::Refused(400, format!("the sign-in was refused: {e}")),
    };
    match pending.step {
        Step::Identity(oauth, captured) => {
            identity(
                users,
                authorization,
                &pending.ticket,
                &ticket,
                oauth,
                &captured,
                callback,
            )
            .await
        }
        Step::Upstream(oauth) => match oauth.complete(callback).await {
            Ok(()) => {
                users.sign_ins.done(&pending.ticket);
                Page::Done {
                    owner: ticket.owner,
                    server: ticket.server,
                    ticket: pending.ticket,
                }
            }
            Err(e) => Page::Refused(502, format!("the sign-in at {} failed: {e}", ticket.server)),
        },
    }
}

/// The person signed in to the gateway: if as the ticket's user, on to the upstream server.
async fn identity(
    users: &Users,
    authorization: &Authorization,
    ticket_id: &str,
    ticket: &Ticket,
    oauth: OAuth,
    captured: &Captured,
    callback: Callback,
) -> Page {
    if let Err(e) = oauth.complete(callback).await {
        return Page::Refused(502, format!("the sign-in to the gateway failed: {e}"));
    }
    let Some(token) = captured.access_token() else {
        return Page::Refused(502, "the sign-in to the gateway gave no token".into());
    };
    let caller = match authorization.identify(&token).await {
        Ok(caller) => caller,
        Err(refused) => return Page::Refused(403, format!("not let in: {refused:?}")),
    };
    if caller.owner != ticket.owner {
        // Someone else's link: their upstream account must not become the ticket's user's.
        return Page::Refused(403, "this sign-in link was made for another user".into());
    }
    let Some((config, _)) = users.servers.get(&ticket.server) else {
        return Page::Refused(404, "this server is not reached per user".into());
    };
    let Some(serving) = users.serving() else {
        return Page::Refused(404, "no sign-ins here".into());
    };
    let actix_mcp::config::TransportConfig::Http {
        url: server_url, ..
    } = &config.transport
    else {
        return Page::Refused(404, "this server is not reached over HTTP".into());
    };
    let redirect = format!("{}{CALLBACK}", serving.origin);
    let oauth = match config.oauth_for_user(users.store_of(&ticket.owner), &redirect) {
        Ok(oauth) => oauth,
        Err(e) => return Page::Refused(500, e.to_string()),
    };
    match oauth.begin(server_url).await {
        Ok(url) => {
            users
                .sign_ins
                .remember(&url, ticket_id, Step::Upstream(oauth));
            Page::Redirect(url)
        }
        Err(e) => Page::Refused(
            502,
            format!("the sign-in at {} could not begin: {e}", ticket.server),
        ),
    }
}

/// A store of one sign-in's credentials, kept only to read the token it was given.
#[derive(Default)]
struct Captured {
    store: MemoryStore,
    last: Mutex<Option<Credentials>>,
}

impl Captured {
    fn access_token(&self) -> Option<String> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.as_ref().and_then(|c| c.access_token.clone())
    }
}

impl CredentialStore for Captured {
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>> {
        self.store.read(key)
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(credentials.clone());
        self.store.write(key, credentials, lease)
    }

    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        self.store.remove(key)
    }

    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        self.store.try_lease(key, ttl)
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        self.store.renew(lease, ttl)
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        self.store.release(lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_one_per_user_and_server_and_unguessable() {
        let sign_ins = SignIns::default();
        let alice = Owner::user("https://i", "alice");
        let bob = Owner::user("https://i", "bob");
        let first = sign_ins.ticket(&alice, "s");
        assert_eq!(first.len(), 64);
        assert_eq!(
            sign_ins.ticket(&alice, "s"),
            first,
            "asked again: the same link"
        );
        assert_ne!(sign_ins.ticket(&bob, "s"), first);
        assert_ne!(sign_ins.ticket(&alice, "t"), first);
    }
}
