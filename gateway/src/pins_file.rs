//! The pins kept in their file (`--pins FILE`), shared by the running gateway (which pins first
//! catalogues and records what it holds) and `actix-mcp-gateway pins` (which approves): every
//! change is a read, a change and a write under an exclusive lock of `FILE.lock`, the write
//! atomic (a new file renamed over the old), so neither loses the other's. The gateway looks at
//! the file again every second and, when an approval came, makes its catalogue anew.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use actix_mcp::Catalogue;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

use crate::pins::{Change, OnChange, Pins, Served};

/// A held definition the operator is told of (once).
#[derive(Debug, Clone)]
pub struct Report {
    pub server: String,
    pub key: String,
    /// The pinned digest it replaces; none for a new name.
    pub replaces: Option<String>,
    pub sha256: String,
}

pub struct PinsFile {
    path: PathBuf,
    on_change: OnChange,
    /// The pins as last read or written here: an approval is a file that differs from it.
    known: Mutex<Pins>,
}

impl PinsFile {
    /// The pins of `path` (none yet if it does not exist); an unreadable file is an error,
    /// never taken for an empty one.
    pub fn open(path: PathBuf, on_change: OnChange) -> Result<Self, String> {
        let pins = locked(&path, |pins: &mut Pins| pins.clone())?;
        Ok(Self {
            path,
            on_change,
            known: Mutex::new(pins),
        })
    }

    /// `catalogue` as it may be served: each server's first catalogue pinned, a changed
    /// definition in its pinned form (or withheld), a new name withheld; what became held
    /// since the last look, to be reported.
    pub fn vet(&self, catalogue: &mut Catalogue) -> Result<Vec<Report>, String> {
        let on_change = self.on_change;
        let (pins, reports) = locked(&self.path, |pins: &mut Pins| {
            let mut reports = Vec::new();
            let first: Vec<String> = servers_of(catalogue)
                .filter(|server| !pins.knows(server))
                .collect();
            let mut look = |server: &str, key: String, definition: Value| {
                let first = first.iter().any(|f| f == server);
                let (served, change) = pins.look(server, &key, &definition, first, on_change);
                if let Change::Held { replaces } = change {
                    let sha256 = crate::pins::digest(&definition);
                    let server = server.to_owned();
                    reports.push(Report {
                        server,
                        key,
                        replaces,
                        sha256,
                    });
                }
                served
            };
            vet_list(&mut catalogue.tools, "tool", |t| t.name.clone(), &mut look);
            vet_list(
                &mut catalogue.prompts,
                "prompt",
                |p| p.name.clone(),
                &mut look,
            );
            vet_list(
                &mut catalogue.resources,
                "resource",
                |r| r.uri.clone(),
                &mut look,
            );
            let templates = &mut catalogue.resource_templates;
            vet_list(templates, "template", |t| t.uri_template.clone(), &mut look);
            (pins.clone(), reports)
        })?;
        *self.lock_known() = pins;
        Ok(reports)
    }

    /// Whether the file changed since it was last read or written here (an approval).
    pub fn approvals_came(&self) -> Result<bool, String> {
        let now = locked(&self.path, |pins: &mut Pins| pins.clone())?;
        let mut known = self.lock_known();
        let changed = *known != now;
        *known = now;
        Ok(changed)
    }

    fn lock_known(&self) -> std::sync::MutexGuard<'_, Pins> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The servers with anything in `catalogue`.
fn servers_of(catalogue: &Catalogue) -> impl Iterator<Item = String> + '_ {
    let tools = catalogue.tools.iter().map(|l| &l.server);
    let prompts = catalogue.prompts.iter().map(|l| &l.server);
    let resources = catalogue.resources.iter().map(|l| &l.server);
    let templates = catalogue.resource_templates.iter().map(|l| &l.server);
    let all: std::collections::BTreeSet<&String> = tools
        .chain(prompts)
        .chain(resources)
        .chain(templates)
        .collect();
    all.into_iter().cloned()
}

/// Each item of `list` as `look` says it may be served (`kind/name` its key).
fn vet_list<T: Serialize + DeserializeOwned>(
    list: &mut Vec<actix_mcp::servers::Listed<T>>,
    kind: &str,
    name: impl Fn(&T) -> String,
    look: &mut impl FnMut(&str, String, Value) -> Served,
) {
    list.retain_mut(|listed| {
        let Ok(definition) = serde_json::to_value(&listed.item) else {
            return false;
        };
        let key = format!("{kind}/{}", name(&listed.item));
        match look(&listed.server, key, definition) {
            Served::Listed => true,
            Served::Withheld => false,
            Served::Pinned(pinned) => match serde_json::from_value(pinned) {
                Ok(item) => {
                    listed.item = item;
                    true
                }
                Err(_) => false,
            },
        }
    });
}

/// `change` applied to the pins of `path` under its lock, written back if it changed them.
pub fn locked<R>(path: &Path, change: impl FnOnce(&mut Pins) -> R) -> Result<R, String> {
    let lock_path = path.with_extension("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let before = read(path)?;
    let mut pins = before.clone();
    let result = change(&mut pins);
    if pins != before {
        write(path, &pins)?;
    }
    // The lock goes with the file handle.
    drop(lock);
    Ok(result)
}

fn read(path: &Path) -> Result<Pins, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Pins::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn write(path: &Path, pins: &Pins) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let text = serde_json::to_vec_pretty(pins).map_err(|e| e.to_string())?;
    let new = path.with_extension("new");
    let mut file = std::fs::File::create(&new).map_err(fail)?;
    file.write_all(&text).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    std::fs::rename(&new, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_under_the_lock_is_kept_and_an_unreadable_file_is_an_error() {
        let dir = std::env::temp_dir().join(format!("pins-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pins.json");
        let _ = std::fs::remove_file(&path);
        let tool = serde_json::json!({"name": "echo"});
        locked(&path, |pins| {
            pins.look("s", "tool/echo", &tool, true, OnChange::Keep)
        })
        .unwrap();
        let read_back = locked(&path, |pins| pins.clone()).unwrap();
        assert!(read_back.servers["s"].pinned.contains_key("tool/echo"));

        let file = PinsFile::open(path.clone(), OnChange::Keep).unwrap();
        assert!(!file.approvals_came().unwrap());
        let changed = serde_json::json!({"name": "echo", "description": "new"});
        locked(&path, |pins| {
            pins.look("s", "tool/echo", &changed, false, OnChange::Keep)
        })
        .unwrap();
        locked(&path, |pins| pins.approve("s", &[])).unwrap();
        assert!(file.approvals_came().unwrap());
        assert!(!file.approvals_came().unwrap(), "told once");

        std::fs::write(&path, "{not json").unwrap();
        assert!(PinsFile::open(path, OnChange::Keep).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
