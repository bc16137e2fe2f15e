//! A local OAuth authorization server, made in the test process: its metadata (RFC 8414) at
//! `/.well-known/oauth-authorization-server` and its keys at `/jwks` (ES256, each with its
//! `kid`), on a free port of 127.0.0.1. It counts the JWKS fetches, can answer them `500`, can
//! rotate to a new key, and mints access tokens (plain, or bound to a DPoP key, RFC 9449) and
//! DPoP proofs.
#![allow(dead_code, reason = "shared by several crates, each using a part")]

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{SystemTime, UNIX_EPOCH},
};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use p256::{elliptic_curve::sec1::ToEncodedPoint as _, pkcs8::EncodePrivateKey as _};
use serde_json::{json, Value};
use sha2::Digest as _;

/// An ES256 key pair: what signs, and the public JWK (`kty`, `crv`, `x`, `y`).
#[derive(Clone)]
pub struct Key {
    signing: Vec<u8>,
    pub jwk: Value,
}

impl Key {
    /// A fresh P-256 key.
    pub fn new() -> Self {
        let secret = p256::SecretKey::random(&mut rand_core::OsRng);
        let signing = secret.to_pkcs8_der().expect("PKCS#8").as_bytes().to_vec();
        let point = secret.public_key().to_encoded_point(false);
        let coordinate = |c: Option<&p256::FieldBytes>| URL_SAFE_NO_PAD.encode(c.expect("affine"));
        let jwk = json!({"kty": "EC", "crv": "P-256",
            "x": coordinate(point.x()), "y": coordinate(point.y())});
        Self { signing, jwk }
    }

    /// Its JWK thumbprint (RFC 7638, SHA-256, base64url): what a bound token's `cnf.jkt` names.
    pub fn thumbprint(&self) -> String {
        let (crv, x, y) = (&self.jwk["crv"], &self.jwk["x"], &self.jwk["y"]);
        let canonical = format!(r#"{{"crv":{crv},"kty":"EC","x":{x},"y":{y}}}"#);
        URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(canonical.as_bytes()))
    }

    /// `claims` signed with this key under `header`.
    pub fn sign(&self, header: &Header, claims: &Value) -> String {
        let key = EncodingKey::from_ec_der(&self.signing);
        jsonwebtoken::encode(header, claims, &key).expect("signed")
    }
}

impl Default for Key {
    fn default() -> Self {
        Self::new()
    }
}

/// The issuer's key of the moment and its id.
struct Current {
    kid: String,
    key: Key,
    /// How many keys it had (each new one a new `kid`).
    generation: usize,
}

struct Shared {
    current: Mutex<Current>,
    fail_jwks: AtomicBool,
    fetches: Arc<AtomicUsize>,
    stopped: AtomicBool,
}

/// The authorization server; it stops when dropped.
pub struct Issuer {
    /// Its issuer URL (`http://127.0.0.1:PORT`), also its base URL.
    pub url: String,
    /// How many times its JWKS was asked for (answered or not).
    pub jwks_fetches: Arc<AtomicUsize>,
    shared: Arc<Shared>,
    address: std::net::SocketAddr,
}

impl Issuer {
    /// Serving on a free port of 127.0.0.1, on a thread of its own.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = listener.local_addr().unwrap();
        let url = format!("http://{address}");
        let fetches = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            current: Mutex::new(Current {
                kid: "key-1".into(),
                key: Key::new(),
                generation: 1,
            }),
            fail_jwks: AtomicBool::new(false),
            fetches: fetches.clone(),
            stopped: AtomicBool::new(false),
        });
        let serving = shared.clone();
        let base = url.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if serving.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (shared, base) = (serving.clone(), base.clone());
                std::thread::spawn(move || answer(stream, &shared, &base));
            }
        });
        Self {
            url,
            jwks_fetches: fetches,
            shared,
            address,
        }
    }

    /// How many times its JWKS was asked for so far.
    pub fn fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }

    /// From now on its JWKS is answered `500` (`true`), or served again (`false`).
    pub fn fail_jwks(&self, fail: bool) {
        self.shared.fail_jwks.store(fail, Ordering::SeqCst);
    }

    /// A new key, under a new `kid`: the JWKS serves only it from now on. Its `kid`.
    pub fn rotate(&self) -> String {
        let mut current = self.current();
        current.generation += 1;
        current.kid = format!("key-{}", current.generation);
        current.key = Key::new();
        current.kid.clone()
    }

    /// The `kid` of its current key.
    pub fn kid(&self) -> String {
        self.current().kid.clone()
    }

    /// An access token of `claims`, signed with the current key, its header naming it.
    pub fn token(&self, claims: Value) -> String {
        let kid = self.kid();
        self.token_with_kid(claims, &kid)
    }

    /// An access token of `claims` signed with the current key, its header naming `kid`.
    pub fn token_with_kid(&self, claims: Value, kid: &str) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        self.current().key.sign(&header, &claims)
    }

    /// A fresh client key for DPoP.
    pub fn dpop_key(&self) -> Key {
        Key::new()
    }

    /// `claims` bound to `key` (`cnf.jkt`, RFC 9449), as a token: what to send with
    /// `Authorization: DPoP`.
    pub fn bound_token(&self, mut claims: Value, key: &Key) -> String {
        claims["cnf"] = json!({ "jkt": key.thumbprint() });
        self.token(claims)
    }

    /// A DPoP proof of `key` for a request `htm` to `htu` carrying `access_token`: fresh (its
    /// `iat` now, a `jti` of its own).
    pub fn dpop_proof(&self, key: &Key, htm: &str, htu: &str, access_token: &str) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("dpop+jwt".into());
        header.jwk = Some(serde_json::from_value(key.jwk.clone()).expect("a JWK"));
        let ath = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(access_token.as_bytes()));
        let claims = json!({"htm": htm, "htu": htu, "iat": now(),
            "jti": uuid::Uuid::new_v4().to_string(), "ath": ath});
        key.sign(&header, &claims)
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which sees it is stopped.
        let _ = TcpStream::connect(self.address);
    }
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Answers one request on `stream` (a GET; the connection closed after it).
fn answer(mut stream: TcpStream, shared: &Shared, base: &str) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let request = String::from_utf8_lossy(&request);
    let path = request.split(' ').nth(1).unwrap_or_default();
    let (status, body) = match path {
        "/.well-known/oauth-authorization-server" => (
            "200 OK",
            json!({"issuer": base, "jwks_uri": format!("{base}/jwks"),
                "response_types_supported": ["code"]}),
        ),
        "/jwks" => {
            shared.fetches.fetch_add(1, Ordering::SeqCst);
            if shared.fail_jwks.load(Ordering::SeqCst) {
                ("500 Internal Server Error", json!({"error": "unavailable"}))
            } else {
                let current = shared
                    .current
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let mut jwk = current.key.jwk.clone();
                jwk["kid"] = json!(current.kid);
                jwk["alg"] = json!("ES256");
                jwk["use"] = json!("sig");
                ("200 OK", json!({ "keys": [jwk] }))
            }
        }
        _ => ("404 Not Found", json!({"error": "not_found"})),
    };
    let body = body.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}
