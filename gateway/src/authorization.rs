//! Downstream authorization (`--authorization-server ISSUER`): the gateway is an OAuth protected
//! resource (MCP authorization, RFC 9728). Every `/mcp` request needs a bearer JWT that the
//! issuer signed (a key of its JWKS, found through its metadata, `keys.rs`), naming the issuer
//! (`iss`), this gateway (`aud` = its resource URL, RFC 8707) and an expiry (`exp`), all three
//! required, not expired, not before its `nbf` nor issued in the future (`iat`), both within a
//! small leeway. Without a token the answer is `401` with a `WWW-Authenticate` naming the
//! protected resource metadata, which the gateway serves, so a client finds the authorization
//! server itself; a token that lacks a scope gets MCP's scope challenge (`403`,
//! `insufficient_scope`), so the client steps up instead of signing in again. The token's
//! issuer and subject are who the request is from (`Owner`). The downstream token stops here:
//! upstream connections carry the gateway's own credentials (the spec forbids token
//! passthrough).

use std::{
    sync::{Mutex, PoisonError},
    time::Duration,
};

use jsonwebtoken::Validation;
use serde_json::{json, Value};

use crate::{
    dpop::ALGORITHMS,
    keys::Keys,
    owner::{Caller, Owner},
};

/// The claims a token must carry.
const REQUIRED_CLAIMS: [&str; 3] = ["exp", "aud", "iss"];

pub struct Authorization {
    issuer: String,
    resource: String,
    /// What a token must grant (its `scope` claim), told to clients in the metadata.
    scopes: Vec<String>,
    /// How far `exp`, `nbf` and `iat` may be off the gateway's clock.
    leeway: Duration,
    keys: Keys,
    /// The DPoP proofs taken lately (a replayed one is refused).
    proofs: Mutex<crate::dpop::SeenProofs>,
}

/// What a request presents to be let in.
pub struct Presented<'a> {
    /// Its `Authorization` header.
    pub authorization: Option<&'a str>,
    /// Its `DPoP` header.
    pub dpop: Option<&'a str>,
    pub method: &'a str,
    /// The path it was sent to (the URL a DPoP proof must name is the gateway's own URL with
    /// this path: never one made of headers a client chooses).
    pub path: &'a str,
}

/// Why a request was refused.
#[derive(Debug)]
pub enum Refused {
    /// No token: the client should authorize (`401`).
    NoToken,
    /// What is wrong with the token it sent (`401 invalid_token`).
    Invalid(String),
    /// A valid token that does not grant this scope (`403 insufficient_scope`).
    InsufficientScope(String),
}

impl Refused {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> u16 {
        match self {
            Self::NoToken | Self::Invalid(_) => 401,
            Self::InsufficientScope(_) => 403,
        }
    }
}

impl Authorization {
    /// Finds `issuer`'s JWKS through its metadata (RFC 8414, then OpenID discovery) and fetches
    /// it. `resource`: the gateway's URL, the audience its tokens must name.
    pub async fn discover(
        issuer: &str,
        resource: String,
        scopes: Vec<String>,
        leeway: Duration,
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
        let keys = Keys::fetch(http, jwks_uri).await?;
        Ok(Self {
            issuer,
            resource,
            scopes,
            leeway,
            keys,
            proofs: Mutex::default(),
        })
    }

    /// Checks a request's `Authorization` header (`Bearer`, or `DPoP` with its `DPoP` proof):
    /// who it is from.
    pub async fn check(&self, request: Presented<'_>) -> Result<Caller, Refused> {
        let header = request.authorization.unwrap_or_default();
        let (scheme, token) = header.split_once(' ').unwrap_or((header, ""));
        let scheme = scheme.to_ascii_lowercase();
        let token = token.trim();
        if token.is_empty() || !matches!(scheme.as_str(), "bearer" | "dpop") {
            return Err(Refused::NoToken);
        }
        let claims = self.verified(token).await?;
        self.possession(&request, &scheme, token, &claims, now_secs())?;
        let mut caller = self.caller(claims)?;
        caller.token = Some(crate::owner::Bearer(token.into()));
        Ok(caller)
    }

    /// Who `token` is from, without a proof of possession: for a token the gateway itself was
    /// just given by the issuer's token endpoint (a sign-in through its own pages), whose key,
    /// if it is bound to one, the gateway holds.
    pub async fn identify(&self, token: &str) -> Result<Caller, Refused> {
        let claims = self.verified(token).await?;
        self.caller(claims)
    }

    /// `token`'s claims, if it is a JWT of the issuer's for this gateway, within its times.
    async fn verified(&self, token: &str) -> Result<Value, Refused> {
        let refused = |why: &str| Refused::Invalid(why.to_owned());
        let head = jsonwebtoken::decode_header(token).map_err(|_| refused("not a JWT"))?;
        if !ALGORITHMS.contains(&head.alg) {
            return Err(refused("its algorithm is not taken"));
        }
        let kid = head.kid.ok_or_else(|| refused("its header names no key"))?;
        let key = self.keys.find(&kid).await;
        let key = key.ok_or_else(|| refused("signed with a key the issuer does not have"))?;
        let claims = jsonwebtoken::decode::<Value>(token, &key, &self.validation(head.alg))
            .map_err(|e| Refused::Invalid(e.to_string()))?
            .claims;
        let issued = claims["iat"].as_i64();
        if issued.is_some_and(|iat| iat > now_secs() + self.leeway.as_secs() as i64) {
            return Err(refused("issued in the future (iat)"));
        }
        Ok(claims)
    }

    /// The caller verified `claims` name, if they grant the gateway's scopes.
    fn caller(&self, claims: Value) -> Result<Caller, Refused> {
        let refused = |why: &str| Refused::Invalid(why.to_owned());
        let scope = claims["scope"].as_str().unwrap_or_default();
        let granted: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
        if let Some(missing) = self.scopes.iter().find(|s| !granted.contains(s)) {
            return Err(Refused::InsufficientScope(missing.clone()));
        }
        // A token of the client itself (client credentials) names it in `client_id`.
        let subject = claims["sub"].as_str().or(claims["client_id"].as_str());
        let subject = subject.ok_or_else(|| refused("it names no subject (sub)"))?;
        let owner = Owner::user(&self.issuer, subject);
        let Value::Object(claims) = claims else {
            return Err(refused("its claims are not an object"));
        };
        Ok(Caller {
            owner,
            scopes: granted,
            claims,
            token: None,
        })
    }

    /// What a token must be: of the issuer, for this gateway, with the claims that say so, and
    /// within its time (`exp`, `nbf`) give or take the leeway.
    fn validation(&self, algorithm: jsonwebtoken::Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&REQUIRED_CLAIMS);
        validation.validate_nbf = true;
        validation.leeway = self.leeway.as_secs();
        validation
    }

    /// A token bound to a key (`cnf.jkt`) only with its proof (`DPoP`), and a proof only with
    /// a bound token. The proof must name the gateway's own URL (`resource`'s origin and the
    /// request's path).
    fn possession(
        &self,
        request: &Presented<'_>,
        scheme: &str,
        token: &str,
        claims: &Value,
        now: i64,
    ) -> Result<(), Refused> {
        let refused = |why: String| Refused::Invalid(why);
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
                let url = format!("{}{}", origin(&self.resource), request.path);
                let proof = crate::dpop::check(proof, request.method, &url, token, jkt, now)
                    .map_err(refused)?;
                let mut seen = self.proofs.lock().unwrap_or_else(PoisonError::into_inner);
                if !seen.first_use(&proof.jti, proof.iat, now) {
                    return Err(refused("a DPoP proof used before".into()));
                }
                Ok(())
            }
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

    /// The `WWW-Authenticate` of a refusal: where the metadata is, the scopes needed, and what
    /// is wrong (MCP's scope challenge for a missing scope).
    pub fn challenge(&self, refused: &Refused) -> String {
        let mut challenge = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        // The scopes the request needs: the gateway's, and what it lacked (an access rule's).
        let mut needed: Vec<&str> = self.scopes.iter().map(String::as_str).collect();
        if let Refused::InsufficientScope(missing) = refused {
            let more = missing.split_whitespace();
            needed.extend(more.filter(|s| !self.scopes.iter().any(|ours| ours == s)));
        }
        if !needed.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", needed.join(" ")));
        }
        let (error, why) = match refused {
            Refused::NoToken => return challenge,
            Refused::Invalid(why) => ("invalid_token", why.clone()),
            Refused::InsufficientScope(missing) => (
                "insufficient_scope",
                format!("the token does not grant {missing}"),
            ),
        };
        let why = why.replace(['"', '\\'], "'");
        challenge.push_str(&format!(", error=\"{error}\", error_description=\"{why}\""));
        challenge
    }
}

/// `scheme://authority` of `url`.
fn origin(url: &str) -> &str {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    let authority = rest.find('/').map_or(rest.len(), |at| at);
    &url[..scheme.len() + 3 + authority]
}

fn now_secs() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_secs() as i64)
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("{url}: {}", response.status()));
    }
    response.json().await.map_err(|e| format!("{url}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offline() -> Authorization {
        Authorization {
            issuer: "http://127.0.0.1:1".into(),
            resource: "http://127.0.0.1:8080/mcp".into(),
            scopes: vec!["mcp".into()],
            leeway: Duration::from_secs(60),
            keys: Keys::with(
                reqwest::Client::new(),
                "http://127.0.0.1:1/jwks".into(),
                jsonwebtoken::jwk::JwkSet { keys: Vec::new() },
            ),
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
            path: "/mcp",
        };
        let none = authorization.check(presented(None)).await;
        assert!(matches!(none, Err(Refused::NoToken)));
        let basic = authorization.check(presented(Some("Basic x"))).await;
        assert!(matches!(basic, Err(Refused::NoToken)));
        let garbage = authorization
            .check(presented(Some("Bearer not.a.jwt")))
            .await;
        assert!(matches!(garbage, Err(Refused::Invalid(_))), "{garbage:?}");
        // A shared-secret token (HS256) is never taken, whatever it says.
        let hs256 = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &json!({"aud": "http://127.0.0.1:8080/mcp", "exp": u32::MAX}),
            &jsonwebtoken::EncodingKey::from_secret(b"guessable").unwrap(),
        )
        .unwrap();
        let header = format!("Bearer {hs256}");
        let refused = authorization.check(presented(Some(&header))).await;
        assert!(matches!(refused, Err(Refused::Invalid(ref why)) if why.contains("algorithm")));
    }

    #[test]
    fn the_metadata_is_found_under_the_resources_path() {
        let authorization = offline();
        assert_eq!(
            authorization.metadata_url(),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
        );
        let challenge = authorization.challenge(&Refused::Invalid("bad \"aud\"".into()));
        assert!(challenge.starts_with("Bearer resource_metadata=\"http://127.0.0.1:8080/"));
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(
            !challenge.contains("\"aud\""),
            "quotes are not let through: {challenge}"
        );
        // MCP's scope challenge: 403, the scope and where the metadata is.
        let step_up = Refused::InsufficientScope("mcp".into());
        assert_eq!(step_up.status(), 403);
        let challenge = authorization.challenge(&step_up);
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(challenge.contains("scope=\"mcp\""), "{challenge}");
        assert!(challenge.contains("resource_metadata="), "{challenge}");
    }

    #[test]
    fn a_proof_names_the_gateways_own_origin() {
        assert_eq!(
            origin("https://gw.example:8443/mcp"),
            "https://gw.example:8443"
        );
        assert_eq!(origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }
}
