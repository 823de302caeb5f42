//! [`Clock`]: the time delayed events are due by, the system's or a test's virtual one.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

/// The longest the scheduler sleeps on the system clock before it reads the time again:
/// a wall clock set forward (NTP, a suspended laptop) is noticed within this.
const SYSTEM_RECHECK: Duration = Duration::from_secs(1);

/// The clock delayed and scheduled events are due by: the system's wall clock (the
/// default), or a virtual clock that a test moves by hand
/// (`photon_runtime::testing::VirtualClock`, feature `testing`).
///
/// Due times are wall-clock instants (UTC): with the system clock, every process that
/// publishes or runs the scheduler must have its clock set (NTP), as an event is due by the
/// clock of the process whose scheduler appends it.
#[derive(Clone, Default)]
pub struct Clock {
    virtual_now: Option<Arc<watch::Sender<DateTime<Utc>>>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.virtual_now {
            None => f.write_str("Clock::System"),
            Some(now) => write!(f, "Clock::Virtual({})", *now.borrow()),
        }
    }
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A virtual clock driven through `now`: what the testing helper hands out.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn driven_by(now: Arc<watch::Sender<DateTime<Utc>>>) -> Self {
        Self {
            virtual_now: Some(now),
        }
    }

    /// The current time by this clock.
    pub fn now(&self) -> DateTime<Utc> {
        match &self.virtual_now {
            None => Utc::now(),
            Some(now) => *now.borrow(),
        }
    }

    /// Resolves at `at` by this clock, or earlier (the caller reads [`Clock::now`] again):
    /// on the system clock after at most [`SYSTEM_RECHECK`], on a virtual clock once it was
    /// moved to `at` or past it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub(crate) async fn sleep_until(&self, at: DateTime<Utc>) {
        match &self.virtual_now {
            None => {
                let left = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                tokio::time::sleep(left.min(SYSTEM_RECHECK)).await;
            }
            Some(now) => {
                let mut moved = now.subscribe();
                // The sender lives in this clock, so the wait ends only when time reaches `at`.
                let _ = moved.wait_for(|now| *now >= at).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_virtual_clock_wakes_sleepers_when_moved_past_their_time() {
        let start = Utc::now();
        let sender = Arc::new(watch::channel(start).0);
        let clock = Clock::driven_by(Arc::clone(&sender));
        assert_eq!(clock.now(), start);
        let at = start + chrono::Duration::seconds(30);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(at).await }
        });
        sender.send_replace(start + chrono::Duration::seconds(29));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished(), "woke a second early");
        sender.send_replace(at);
        sleeper.await.unwrap();
        assert_eq!(clock.now(), at);
    }

    #[tokio::test]
    async fn the_system_clock_returns_at_once_for_a_past_time() {
        let clock = Clock::system();
        let before = clock.now();
        clock
            .sleep_until(before - chrono::Duration::seconds(5))
            .await;
        assert!(clock.now() >= before);
    }
}
