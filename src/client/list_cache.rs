//! The cache of list pages (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`) that a 2026-07-28 server marks cacheable with `ttlMs`.
//!
//! A page is kept for its `ttlMs` (either `cacheScope`: the cache belongs to one connection,
//! which speaks for one identity) and dropped by the family's `notifications/*/list_changed`.
//! A page fetched while such a notification arrived is not kept: each family has a generation,
//! bumped by its notification, and a page is stored only under the generation it was asked in.
//! Results without `ttlMs` (every server of an older revision) are never cached.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde_json::value::RawValue;

use crate::protocol::{notifications::ServerNotification, results::CacheHints};

/// Pages kept at most, so a server handing out endless cursors cannot grow the cache.
const MAX_PAGES: usize = 4096;

/// The lists a `list_changed` notification names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Family {
    Tools,
    Prompts,
    Resources,
}

impl Family {
    /// The family of a list method; `None` for every other method.
    pub fn of(method: &str) -> Option<Family> {
        match method {
            "tools/list" => Some(Family::Tools),
            "prompts/list" => Some(Family::Prompts),
            "resources/list" | "resources/templates/list" => Some(Family::Resources),
            _ => None,
        }
    }

    /// The family a notification says changed.
    pub fn changed_by(notification: &ServerNotification) -> Option<Family> {
        match notification {
            ServerNotification::ToolsListChanged => Some(Family::Tools),
            ServerNotification::PromptsListChanged => Some(Family::Prompts),
            ServerNotification::ResourcesListChanged => Some(Family::Resources),
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which page: the method and the cursor it was asked with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PageKey {
    pub method: &'static str,
    pub cursor: Option<String>,
}

/// A page asked for: its key and the generation of its family when it was asked.
#[derive(Debug)]
pub(crate) struct Lookup {
    pub key: PageKey,
    generation: u64,
}

struct Kept {
    page: Box<RawValue>,
    until: Instant,
}

#[derive(Default)]
struct Pages {
    generations: [u64; 3],
    kept: HashMap<PageKey, Kept>,
}

#[derive(Default)]
pub(crate) struct ListCache {
    pages: Mutex<Pages>,
}

impl ListCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pages> {
        // Nothing panics while holding the lock; a poisoned cache is still consistent.
        self.pages.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept page for `key` if it is still fresh (and `reuse`); otherwise what to store the
    /// answer under.
    pub fn get(&self, key: PageKey, now: Instant, reuse: bool) -> Result<Box<RawValue>, Lookup> {
        let mut pages = self.lock();
        match pages.kept.get(&key) {
            Some(kept) if reuse && kept.until > now => return Ok(kept.page.clone()),
            Some(_) => {
                pages.kept.remove(&key);
            }
            None => {}
        }
        let generation = Family::of(key.method).map_or(0, |f| pages.generations[f.index()]);
        Err(Lookup { key, generation })
    }

    /// Keeps a fetched page for its `ttlMs`, unless its family changed since it was asked.
    pub fn store(&self, lookup: Lookup, page: &RawValue, now: Instant) {
        let Ok(hints) = serde_json::from_str::<CacheHints>(page.get()) else {
            return;
        };
        let Some(ttl) = hints.ttl_ms.filter(|ttl| *ttl > 0) else {
            return;
        };
        let Some(family) = Family::of(lookup.key.method) else {
            return;
        };
        let mut pages = self.lock();
        if pages.generations[family.index()] != lookup.generation {
            return; // a list_changed arrived while this page was on its way
        }
        if pages.kept.len() >= MAX_PAGES {
            pages.kept.retain(|_, kept| kept.until > now);
            if pages.kept.len() >= MAX_PAGES {
                return;
            }
        }
        let until = now + Duration::from_millis(ttl);
        pages.kept.insert(
            lookup.key,
            Kept {
                page: page.to_owned(),
                until,
            },
        );
    }

    /// Drops every page of `family` and any page of it still on its way.
    pub fn invalidate(&self, family: Family) {
        let mut pages = self.lock();
        pages.generations[family.index()] += 1;
        pages
            .kept
            .retain(|key, _| Family::of(key.method) != Some(family));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    fn key(method: &'static str) -> PageKey {
        PageKey {
            method,
            cursor: None,
        }
    }

    #[test]
    fn a_page_with_ttl_is_kept_until_it_expires() {
        let cache = ListCache::default();
        let now = Instant::now();
        let lookup = cache.get(key("tools/list"), now, true).unwrap_err();
        cache.store(lookup, &raw(r#"{"tools":[],"ttlMs":1000}"#), now);
        assert!(cache.get(key("tools/list"), now, true).is_ok());
        let later = now + Duration::from_millis(1001);
        assert!(cache.get(key("tools/list"), later, true).is_err());
    }

    #[test]
    fn a_page_without_ttl_or_with_zero_is_never_kept() {
        let cache = ListCache::default();
        let now = Instant::now();
        for page in [r#"{"tools":[]}"#, r#"{"tools":[],"ttlMs":0}"#] {
            let lookup = cache.get(key("tools/list"), now, true).unwrap_err();
            cache.store(lookup, &raw(page), now);
            assert!(cache.get(key("tools/list"), now, true).is_err(), "{page}");
        }
    }

    #[test]
    fn list_changed_drops_its_family_only_and_pages_in_flight() {
        let cache = ListCache::default();
        let now = Instant::now();
        let page = raw(r#"{"x":[],"ttlMs":60000}"#);
        for method in ["tools/list", "prompts/list", "resources/templates/list"] {
            let lookup = cache.get(key(method), now, true).unwrap_err();
            cache.store(lookup, &page, now);
        }
        let in_flight = cache.get(key("resources/list"), now, true).unwrap_err();
        cache.invalidate(Family::Resources);
        cache.store(in_flight, &page, now); // asked before the notification: not kept
        assert!(cache.get(key("resources/list"), now, true).is_err());
        assert!(cache
            .get(key("resources/templates/list"), now, true)
            .is_err());
        assert!(cache.get(key("tools/list"), now, true).is_ok());
        assert!(cache.get(key("prompts/list"), now, true).is_ok());
    }
}
