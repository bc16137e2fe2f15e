//! DPoP (RFC 9449) at the resource: a sender-constrained access token (its `cnf.jkt` claim) is
//! taken only with a proof of possession (the `DPoP` header), a JWT signed by the key the token is
//! bound to, for this request (`htm`, `htu`), this token (`ath`), and recent (`iat`).

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

/// Checks `proof` for a request `method` to `url` carrying `token`, bound to the key whose
/// thumbprint is `jkt`; `now` in seconds since the epoch. What is wrong, if anything.
pub fn check(
    proof: &str,
    method: &str,
    url: &str,
    token: &str,
    jkt: &str,
    now: i64,
) -> Result<(), String> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_that_is_not_one_is_refused_saying_why() {
        let now = 1_800_000_000;
        let why = check("x.y.z", "POST", "http://h/mcp", "t", "jkt", now).unwrap_err();
        assert!(why.contains("not a JWT"), "{why}");
        // A proof without the DPoP type (here an HS256 JWT) is refused before anything else.
        let hs = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &serde_json::json!({"htm": "POST"}),
            &jsonwebtoken::EncodingKey::from_secret(b"s").unwrap(),
        )
        .unwrap();
        let why = check(&hs, "POST", "http://h/mcp", "t", "jkt", now).unwrap_err();
        assert!(why.contains("dpop+jwt"), "{why}");
    }
}
