//! `RedisStore` against Debian's `redis-server` on 127.0.0.1 (installed when missing): what a
//! service's replicas rely on. Entries are encrypted at rest and bound to their key; one lease
//! at a time across store instances, lost by itself when its holder dies; a write under a lease
//! taken over is refused; only its holder renews a lease; prefixes keep services apart.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

#[path = "support/redis.rs"]
mod redis_server;

use std::time::Duration;

use actix_mcp::auth::{CredentialStore, Credentials, RedisStore, StoreError};

const KEY: [u8; 32] = [7; 32];

fn token(text: &str) -> Credentials {
    Credentials {
        client_id: "c".into(),
        access_token: Some(text.into()),
        refresh_token: Some(format!("{text}-refresh")),
        ..Credentials::default()
    }
}

/// One replica's store of the service `svc:`.
async fn replica(redis: &redis_server::Redis) -> RedisStore {
    RedisStore::connect(&redis.url(), KEY, "svc:")
        .await
        .unwrap()
}

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).expect("a URL");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis")
}

#[tokio::test]
async fn entries_are_encrypted_at_rest_and_bound_to_their_key() {
    let redis = redis_server::start();
    let store = RedisStore::connect(&redis.url(), KEY, "svc:")
        .await
        .unwrap();
    assert_eq!(store.write("k", &token("s3cret"), None).await.unwrap(), 1);
    assert_eq!(store.write("k", &token("s3cret"), None).await.unwrap(), 2);
    let stored = store.read("k").await.unwrap().expect("kept");
    assert_eq!((stored.credentials, stored.version), (token("s3cret"), 2));

    let mut connection = raw(&redis.url()).await;
    let sealed: Vec<u8> = redis::cmd("HGET")
        .arg("svc:entry:k")
        .arg("c")
        .query_async(&mut connection)
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&sealed);
    assert!(
        !shown.contains("s3cret") && !shown.contains("client_id"),
        "{shown}"
    );

    // The same value under another key does not open: it is bound to its key's name.
    let _: () = redis::cmd("HSET")
        .arg("svc:entry:other")
        .arg("v")
        .arg(1)
        .arg("c")
        .arg(&sealed)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(matches!(
        store.read("other").await,
        Err(StoreError::Corrupt { .. })
    ));
    // A changed byte, or another service key: reported, never read as empty.
    let mut tampered = sealed.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let _: () = redis::cmd("HSET")
        .arg("svc:entry:k")
        .arg("c")
        .arg(&tampered)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(matches!(
        store.read("k").await,
        Err(StoreError::Corrupt { .. })
    ));
    let other_key = RedisStore::connect(&redis.url(), [8; 32], "svc:")
        .await
        .unwrap();
    store.write("k", &token("s3cret"), None).await.unwrap();
    assert!(matches!(
        other_key.read("k").await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn one_lease_at_a_time_across_replicas_and_fenced_writes() {
    let redis = redis_server::start();
    let (a, b) = (replica(&redis).await, replica(&redis).await);
    let ttl = Duration::from_secs(30);
    let first = a.try_lease("k", ttl).await.unwrap().expect("free");
    assert_eq!(b.try_lease("k", ttl).await.unwrap(), None, "held by a");
    // A stale holder's release leaves nothing; its own frees the key.
    a.release(&first).await.unwrap();
    let second = b.try_lease("k", ttl).await.unwrap().expect("released");
    assert!(second.fence > first.fence);
    assert!(matches!(
        a.write("k", &token("late"), Some(&first)).await,
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(a.read("k").await.unwrap(), None, "nothing written");
    b.write("k", &token("new"), Some(&second)).await.unwrap();
    a.release(&first).await.unwrap();
    assert_eq!(a.try_lease("k", ttl).await.unwrap(), None, "still b's");
}

/// A sign-in holds its lease for as long as the person takes, renewing it; a lease given back
/// or taken over is not renewed.
#[tokio::test]
async fn a_lease_is_renewed_by_its_holder_only() {
    let redis = redis_server::start();
    let (a, b) = (replica(&redis).await, replica(&redis).await);
    let first = a
        .try_lease("k", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free");
    let renewed = a
        .renew(&first, Duration::from_secs(600))
        .await
        .unwrap()
        .expect("held");
    assert_eq!(renewed.fence, first.fence);
    assert!(renewed.deadline_ms > first.deadline_ms);
    let mut raw = raw(&redis.url()).await;
    let left: i64 = redis::cmd("PTTL")
        .arg("svc:lease:k")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(left > 60_000, "extended at the server: {left} ms left");
    assert_eq!(
        b.try_lease("k", Duration::from_secs(5)).await.unwrap(),
        None
    );
    a.release(&renewed).await.unwrap();
    assert_eq!(
        a.renew(&renewed, Duration::from_secs(5)).await.unwrap(),
        None,
        "given back"
    );
    let taken = b
        .try_lease("k", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("released");
    assert_eq!(
        a.renew(&first, Duration::from_secs(5)).await.unwrap(),
        None,
        "taken over"
    );
    assert!(b
        .renew(&taken, Duration::from_secs(5))
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn a_dead_holders_lease_ends_by_itself() {
    let redis = redis_server::start();
    let store = RedisStore::connect(&redis.url(), KEY, "svc:")
        .await
        .unwrap();
    let short = Duration::from_millis(300);
    let dead = store.try_lease("k", short).await.unwrap().expect("free");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let next = loop {
        if let Some(lease) = store.try_lease("k", short).await.unwrap() {
            break lease;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(next.fence > dead.fence);
}

#[tokio::test]
async fn prefixes_keep_services_apart() {
    let redis = redis_server::start();
    let one = RedisStore::connect(&redis.url(), KEY, "one:")
        .await
        .unwrap();
    let two = RedisStore::connect(&redis.url(), KEY, "two:")
        .await
        .unwrap();
    one.write("k", &token("one"), None).await.unwrap();
    assert_eq!(two.read("k").await.unwrap(), None);
    assert!(two
        .try_lease("k", Duration::from_secs(5))
        .await
        .unwrap()
        .is_some());
    assert!(one
        .try_lease("k", Duration::from_secs(5))
        .await
        .unwrap()
        .is_some());
}
