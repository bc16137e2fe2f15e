//! Gateway replicas sharing one Redis (`--replicas redis://…`): any replica serves any
//! 2025-11-25 session, and what a replica that dies owed upstream is settled by another.
//!
//! - **Session records** (`record.rs`): what a request needs to be served anywhere (owner,
//!   version, capabilities, log level, subscriptions), written when the session opens, read by
//!   a replica that has no copy of it yet (it makes one, `http/replicated.rs`), its expiry
//!   pushed back to the idle limit as the session is used, removed when it is closed. Sealed
//!   with the replicas' shared key (`seal.rs`), under ids as unguessable as before. A user's
//!   sessions are counted here too, across the replicas.
//! - **The bus** (`bus.rs`): what must reach the replica holding something of a session: the
//!   client's cancel of a call made elsewhere, its answer to a server's request asked
//!   elsewhere, the session's close or change, a request relayed where its call or task is
//!   and that request's messages back. Redis streams read from where each replica stopped, one
//!   hop, every message sealed, each replica's queue of them bounded.
//! - **Leases** (`survivor.rs`): a replica says it is alive while it lives. Before a call is
//!   written to an HTTP upstream server that keeps sessions, the replica records it
//!   (`OwedCall`) and removes the record when the call ends; when a replica's word lapses, one
//!   survivor sends the cancel of every call it left there, then ends those upstream sessions.
//!
//! Without `--replicas` none of this runs: a single gateway keeps its sessions in its own
//! memory, exactly as before.

mod bus;
pub mod record;
mod seal;
mod survivor;

use std::{collections::HashMap, sync::Arc, time::Duration};

use redis::aio::ConnectionManager;

use crate::owner::Owner;
pub use bus::{Envelope, Relay, QUEUE};
use record::{OwedCall, OwnerRecord, SessionRecord};
use seal::Seal;
pub use survivor::Endpoint;

/// Why the shared store did not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the replicas' Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("a record in the replicas' Redis does not open with this key, or does not parse: {0}")]
    Corrupt(String),
}

/// How replicas share: where, under which key and prefix, and their times.
pub struct Settings {
    pub url: String,
    pub key: [u8; 32],
    pub prefix: String,
    /// A session record's expiry: the sessions' idle limit.
    pub idle: Duration,
    /// How long a replica that stops renewing is still taken as alive.
    pub lease: Duration,
    /// The HTTP upstream servers by name: where a survivor sends what a dead replica owed.
    pub endpoints: HashMap<String, Endpoint>,
}

pub struct Replicas {
    /// This replica's id, random for each process.
    pub me: Arc<str>,
    redis: ConnectionManager,
    client: redis::Client,
    seal: Seal,
    prefix: String,
    idle: Duration,
    lease: Duration,
    endpoints: HashMap<String, Endpoint>,
}

impl Replicas {
    /// Connects to the store; nothing runs until [`run`](Self::run).
    pub async fn connect(settings: Settings) -> Result<Arc<Self>, StoreError> {
        let client = redis::Client::open(settings.url.as_str())?;
        let redis = client.get_connection_manager().await?;
        Ok(Arc::new(Self {
            me: uuid::Uuid::new_v4().simple().to_string().into(),
            redis,
            client,
            seal: Seal::new(settings.key),
            prefix: settings.prefix,
            idle: settings.idle,
            lease: settings.lease,
            endpoints: settings.endpoints,
        }))
    }

    fn name(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}:{id}", self.prefix)
    }

    fn sealed<T: serde::Serialize>(&self, place: &str, value: &T) -> Result<Vec<u8>, StoreError> {
        let plain = serde_json::to_vec(value).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let sealed = self.seal.seal(place, &plain);
        sealed.ok_or_else(|| StoreError::Corrupt("cannot encrypt".into()))
    }

    fn opened<T: serde::de::DeserializeOwned>(
        &self,
        place: &str,
        sealed: &[u8],
    ) -> Result<T, StoreError> {
        let plain = (self.seal.open(place, sealed))
            .ok_or_else(|| StoreError::Corrupt(format!("{place} does not open")))?;
        serde_json::from_slice(&plain).map_err(|e| StoreError::Corrupt(format!("{place}: {e}")))
    }

    /// Session `id` opened (or changed): its record, expiring after the idle limit.
    pub async fn put_session(&self, id: &str, record: &SessionRecord) -> Result<(), StoreError> {
        let place = self.name("session", id);
        let sealed = self.sealed(&place, record)?;
        let mut redis = self.redis.clone();
        redis::cmd("SET")
            .arg(&place)
            .arg(sealed)
            .arg("PX")
            .arg(millis(self.idle))
            .query_async::<()>(&mut redis)
            .await?;
        Ok(())
    }

    /// Session `id`'s record, its expiry pushed back to the idle limit (a request uses it);
    /// `None` if it was closed or expired.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let place = self.name("session", id);
        let mut redis = self.redis.clone();
        let sealed: Option<Vec<u8>> = redis::cmd("GETEX")
            .arg(&place)
            .arg("PX")
            .arg(millis(self.idle))
            .query_async(&mut redis)
            .await?;
        sealed.map(|s| self.opened(&place, &s)).transpose()
    }

    /// Session `id` was closed: no replica serves it any more (nor counts it its owner's).
    pub async fn remove_session(&self, id: &str, owner: &Owner) -> Result<(), StoreError> {
        let mut redis = self.redis.clone();
        redis::pipe()
            .cmd("DEL")
            .arg(self.name("session", id))
            .ignore()
            .cmd("ZREM")
            .arg(self.owners_sessions(owner))
            .arg(id)
            .ignore()
            .query_async::<()>(&mut redis)
            .await?;
        Ok(())
    }

    /// Where `owner`'s sessions are counted across replicas: a name made of a digest of who
    /// they are, so that Redis holds no user's name.
    fn owners_sessions(&self, owner: &Owner) -> String {
        use sha2::Digest as _;
        let who = serde_json::to_vec(&OwnerRecord::from(owner)).unwrap_or_default();
        let digest = sha2::Sha256::digest(&who);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.name("owner", &hex)
    }

    /// Counts session `id` as `owner`'s across every replica, unless they hold `limit` live
    /// ones already (`false`): each counted until the idle limit after it was last used.
    pub async fn count_session(
        &self,
        id: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<bool, StoreError> {
        /// Drops the expired, then adds `id` if there is room; the set expires with its last.
        const COUNT: &str = r"
            redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
            if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
            redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
            redis.call('PEXPIREAT', KEYS[1], ARGV[2])
            return 1";
        let now = now_ms();
        let until = now.saturating_add(millis(self.idle));
        let mut redis = self.redis.clone();
        let counted: i64 = redis::Script::new(COUNT)
            .key(self.owners_sessions(owner))
            .arg(now)
            .arg(until)
            .arg(limit)
            .arg(id)
            .invoke_async(&mut redis)
            .await?;
        Ok(counted == 1)
    }

    /// Session `id` of `owner` was used: counted until the idle limit from now.
    pub async fn session_used(&self, id: &str, owner: &Owner) -> Result<(), StoreError> {
        let until = now_ms().saturating_add(millis(self.idle));
        let key = self.owners_sessions(owner);
        let mut redis = self.redis.clone();
        redis::pipe()
            .cmd("ZADD")
            .arg(&key)
            .arg("XX")
            .arg(until)
            .arg(id)
            .ignore()
            .cmd("PEXPIREAT")
            .arg(&key)
            .arg(until)
            .arg("GT")
            .ignore()
            .query_async::<()>(&mut redis)
            .await?;
        Ok(())
    }

    /// Adds `envelope` to the bus stream `stream` (trimmed to about `bus::KEPT` entries). A
    /// connection that broke fails the first command after it and is made again meanwhile:
    /// the message is tried three times, 100 and 200 ms apart, before it is given up.
    async fn add(&self, stream: &str, envelope: &Envelope) -> Result<(), StoreError> {
        let sealed = self.sealed(stream, envelope)?;
        let mut wait = Duration::from_millis(100);
        let mut tries = 1;
        loop {
            let mut redis = self.redis.clone();
            let added = redis::cmd("XADD")
                .arg(stream)
                .arg("MAXLEN")
                .arg("~")
                .arg(bus::KEPT)
                .arg("*")
                .arg("m")
                .arg(&sealed)
                .query_async::<()>(&mut redis)
                .await;
            match added {
                Ok(()) => return Ok(()),
                Err(e) if tries == 3 => return Err(e.into()),
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    (wait, tries) = (wait * 2, tries + 1);
                }
            }
        }
    }

    /// Tells every other replica `envelope` (one hop, no answer): how many others are alive to
    /// read it.
    pub async fn publish(&self, envelope: &Envelope) -> Result<usize, StoreError> {
        self.add(&self.name("stream", "all"), envelope).await?;
        let mut alive = 0;
        for other in self.others().await? {
            alive += usize::from(self.alive(&other).await?);
        }
        Ok(alive)
    }

    /// Tells replica `to` only `envelope` (one hop, no answer): whether it is alive to read it.
    pub async fn publish_to(&self, to: &str, envelope: &Envelope) -> Result<bool, StoreError> {
        if !self.alive(to).await? {
            return Ok(false);
        }
        self.add(&self.name("stream", to), envelope).await?;
        Ok(true)
    }

    /// The other replicas listed (alive or not yet settled).
    pub async fn others(&self) -> Result<Vec<String>, StoreError> {
        let mut redis = self.redis.clone();
        let members: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.name("replicas", "all"))
            .query_async(&mut redis)
            .await?;
        Ok(members.into_iter().filter(|r| **r != *self.me).collect())
    }

    /// Whether replica `replica` still says it is alive (`survivor.rs`).
    pub async fn alive(&self, replica: &str) -> Result<bool, StoreError> {
        let mut redis = self.redis.clone();
        let alive: bool = redis::cmd("EXISTS")
            .arg(self.name("alive", replica))
            .query_async(&mut redis)
            .await?;
        Ok(alive)
    }

    /// How often a replica says it is alive, and looks at the others.
    pub fn turn(&self) -> Duration {
        self.lease / 4
    }

    /// Records, before it is written, a call this replica is about to owe an upstream server;
    /// the returned key removes it with [`paid`](Self::paid).
    pub async fn owe(&self, call: &OwedCall) -> Result<String, StoreError> {
        let owed = self.name("owed", &self.me);
        let field = format!("{}\n{}\n{}", call.server, call.session, call.request);
        let sealed = self.sealed(&owed, call)?;
        let mut redis = self.redis.clone();
        redis::cmd("HSET")
            .arg(&owed)
            .arg(&field)
            .arg(sealed)
            .query_async::<()>(&mut redis)
            .await?;
        Ok(field)
    }

    /// The call recorded under `field` ended: nothing is owed for it any more.
    pub async fn paid(&self, field: &str) -> Result<(), StoreError> {
        let mut redis = self.redis.clone();
        redis::cmd("HDEL")
            .arg(self.name("owed", &self.me))
            .arg(field)
            .query_async::<()>(&mut redis)
            .await?;
        Ok(())
    }

    /// This replica stops, having written every cancel it owed (`Servers::stop`): nothing is
    /// left for a survivor to settle, and it is no longer listed.
    pub async fn leave(&self) -> Result<(), StoreError> {
        let mut redis = self.redis.clone();
        redis::pipe()
            .cmd("DEL")
            .arg(self.name("owed", &self.me))
            .arg(self.name("alive", &self.me))
            .arg(self.name("stream", &self.me))
            .ignore()
            .cmd("SREM")
            .arg(self.name("replicas", "all"))
            .arg(&*self.me)
            .ignore()
            .query_async::<()>(&mut redis)
            .await?;
        Ok(())
    }

    /// Whether upstream server `server` is one whose calls are recorded (an HTTP endpoint).
    pub fn settles(&self, server: &str) -> bool {
        self.endpoints.contains_key(server)
    }

    /// Runs this replica's part: its lease renewed, the bus's messages handed to `deliver`,
    /// and the settling of replicas that died.
    pub fn run(self: &Arc<Self>, deliver: tokio::sync::mpsc::Sender<Envelope>) {
        actix_rt::spawn(bus::listen(self.clone(), deliver));
        actix_rt::spawn(survivor::live(self.clone()));
    }
}

/// `name`, marked as this replica's when replicas run (`REPLICA~name`): a request naming it (a
/// task's, a retry's `requestState`) that reaches another replica is relayed here.
pub fn here_named(replicas: Option<&Arc<Replicas>>, name: &str) -> String {
    match replicas {
        Some(replicas) => format!("{}~{name}", replicas.me),
        None => name.to_owned(),
    }
}

/// The other replica a name made by [`here_named`] marks, if it marks one.
pub fn elsewhere<'n>(replicas: &Replicas, name: &'n str) -> Option<&'n str> {
    let (replica, _) = name.split_once('~')?;
    (replica != &*replicas.me).then_some(replica)
}

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, millis)
}

fn millis(time: Duration) -> u64 {
    u64::try_from(time.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A call recorded as owed (`Replicas::owe`) until this is dropped, as the call ends.
pub struct Owed {
    replicas: Arc<Replicas>,
    field: Arc<std::sync::Mutex<Option<String>>>,
}

impl Drop for Owed {
    fn drop(&mut self) {
        let field = self.field.lock().ok().and_then(|mut field| field.take());
        if let Some(field) = field {
            let replicas = self.replicas.clone();
            actix_rt::spawn(async move {
                if let Err(e) = replicas.paid(&field).await {
                    tracing::warn!(error = %e, "a call's record was not removed");
                }
            });
        }
    }
}

/// `call` to `server`, recorded as owed before it is written when `replicas` run and the
/// server is an HTTP one that keeps sessions; the record goes with the returned [`Owed`].
pub fn owing<T: actix_mcp::servers::RoutedResult>(
    replicas: Option<&Arc<Replicas>>,
    server: &str,
    call: actix_mcp::servers::RoutedCall<T>,
) -> (actix_mcp::servers::RoutedCall<T>, Option<Owed>) {
    let Some(replicas) = replicas.filter(|r| r.settles(server)) else {
        return (call, None);
    };
    let field = Arc::new(std::sync::Mutex::new(None));
    let owed = Owed {
        replicas: replicas.clone(),
        field: field.clone(),
    };
    let (replicas, server) = (replicas.clone(), server.to_owned());
    let call = call.before_send(move |client, id| {
        let session = client.session_id();
        let protocol_version = client.protocol_version().to_owned();
        Box::pin(async move {
            // A server that keeps no session: its POST's end is the call's cancel.
            let Some(session) = session else { return };
            let call = OwedCall {
                server,
                session: session.to_string(),
                protocol_version,
                request: id.as_u64(),
            };
            match replicas.owe(&call).await {
                Ok(recorded) => {
                    if let Ok(mut field) = field.lock() {
                        *field = Some(recorded);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "a call was not recorded as owed"),
            }
        })
    });
    (call, Some(owed))
}
