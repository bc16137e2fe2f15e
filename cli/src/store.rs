//! `--credentials`: where OAuth credentials are kept. A file (the default:
//! `$XDG_CONFIG_HOME/actix-mcp/credentials.json`, readable by the owner only, shared safely by
//! every `actix-mcp` of that user), or a Redis database (`redis://HOST:PORT/DB`) shared by
//! every process and machine given the same key: `ACTIX_MCP_CREDENTIALS_KEY` (32 bytes as 64
//! hex digits) encrypts the entries, `ACTIX_MCP_CREDENTIALS_PREFIX` (default `actix-mcp:`)
//! names them.

use std::sync::Arc;

use actix_mcp::auth::{CredentialStore, FileStore, RedisStore};

use super::{usage, Failure};

/// The variable holding the Redis store's encryption key.
pub const KEY_VARIABLE: &str = "ACTIX_MCP_CREDENTIALS_KEY";
const PREFIX_VARIABLE: &str = "ACTIX_MCP_CREDENTIALS_PREFIX";

/// Where the CLI keeps OAuth credentials by default: `$XDG_CONFIG_HOME/actix-mcp/credentials.json`
/// (or `~/.config/…`).
pub fn default_path() -> std::path::PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".config"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("actix-mcp").join("credentials.json")
}

/// The store `--credentials` names (the default file without it).
pub async fn open(credentials: Option<&str>) -> Result<Arc<dyn CredentialStore>, Failure> {
    let Some(place) = credentials else {
        return Ok(Arc::new(FileStore::new(default_path())));
    };
    if !(place.starts_with("redis://") || place.starts_with("rediss://")) {
        return Ok(Arc::new(FileStore::new(place)));
    }
    let key = std::env::var(KEY_VARIABLE).map_err(|_| {
        usage(format!(
            "--credentials {place}: set {KEY_VARIABLE} to the store's key (64 hex digits)"
        ))
    })?;
    let key: [u8; 32] = hex::decode(key.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| usage(format!("{KEY_VARIABLE}: not 32 bytes as 64 hex digits")))?;
    let prefix = std::env::var(PREFIX_VARIABLE).unwrap_or_else(|_| "actix-mcp:".into());
    let store = RedisStore::connect(place, key, &prefix)
        .await
        .map_err(|e| Failure {
            message: format!("--credentials {place}: {e}"),
            code: 1,
        })?;
    Ok(Arc::new(store))
}
