//! Downstream authorization (`--authorization-server ISSUER`): the gateway is an OAuth protected
//! resource (MCP authorization, RFC 9728). Every `/mcp` request needs a bearer JWT that the
//! issuer signed (a key of its JWKS, found through its metadata), issued by it, for this gateway
//! (`aud` = its resource URL, RFC 8707), not expired. Without one the answer is `401` with a
//! `WWW-Authenticate` naming the protected resource metadata, which the gateway serves, so a
//! client finds the authorization server itself. The downstream token stops here: upstream
//! connections carry the gateway's own credentials (the spec forbids token passthrough).

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use jsonwebtoken::{jwk::JwkSet, DecodingKey, Validation};
use serde_json::{json, Value};

use crate::dpop::ALGORITHMS;

/// How often an unknown key id may send the gateway to fetch the JWKS again (key rotation).
const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(30);

pub struct Authorization {
    issuer: String,
    resource: String,
    /// What a token must grant (its `scope` claim), told to clients in the metadata.
    scopes: Vec<String>,
    jwks_uri: String,
    http: reqwest::Client,
    keys: Mutex<Keys>,
    /// The DPoP proofs taken lately (a replayed one is refused).
    proofs: Mutex<crate::dpop::SeenProofs>,
}

struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// What a request presents to be let in.
pub struct Presented<'a> {
    /// Its `Authorization` header.
    pub authorization: Option<&'a str>,
    /// Its `DPoP` header.
    pub dpop: Option<&'a str>,
    pub method: &'a str,
    /// The URL it was sent to, as the client named it.
    pub url: &'a str,
}

/// Why a request was refused: no token (`None`, the client should authorize), or what is
/// wrong with the one it sent.
#[derive(Debug)]
pub struct Refused(pub Option<String>);

impl Authorization {
    /// Finds `issuer`'s JWKS through its metadata (RFC 8414, then OpenID discovery) and fetches
    /// it. `resource`: the gateway's URL, the audience its tokens must name.
    pub async fn discover(
        issuer: &str,
        resource: String,
        scopes: Vec<String>,
    ) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        let issuer = issuer.trim_end_matches('/').to_owned();
        let mut metadata = None;
        for well_known in ["oauth-authorization-server", "openid-configuration"] {
            let url = format!("{issuer}/.well-known/{well_known}");
            if let Ok(found) = get_json(&http, &url).await {
                metadata = Some(found);
                break;
            }
        }
        let metadata =
            metadata.ok_or_else(|| format!("{issuer}: no authorization server metadata"))?;
        if metadata["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(issuer.as_str()) {
            return Err(format!("{issuer}: its metadata names another issuer"));
        }
        let jwks_uri = metadata["jwks_uri"]
            .as_str()
            .ok_or_else(|| format!("{issuer}: its metadata has no jwks_uri"))?
            .to_owned();
        let set = fetch_keys(&http, &jwks_uri).await?;
        Ok(Self {
            issuer,
            resource,
            scopes,
            jwks_uri,
            http,
            keys: Mutex::new(Keys {
                set,
                fetched: Instant::now(),
            }),
            proofs: Mutex::default(),
        })
    }

    /// Checks a request's `Authorization` header (`Bearer`, or `DPoP` with its `DPoP` proof).
    pub async fn check(&self, request: Presented<'_>) -> Result<(), Refused> {
        let header = request.authorization.unwrap_or_default();
        let (scheme, token) = header.split_once(' ').unwrap_or((header, ""));
        let scheme = scheme.to_ascii_lowercase();
        let token = token.trim();
        if token.is_empty() || !matches!(scheme.as_str(), "bearer" | "dpop") {
            return Err(Refused(None));
        }
        let refused = |why: &str| Refused(Some(why.to_owned()));
        let head = jsonwebtoken::decode_header(token).map_err(|_| refused("not a JWT"))?;
        if !ALGORITHMS.contains(&head.alg) {
            return Err(refused("its algorithm is not taken"));
        }
        let kid = head.kid.ok_or_else(|| refused("its header names no key"))?;
        let key = match self.key(&kid) {
            Some(key) => key,
            None => {
                self.refetch().await;
                self.key(&kid)
                    .ok_or_else(|| refused("signed with a key the issuer does not have"))?
            }
        };
        let mut validation = Validation::new(head.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| Refused(Some(e.to_string())))?
            .claims;
        self.possession(&request, &scheme, token, &claims)?;
        let granted: Vec<&str> = claims["scope"]
            .as_str()
            .unwrap_or_default()
            .split(' ')
            .collect();
        match self.scopes.iter().find(|s| !granted.contains(&s.as_str())) {
            Some(missing) => Err(Refused(Some(format!(
                "the token does not grant {missing:?}"
            )))),
            None => Ok(()),
        }
    }

    /// A token bound to a key (`cnf.jkt`) only with its proof (`DPoP`), and a proof only with
    /// a bound token.
    fn possession(
        &self,
        request: &Presented<'_>,
        scheme: &str,
        token: &str,
        claims: &Value,
    ) -> Result<(), Refused> {
        let refused = |why: String| Refused(Some(why));
        match (claims["cnf"]["jkt"].as_str(), scheme) {
            (None, "bearer") => Ok(()),
            (None, _) => Err(refused("a DPoP scheme for a token bound to no key".into())),
            (Some(_), "bearer") => Err(refused(
                "a token bound to a key, sent without its proof".into(),
            )),
            (Some(jkt), _) => {
                let proof = request
                    .dpop
                    .ok_or_else(|| refused("no DPoP proof".into()))?;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                let proof = crate::dpop::check(proof, request.method, request.url, token, jkt, now)
                    .map_err(refused)?;
                let mut seen = self.proofs.lock().unwrap_or_else(PoisonError::into_inner);
                if !seen.first_use(&proof.jti, proof.iat, now) {
                    return Err(refused("a DPoP proof used before".into()));
                }
                Ok(())
            }
        }
    }

    fn key(&self, kid: &str) -> Option<DecodingKey> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        DecodingKey::from_jwk(keys.set.find(kid)?).ok()
    }

    /// Fetches the JWKS again (the issuer may have rotated its keys), at most once in a while.
    async fn refetch(&self) {
        {
            let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
            if keys.fetched.elapsed() < REFETCH_AT_MOST_EVERY {
                return;
            }
        }
        match fetch_keys(&self.http, &self.jwks_uri).await {
            Ok(set) => {
                *self.keys.lock().unwrap_or_else(PoisonError::into_inner) = Keys {
                    set,
                    fetched: Instant::now(),
                }
            }
            Err(e) => tracing::warn!(%e, "the issuer's keys could not be fetched again"),
        }
    }

    /// Where the protected resource metadata is (RFC 9728: the resource's path under
    /// `/.well-known/oauth-protected-resource`).
    pub fn metadata_url(&self) -> String {
        match self.resource.split_once("://") {
            Some((scheme, rest)) => {
                let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
                format!("{scheme}://{authority}/.well-known/oauth-protected-resource/{path}")
            }
            None => self.resource.clone(),
        }
    }

    /// The protected resource metadata.
    pub fn metadata(&self) -> Value {
        let mut metadata = json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes.is_empty() {
            metadata["scopes_supported"] = json!(self.scopes);
        }
        metadata
    }

    /// The `WWW-Authenticate` of a refusal.
    pub fn challenge(&self, refused: &Refused) -> String {
        let mut challenge = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        if !self.scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", self.scopes.join(" ")));
        }
        if let Some(why) = &refused.0 {
            let why = why.replace(['"', '\\'], "'");
            challenge.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{why}\""
            ));
        }
        challenge
    }
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("{url}: {}", response.status()));
    }
    response.json().await.map_err(|e| format!("{url}: {e}"))
}

async fn fetch_keys(http: &reqwest::Client, jwks_uri: &str) -> Result<JwkSet, String> {
    let set = get_json(http, jwks_uri).await?;
    serde_json::from_value(set).map_err(|e| format!("{jwks_uri}: not a JWKS: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offline() -> Authorization {
        Authorization {
            issuer: "http://127.0.0.1:1".into(),
            resource: "http://127.0.0.1:8080/mcp".into(),
            scopes: vec!["mcp".into()],
            jwks_uri: "http://127.0.0.1:1/jwks".into(),
            http: reqwest::Client::new(),
            keys: Mutex::new(Keys {
                set: JwkSet { keys: Vec::new() },
                fetched: Instant::now(),
            }),
            proofs: Mutex::default(),
        }
    }

    #[actix_rt::test]
    async fn no_token_asks_to_authorize_and_a_bad_one_says_why() {
        let authorization = offline();
        let presented = |authorization| Presented {
            authorization,
            dpop: None,
            method: "POST",
            url: "http://127.0.0.1:8080/mcp",
        };
        let none = authorization.check(presented(None)).await;
        assert!(matches!(none, Err(Refused(None))));
        let basic = authorization.check(presented(Some("Basic x"))).await;
        assert!(matches!(basic, Err(Refused(None))));
        let garbage = authorization
            .check(presented(Some("Bearer not.a.jwt")))
            .await;
        assert!(matches!(garbage, Err(Refused(Some(_)))), "{garbage:?}");
        // A shared-secret token (HS256) is never taken, whatever it says.
        let hs256 = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &json!({"aud": "http://127.0.0.1:8080/mcp", "exp": u32::MAX}),
            &jsonwebtoken::EncodingKey::from_secret(b"guessable").unwrap(),
        )
        .unwrap();
        let header = format!("Bearer {hs256}");
        let refused = authorization.check(presented(Some(&header))).await;
        assert!(matches!(refused, Err(Refused(Some(ref why))) if why.contains("algorithm")));
    }

    #[test]
    fn the_metadata_is_found_under_the_resources_path() {
        let authorization = offline();
        assert_eq!(
            authorization.metadata_url(),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
        );
        let challenge = authorization.challenge(&Refused(Some("bad \"aud\"".into())));
        assert!(challenge.starts_with("Bearer resource_metadata=\"http://127.0.0.1:8080/"));
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(
            !challenge.contains("\"aud\""),
            "quotes are not let through: {challenge}"
        );
    }
}
