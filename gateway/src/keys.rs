//! The issuer's signing keys (its JWKS), fetched once for every request that waits on them.
//!
//! A token naming a key id the gateway does not hold may mean the issuer rotated its keys, or
//! that someone made the id up. Either way the JWKS is fetched again at most once per
//! [`REFETCH_AT_MOST_EVERY`], whatever the fetch gave (a failure is remembered as long as a
//! success), and the requests that arrive while one fetch runs wait for it instead of starting
//! their own. [`Refetches`] decides, with time passed in; [`Keys`] does the I/O.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use jsonwebtoken::{jwk::JwkSet, DecodingKey};

/// How often an unknown key id may send the gateway to fetch the JWKS again.
pub const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(10);

/// When the JWKS was last fetched, and how many fetches were made: the plain rule of when to
/// fetch again.
#[derive(Debug)]
pub struct Refetches {
    last: Option<Instant>,
    /// Fetches made so far: a request that saw `n` and finds more after waiting its turn uses
    /// what the other fetch brought.
    made: u64,
}

/// What a request with an unknown key id does.
#[derive(Debug, PartialEq, Eq)]
pub enum Refetch {
    /// Fetch the JWKS now (this request's turn).
    Fetch,
    /// Another fetch ended while it waited: look again in what it brought.
    LookAgain,
    /// A fetch was made too recently: the key is unknown.
    TooSoon,
}

impl Refetches {
    /// The keys were fetched at `now` (at startup).
    pub fn fetched_at(now: Instant) -> Self {
        Self {
            last: Some(now),
            made: 1,
        }
    }

    /// How many fetches were made: what a request remembers before it waits its turn.
    pub fn made(&self) -> u64 {
        self.made
    }

    /// A request that saw `seen` fetches before waiting its turn, at `now`.
    pub fn decide(&self, seen: u64, now: Instant) -> Refetch {
        if self.made != seen {
            return Refetch::LookAgain;
        }
        match self.last {
            Some(last) if now.saturating_duration_since(last) < REFETCH_AT_MOST_EVERY => {
                Refetch::TooSoon
            }
            _ => Refetch::Fetch,
        }
    }

    /// A fetch ended at `now`, whether it worked or not.
    pub fn fetched(&mut self, now: Instant) {
        self.last = Some(now);
        self.made += 1;
    }
}

/// The issuer's keys and the rule for fetching them again.
pub struct Keys {
    jwks_uri: String,
    http: reqwest::Client,
    set: Mutex<JwkSet>,
    /// Held by the one request fetching; the others wait on it, then look again.
    turn: tokio::sync::Mutex<Refetches>,
    /// How many fetches were made, read without waiting for the turn.
    made: AtomicU64,
}

impl Keys {
    /// The keys at `jwks_uri`, fetched now.
    pub async fn fetch(http: reqwest::Client, jwks_uri: String) -> Result<Self, String> {
        let set = fetch_set(&http, &jwks_uri).await?;
        Ok(Self::with(http, jwks_uri, set))
    }

    /// Keys already fetched (`set`).
    pub fn with(http: reqwest::Client, jwks_uri: String, set: JwkSet) -> Self {
        Self {
            jwks_uri,
            http,
            set: Mutex::new(set),
            turn: tokio::sync::Mutex::new(Refetches::fetched_at(Instant::now())),
            made: AtomicU64::new(1),
        }
    }

    /// The key named `kid`, fetching the JWKS again if the rule allows it.
    pub async fn find(&self, kid: &str) -> Option<DecodingKey> {
        if let Some(key) = self.held(kid) {
            return Some(key);
        }
        let seen = self.made.load(Ordering::Acquire);
        let mut turn = self.turn.lock().await;
        match turn.decide(seen, Instant::now()) {
            Refetch::LookAgain | Refetch::TooSoon => return self.held(kid),
            Refetch::Fetch => {}
        }
        match fetch_set(&self.http, &self.jwks_uri).await {
            Ok(set) => *self.set.lock().unwrap_or_else(PoisonError::into_inner) = set,
            Err(e) => tracing::warn!(%e, "the issuer's keys could not be fetched again"),
        }
        turn.fetched(Instant::now());
        self.made.store(turn.made(), Ordering::Release);
        drop(turn);
        self.held(kid)
    }

    fn held(&self, kid: &str) -> Option<DecodingKey> {
        let set = self.set.lock().unwrap_or_else(PoisonError::into_inner);
        DecodingKey::from_jwk(set.find(kid)?).ok()
    }
}

async fn fetch_set(http: &reqwest::Client, jwks_uri: &str) -> Result<JwkSet, String> {
    let response = http.get(jwks_uri).send().await;
    let response = response.map_err(|e| format!("{jwks_uri}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{jwks_uri}: {}", response.status()));
    }
    let set = response.json::<JwkSet>().await;
    set.map_err(|e| format!("{jwks_uri}: not a JWKS: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_fetch_waits_out_the_interval_whatever_the_first_gave() {
        let start = Instant::now();
        let mut fetches = Refetches::fetched_at(start);
        let seen = fetches.made();
        assert_eq!(fetches.decide(seen, start), Refetch::TooSoon);
        let later = start + REFETCH_AT_MOST_EVERY;
        assert_eq!(fetches.decide(seen, later), Refetch::Fetch);
        // The fetch failed or worked alike: the next waits out the interval again.
        fetches.fetched(later);
        let seen = fetches.made();
        let soon = later + REFETCH_AT_MOST_EVERY / 2;
        assert_eq!(fetches.decide(seen, soon), Refetch::TooSoon);
        // Rotation is picked up once the interval has passed.
        let after = later + REFETCH_AT_MOST_EVERY;
        assert_eq!(fetches.decide(seen, after), Refetch::Fetch);
    }

    #[test]
    fn requests_that_waited_for_a_fetch_use_it_instead_of_fetching() {
        let start = Instant::now();
        let mut fetches = Refetches::fetched_at(start);
        let later = start + REFETCH_AT_MOST_EVERY * 2;
        // Forty requests saw the same count; the first fetches, the others look again.
        let seen = fetches.made();
        assert_eq!(fetches.decide(seen, later), Refetch::Fetch);
        fetches.fetched(later);
        for _ in 0..39 {
            assert_eq!(fetches.decide(seen, later), Refetch::LookAgain);
        }
    }
}
