//! One refresh per expiry across every process and replica sharing the credential store.
//!
//! OAuth 2.1 rotates refresh tokens, and a provider that sees one used twice takes it for a
//! replay and revokes the grant. Within a process the flow's single flight already makes one
//! refresh; across processes the store's refresh lease does:
//!
//! 1. take the key's lease (`try_lease`); if another holds it, wait: read the store, bounded,
//!    until its new token appears (adopted, no refresh) or the lease is free again (its holder
//!    died: at most one lease deadline lost);
//! 2. holding it, read the store again ([`decide`]): a token another process wrote meanwhile is
//!    adopted; else the refresh token *just read* is sent (never one held from before the last
//!    write);
//! 3. write the answer under the lease (fenced: refused if the lease was taken over), release.
//!
//! A refresh token the provider refuses is spent: it is removed from the store under the lease,
//! so no other process sends it again, and the loss is reported once; one sign-in follows.

use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use oauth2::RefreshToken;

use super::{
    discovery::AuthorizationServerMetadata,
    failure,
    fetch::Fetcher,
    flow::{apply_answer, needs_refresh, store_key},
    grants::{now_secs, TokenAnswer},
    store::{Lease, StoreError},
    web, AuthErrorKind, Credentials, OAuth,
};
use crate::error::Error;

/// How long a refresh lease lasts: a holder that dies costs the others at most this.
pub(super) const LEASE_TTL: Duration = Duration::from_secs(15);

/// The token request's own bound, well inside the lease: a live holder writes before its lease
/// can be taken over.
const REFRESH_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a process waits for another's refresh: a lease, and a margin.
const WAIT_BOUND: Duration = Duration::from_secs(25);

/// The grant to refresh, as the flow holds it.
pub(super) struct Held {
    pub metadata: AuthorizationServerMetadata,
    pub issuer: String,
    pub resource: String,
    pub credentials: Credentials,
}

/// What the store's entry, read under the lease, calls for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Another process refreshed meanwhile: its token is used, nothing is sent.
    Adopt(Credentials),
    /// Refresh these credentials with their refresh token (the one just read).
    Refresh(Credentials),
    /// Nothing to refresh with: a sign-in follows.
    SignIn,
}

/// Whether `stored` holds another token than `held`, one that needs no refresh at `now`.
pub(super) fn refreshed_by_another(held: &Credentials, stored: &Credentials, now: u64) -> bool {
    let other = stored.access_token.is_some() && stored.access_token != held.access_token;
    let live = stored.expires_at.is_none_or(|at| at > now);
    other && live && !needs_refresh(stored, now)
}

/// The decision under the lease, from what the store holds now (`None`: nothing stored).
pub(super) fn decide(held: &Credentials, stored: Option<&Credentials>, now: u64) -> Decision {
    let latest = match stored {
        Some(stored) if refreshed_by_another(held, stored, now) => {
            return Decision::Adopt(stored.clone())
        }
        // The store's refresh token is the latest written: the one to send.
        Some(stored) => stored,
        // Nothing stored (a store that lost it): what is held is all there is.
        None => held,
    };
    match latest.refresh_token {
        Some(_) => Decision::Refresh(latest.clone()),
        None => Decision::SignIn,
    }
}

/// How a refresh request ended.
enum Exchange {
    Granted(Credentials),
    /// The provider refused the refresh token.
    Refused(String),
}

fn store_failure(error: StoreError) -> Error {
    failure(AuthErrorKind::Store, error.to_string())
}

impl OAuth {
    /// Refreshes `held` once for every process sharing the store. `Ok(true)`: a new token is
    /// held (refreshed here or by another process); `Ok(false)`: nothing to refresh with, or
    /// the refresh token was refused (a sign-in follows).
    pub(super) async fn coordinated_refresh(&self, held: Held) -> Result<bool, Error> {
        let store = self.inner.config.store.clone();
        let key = store_key(&held.issuer, &held.resource);
        let started = Instant::now();
        let mut pauses = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_millis(500))
            .without_max_times()
            .build();
        loop {
            if let Some(lease) = store
                .try_lease(&key, LEASE_TTL)
                .await
                .map_err(store_failure)?
            {
                let outcome = self.refresh_under(&held, &key, &lease).await;
                if let Err(e) = store.release(&lease).await {
                    tracing::warn!(error = %e, "cannot release the refresh lease");
                }
                return outcome;
            }
            // Another process is refreshing: its token, once written, is ours.
            if let Some(stored) = store.read(&key).await.map_err(store_failure)? {
                if refreshed_by_another(&held.credentials, &stored.credentials, now_secs()) {
                    self.hold(&held, stored.credentials);
                    return Ok(true);
                }
            }
            if started.elapsed() >= WAIT_BOUND {
                return Err(failure(
                    AuthErrorKind::RefreshWaitTimedOut,
                    format!(
                        "another process held the refresh lease of {} and wrote no new token \
                         within {} s",
                        held.resource,
                        WAIT_BOUND.as_secs()
                    ),
                ));
            }
            let pause = pauses.next().unwrap_or(Duration::from_millis(500));
            tokio::time::sleep(pause).await;
        }
    }

    /// Step 2 and 3, holding `lease`.
    async fn refresh_under(&self, held: &Held, key: &str, lease: &Lease) -> Result<bool, Error> {
        let store = &self.inner.config.store;
        let stored = store.read(key).await.map_err(store_failure)?;
        let stored = stored.map(|s| s.credentials);
        let base = match decide(&held.credentials, stored.as_ref(), now_secs()) {
            Decision::Adopt(credentials) => {
                self.hold(held, credentials);
                return Ok(true);
            }
            Decision::SignIn => {
                self.forget_refresh_token();
                return Ok(false);
            }
            Decision::Refresh(base) => base,
        };
        match self
            .exchange_refresh(&held.metadata, &held.resource, &base)
            .await?
        {
            Exchange::Granted(updated) => {
                self.keep_under(&held.metadata, &held.resource, updated, lease)
                    .await;
                Ok(true)
            }
            Exchange::Refused(why) => {
                tracing::warn!(
                    resource = %held.resource,
                    "the stored refresh token was refused ({why}); most likely another process \
                     used it and ended before storing its successor. Signing in again"
                );
                // Spent: removed from the store, so that no process sends it again.
                let spent = Credentials {
                    access_token: None,
                    refresh_token: None,
                    expires_at: None,
                    ..base
                };
                if let Err(e) = store.write(key, &spent, Some(lease)).await {
                    tracing::warn!(error = %e, "cannot mark the refresh token spent");
                }
                self.forget_refresh_token();
                Ok(false)
            }
        }
    }

    /// One refresh request with `base`'s refresh token.
    async fn exchange_refresh(
        &self,
        metadata: &AuthorizationServerMetadata,
        resource: &str,
        base: &Credentials,
    ) -> Result<Exchange, Error> {
        let Some(refresh_token) = base.refresh_token.clone() else {
            return Ok(Exchange::Refused("no refresh token".into()));
        };
        let fetcher = Fetcher::new()?;
        let client = self.oauth2_client(metadata, base)?;
        let http = |request| self.execute_with_dpop(&fetcher, request);
        let refresh_token = RefreshToken::new(refresh_token);
        let request = client
            .exchange_refresh_token(&refresh_token)
            .add_extra_param("resource", resource.to_owned())
            .request_async(&http);
        let answer = tokio::time::timeout(REFRESH_REQUEST_TIMEOUT, request)
            .await
            .map_err(|_| {
                failure(
                    AuthErrorKind::Token,
                    format!(
                        "the token endpoint did not answer the refresh within {} s",
                        REFRESH_REQUEST_TIMEOUT.as_secs()
                    ),
                )
            })?;
        match answer {
            Ok(token) => {
                let mut updated = base.clone();
                let answer = TokenAnswer::from(&token);
                apply_answer(&mut updated, answer, base.scopes.clone(), now_secs());
                Ok(Exchange::Granted(updated))
            }
            Err(e @ oauth2::RequestTokenError::ServerResponse(_)) => {
                Ok(Exchange::Refused(web::token_error(&e)))
            }
            Err(e) => Err(failure(AuthErrorKind::Token, web::token_error(&e))),
        }
    }

    /// Holds `credentials` as the grant's, without writing the store (another process did).
    fn hold(&self, held: &Held, credentials: Credentials) {
        self.hold_grant(&held.metadata, &held.resource, credentials);
    }

    fn forget_refresh_token(&self) {
        if let Some(grant) = self.state().granted.as_mut() {
            grant.credentials.refresh_token = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(access: &str, refresh: Option<&str>, expires_at: u64) -> Credentials {
        Credentials {
            access_token: Some(access.into()),
            refresh_token: refresh.map(Into::into),
            expires_at: Some(expires_at),
            issued_at: Some(expires_at.saturating_sub(3_600)),
            ..Credentials::default()
        }
    }

    #[test]
    fn a_token_another_process_wrote_is_adopted() {
        let held = credentials("a1", Some("r1"), 100);
        let stored = credentials("a2", Some("r2"), 10_000);
        assert_eq!(decide(&held, Some(&stored), 100), Decision::Adopt(stored));
    }

    #[test]
    fn the_refresh_token_sent_is_the_one_just_read() {
        let held = credentials("a1", Some("r1"), 100);
        // Another process refreshed long ago; its token is expiring too: refresh with its
        // refresh token, never the one held from before.
        let stored = credentials("a2", Some("r2"), 110);
        assert_eq!(
            decide(&held, Some(&stored), 100),
            Decision::Refresh(stored.clone())
        );
        assert_eq!(
            decide(&held, Some(&held.clone()), 100),
            Decision::Refresh(held.clone())
        );
    }

    #[test]
    fn a_spent_entry_means_a_sign_in_not_a_replay() {
        let held = credentials("a1", Some("r1"), 100);
        let spent = Credentials {
            access_token: None,
            refresh_token: None,
            ..held.clone()
        };
        assert_eq!(decide(&held, Some(&spent), 100), Decision::SignIn);
    }

    #[test]
    fn with_nothing_stored_the_held_token_is_refreshed() {
        let held = credentials("a1", Some("r1"), 100);
        assert_eq!(decide(&held, None, 100), Decision::Refresh(held.clone()));
    }
}
