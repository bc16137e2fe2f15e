//! ES256 JSON Web Tokens, for the grants that need one: `private_key_jwt` client assertions (RFC
//! 7523) and DPoP proofs (RFC 9449). The key and the signature are the `p256` crate's; what is
//! here is the compact serialization around them.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use p256::{
    ecdsa::{signature::Signer, Signature, SigningKey},
    pkcs8::DecodePrivateKey,
};
use serde_json::{json, Value};

use super::AuthErrorKind;
use crate::error::Error;

/// A P-256 signing key. Its `Debug` shows nothing of it.
#[derive(Clone)]
pub(crate) struct Es256Key {
    key: SigningKey,
}

impl std::fmt::Debug for Es256Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Es256Key(<redacted>)")
    }
}

impl Es256Key {
    /// A PKCS#8 PEM private key.
    pub fn from_pem(pem: &str) -> Result<Self, Error> {
        let key = SigningKey::from_pkcs8_pem(pem).map_err(|e| {
            super::failure(
                AuthErrorKind::NoClientIdentity,
                format!("the private key is not a PKCS#8 P-256 key: {e}"),
            )
        })?;
        Ok(Self { key })
    }

    /// A fresh key (DPoP: one per authorization).
    pub fn generate() -> Self {
        Self {
            key: SigningKey::random(&mut rand_core::OsRng),
        }
    }

    /// The public key as a JWK (no private part).
    pub fn public_jwk(&self) -> Value {
        let point = self.key.verifying_key().to_encoded_point(false);
        let coordinate =
            |c: Option<&p256::FieldBytes>| c.map(|c| URL_SAFE_NO_PAD.encode(c)).unwrap_or_default();
        json!({"kty": "EC", "crv": "P-256", "x": coordinate(point.x()), "y": coordinate(point.y())})
    }

    /// `header.claims.signature`, with `alg: ES256` added to the header.
    pub fn sign(&self, mut header: Value, claims: &Value) -> String {
        header["alg"] = json!("ES256");
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature: Signature = self.key.sign(signing_input.as_bytes());
        format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        )
    }
}

/// A unique token id.
pub(crate) fn jti() -> String {
    let mut bytes = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::{signature::Verifier, VerifyingKey};

    #[test]
    fn tokens_verify_with_the_public_key_and_carry_what_was_given() {
        let key = Es256Key::generate();
        let token = key.sign(
            json!({"typ": "dpop+jwt", "jwk": key.public_jwk()}),
            &json!({"htm": "POST"}),
        );
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap()).unwrap();
        let verifying = VerifyingKey::from(&key.key);
        assert!(verifying
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .is_ok());
        assert_ne!(jti(), jti());
        assert_eq!(format!("{key:?}"), "Es256Key(<redacted>)");
    }
}
