//! Where credentials live between connections (and, with [`FileStore`], between runs and
//! processes): the client registration and the tokens, keyed by authorization server (issuer)
//! and resource.
//!
//! A store is also where processes agree on who refreshes a token: OAuth 2.1 rotates refresh
//! tokens, and a provider that sees one used twice revokes the grant. So a store keeps a
//! version per entry and a refresh lease per key (see [`CredentialStore`]); the refresh path
//! takes the lease, reads the store again, and refreshes only if nobody did meanwhile.

mod file;
#[cfg(feature = "redis")]
mod redis;
pub(crate) mod table;

use std::{
    future::Future,
    pin::Pin,
    sync::{Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

pub use file::FileStore;
#[cfg(feature = "redis")]
pub use redis::RedisStore;
use table::Table;

use serde::{Deserialize, Serialize};

/// What one authorization server granted this client for one resource.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The client id at this authorization server (empty if none is needed).
    pub client_id: String,
    /// The client secret; `None` for public clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the client authenticates to the token endpoint. A stored name this client does not
    /// know reads as [`TokenAuthMethod::None`].
    #[serde(default, deserialize_with = "known_method_or_none")]
    pub auth_method: TokenAuthMethod,
    /// Whether this client was registered by us (DCR), so it may be discarded and registered
    /// again.
    #[serde(default)]
    pub registered: bool,
    /// The access token; `None` until a token is granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    /// The token type the server gave (`Bearer` or `DPoP`); `None` is treated as `Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When the access token was granted (Unix seconds): with `expires_at`, its lifetime, which
    /// sets how early it is refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<u64>,
    /// The refresh token, if the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes asked for when the token was obtained.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The DPoP key (RFC 9449) the tokens are bound to, as the private P-256 scalar
    /// (base64url): kept with them, so that another process can use a DPoP-bound refresh token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<String>,
}

/// How a client authenticates to the token endpoint (RFC 7591 `token_endpoint_auth_method`),
/// of the methods this client can use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenAuthMethod {
    /// A public client: its `client_id` in the request body, no secret.
    #[default]
    None,
    /// The secret in an HTTP Basic `Authorization` header.
    ClientSecretBasic,
    /// The secret in the request body.
    ClientSecretPost,
    /// A signed assertion (RFC 7523) made with the client's private key.
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// Every method, in the order a registration prefers them.
    pub(crate) const ALL: [Self; 4] = [
        Self::None,
        Self::ClientSecretBasic,
        Self::ClientSecretPost,
        Self::PrivateKeyJwt,
    ];

    /// The name metadata and registrations use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method named `name`, if this client knows it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl std::fmt::Display for TokenAuthMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn known_method_or_none<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<TokenAuthMethod, D::Error> {
    let name = String::deserialize(deserializer)?;
    Ok(TokenAuthMethod::from_name(&name).unwrap_or_default())
}

/// Secrets never appear in `Debug`.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("Credentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &hidden(&self.client_secret))
            .field("auth_method", &self.auth_method)
            .field("access_token", &hidden(&self.access_token))
            .field("refresh_token", &hidden(&self.refresh_token))
            .field("dpop_key", &hidden(&self.dpop_key))
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// An entry as the store holds it: the credentials, and the version they were written at
/// (each write of a key gives it the next one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// What is kept.
    pub credentials: Credentials,
    /// Grows with every write of the key.
    pub version: u64,
}

/// The right to refresh one key's token until its deadline. Each lease taken of a key gets the
/// next fence: a write under a lease that another took over since is refused
/// ([`StoreError::Fenced`]), so a holder presumed dead cannot overwrite its successor's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The key leased.
    pub key: String,
    /// Grows with every lease taken of the key.
    pub fence: u64,
    /// Until when it is held (milliseconds since the Unix epoch).
    pub deadline_ms: u64,
}

/// Why a store could not do what it was asked.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// What the store holds cannot be read (a truncated or corrupted file, a value that does not
    /// decrypt): reported, never taken for an empty store.
    #[error("the credential store {what} is unreadable: {reason}")]
    Corrupt {
        /// The file or key.
        what: String,
        /// Why.
        reason: String,
    },
    /// A write under a lease that was taken over since.
    #[error("the refresh lease of {key:?} was taken over; the write was refused")]
    Fenced {
        /// The key.
        key: String,
    },
    /// The store could not be reached or written (I/O, the database).
    #[error("the credential store is unavailable: {0}")]
    Unavailable(String),
}

/// A store that fails fails the authorization with [`AuthErrorKind::Store`].
///
/// [`AuthErrorKind::Store`]: crate::AuthErrorKind::Store
impl From<StoreError> for crate::error::Error {
    fn from(error: StoreError) -> Self {
        super::failure(crate::error::AuthErrorKind::Store, error.to_string())
    }
}

/// What a store's operations return.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Keeps credentials by key (`issuer` and resource), and the refresh leases that make one
/// refresh per expiry across every process sharing the store.
///
/// Every read is of the store itself, not of a copy: another process may have written since.
/// A store shared by several processes or replicas ([`FileStore`], `RedisStore`) makes its
/// operations atomic across them; [`MemoryStore`] within one process.
pub trait CredentialStore: Send + Sync + 'static {
    /// The entry under `key`, with its version; `None` if there is none.
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>>;

    /// Keeps `credentials` under `key`, replacing what was there; the new version. Under
    /// `lease`, refused with [`StoreError::Fenced`] if a later lease of `key` was taken.
    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64>;

    /// Forgets what is kept under `key`.
    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()>;

    /// Takes `key`'s refresh lease for `ttl`, if nobody holds it (or its holder's deadline has
    /// passed); `None` if another holds it.
    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>>;

    /// Extends `lease` for `ttl` from now if its holder still has it (nobody took it over, it
    /// was not given back): the renewed lease, else `None`. A holder that waits long (a
    /// sign-in waits for a person) renews well within its deadline.
    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>>;

    /// Gives `lease` back (nothing happens if it was taken over).
    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()>;
}

/// Milliseconds since the Unix epoch: the leases' clock, shared by every process on a machine
/// (and, for a shared database, by machines whose clocks agree within a lease's margin).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// In memory: lost when the program exits; shared by the `OAuth`s of one process that are
/// given the same store.
#[derive(Debug, Default)]
pub struct MemoryStore {
    table: Mutex<Table>,
}

impl MemoryStore {
    fn with<T>(&self, f: impl FnOnce(&mut Table) -> T) -> T {
        f(&mut self.table.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl CredentialStore for MemoryStore {
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>> {
        let read = self.with(|table| table.read(key));
        Box::pin(std::future::ready(Ok(read)))
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        let written = self.with(|table| table.write(key, credentials, lease));
        Box::pin(std::future::ready(written))
    }

    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        self.with(|table| table.remove(key));
        Box::pin(std::future::ready(Ok(())))
    }

    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        let lease = self.with(|table| table.try_lease(key, now_ms(), millis(ttl)));
        Box::pin(std::future::ready(Ok(lease)))
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        let renewed = self.with(|table| table.renew(lease, now_ms(), millis(ttl)));
        Box::pin(std::future::ready(Ok(renewed)))
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        self.with(|table| table.release(lease));
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug() {
        let credentials = Credentials {
            client_secret: Some("s3cret".into()),
            access_token: Some("tok3n".into()),
            refresh_token: Some("r3fresh".into()),
            ..Credentials::default()
        };
        let shown = format!("{credentials:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("tok3n") && !shown.contains("r3fresh")
        );
    }

    #[test]
    fn auth_methods_are_stored_by_their_registered_names() {
        let credentials = Credentials {
            auth_method: TokenAuthMethod::ClientSecretPost,
            ..Credentials::default()
        };
        let text = serde_json::to_string(&credentials).unwrap();
        assert!(
            text.contains(r#""auth_method":"client_secret_post""#),
            "{text}"
        );
        let read = |method: &str| {
            let text = format!(r#"{{"client_id":"c","auth_method":"{method}"}}"#);
            serde_json::from_str::<Credentials>(&text)
                .unwrap()
                .auth_method
        };
        assert_eq!(read("private_key_jwt"), TokenAuthMethod::PrivateKeyJwt);
        assert_eq!(
            read("tls_client_auth"),
            TokenAuthMethod::None,
            "unknown: public"
        );
        for method in TokenAuthMethod::ALL {
            assert_eq!(TokenAuthMethod::from_name(method.as_str()), Some(method));
        }
    }
}
