//! Credentials on Redis, shared by every process and replica of a service (feature `redis`).
//!
//! Under a prefix of the service's (`{prefix}`), a key `k` has:
//! - `{prefix}entry:k`, a hash: `v` its version, `c` the credentials encrypted at rest
//!   (XChaCha20-Poly1305 with the service's 32-byte key; a random nonce per write; the key's
//!   name bound as associated data, so an entry cannot be moved to another key);
//! - `{prefix}fence:k`, the fence counter: one more for each lease taken;
//! - `{prefix}lease:k`, the current lease: its fence, expiring by itself after the lease's time
//!   (`SET … PX`), so a holder that dies loses it.
//!
//! Taking a lease, renewing one, writing under one and releasing one are Lua scripts: each is atomic at the
//! server. A write under a lease is refused when its fence is not the latest (fencing).

use std::time::Duration;

use chacha20poly1305::{
    aead::{Aead, Generate, KeyInit, Payload},
    XChaCha20Poly1305, XNonce,
};
use redis::{aio::ConnectionManager, AsyncCommands, Script};

use super::{millis, now_ms, CredentialStore, Credentials, Lease, StoreError, StoreFuture, Stored};

const NONCE_BYTES: usize = 24;

/// A credential store on Redis (see the module's documentation).
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    cipher: XChaCha20Poly1305,
    prefix: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn unavailable(error: redis::RedisError) -> StoreError {
    StoreError::Unavailable(format!("Redis: {error}"))
}

/// Takes the lease if nobody holds it: the new fence, or 0.
const TAKE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence, 'PX', ARGV[1])
return fence";

/// Writes an entry (under a lease when ARGV[2] is not empty): the new version, or -1 if the
/// lease's fence is not the latest.
const WRITE: &str = r"
if ARGV[2] ~= '' then
  local latest = tonumber(redis.call('GET', KEYS[2]) or '0')
  if latest ~= tonumber(ARGV[2]) then return -1 end
end
local version = redis.call('HINCRBY', KEYS[1], 'v', 1)
redis.call('HSET', KEYS[1], 'c', ARGV[1])
return version";

/// Extends the lease if it is still the given one: 1, else 0.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0";

/// Releases the lease if it is still the given one.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`; reconnecting by itself when the connection
    /// drops). `key` encrypts the entries (keep it as you keep other secrets; every replica
    /// needs the same); `prefix` names this service's keys (e.g. `"my-service:mcp:"`).
    pub async fn connect(url: &str, key: [u8; 32], prefix: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let connection = ConnectionManager::new(client).await.map_err(unavailable)?;
        Ok(Self {
            connection,
            cipher: XChaCha20Poly1305::new(&key.into()),
            prefix: prefix.to_owned(),
        })
    }

    /// The same store under a scope of its own, e.g. one user of a multi-user service (each
    /// user's grant has the same authorization server and resource). Shares the connection.
    pub fn scoped(&self, scope: &str) -> Self {
        // Length-prefixed, so that no two scopes (`a:b` + `c`, `a` + `b:c`) meet.
        let prefix = format!("{}{}:{scope}:", self.prefix, scope.len());
        Self {
            prefix,
            ..self.clone()
        }
    }

    fn name(&self, kind: &str, key: &str) -> String {
        format!("{}{kind}:{key}", self.prefix)
    }

    fn seal(&self, key: &str, credentials: &Credentials) -> Result<Vec<u8>, StoreError> {
        let plain = serde_json::to_vec(credentials)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode credentials: {e}")))?;
        let nonce = XNonce::generate();
        let aad = self.name("entry", key);
        let sealed = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &plain,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Unavailable("cannot encrypt credentials".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn open(&self, key: &str, sealed: &[u8]) -> Result<Credentials, StoreError> {
        let corrupt = |reason: &str| StoreError::Corrupt {
            what: format!("Redis key {}", self.name("entry", key)),
            reason: reason.to_owned(),
        };
        if sealed.len() < NONCE_BYTES {
            return Err(corrupt("too short"));
        }
        let (nonce, sealed) = sealed.split_at(NONCE_BYTES);
        let nonce = XNonce::try_from(nonce).map_err(|_| corrupt("bad nonce"))?;
        let aad = self.name("entry", key);
        let plain = self
            .cipher
            .decrypt(
                &nonce,
                Payload {
                    msg: sealed,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| corrupt("does not decrypt with this key"))?;
        serde_json::from_slice(&plain).map_err(|e| corrupt(&e.to_string()))
    }
}

impl CredentialStore for RedisStore {
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let (version, sealed): (Option<u64>, Option<Vec<u8>>) = redis::cmd("HMGET")
                .arg(self.name("entry", key))
                .arg("v")
                .arg("c")
                .query_async(&mut connection)
                .await
                .map_err(unavailable)?;
            match (version, sealed) {
                (Some(version), Some(sealed)) => Ok(Some(Stored {
                    credentials: self.open(key, &sealed)?,
                    version,
                })),
                _ => Ok(None),
            }
        })
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let sealed = self.seal(key, credentials)?;
            let fence = lease.map(|l| l.fence.to_string()).unwrap_or_default();
            let mut connection = self.connection.clone();
            let version: i64 = Script::new(WRITE)
                .key(self.name("entry", key))
                .key(self.name("fence", key))
                .arg(sealed)
                .arg(fence)
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            u64::try_from(version).map_err(|_| StoreError::Fenced {
                key: key.to_owned(),
            })
        })
    }

    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let _: i64 = connection
                .del(self.name("entry", key))
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let ttl_ms = millis(ttl).max(1);
            let fence: u64 = Script::new(TAKE)
                .key(self.name("lease", key))
                .key(self.name("fence", key))
                .arg(ttl_ms)
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok((fence > 0).then(|| Lease {
                key: key.to_owned(),
                fence,
                deadline_ms: now_ms().saturating_add(ttl_ms),
            }))
        })
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let ttl_ms = millis(ttl).max(1);
            let renewed: i64 = Script::new(RENEW)
                .key(self.name("lease", &lease.key))
                .arg(lease.fence)
                .arg(ttl_ms)
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok((renewed == 1).then(|| Lease {
                deadline_ms: now_ms().saturating_add(ttl_ms),
                ..lease.clone()
            }))
        })
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let _: i64 = Script::new(RELEASE)
                .key(self.name("lease", &lease.key))
                .arg(lease.fence)
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }
}
