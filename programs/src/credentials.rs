//! `--credentials`: where OAuth credentials are kept. A file (by default
//! `$XDG_CONFIG_HOME/actix-mcp/credentials.json`, readable by the owner only, shared safely by
//! every program of that user), or a Redis database (`redis://HOST:PORT/DB`) shared by every
//! process and machine given the same key: `ACTIX_MCP_CREDENTIALS_KEY` (32 bytes as 64 hex
//! digits) encrypts the entries, `ACTIX_MCP_CREDENTIALS_PREFIX` (default `actix-mcp:`) names
//! them. The command line and the gateway read it alike, so a grant signed in to with one is
//! used, and refreshed once, by the other.

use std::{path::PathBuf, sync::Arc};

use actix_mcp::auth::{CredentialStore, FileStore, RedisStore};

/// The variable holding the Redis store's encryption key.
pub const KEY_VARIABLE: &str = "ACTIX_MCP_CREDENTIALS_KEY";
const PREFIX_VARIABLE: &str = "ACTIX_MCP_CREDENTIALS_PREFIX";

/// Why the store `--credentials` names cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The command line or the environment is wrong (a usage error).
    #[error("{0}")]
    Usage(String),
    /// The store could not be reached.
    #[error("{0}")]
    Unavailable(String),
}

/// Where the programs keep OAuth credentials by default:
/// `$XDG_CONFIG_HOME/actix-mcp/credentials.json` (or `~/.config/…`).
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".config"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("actix-mcp").join("credentials.json")
}

/// The store `--credentials` names (the default file without it).
pub async fn open(credentials: Option<&str>) -> Result<Arc<dyn CredentialStore>, CredentialsError> {
    let Some(place) = credentials else {
        return Ok(Arc::new(FileStore::new(default_path())));
    };
    if !(place.starts_with("redis://") || place.starts_with("rediss://")) {
        return Ok(Arc::new(FileStore::new(place)));
    }
    let key = key_from_env(&format!("--credentials {place}"))?;
    let prefix = prefix_from_env();
    let store = RedisStore::connect(place, key, &prefix)
        .await
        .map_err(|e| CredentialsError::Unavailable(format!("--credentials {place}: {e}")))?;
    Ok(Arc::new(store))
}

/// The store's key from [`KEY_VARIABLE`] (replicas seal what they share with it too), for
/// `what` (named in the error).
pub fn key_from_env(what: &str) -> Result<[u8; 32], CredentialsError> {
    let key = std::env::var(KEY_VARIABLE).map_err(|_| {
        CredentialsError::Usage(format!(
            "{what}: set {KEY_VARIABLE} to the store's key (64 hex digits)"
        ))
    })?;
    parse_key(&key).ok_or_else(|| {
        CredentialsError::Usage(format!("{KEY_VARIABLE}: not 32 bytes as 64 hex digits"))
    })
}

/// The prefix of what is kept in Redis ([`PREFIX_VARIABLE`], default `actix-mcp:`).
pub fn prefix_from_env() -> String {
    std::env::var(PREFIX_VARIABLE).unwrap_or_else(|_| "actix-mcp:".into())
}

fn parse_key(hex_digits: &str) -> Option<[u8; 32]> {
    hex::decode(hex_digits.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_32_bytes_in_64_hex_digits() {
        let digits = "00".repeat(31) + "ff";
        assert_eq!(parse_key(&digits).map(|k| k[31]), Some(0xff));
        assert_eq!(parse_key(&format!(" {digits}\n")).map(|k| k[0]), Some(0));
        assert!(parse_key(&"00".repeat(31)).is_none(), "31 bytes");
        assert!(parse_key(&"zz".repeat(32)).is_none(), "not hex");
    }
}
