//! One refresh per expiry across every process and replica sharing the credential store.
//!
//! OAuth 2.1 rotates refresh tokens, and a provider that sees one used twice takes it for a
//! replay and revokes the grant. Within a process the flow's single flight already makes one
//! refresh; across processes the store's refresh lease does:
//!
//! 1. take the key's lease (`try_lease`); if another holds it, wait: read the store, bounded,
//!    until its new token appears (adopted, no refresh) or the lease is free again (its holder
//!    died: at most one lease deadline lost);
//! 2. holding it, read the store again (`refresh_states::decide`): a token another process wrote meanwhile is
//!    adopted; else the refresh token *just read* is sent (never one held from before the last
//!    write);
//! 3. write the answer under the lease (fenced: refused if the lease was taken over), release.
//!
//! A refresh token the provider refuses is spent: it is removed from the store under the lease,
//! so no other process sends it again, and the loss is reported once; one sign-in follows.

use oauth2::RefreshToken;

use super::{
    discovery::AuthorizationServerMetadata,
    failure,
    fetch::Fetcher,
    refresh_states::{
        Action, Answer, Coordinator, Outcome, Work, LEASE_TTL, REFRESH_REQUEST_TIMEOUT, WAIT_BOUND,
    },
    store::{now_ms, Lease, StoreError},
    vocabulary::{apply_answer, now_secs, store_key, TokenAnswer},
    web, AuthErrorKind, Credentials, OAuth,
};
use crate::error::Error;

/// The grant to refresh, as the flow holds it.
pub(super) struct Held {
    pub metadata: AuthorizationServerMetadata,
    pub issuer: String,
    pub resource: String,
    pub credentials: Credentials,
}

impl OAuth {
    /// Refreshes `held` once for every process sharing the store. `Ok(true)`: a new token is
    /// held (refreshed here or by another process); `Ok(false)`: nothing to refresh with, or
    /// the refresh token was refused (a sign-in follows).
    pub(super) async fn coordinated_refresh(&self, held: Held) -> Result<bool, Error> {
        let key = store_key(&held.issuer, &held.resource);
        let mut lease = None;
        let outcome = self.coordinate(&held, &key, &mut lease).await;
        if let (Err(_), Some(lease)) = (&outcome, &lease) {
            // The store failed while the lease was held: give it back, if the store lets us.
            let _ = self.inner.config.store.release(lease).await;
        }
        match outcome? {
            Outcome::Adopted(credentials) | Outcome::Refreshed(credentials) => {
                self.hold_grant(&held.metadata, &held.resource, credentials);
                Ok(true)
            }
            Outcome::SignIn { lost } => {
                if lost {
                    tracing::warn!(
                        resource = %held.resource,
                        "the stored refresh token was refused: most likely another process used \
                         it and ended before storing its successor. It is removed from the \
                         store; signing in again"
                    );
                }
                self.forget_refresh_token();
                Ok(false)
            }
            Outcome::TimedOut => Err(failure(
                AuthErrorKind::RefreshWaitTimedOut,
                format!(
                    "another process held the refresh lease of {} and wrote no new token within \
                     {} s",
                    held.resource,
                    WAIT_BOUND.as_secs()
                ),
            )),
            Outcome::Failed => Err(failure(
                AuthErrorKind::Token,
                "the token refresh failed (see the log for why)".into(),
            )),
        }
    }

    /// Does what the [`Coordinator`] asks until it is done; `lease` is the one held meanwhile.
    async fn coordinate(
        &self,
        held: &Held,
        key: &str,
        lease: &mut Option<Lease>,
    ) -> Result<Outcome, StoreError> {
        let store = &self.inner.config.store;
        let (mut coordinator, mut action) = Coordinator::start(held.credentials.clone(), now_ms());
        loop {
            action = match action {
                Action::Done(outcome) => return Ok(outcome),
                Action::TryLease => {
                    *lease = store.try_lease(key, LEASE_TTL).await?;
                    coordinator.leased(lease.clone())
                }
                Action::Read => {
                    let stored = store.read(key).await?.map(|s| s.credentials);
                    coordinator.read(stored, now_ms())
                }
                Action::Sleep(pause) => {
                    tokio::time::sleep(pause).await;
                    coordinator.woke()
                }
                Action::Work(Work::Refresh(base)) => {
                    // Its refresh token may be bound to the DPoP key of the process that got it.
                    self.use_dpop_key_of(&base);
                    match self
                        .exchange_refresh(&held.metadata, &held.resource, &base)
                        .await
                    {
                        Ok(answer) => coordinator.refreshed(answer),
                        Err(e) => {
                            tracing::warn!(error = %e, "the token refresh failed");
                            coordinator.refresh_failed()
                        }
                    }
                }
                Action::Work(Work::Write(credentials)) => {
                    let metadata = &held.metadata;
                    self.store_grant(metadata, &held.resource, &credentials, lease.as_ref())
                        .await;
                    coordinator.written()
                }
                Action::Release(given) => {
                    if let Err(e) = store.release(&given).await {
                        tracing::warn!(error = %e, "cannot release the refresh lease");
                    }
                    *lease = None;
                    coordinator.released()
                }
            };
        }
    }

    /// One refresh request with `base`'s refresh token.
    async fn exchange_refresh(
        &self,
        metadata: &AuthorizationServerMetadata,
        resource: &str,
        base: &Credentials,
    ) -> Result<Answer, Error> {
        let Some(refresh_token) = base.refresh_token.clone() else {
            return Ok(Answer::Refused);
        };
        let fetcher = Fetcher::new(self.inner.config.request_timeout)?;
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
                    AuthErrorKind::TimedOut,
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
                Ok(Answer::Granted(Box::new(updated)))
            }
            Err(e @ oauth2::RequestTokenError::ServerResponse(_)) => {
                tracing::debug!(error = %web::token_error(&e), "the refresh token was refused");
                Ok(Answer::Refused)
            }
            Err(e) => Err(web::token_failure(&e)),
        }
    }

    fn forget_refresh_token(&self) {
        if let Some(grant) = self.state().granted.as_mut() {
            grant.credentials.refresh_token = None;
        }
    }
}
