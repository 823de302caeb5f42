//! [`VirtualClock`]: time a test moves by hand, for delayed and scheduled delivery.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::Clock;

/// A clock that stands still until the test moves it: give its [`VirtualClock::clock`] to
/// [`SchedulerConfig::clock`](crate::SchedulerConfig::clock), publish for later, then
/// [`advance`](VirtualClock::advance) it; events due by then are appended, later ones are
/// not. It works on every port (the scheduler reads this clock instead of the system's),
/// and a test of a day-long delay takes milliseconds.
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use futures::StreamExt;
/// use photon_runtime::testing::VirtualClock;
/// use photon_runtime::{Photon, SchedulerConfig};
/// use serde_json::json;
///
/// let clock = VirtualClock::new();
/// let photon = Photon::builder()
///     .scheduler(SchedulerConfig::default().clock(clock.clock()))
///     .build()?;
/// let mut reminders = photon.subscribe("reminders", None, None);
/// let day = Duration::from_secs(24 * 3600);
/// photon.publish_after("reminders", None, json!(null), json!("tomorrow"), day).await?;
/// clock.advance(day);
/// assert_eq!(reminders.next().await.unwrap()?.payload, json!("tomorrow"));
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct VirtualClock {
    now: Arc<watch::Sender<DateTime<Utc>>>,
}

impl Default for VirtualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl VirtualClock {
    /// A virtual clock reading the system's time now, to the millisecond (due times are
    /// kept in milliseconds, rounded up), standing still from then on.
    pub fn new() -> Self {
        let now = Utc::now();
        Self::starting_at(DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now))
    }

    /// A virtual clock reading `start`.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self {
            now: Arc::new(watch::channel(start).0),
        }
    }

    /// The [`Clock`] to hand to Photon.
    pub fn clock(&self) -> Clock {
        Clock::driven_by(Arc::clone(&self.now))
    }

    /// The time it reads.
    pub fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    /// Moves the clock forward by `by`, waking the schedulers waiting on it.
    ///
    /// # Panics
    /// When `by` does not fit a date (hundreds of millions of years).
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).expect("a duration that fits a date");
        self.now.send_modify(|now| *now += by);
    }

    /// Sets the clock to `at`, forward or back (back: nothing already appended is undone).
    pub fn set(&self, at: DateTime<Utc>) {
        self.now.send_replace(at);
    }
}
