//! A sign-in begun on one replica of a web service and completed on another: what completing
//! it needs (the PKCE verifier, the client, the issuer and resource) travels sealed in the
//! authorization request's `state`, instead of staying in the memory of the replica that began
//! it. Sealed with XChaCha20-Poly1305 under a key every replica has, its owner (the service's
//! user) bound as associated data: a `state` begun for one user does not open for another, and
//! one changed in transit does not open at all. It expires with the sign-in timeout.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use chacha20poly1305::{
    aead::{Aead, Generate, KeyInit, Payload},
    XChaCha20Poly1305, XNonce,
};
use serde::{Deserialize, Serialize};

use super::{failure, AuthErrorKind, Credentials, TokenAuthMethod};
use crate::error::Error;

const PREFIX: &str = "s1.";
const NONCE_BYTES: usize = 24;

/// What a replica needs to complete a sign-in it did not begin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct SealedSignIn {
    /// The MCP server signed in to.
    pub server: String,
    pub issuer: String,
    pub resource: String,
    /// The PKCE code verifier.
    pub verifier: String,
    pub scopes: Vec<String>,
    /// The client's identity at the issuer (no token).
    pub client_id: String,
    pub client_secret: Option<String>,
    pub auth_method: TokenAuthMethod,
    pub registered: bool,
    /// Unix seconds after which it is refused.
    pub expires_at: u64,
}

impl SealedSignIn {
    /// The client identity it carries, as credentials without a token.
    pub fn client(&self) -> Credentials {
        Credentials {
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            auth_method: self.auth_method,
            registered: self.registered,
            ..Credentials::default()
        }
    }
}

/// Seals and opens sign-ins for one owner, under the service's key.
#[derive(Clone)]
pub(super) struct Sealer {
    cipher: XChaCha20Poly1305,
    owner: String,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

fn refused(why: &str) -> Error {
    failure(
        AuthErrorKind::ResponseMismatch,
        format!("the authorization response's state is not a sign-in of ours: {why}"),
    )
}

impl Sealer {
    pub fn new(key: [u8; 32], owner: String) -> Self {
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
            owner,
        }
    }

    fn aad(&self) -> String {
        format!("actix-mcp sign-in for {}", self.owner)
    }

    /// `sign_in` as a `state` value.
    pub fn seal(&self, sign_in: &SealedSignIn) -> Result<String, Error> {
        let plain = serde_json::to_vec(sign_in).map_err(|e| {
            failure(
                AuthErrorKind::Token,
                format!("cannot seal the sign-in: {e}"),
            )
        })?;
        let nonce = XNonce::generate();
        let aad = self.aad();
        let payload = Payload {
            msg: &plain,
            aad: aad.as_bytes(),
        };
        let sealed = self
            .cipher
            .encrypt(&nonce, payload)
            .map_err(|_| failure(AuthErrorKind::Token, "cannot seal the sign-in".into()))?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The sign-in `state` seals, if it is one of this owner's, intact, and unexpired at `now`.
    pub fn open(&self, state: &str, now: u64) -> Result<SealedSignIn, Error> {
        let encoded = state
            .strip_prefix(PREFIX)
            .ok_or_else(|| refused("not sealed"))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| refused("not base64url"))?;
        if bytes.len() < NONCE_BYTES {
            return Err(refused("too short"));
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let nonce = XNonce::try_from(nonce).map_err(|_| refused("bad nonce"))?;
        let aad = self.aad();
        let payload = Payload {
            msg: sealed,
            aad: aad.as_bytes(),
        };
        let plain = self
            .cipher
            .decrypt(&nonce, payload)
            .map_err(|_| refused("sealed for another user, with another key, or altered"))?;
        let sign_in: SealedSignIn =
            serde_json::from_slice(&plain).map_err(|_| refused("unreadable"))?;
        if sign_in.expires_at <= now {
            return Err(failure(
                AuthErrorKind::SignInTimedOut,
                "the sign-in expired before it was completed; sign in again".into(),
            ));
        }
        Ok(sign_in)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign_in() -> SealedSignIn {
        SealedSignIn {
            server: "https://mcp.example.com/mcp".into(),
            issuer: "https://as.example.com".into(),
            resource: "https://mcp.example.com/mcp".into(),
            verifier: "v".repeat(43),
            scopes: vec!["mcp".into()],
            client_id: "c".into(),
            client_secret: Some("s".into()),
            auth_method: TokenAuthMethod::ClientSecretPost,
            registered: true,
            expires_at: 1_000,
        }
    }

    fn kind(result: Result<SealedSignIn, Error>) -> AuthErrorKind {
        match result {
            Err(Error::Unauthorized { kind, .. }) => kind,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_sealed_sign_in_opens_for_its_owner_on_any_replica_until_it_expires() {
        let (on_a, on_b) = (
            Sealer::new([1; 32], "alice".into()),
            Sealer::new([1; 32], "alice".into()),
        );
        let state = on_a.seal(&sign_in()).unwrap();
        assert!(
            !state.contains("vvvv") && !state.contains("as.example"),
            "{state}"
        );
        assert_eq!(on_b.open(&state, 999).unwrap(), sign_in());
        assert_eq!(
            kind(on_b.open(&state, 1_000)),
            AuthErrorKind::SignInTimedOut
        );
    }

    #[test]
    fn another_owner_another_key_or_an_altered_state_is_refused() {
        let state = Sealer::new([1; 32], "alice".into())
            .seal(&sign_in())
            .unwrap();
        let bob = Sealer::new([1; 32], "bob".into());
        assert_eq!(kind(bob.open(&state, 0)), AuthErrorKind::ResponseMismatch);
        let other_key = Sealer::new([2; 32], "alice".into());
        assert_eq!(
            kind(other_key.open(&state, 0)),
            AuthErrorKind::ResponseMismatch
        );
        let alice = Sealer::new([1; 32], "alice".into());
        let mut altered = state.into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert_eq!(
            kind(alice.open(&altered, 0)),
            AuthErrorKind::ResponseMismatch
        );
        for junk in ["", "s1.", "s1.!!", "random-state"] {
            assert_eq!(
                kind(alice.open(junk, 0)),
                AuthErrorKind::ResponseMismatch,
                "{junk}"
            );
        }
    }
}
