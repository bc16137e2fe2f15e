//! A JSON file readable by its owner only, shared by every process of that user (the CLI keeps
//! its tokens here). Each change is a read-modify-write under an exclusive advisory lock on
//! `<file>.lock`, written atomically (a temporary file, fsync, rename, fsync of the directory),
//! so a process killed mid-write leaves the old file or the new one, never half of one. A file
//! that cannot be read is reported ([`StoreError::Corrupt`]), never taken for an empty one.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{ErrorKind, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use super::{
    millis, now_ms, table::Table, CredentialStore, Credentials, Lease, StoreError, StoreFuture,
    Stored,
};

/// The file's format: `{"format": 2, "entries": …, "leases": …}`. The first format, a map of
/// key to credentials, is read too (and written as this one at the next change).
const FORMAT: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Document {
    format: u32,
    #[serde(flatten)]
    table: Table,
}

/// A credential file shared by processes (see the module's documentation).
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// A store in the file at `path` (created, with its directory, on the first write).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `change` on the file's table under the lock, on tokio's blocking pool, and writes
    /// the table back if it changed.
    fn change<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Table) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || locked(&path, change))
                .await
                .map_err(|e| StoreError::Unavailable(format!("the store's task failed: {e}")))?
        })
    }
}

impl CredentialStore for FileStore {
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Stored>> {
        // No lock: the file is only ever replaced whole, so a reader sees one version of it.
        let path = self.path.clone();
        let key = key.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || Ok(load(&path)?.read(&key)))
                .await
                .map_err(|e| StoreError::Unavailable(format!("the store's task failed: {e}")))?
        })
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        credentials: &'a Credentials,
        lease: Option<&'a Lease>,
    ) -> StoreFuture<'a, u64> {
        let (key, credentials, lease) = (key.to_owned(), credentials.clone(), lease.cloned());
        self.change(move |table| table.write(&key, &credentials, lease.as_ref()))
    }

    fn remove<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        let key = key.to_owned();
        self.change(move |table| {
            table.remove(&key);
            Ok(())
        })
    }

    fn try_lease<'a>(&'a self, key: &'a str, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        let key = key.to_owned();
        self.change(move |table| Ok(table.try_lease(&key, now_ms(), millis(ttl))))
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, Option<Lease>> {
        let lease = lease.clone();
        self.change(move |table| Ok(table.renew(&lease, now_ms(), millis(ttl))))
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        let lease = lease.clone();
        self.change(move |table| {
            table.release(&lease);
            Ok(())
        })
    }
}

fn unavailable(path: &Path, what: &str, e: std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("{what} {}: {e}", path.display()))
}

/// `change` under the exclusive lock of `path`'s lock file; the table written back if changed.
fn locked<T>(
    path: &Path,
    change: impl FnOnce(&mut Table) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| unavailable(dir, "cannot create", e))?;
    }
    let lock_path = with_suffix(path, ".lock");
    let lock = owner_only()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| unavailable(&lock_path, "cannot open", e))?;
    // Released when `lock` is closed, also when the process dies.
    lock.lock()
        .map_err(|e| unavailable(&lock_path, "cannot lock", e))?;
    let before = load(path)?;
    let mut table = before.clone();
    let out = change(&mut table)?;
    if table != before {
        save(path, &table)?;
    }
    Ok(out)
}

/// The file's table: empty if there is no file; `Corrupt` if it cannot be read as one.
fn load(path: &Path) -> Result<Table, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Table::default()),
        Err(e) => return Err(unavailable(path, "cannot read", e)),
    };
    parse(&bytes).map_err(|reason| StoreError::Corrupt {
        what: path.display().to_string(),
        reason,
    })
}

fn parse(bytes: &[u8]) -> Result<Table, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    match value.get("format").map(serde_json::Value::as_u64) {
        None => {
            let entries: HashMap<String, Credentials> =
                serde_json::from_value(value).map_err(|e| e.to_string())?;
            Ok(Table::from_entries(entries))
        }
        Some(Some(format)) if format == u64::from(FORMAT) => {
            let document: Document = serde_json::from_value(value).map_err(|e| e.to_string())?;
            Ok(document.table)
        }
        Some(format) => Err(format!(
            "format {format:?}, this client reads format {FORMAT}"
        )),
    }
}

/// Replaces the file with `table`: a temporary file beside it, flushed to disk, renamed over
/// it, and the directory flushed, so the rename survives a crash.
fn save(path: &Path, table: &Table) -> Result<(), StoreError> {
    let document = Document {
        format: FORMAT,
        table: table.clone(),
    };
    let text = serde_json::to_vec_pretty(&document)
        .map_err(|e| StoreError::Unavailable(format!("cannot encode credentials: {e}")))?;
    let temp = with_suffix(path, &format!(".{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = owner_only()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        file.write_all(&text)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Directories cannot be opened for syncing everywhere; where they can, do.
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        unavailable(path, "cannot write", e)
    })
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Open options that create files readable and writable by their owner only (unix).
fn owner_only() -> OpenOptions {
    #[allow(unused_mut, reason = "mutated on unix only")]
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("actix-mcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn token(text: &str) -> Credentials {
        Credentials {
            client_id: "c".into(),
            client_secret: Some("s3cret".into()),
            access_token: Some(text.into()),
            ..Credentials::default()
        }
    }

    #[tokio::test]
    async fn the_file_keeps_credentials_owner_only_across_instances() {
        let dir = temp_dir("file-store");
        let path = dir.join("credentials.json");
        let store = FileStore::new(&path);
        assert_eq!(store.write("k", &token("a"), None).await.unwrap(), 1);
        let other = FileStore::new(&path);
        let stored = other.read("k").await.unwrap().expect("kept");
        assert_eq!((stored.credentials, stored.version), (token("a"), 1));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        other.remove("k").await.unwrap();
        assert_eq!(store.read("k").await.unwrap(), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_truncated_file_is_reported_not_taken_for_empty() {
        let dir = temp_dir("file-store-truncated");
        let path = dir.join("credentials.json");
        let store = FileStore::new(&path);
        store.write("k", &token("a"), None).await.unwrap();
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
        let read = store.read("k").await;
        assert!(matches!(read, Err(StoreError::Corrupt { .. })), "{read:?}");
        // A change is refused too: the file is left for a person to look at.
        let written = store.write("k", &token("b"), None).await;
        assert!(matches!(written, Err(StoreError::Corrupt { .. })));
        assert_eq!(std::fs::read(&path).unwrap(), &whole[..whole.len() / 2]);
        std::fs::write(&path, b"").unwrap();
        assert!(matches!(
            store.read("k").await,
            Err(StoreError::Corrupt { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn the_first_format_is_read_and_rewritten_in_the_second() {
        let dir = temp_dir("file-store-format");
        let path = dir.join("credentials.json");
        std::fs::create_dir_all(&dir).unwrap();
        let old = HashMap::from([("k".to_owned(), token("a"))]);
        std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
        let store = FileStore::new(&path);
        assert_eq!(
            store.read("k").await.unwrap().unwrap().credentials,
            token("a")
        );
        store.write("k", &token("b"), None).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""format": 2"#), "{text}");
        assert_eq!(store.read("k").await.unwrap().unwrap().version, 2);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Many writers at once, each a read-modify-write of its own key: none is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_changes_of_one_file_lose_nothing() {
        let dir = temp_dir("file-store-concurrent");
        let path = dir.join("credentials.json");
        let writers = (0..16).map(|i| {
            let store = FileStore::new(&path);
            tokio::spawn(async move {
                store
                    .write(&format!("k{i}"), &token(&i.to_string()), None)
                    .await
            })
        });
        for writer in futures::future::join_all(writers).await {
            writer.unwrap().unwrap();
        }
        let store = FileStore::new(&path);
        for i in 0..16 {
            assert!(
                store.read(&format!("k{i}")).await.unwrap().is_some(),
                "k{i}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn one_lease_at_a_time_across_instances() {
        let dir = temp_dir("file-store-lease");
        let path = dir.join("credentials.json");
        let (a, b) = (FileStore::new(&path), FileStore::new(&path));
        let ttl = Duration::from_secs(60);
        let lease = a.try_lease("k", ttl).await.unwrap().expect("free");
        assert_eq!(b.try_lease("k", ttl).await.unwrap(), None);
        a.release(&lease).await.unwrap();
        let taken = b.try_lease("k", ttl).await.unwrap().expect("released");
        assert!(matches!(
            a.write("k", &token("late"), Some(&lease)).await,
            Err(StoreError::Fenced { .. })
        ));
        b.write("k", &token("new"), Some(&taken)).await.unwrap();
        assert_eq!(a.renew(&lease, ttl).await.unwrap(), None, "taken over");
        let renewed = b.renew(&taken, ttl * 2).await.unwrap().expect("b's");
        assert!(renewed.deadline_ms > taken.deadline_ms);
        let _ = std::fs::remove_dir_all(dir);
    }
}
