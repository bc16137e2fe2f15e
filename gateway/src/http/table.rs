//! The table of 2025-11-25 downstream sessions, as a plain type: no I/O, time passed in, one
//! method per event. The HTTP handlers (on any worker) report what happens and do what it
//! returns: a session handle to talk to, a refusal to answer, the sessions to end.
//!
//! - Every session has an owner (`Owner`): a request, stream or `DELETE` naming a session of
//!   another owner finds nothing, exactly as for an id never given, and changes nothing.
//! - A session with no exchange under way for longer than the idle limit is ended at the next
//!   sweep; one with a request in progress is not idle.
//! - Sessions are capped, in all and per authenticated owner (the anonymous owner is everyone
//!   and is capped by the total only).
//! - Every session opened leaves exactly once (closed, expired, or at shutdown) with its handle,
//!   so that what it left in flight upstream is cancelled; after shutdown nothing opens.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use crate::owner::Owner;

/// The table's limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// A session idle this long is ended.
    pub idle: Duration,
    /// Sessions in all.
    pub sessions: usize,
    /// Sessions of one authenticated owner.
    pub per_owner: usize,
}

/// Why a session was not opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// The table holds its limit of sessions (`503`).
    Table(usize),
    /// This owner holds its limit (`429`).
    Owner(usize),
    /// The gateway is stopping (`503`).
    Stopping,
}

struct Entry<H> {
    owner: Owner,
    handle: H,
    last_seen: Instant,
    /// With replicas: when its shared record was last looked at (`due_for_record`).
    record_seen: Instant,
    /// Requests and streams under way: a busy session is not idle.
    busy: u32,
}

pub struct Table<H> {
    sessions: HashMap<String, Entry<H>>,
    owners: HashMap<Owner, usize>,
    limits: Limits,
    stopping: bool,
    /// The model test's deliberate isolation bug: owners are not compared.
    #[cfg(test)]
    ignore_owner: bool,
}

impl<H: Clone> Table<H> {
    pub fn new(limits: Limits) -> Self {
        Self {
            sessions: HashMap::new(),
            owners: HashMap::new(),
            limits,
            stopping: false,
            #[cfg(test)]
            ignore_owner: false,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// `owner` opens session `id` (fresh and unguessable) at `now`.
    pub fn open(&mut self, id: String, owner: Owner, handle: H, now: Instant) -> Result<(), Full> {
        if self.stopping {
            return Err(Full::Stopping);
        }
        if self.sessions.len() >= self.limits.sessions {
            return Err(Full::Table(self.limits.sessions));
        }
        let held = self.owners.get(&owner).copied().unwrap_or(0);
        if owner != Owner::Anonymous && held >= self.limits.per_owner {
            return Err(Full::Owner(self.limits.per_owner));
        }
        *self.owners.entry(owner.clone()).or_default() += 1;
        let entry = Entry {
            owner,
            handle,
            last_seen: now,
            record_seen: now,
            busy: 0,
        };
        self.sessions.insert(id, entry);
        Ok(())
    }

    /// `owner` begins an exchange (a request, a stream) with session `id` at `now`: its handle,
    /// if the session is there and `owner`'s. Each begun exchange is [`finish`](Self::finish)ed.
    pub fn begin(&mut self, id: &str, owner: &Owner, now: Instant) -> Option<H> {
        let ignore = self.ignores_owner();
        let entry = self
            .sessions
            .get_mut(id)
            .filter(|e| ignore || e.owner == *owner)?;
        entry.busy += 1;
        entry.last_seen = now;
        Some(entry.handle.clone())
    }

    /// `owner` begins an exchange with session `id`, opened on another replica: the handle of
    /// this replica's copy if it made one meanwhile (`false`), else `handle`, opened as its copy
    /// here and counted as any session (`true`). `None` if `id` is another owner's here.
    pub fn begin_copy(
        &mut self,
        id: &str,
        owner: &Owner,
        handle: H,
        now: Instant,
    ) -> Result<Option<(H, bool)>, Full> {
        if let Some(there) = self.begin(id, owner, now) {
            return Ok(Some((there, false)));
        }
        if self.sessions.contains_key(id) {
            return Ok(None);
        }
        self.open(id.to_owned(), owner.clone(), handle, now)?;
        let begun = self.begin(id, owner, now).ok_or(Full::Stopping)?;
        Ok(Some((begun, true)))
    }

    /// With replicas: whether session `id`'s shared record is due to be looked at again (its
    /// expiry pushed back, a close elsewhere seen) at `now`, once `every`; if so, it counts as
    /// looked at.
    pub fn due_for_record(&mut self, id: &str, now: Instant, every: Duration) -> bool {
        let Some(entry) = self.sessions.get_mut(id) else {
            return false;
        };
        let due = now.saturating_duration_since(entry.record_seen) >= every;
        if due {
            entry.record_seen = now;
        }
        due
    }

    /// Session `id`'s handle, whoever's it is: for a message another replica relays (its
    /// owner was checked there).
    pub fn relayed_to(&self, id: &str) -> Option<H> {
        self.sessions.get(id).map(|entry| entry.handle.clone())
    }

    /// Session `id` was closed on another replica: its handle, removed, to end.
    pub fn closed_elsewhere(&mut self, id: &str) -> Option<H> {
        self.remove(id)
    }

    /// An exchange begun at `id` ended at `now` (the session may have left meanwhile).
    pub fn finish(&mut self, id: &str, now: Instant) {
        if let Some(entry) = self.sessions.get_mut(id) {
            entry.busy = entry.busy.saturating_sub(1);
            entry.last_seen = now;
        }
    }

    /// `owner` closes session `id` (`DELETE`): its handle, to end it.
    pub fn close(&mut self, id: &str, owner: &Owner) -> Option<H> {
        if self.sessions.get(id)?.owner != *owner && !self.ignores_owner() {
            return None;
        }
        self.remove(id)
    }

    /// The sessions idle for longer than the limit at `now`, removed: to end.
    pub fn expire(&mut self, now: Instant) -> Vec<H> {
        let idle = self.limits.idle;
        let expired: Vec<String> = (self.sessions.iter())
            .filter(|(_, e)| e.busy == 0 && now.saturating_duration_since(e.last_seen) >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        expired.iter().filter_map(|id| self.remove(id)).collect()
    }

    /// The gateway stops: every session, removed, to end; none opens any more.
    pub fn stop(&mut self) -> Vec<H> {
        self.stopping = true;
        self.owners.clear();
        self.sessions.drain().map(|(_, e)| e.handle).collect()
    }

    #[cfg(test)]
    fn ignores_owner(&self) -> bool {
        self.ignore_owner
    }

    #[cfg(not(test))]
    fn ignores_owner(&self) -> bool {
        false
    }

    fn remove(&mut self, id: &str) -> Option<H> {
        let entry = self.sessions.remove(id)?;
        if let Some(held) = self.owners.get_mut(&entry.owner) {
            *held -= 1;
            if *held == 0 {
                self.owners.remove(&entry.owner);
            }
        }
        Some(entry.handle)
    }
}

#[cfg(test)]
#[path = "table_model.rs"]
mod model;

#[cfg(test)]
mod copies {
    use super::*;

    const LIMITS: Limits = Limits {
        idle: Duration::from_secs(60),
        sessions: 10,
        per_owner: 2,
    };

    fn alice() -> Owner {
        Owner::user("https://issuer", "alice")
    }

    #[test]
    fn a_copy_is_made_once_and_counted_as_its_owners_session() {
        let (mut table, now) = (Table::new(LIMITS), Instant::now());
        assert_eq!(table.begin_copy("s", &alice(), 1, now), Ok(Some((1, true))));
        assert_eq!(
            table.begin_copy("s", &alice(), 2, now),
            Ok(Some((1, false)))
        );
        assert_eq!(table.len(), 1);
        table.open("t".into(), alice(), 3, now).unwrap();
        let full = table.begin_copy("u", &alice(), 4, now);
        assert_eq!(full, Err(Full::Owner(2)), "the per-owner cap counts copies");
    }

    #[test]
    fn another_owners_session_is_neither_found_nor_replaced_by_a_copy() {
        let (mut table, now) = (Table::new(LIMITS), Instant::now());
        table.open("s".into(), alice(), 1, now).unwrap();
        let mallory = Owner::user("https://issuer", "mallory");
        assert_eq!(table.begin_copy("s", &mallory, 2, now), Ok(None));
        assert_eq!(
            table.begin("s", &alice(), now),
            Some(1),
            "alice's is still hers"
        );
    }

    #[test]
    fn a_record_is_looked_at_once_per_period_and_a_close_elsewhere_removes_the_copy() {
        let (mut table, now) = (Table::new(LIMITS), Instant::now());
        table.open("s".into(), alice(), 1, now).unwrap();
        let every = Duration::from_secs(1);
        assert!(!table.due_for_record("s", now, every), "just made from it");
        let later = now + every;
        assert!(table.due_for_record("s", later, every));
        assert!(!table.due_for_record("s", later, every), "looked at");
        assert!(!table.due_for_record("t", later, every), "no such copy");
        assert_eq!(table.closed_elsewhere("s"), Some(1));
        assert_eq!(table.len(), 0);
        table.open("t".into(), alice(), 2, now).unwrap();
        table.open("u".into(), alice(), 3, now).unwrap();
    }
}
