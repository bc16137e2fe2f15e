//! The one internal form of a request timeout, and the one place that words it.
//!
//! Callers give a [`Duration`]; from there on a timeout travels as a [`Timeout`]: whole
//! milliseconds (rounded up), 4 bytes, `Option<Timeout>` too (the zero niche means "none").

use std::{num::NonZeroU32, time::Duration};

use crate::error::Error;

/// A request timeout: 1 ms to `u32::MAX` ms (about 49 days); longer ones are capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timeout(NonZeroU32);

impl Timeout {
    /// Rounds up to whole milliseconds (at least 1), caps at `u32::MAX` ms.
    pub fn new(after: Duration) -> Self {
        let ms = after.as_nanos().div_ceil(1_000_000).max(1);
        let ms = u32::try_from(ms).unwrap_or(u32::MAX);
        Self(NonZeroU32::new(ms).unwrap_or(NonZeroU32::MAX))
    }

    /// `None` for 0 ms.
    pub fn from_ms(ms: u32) -> Option<Self> {
        NonZeroU32::new(ms).map(Self)
    }

    pub fn ms(self) -> u32 {
        self.0.get()
    }

    pub fn duration(self) -> Duration {
        Duration::from_millis(self.ms().into())
    }

    /// The reason a timed-out request's `notifications/cancelled` carries.
    pub fn reason(self) -> String {
        format!("timed out after {} ms", self.ms())
    }

    /// What the caller of a timed-out request gets.
    pub fn error(self) -> Error {
        Error::Timeout {
            after: self.duration(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_to_whole_milliseconds_and_caps() {
        assert_eq!(Timeout::new(Duration::from_micros(1)).ms(), 1);
        assert_eq!(Timeout::new(Duration::from_micros(1500)).ms(), 2);
        assert_eq!(Timeout::new(Duration::from_secs(60)).ms(), 60_000);
        assert_eq!(Timeout::new(Duration::MAX).ms(), u32::MAX);
        assert_eq!(Timeout::from_ms(0), None);
        assert_eq!(
            Timeout::new(Duration::from_millis(300)).reason(),
            "timed out after 300 ms"
        );
        assert_eq!(std::mem::size_of::<Option<Timeout>>(), 4);
    }
}
