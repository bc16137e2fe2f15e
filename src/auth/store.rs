//! Where credentials live between connections (and, with [`FileStore`], between runs): the client
//! registration and the tokens, keyed by authorization server (issuer) and resource.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Mutex, PoisonError},
};

use serde::{Deserialize, Serialize};

/// What one authorization server granted this client for one resource.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The client id at this authorization server (empty if none is needed).
    pub client_id: String,
    /// The client secret; `None` for public clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the client authenticates to the token endpoint. A stored name this client does not
    /// know reads as [`TokenAuthMethod::None`].
    #[serde(default, deserialize_with = "known_method_or_none")]
    pub auth_method: TokenAuthMethod,
    /// Whether this client was registered by us (DCR), so it may be discarded and registered
    /// again.
    #[serde(default)]
    pub registered: bool,
    /// The access token; `None` until a token is granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    /// The token type the server gave (`Bearer` or `DPoP`); `None` is treated as `Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When the access token was granted (Unix seconds): with `expires_at`, its lifetime, which
    /// sets how early it is refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<u64>,
    /// The refresh token, if the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes asked for when the token was obtained.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// How a client authenticates to the token endpoint (RFC 7591 `token_endpoint_auth_method`),
/// of the methods this client can use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenAuthMethod {
    /// A public client: its `client_id` in the request body, no secret.
    #[default]
    None,
    /// The secret in an HTTP Basic `Authorization` header.
    ClientSecretBasic,
    /// The secret in the request body.
    ClientSecretPost,
    /// A signed assertion (RFC 7523) made with the client's private key.
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// Every method, in the order a registration prefers them.
    pub(crate) const ALL: [Self; 4] = [
        Self::None,
        Self::ClientSecretBasic,
        Self::ClientSecretPost,
        Self::PrivateKeyJwt,
    ];

    /// The name metadata and registrations use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method named `name`, if this client knows it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl std::fmt::Display for TokenAuthMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn known_method_or_none<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<TokenAuthMethod, D::Error> {
    let name = String::deserialize(deserializer)?;
    Ok(TokenAuthMethod::from_name(&name).unwrap_or_default())
}

/// Secrets never appear in `Debug`.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("Credentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &hidden(&self.client_secret))
            .field("auth_method", &self.auth_method)
            .field("access_token", &hidden(&self.access_token))
            .field("refresh_token", &hidden(&self.refresh_token))
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// Keeps credentials by key (`issuer` and resource).
pub trait CredentialStore: Send + Sync + 'static {
    /// The credentials kept under `key`; `None` if there are none.
    fn load(&self, key: &str) -> Option<Credentials>;
    /// Keeps `credentials` under `key`, replacing what was there.
    fn save(&self, key: &str, credentials: &Credentials);
    /// Forgets what is kept under `key`.
    fn remove(&self, key: &str);
}

/// In memory: lost when the program exits.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, Credentials>>,
}

impl CredentialStore for MemoryStore {
    fn load(&self, key: &str) -> Option<Credentials> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(key).cloned()
    }

    fn save(&self, key: &str, credentials: &Credentials) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.insert(key.to_owned(), credentials.clone());
    }

    fn remove(&self, key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.remove(key);
    }
}

/// A JSON file readable by its owner only (mode 0600 on unix), for programs that restart (the
/// CLI keeps its tokens here). A file that cannot be read is treated as empty, with a warning.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    lock: Mutex<()>,
}

impl FileStore {
    /// A store in the file at `path` (created, with its directory, on the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    fn read(&self) -> HashMap<String, Credentials> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %self.path.display(), error = %e, "ignoring an unreadable credential file");
                HashMap::new()
            }),
            Err(_) => HashMap::new(),
        }
    }

    fn write(&self, entries: &HashMap<String, Credentials>) {
        let result = (|| -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let text = serde_json::to_vec_pretty(entries).map_err(std::io::Error::other)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let temp = self.path.with_extension("tmp");
            std::io::Write::write_all(&mut options.open(&temp)?, &text)?;
            std::fs::rename(&temp, &self.path)
        })();
        if let Err(e) = result {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot save credentials");
        }
    }
}

impl CredentialStore for FileStore {
    fn load(&self, key: &str) -> Option<Credentials> {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.read().remove(key)
    }

    fn save(&self, key: &str, credentials: &Credentials) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut entries = self.read();
        entries.insert(key.to_owned(), credentials.clone());
        self.write(&entries);
    }

    fn remove(&self, key: &str) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut entries = self.read();
        if entries.remove(key).is_some() {
            self.write(&entries);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_store_keeps_credentials_owner_only_and_never_shows_secrets() {
        let dir = std::env::temp_dir().join(format!("actix-mcp-store-{}", std::process::id()));
        let path = dir.join("credentials.json");
        let store = FileStore::new(&path);
        let credentials = Credentials {
            client_id: "c".into(),
            client_secret: Some("s3cret".into()),
            auth_method: TokenAuthMethod::ClientSecretBasic,
            access_token: Some("tok3n".into()),
            ..Credentials::default()
        };
        store.save("k", &credentials);
        assert_eq!(FileStore::new(&path).load("k"), Some(credentials.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let shown = format!("{credentials:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("tok3n"));
        store.remove("k");
        assert_eq!(store.load("k"), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn auth_methods_are_stored_by_their_registered_names() {
        let credentials = Credentials {
            auth_method: TokenAuthMethod::ClientSecretPost,
            ..Credentials::default()
        };
        let text = serde_json::to_string(&credentials).unwrap();
        assert!(
            text.contains(r#""auth_method":"client_secret_post""#),
            "{text}"
        );
        let read = |method: &str| {
            let text = format!(r#"{{"client_id":"c","auth_method":"{method}"}}"#);
            serde_json::from_str::<Credentials>(&text)
                .unwrap()
                .auth_method
        };
        assert_eq!(read("private_key_jwt"), TokenAuthMethod::PrivateKeyJwt);
        assert_eq!(
            read("tls_client_auth"),
            TokenAuthMethod::None,
            "unknown: public"
        );
        for method in TokenAuthMethod::ALL {
            assert_eq!(TokenAuthMethod::from_name(method.as_str()), Some(method));
        }
    }
}
