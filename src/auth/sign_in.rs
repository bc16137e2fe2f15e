//! One sign-in for every process and replica sharing the credential store: the glue around
//! [`SignInCoordinator`] (`sign_in_states.rs` has the rules). The holder of the key's sign-in
//! lease runs the sign-in through the user agent, renewing the lease while the person takes
//! their time; the others wait, bounded, and adopt the token it stores. A store that cannot
//! coordinate (unwritable, unreachable) costs the coordination, not the sign-in: it runs here,
//! as it would with no store shared.

use url::Url;

use super::{
    failure,
    fetch::Fetcher,
    sign_in_states::{Action, Outcome, SignIn, SignInCoordinator, RENEW_EVERY, SIGN_IN_LEASE_TTL},
    store::{now_ms, Lease, StoreError},
    vocabulary::{store_key, Found},
    AuthErrorKind, OAuth,
};
use crate::error::Error;

/// What the sign-in is needed for.
pub(super) struct Need {
    /// The access token the server refused (or none held): another one in the store means
    /// someone signed in.
    pub refused: Option<String>,
    /// The scopes a step-up asks for (empty otherwise): another's token is adopted only with
    /// them all.
    pub wanted: Vec<String>,
}

/// How a coordinated sign-in went, with what the glue keeps aside.
struct Ended {
    outcome: Outcome,
    /// This process's sign-in, if it ran one.
    signed_in: Option<Result<(), Error>>,
}

impl OAuth {
    /// The sign-in with a person, once for every process sharing the store: here, or adopted
    /// from the process that held the sign-in lease.
    pub(super) async fn coordinated_sign_in(
        &self,
        fetcher: &Fetcher,
        server: &Url,
        found: Found,
        scopes: Vec<String>,
        need: Need,
    ) -> Result<(), Error> {
        let (metadata, resource) = (found.metadata.clone(), found.resource.clone());
        let key = store_key(&found.issuer, &found.resource);
        let bound = SignInCoordinator::wait_bound(self.inner.config.sign_in_timeout);
        let (coordinator, action) =
            SignInCoordinator::start(need.refused, need.wanted, now_ms(), bound);
        let sign_in = self.authorize_with_agent(fetcher, server, found, scopes);
        let mut sign_in = std::pin::pin!(sign_in);
        let mut lease = None;
        let ended = self
            .coordinate_sign_in(&key, coordinator, action, sign_in.as_mut(), &mut lease)
            .await;
        let ended = match ended {
            Ok(ended) => ended,
            // Only taking the lease and reading fail this way, both before any sign-in began.
            Err(error) => {
                if let Some(lease) = &lease {
                    // Give it back, if the store lets us.
                    let _ = self.inner.config.store.release(lease).await;
                }
                tracing::warn!(
                    %error,
                    "the credential store cannot coordinate the sign-in with other processes; \
                     signing in here"
                );
                return sign_in.await;
            }
        };
        match ended.outcome {
            Outcome::Adopted(credentials) => {
                tracing::info!(%resource, "adopted the token another process signed in for");
                self.hold_grant(&metadata, &resource, *credentials);
                Ok(())
            }
            Outcome::SignedIn | Outcome::SignInFailed => ended.signed_in.unwrap_or_else(|| {
                Err(failure(
                    AuthErrorKind::Token,
                    "the sign-in coordination failed (see the log for why)".into(),
                ))
            }),
            Outcome::TimedOut => Err(failure(
                AuthErrorKind::SignInTimedOut,
                format!(
                    "another process has been signing in to {resource} for {} s and stored no \
                     token (its sign-in window may still be open)",
                    bound.as_secs()
                ),
            )),
        }
    }

    /// Does what the coordinator asks until it is done; `sign_in` runs if it asks for it, and
    /// `lease` is the one held meanwhile.
    async fn coordinate_sign_in(
        &self,
        key: &str,
        mut coordinator: SignInCoordinator,
        mut action: Action,
        mut sign_in: std::pin::Pin<&mut impl std::future::Future<Output = Result<(), Error>>>,
        lease: &mut Option<Lease>,
    ) -> Result<Ended, StoreError> {
        let store = &self.inner.config.store;
        let lease_key = format!("sign-in {key}");
        let mut signed_in = None;
        let mut told = false;
        loop {
            action = match action {
                Action::Done(outcome) => return Ok(Ended { outcome, signed_in }),
                Action::TryLease => {
                    *lease = store.try_lease(&lease_key, SIGN_IN_LEASE_TTL).await?;
                    coordinator.leased(lease.clone())
                }
                Action::Read => {
                    let stored = store.read(key).await?.map(|s| s.credentials);
                    coordinator.read(stored, now_ms())
                }
                Action::Sleep(pause) => {
                    if !std::mem::replace(&mut told, true) {
                        tracing::info!("another process is signing in; waiting for its token");
                        self.inner.agent.waiting_for_another();
                    }
                    tokio::time::sleep(pause).await;
                    coordinator.woke()
                }
                Action::Work(SignIn) => {
                    let result = self.renewing(&mut coordinator, sign_in.as_mut()).await;
                    let succeeded = result.is_ok();
                    signed_in = Some(result);
                    coordinator.signed_in(succeeded)
                }
                Action::Release(given) => {
                    if let Err(e) = store.release(&given).await {
                        tracing::warn!(error = %e, "cannot release the sign-in lease");
                    }
                    *lease = None;
                    coordinator.released()
                }
            };
        }
    }

    /// Runs `sign_in` to its end, renewing the coordinator's lease every [`RENEW_EVERY`].
    async fn renewing(
        &self,
        coordinator: &mut SignInCoordinator,
        mut sign_in: std::pin::Pin<&mut impl std::future::Future<Output = Result<(), Error>>>,
    ) -> Result<(), Error> {
        let store = &self.inner.config.store;
        loop {
            tokio::select! {
                result = &mut sign_in => return result,
                () = tokio::time::sleep(RENEW_EVERY) => {}
            }
            let Some(lease) = coordinator.renewal() else {
                continue;
            };
            match store.renew(&lease, SIGN_IN_LEASE_TTL).await {
                Ok(renewed) => {
                    if coordinator.renewed(renewed) {
                        tracing::warn!(
                            "the sign-in lease was taken over (this process stalled past its \
                             deadline): another process may ask for a sign-in too"
                        );
                    }
                }
                // The lease may still hold; the next renewal tries again.
                Err(e) => tracing::warn!(error = %e, "cannot renew the sign-in lease"),
            }
        }
    }
}
