//! Model-based test of [`Supervision`]: random interleavings of starts, connects, failures,
//! ends, stops and time, with the invariants a user relies on checked after every step.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::supervision::{Next, RestartPolicy, Status, Supervision};
use crate::error::Error;

#[derive(Debug, Clone)]
enum Event {
    Start { forced: bool },
    Connected,
    ConnectFailed,
    Ended,
    Stop,
    Advance(u64),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => Just(Event::Start { forced: false }),
        1 => Just(Event::Start { forced: true }),
        3 => Just(Event::Connected),
        3 => Just(Event::ConnectFailed),
        3 => Just(Event::Ended),
        1 => Just(Event::Stop),
        4 => (0u64..40_000).prop_map(Event::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(5_000)
    ))]

    #[test]
    fn supervision_keeps_its_promises(
        enabled in prop::bool::weighted(0.9),
        max_restarts in 0u32..5,
        events in prop::collection::vec(event(), 1..80),
    ) {
        let policy = RestartPolicy {
            max_restarts,
            window: Duration::from_secs(60),
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        };
        let mut s = Supervision::new(policy.clone(), enabled);
        let t0 = Instant::now();
        let mut now = t0;
        // Restarts granted since the last forced start, with when they were granted.
        let mut granted: Vec<Instant> = Vec::new();
        let mut starts = 0u64;
        for event in events {
            let before = s.status().clone();
            match event {
                Event::Start { forced } => {
                    let began = s.start(now, forced);
                    let allowed = match &before {
                        Status::Idle => true,
                        Status::BackingOff { until, .. } => forced || now >= *until,
                        Status::Failed { .. } | Status::Stopped => forced,
                        Status::Starting | Status::Ready | Status::Disabled => false,
                    };
                    prop_assert_eq!(began, allowed, "start from {:?}", before.name());
                    if began {
                        starts += 1;
                        prop_assert_eq!(s.status().name(), "starting");
                        if forced {
                            granted.clear();
                        }
                    }
                }
                Event::Connected => {
                    s.connected(now);
                    let expected = if matches!(before, Status::Starting) { "ready" } else { before.name() };
                    prop_assert_eq!(s.status().name(), expected);
                }
                Event::ConnectFailed | Event::Ended => {
                    let next = if matches!(event, Event::Ended) {
                        s.ended(Error::Protocol("x".into()), now)
                    } else {
                        s.connect_failed(Error::Protocol("x".into()), now)
                    };
                    let applies = if matches!(event, Event::Ended) {
                        matches!(before, Status::Ready)
                    } else {
                        matches!(before, Status::Starting)
                    };
                    if !applies {
                        prop_assert_eq!(&next, &Next::Nothing);
                        prop_assert_eq!(s.status().name(), before.name(), "ignored");
                        continue;
                    }
                    match next {
                        Next::RestartAt(at) => {
                            let delay = at - now;
                            // At once only for the first end within a window.
                            let earlier = granted.iter().filter(|at| now.saturating_duration_since(**at) < policy.window).count();
                            let immediate = matches!(event, Event::Ended) && delay.is_zero() && earlier == 0;
                            prop_assert!(immediate || (delay >= policy.min_delay && delay <= policy.max_delay), "{:?}", delay);
                            prop_assert_eq!(s.status().name(), "backing-off");
                            granted.push(now);
                        }
                        Next::Nothing => {
                            let failed = matches!(s.status(), Status::Failed { restarts, .. } if *restarts > policy.max_restarts);
                            prop_assert!(failed, "failed past the cap: {:?}", s.status().name());
                        }
                    }
                    // The cap: never more restarts granted within one window than allowed.
                    let recent = granted.iter().filter(|at| now.saturating_duration_since(**at) < policy.window).count();
                    prop_assert!(recent <= policy.max_restarts as usize, "{} restarts within the window", recent);
                }
                Event::Stop => {
                    s.stop();
                    let expected = if matches!(before, Status::Disabled) { "disabled" } else { "stopped" };
                    prop_assert_eq!(s.status().name(), expected);
                }
                Event::Advance(ms) => now += Duration::from_millis(ms),
            }
            if !enabled {
                prop_assert_eq!(s.status().name(), "disabled", "a disabled server never starts");
            }
            prop_assert_eq!(s.starts(), starts);
        }
    }
}
