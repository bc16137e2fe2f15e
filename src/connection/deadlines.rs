//! Request timeouts kept by the actor, without a timer per request.
//!
//! Time is cut into 10 ms ticks. A request with a timeout records the tick it expires at, and
//! the actor keeps only a count of live requests per tick. One wake-up is scheduled for the
//! earliest tick with a live request; only when one is actually due does the actor look through
//! the in-flight table for the expired ones. A request that finishes first just decrements its
//! tick's count: nothing per request stays behind.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

const TICK: Duration = Duration::from_millis(10);

pub(crate) struct Deadlines {
    epoch: Instant,
    /// Tick → requests still in flight that expire at it.
    due: BTreeMap<u32, u32>,
    /// The scheduled wake-up and its tick. A task holding only a weak address, so a pending
    /// wake-up never keeps the connection alive.
    pub wake: Option<(u32, tokio::task::JoinHandle<()>)>,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            due: BTreeMap::new(),
            wake: None,
        }
    }
}

impl Deadlines {
    /// Registers a request expiring `timeout` from now; returns its tick (never 0).
    pub fn add(&mut self, timeout: Duration) -> u32 {
        let at = self.epoch.elapsed() + timeout;
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

    pub fn now(&self) -> u32 {
        u32::try_from(self.epoch.elapsed().as_nanos() / TICK.as_nanos()).unwrap_or(u32::MAX)
    }

    /// Forgets every tick up to `now`; returns whether a live request was due.
    pub fn take_due(&mut self, now: u32) -> bool {
        let later = self.due.split_off(&(now.saturating_add(1)));
        let due = !self.due.is_empty();
        self.due = later;
        due
    }

    /// The earliest tick with a live request, and how long until it.
    pub fn next(&self) -> Option<(u32, Duration)> {
        let (&tick, _) = self.due.first_key_value()?;
        let at = self.epoch + TICK * tick;
        Some((tick, at.saturating_duration_since(Instant::now())))
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
        let mut d = Deadlines::default();
        let a = d.add(Duration::from_millis(50));
        let b = d.add(Duration::from_millis(50));
        let c = d.add(Duration::from_secs(60));
        assert!(a <= b && b < c);
        d.remove(a);
        assert_eq!(d.next().map(|n| n.0), Some(b));
        assert!(!d.take_due(b - 1));
        assert!(d.take_due(b));
        assert!(!d.take_due(b), "taken once");
        assert_eq!(d.next().map(|n| n.0), Some(c));
        d.remove(c);
        assert!(d.next().is_none());
    }
}
