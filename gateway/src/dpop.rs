//! DPoP (RFC 9449) at the resource: a sender-constrained access token (its `cnf.jkt` claim) is
//! taken only with a proof of possession (the `DPoP` header), a JWT signed by the key the token is
//! bound to, for this request (`htm`, `htu`), this token (`ath`), recent (`iat`), and never
//! seen before (its `jti`, kept for as long as its `iat` stays recent).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use jsonwebtoken::{jwk::ThumbprintHash, Algorithm, DecodingKey, Validation};
use serde_json::Value;
use sha2::Digest as _;

/// The signature algorithms taken, of tokens and proofs: asymmetric ones only (a shared
/// secret has no JWKS).
pub const ALGORITHMS: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::EdDSA,
];

/// How far a proof's `iat` may be from now, either way, in seconds.
const IAT_WINDOW: i64 = 60;

/// The proofs taken, by `jti`, until their `iat` is no longer recent: a proof sent again
/// (replayed by whoever saw it) is refused.
#[derive(Default)]
pub struct SeenProofs {
    /// `jti` → the time after which its proof would be refused as not recent anyway.
    seen: std::collections::HashMap<String, i64>,
    /// When the old ones were last forgotten (once a second at most, not once a request).
    swept: i64,
}

impl SeenProofs {
    /// Whether this is the first use of proof `jti`, made at `iat`; `now` in seconds since
    /// the epoch. Proofs too old to be taken again are forgotten on the way.
    pub fn first_use(&mut self, jti: &str, iat: i64, now: i64) -> bool {
        if now > self.swept {
            self.seen.retain(|_, until| *until >= now);
            self.swept = now;
        }
        if self.seen.contains_key(jti) {
            return false;
        }
        self.seen.insert(jti.to_owned(), iat + IAT_WINDOW);
        true
    }
}

/// A proof that passed [`check`]: its `jti` and `iat`, for [`SeenProofs`].
pub struct Proof {
    pub jti: String,
    pub iat: i64,
}

/// Checks `proof` for a request `method` to `url` carrying `token`, bound to the key whose
/// thumbprint is `jkt`; `now` in seconds since the epoch. What is wrong, if anything.
pub fn check(
    proof: &str,
    method: &str,
    url: &str,
    token: &str,
    jkt: &str,
    now: i64,
) -> Result<Proof, String> {
    let head = jsonwebtoken::decode_header(proof).map_err(|_| "the DPoP proof is not a JWT")?;
    if head.typ.as_deref() != Some("dpop+jwt") {
        return Err("the DPoP proof is not typed dpop+jwt".into());
    }
    if !ALGORITHMS.contains(&head.alg) {
        return Err("the DPoP proof's algorithm is not taken".into());
    }
    let jwk = head.jwk.ok_or("the DPoP proof carries no key")?;
    let thumbprint = jwk
        .thumbprint(ThumbprintHash::SHA256)
        .map_err(|_| "the DPoP proof's key has no thumbprint")?;
    if thumbprint != jkt {
        return Err("the DPoP proof is signed by another key than the token's".into());
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|_| "the DPoP proof's key is not usable")?;
    let mut validation = Validation::new(head.alg);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<Value>(proof, &key, &validation)
        .map_err(|e| format!("the DPoP proof: {e}"))?
        .claims;
    if claims["htm"].as_str() != Some(method) {
        return Err("the DPoP proof is for another method".into());
    }
    let htu = claims["htu"].as_str().unwrap_or_default();
    let without_query = |u: &str| {
        u.split(['?', '#'])
            .next()
            .unwrap_or(u)
            .trim_end_matches('/')
            .to_owned()
    };
    if without_query(htu) != without_query(url) {
        return Err("the DPoP proof is for another URL".into());
    }
    let iat = claims["iat"].as_i64().ok_or("the DPoP proof has no iat")?;
    if (iat - now).abs() > IAT_WINDOW {
        return Err("the DPoP proof is not recent".into());
    }
    let ath = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes()));
    if claims["ath"].as_str() != Some(ath.as_str()) {
        return Err("the DPoP proof is for another token".into());
    }
    let jti = claims["jti"].as_str().ok_or("the DPoP proof has no jti")?;
    Ok(Proof {
        jti: jti.to_owned(),
        iat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_that_is_not_one_is_refused_saying_why() {
        let now = 1_800_000_000;
        let why = check("x.y.z", "POST", "http://h/mcp", "t", "jkt", now)
            .err()
            .unwrap();
        assert!(why.contains("not a JWT"), "{why}");
        // A proof without the DPoP type (here an HS256 JWT) is refused before anything else.
        let hs = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &serde_json::json!({"htm": "POST"}),
            &jsonwebtoken::EncodingKey::from_secret(b"s").unwrap(),
        )
        .unwrap();
        let why = check(&hs, "POST", "http://h/mcp", "t", "jkt", now)
            .err()
            .unwrap();
        assert!(why.contains("dpop+jwt"), "{why}");
    }

    #[test]
    fn a_proof_is_taken_once_and_forgotten_only_when_it_is_too_old_anyway() {
        let mut seen = SeenProofs::default();
        let iat = 1_800_000_000;
        assert!(seen.first_use("a", iat, iat));
        assert!(!seen.first_use("a", iat, iat + 1), "replayed");
        assert!(seen.first_use("b", iat, iat + 1), "another proof");
        assert!(
            !seen.first_use("a", iat, iat + IAT_WINDOW),
            "still recent: still refused"
        );
        // Past its window `check` refuses it as not recent; here it is forgotten.
        assert!(seen.first_use("a", iat, iat + IAT_WINDOW + 1));
        assert_eq!(seen.seen.len(), 1, "b was forgotten too");
    }
}
