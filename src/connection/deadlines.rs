//! Request timeouts without a timer per request. Pure bookkeeping: the time is always passed in.
//!
//! Time is cut into 10 ms ticks counted from an epoch. A request with a timeout records the tick
//! it expires at, and only a count of live requests per tick is kept here. The connection wakes
//! up once, for the earliest tick with a live request ([`Deadlines::next`]); only when one is
//! actually due does it look through the in-flight table for the expired ones. A request that
//! finishes first just decrements its tick's count: nothing per request stays behind.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

const TICK: Duration = Duration::from_millis(10);

pub(crate) struct Deadlines {
    epoch: Instant,
    /// Tick → requests still in flight that expire at it.
    due: BTreeMap<u32, u32>,
}

impl Deadlines {
    pub fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            due: BTreeMap::new(),
        }
    }

    /// Registers a request expiring `after` from `now`; returns its tick (never 0).
    pub fn add(&mut self, after: Duration, now: Instant) -> u32 {
        let at = now.saturating_duration_since(self.epoch) + after;
        let tick = u32::try_from(at.as_nanos().div_ceil(TICK.as_nanos()))
            .unwrap_or(u32::MAX)
            .max(1);
        *self.due.entry(tick).or_insert(0) += 1;
        tick
    }

    /// A request expiring at `tick` finished or was cancelled.
    pub fn remove(&mut self, tick: u32) {
        if let Some(count) = self.due.get_mut(&tick) {
            *count -= 1;
            if *count == 0 {
                self.due.remove(&tick);
            }
        }
    }

    /// The tick `now` falls in.
    pub fn tick(&self, now: Instant) -> u32 {
        let since = now.saturating_duration_since(self.epoch);
        u32::try_from(since.as_nanos() / TICK.as_nanos()).unwrap_or(u32::MAX)
    }

    /// Forgets every tick up to `tick`; returns whether a live request was due.
    pub fn take_due(&mut self, tick: u32) -> bool {
        let later = self.due.split_off(&(tick.saturating_add(1)));
        let due = !self.due.is_empty();
        self.due = later;
        due
    }

    /// When the earliest tick with a live request begins.
    pub fn next(&self) -> Option<Instant> {
        let (&tick, _) = self.due.first_key_value()?;
        Some(self.epoch + TICK * tick)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    pub fn clear(&mut self) {
        self.due.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_adds_and_removes_and_due_ticks_are_taken_once() {
        let epoch = Instant::now();
        let mut d = Deadlines::new(epoch);
        let a = d.add(Duration::from_millis(50), epoch);
        let b = d.add(Duration::from_millis(50), epoch + Duration::from_millis(1));
        let c = d.add(Duration::from_secs(60), epoch);
        assert!(a <= b && b < c);
        d.remove(a);
        assert_eq!(d.next(), Some(epoch + TICK * b));
        assert!(!d.take_due(b - 1));
        assert!(d.take_due(b));
        assert!(!d.take_due(b), "taken once");
        assert_eq!(d.next(), Some(epoch + TICK * c));
        d.remove(c);
        assert!(d.next().is_none() && d.is_empty());
    }

    #[test]
    fn a_deadline_is_never_due_before_its_time() {
        let epoch = Instant::now();
        let mut d = Deadlines::new(epoch);
        let now = epoch + Duration::from_millis(3);
        let tick = d.add(Duration::from_millis(25), now);
        let due_at = d.next().unwrap();
        assert!(due_at >= now + Duration::from_millis(25));
        assert!(!d.take_due(d.tick(due_at) - 1));
        assert!(d.take_due(tick));
    }
}
