//! What a store holds, as a plain type: the entries with their versions, and the refresh leases
//! with their fences. No I/O and no clock (time is passed in, in milliseconds since the Unix
//! epoch), so that the in-memory store, the file store and the model test share one set of
//! rules:
//!
//! - every write of a key gives it the next version;
//! - a lease of a key is taken only when none is held or the held one is past its deadline, and
//!   each lease taken of a key gets the next fence;
//! - a write under a lease is refused once a later lease of the key was taken (the holder was
//!   presumed dead and another took over): fencing.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{Credentials, Lease, StoreError, Stored};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Table {
    #[serde(default)]
    entries: HashMap<String, Entry>,
    #[serde(default)]
    leases: HashMap<String, LeaseRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    credentials: Credentials,
    version: u64,
}

/// A key's lease: the latest fence given, and until when its holder has it (`0`: released).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct LeaseRecord {
    fence: u64,
    deadline_ms: u64,
    /// The version the key had when the lease was taken.
    #[serde(default)]
    taken_at_version: u64,
}

impl Table {
    /// A table of the entries of a store of the first format (a map of key to credentials).
    pub fn from_entries(entries: HashMap<String, Credentials>) -> Self {
        let entries = entries
            .into_iter()
            .map(|(key, credentials)| {
                let entry = Entry {
                    credentials,
                    version: 1,
                };
                (key, entry)
            })
            .collect();
        Self {
            entries,
            leases: HashMap::new(),
        }
    }

    pub fn read(&self, key: &str) -> Option<Stored> {
        self.entries.get(key).map(|entry| Stored {
            credentials: entry.credentials.clone(),
            version: entry.version,
        })
    }

    /// Writes `credentials` under `key` (under `lease`, if given, fenced); the new version.
    pub fn write(
        &mut self,
        key: &str,
        credentials: &Credentials,
        lease: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        if let Some(lease) = lease {
            self.check(key, lease)?;
        }
        let version = self.version(key) + 1;
        let entry = Entry {
            credentials: credentials.clone(),
            version,
        };
        self.entries.insert(key.to_owned(), entry);
        Ok(version)
    }

    /// Removes `key`'s entry; whether there was one. Its lease record stays: fences never go
    /// back.
    pub fn remove(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    /// Takes `key`'s lease until `now_ms + ttl_ms`, if nobody holds it.
    pub fn try_lease(&mut self, key: &str, now_ms: u64, ttl_ms: u64) -> Option<Lease> {
        let version = self.version(key);
        let record = self.leases.entry(key.to_owned()).or_default();
        if record.deadline_ms > now_ms {
            return None;
        }
        record.fence += 1;
        record.deadline_ms = now_ms.saturating_add(ttl_ms);
        record.taken_at_version = version;
        Some(Lease {
            key: key.to_owned(),
            fence: record.fence,
            deadline_ms: record.deadline_ms,
        })
    }

    /// Extends `lease` to `now_ms + ttl_ms` if it is still held: the key's latest, not given
    /// back, not past its deadline. The renewed lease, else `None`.
    pub fn renew(&mut self, lease: &Lease, now_ms: u64, ttl_ms: u64) -> Option<Lease> {
        let record = self.leases.get_mut(&lease.key)?;
        if record.fence != lease.fence || record.deadline_ms <= now_ms {
            return None;
        }
        record.deadline_ms = now_ms.saturating_add(ttl_ms);
        Some(Lease {
            deadline_ms: record.deadline_ms,
            ..lease.clone()
        })
    }

    /// Gives `lease` back, if it is still the key's latest.
    pub fn release(&mut self, lease: &Lease) {
        if let Some(record) = self.leases.get_mut(&lease.key) {
            if record.fence == lease.fence {
                record.deadline_ms = 0;
            }
        }
    }

    fn check(&self, key: &str, lease: &Lease) -> Result<(), StoreError> {
        let latest = self.leases.get(key).map_or(0, |r| r.fence);
        if lease.key != key || lease.fence != latest {
            return Err(StoreError::Fenced {
                key: key.to_owned(),
            });
        }
        Ok(())
    }

    fn version(&self, key: &str) -> u64 {
        let written = self.entries.get(key).map_or(0, |e| e.version);
        // A removed key's next version still grows past what any lease saw.
        let leased = self.leases.get(key).map_or(0, |r| r.taken_at_version);
        written.max(leased)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> Credentials {
        Credentials {
            access_token: Some(text.into()),
            ..Credentials::default()
        }
    }

    #[test]
    fn each_write_gives_the_next_version() {
        let mut table = Table::default();
        assert_eq!(table.write("k", &token("a"), None).unwrap(), 1);
        assert_eq!(table.write("k", &token("b"), None).unwrap(), 2);
        assert_eq!(table.read("k").unwrap().version, 2);
        assert!(table.remove("k"));
        assert_eq!(table.read("k"), None);
        assert_eq!(table.write("k", &token("c"), None).unwrap(), 1);
    }

    #[test]
    fn a_lease_is_taken_by_one_until_released_or_past_its_deadline() {
        let mut table = Table::default();
        let first = table.try_lease("k", 1_000, 500).expect("free");
        assert_eq!(table.try_lease("k", 1_200, 500), None, "held");
        table.release(&first);
        let second = table.try_lease("k", 1_300, 500).expect("released");
        assert!(second.fence > first.fence);
        assert_eq!(table.try_lease("k", 1_799, 500), None);
        let third = table.try_lease("k", 1_800, 500).expect("past its deadline");
        assert!(third.fence > second.fence);
        assert!(table.try_lease("other", 1_800, 500).is_some(), "per key");
    }

    #[test]
    fn a_lease_is_renewed_by_its_holder_only() {
        let mut table = Table::default();
        let first = table.try_lease("k", 1_000, 500).expect("free");
        let renewed = table.renew(&first, 1_400, 500).expect("still held");
        assert_eq!(renewed.deadline_ms, 1_900);
        assert_eq!(renewed.fence, first.fence);
        assert_eq!(
            table.try_lease("k", 1_600, 500),
            None,
            "renewed past its first deadline"
        );
        assert_eq!(table.renew(&renewed, 1_900, 500), None, "lapsed");
        let taken = table.try_lease("k", 1_900, 500).expect("lapsed");
        assert_eq!(table.renew(&renewed, 2_000, 500), None, "taken over");
        table.release(&taken);
        assert_eq!(table.renew(&taken, 2_100, 500), None, "given back");
    }

    #[test]
    fn a_write_under_a_lease_taken_over_is_refused() {
        let mut table = Table::default();
        let stale = table.try_lease("k", 0, 100).unwrap();
        let current = table.try_lease("k", 100, 100).unwrap();
        assert!(matches!(
            table.write("k", &token("late"), Some(&stale)),
            Err(StoreError::Fenced { .. })
        ));
        assert_eq!(table.read("k"), None, "nothing written");
        table.write("k", &token("new"), Some(&current)).unwrap();
        // A stale holder's release leaves the current lease alone.
        table.release(&stale);
        assert_eq!(table.try_lease("k", 150, 100), None);
    }

    #[test]
    fn the_first_format_reads_as_entries_at_version_one() {
        let old = HashMap::from([("k".to_owned(), token("a"))]);
        let table = Table::from_entries(old);
        assert_eq!(table.read("k").unwrap().version, 1);
    }
}
