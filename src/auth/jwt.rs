//! ES256 JSON Web Tokens, for the grants that need one: `private_key_jwt` client assertions (RFC
//! 7523) and DPoP proofs (RFC 9449). The key and the signature are the `p256` crate's; what is
//! here is the compact serialization around them.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use p256::{
    ecdsa::{signature::Signer, Signature, SigningKey},
    pkcs8::DecodePrivateKey,
};
use serde::Serialize;

use super::AuthErrorKind;
use crate::error::Error;

/// A P-256 public key as a JSON Web Key (RFC 7517, RFC 7518 §6.2.1): no private part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Jwk {
    kty: &'static str,
    crv: &'static str,
    x: String,
    y: String,
}

/// The JOSE header: `typ`, `alg` (always ES256), and the public key for a DPoP proof.
#[derive(Serialize)]
struct Header<'a> {
    typ: &'static str,
    alg: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    jwk: Option<&'a Jwk>,
}

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

    /// The private scalar, base64url: how a DPoP key is kept with the tokens bound to it.
    pub fn to_secret(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.to_bytes())
    }

    /// A key kept by [`to_secret`](Self::to_secret); `None` if `secret` is not one.
    pub fn from_secret(secret: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(secret).ok()?;
        let key = SigningKey::from_slice(&bytes).ok()?;
        Some(Self { key })
    }

    /// The public key as a JWK.
    pub fn public_jwk(&self) -> Jwk {
        let point = self.key.verifying_key().to_encoded_point(false);
        let coordinate =
            |c: Option<&p256::FieldBytes>| c.map(|c| URL_SAFE_NO_PAD.encode(c)).unwrap_or_default();
        Jwk {
            kty: "EC",
            crv: "P-256",
            x: coordinate(point.x()),
            y: coordinate(point.y()),
        }
    }

    /// `header.claims.signature` (JWS compact serialization), with the header `typ` and, if
    /// given, the public key `jwk`.
    pub fn sign(
        &self,
        typ: &'static str,
        jwk: Option<&Jwk>,
        claims: &impl Serialize,
    ) -> Result<String, Error> {
        let header = Header {
            typ,
            alg: "ES256",
            jwk,
        };
        let signing_input = format!("{}.{}", encode(&header)?, encode(claims)?);
        let signature: Signature = self.key.sign(signing_input.as_bytes());
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        ))
    }
}

/// A JWT part: the JSON, base64url.
fn encode(part: &impl Serialize) -> Result<String, Error> {
    let json = serde_json::to_vec(part).map_err(|e| {
        super::failure(
            AuthErrorKind::Token,
            format!("a JWT that does not encode: {e}"),
        )
    })?;
    Ok(URL_SAFE_NO_PAD.encode(json))
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
    use serde_json::{json, Value};

    #[test]
    fn tokens_verify_with_the_public_key_and_carry_what_was_given() {
        let key = Es256Key::generate();
        let token = key
            .sign("dpop+jwt", Some(&key.public_jwk()), &json!({"htm": "POST"}))
            .unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["typ"], "dpop+jwt");
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
