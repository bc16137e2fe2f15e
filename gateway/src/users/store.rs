//! One user's part of the credential store: every key under a prefix that names the user
//! unambiguously (the issuer's and subject's lengths written before them), so that one user's
//! grant is never read, refreshed or overwritten as another's, whatever their names hold.

use std::{sync::Arc, time::Duration};

use actix_mcp::auth::{CredentialStore, Credentials, Lease, StoreFuture, Stored};

use crate::owner::Owner;

pub struct UserStore {
    inner: Arc<dyn CredentialStore>,
    prefix: String,
}

impl UserStore {
    pub fn new(inner: Arc<dyn CredentialStore>, owner: &Owner) -> Self {
        Self {
            inner,
            prefix: prefix(owner),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

/// `user:<len>:<issuer>:<len>:<subject>:`; the anonymous owner has no part of its own.
fn prefix(owner: &Owner) -> String {
    match owner {
        Owner::Anonymous => "anonymous:".to_owned(),
        Owner::User { issuer, subject } => format!(
            "user:{}:{issuer}:{}:{subject}:",
            issuer.len(),
            subject.len()
        ),
    }
}

impl CredentialStore for UserStore {
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>> {
        Box::pin(async move { self.inner.read(&self.key(key)).await })
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move { self.inner.write(&self.key(key), credentials, lease).await })
    }

    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move { self.inner.remove(&self.key(key)).await })
    }

    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { self.inner.try_lease(&self.key(key), ttl).await })
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        self.inner.renew(lease, ttl)
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        self.inner.release(lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_users_share_a_prefix_whatever_their_names_hold() {
        let a = prefix(&Owner::user("https://i", "a:b"));
        let b = prefix(&Owner::user("https://i:a", "b"));
        assert_ne!(a, b);
        assert!(!a.starts_with(&b) && !b.starts_with(&a));
        assert_ne!(prefix(&Owner::Anonymous), prefix(&Owner::user("", "")));
    }

    #[tokio::test]
    async fn a_users_grant_is_theirs_alone() {
        let shared: Arc<dyn CredentialStore> = Arc::new(actix_mcp::auth::MemoryStore::default());
        let alice = UserStore::new(shared.clone(), &Owner::user("https://i", "alice"));
        let bob = UserStore::new(shared.clone(), &Owner::user("https://i", "bob"));
        let credentials: Credentials = serde_json::from_value(serde_json::json!({
            "client_id": "c", "access_token": "alice's"}))
        .expect("credentials");
        alice.write("k", &credentials, None).await.expect("written");
        assert!(alice.read("k").await.expect("read").is_some());
        assert!(bob.read("k").await.expect("read").is_none());
        assert!(shared.read("k").await.expect("read").is_none());
    }
}
