//! Delayed and scheduled delivery: [`Photon::publish_after`](crate::Photon::publish_after)
//! and [`Photon::publish_at`](crate::Photon::publish_at).
//!
//! An event published for later is validated and sealed at once, then stored as an entry of
//! the schedule topic ([`SchedulerConfig::topic`], default [`SCHEDULE_TOPIC`]). A scheduler
//! appends it to its own topic when it is due; subscribers see it from then on, with the
//! seq it gets then. It works the same on every port, over what every port has (a topic
//! and a consumer group), and it is as durable as the port: a restart or a SIGKILL of the
//! publishing process loses nothing it returned `Ok` for.
//!
//! - **Never early.** An event is appended once the scheduler's clock reads its due time
//!   (rounded up to the millisecond), and no sooner. It is late by the scheduler's
//!   reaction (milliseconds), or, when no scheduler runs, until one does: when the process
//!   running it dies, another process's scheduler takes over within its lease
//!   ([`SchedulerConfig::lease`], default 5 s) and appends what fell due meanwhile.
//! - **A scheduler must run.** [`Photon::publish_after`](crate::Photon::publish_after)
//!   starts one in the publishing process; a process that only consumes starts one with
//!   [`Photon::start_scheduler`](crate::Photon::start_scheduler). Any number of processes
//!   may run one: a lease elects the one that appends, the others stand by.
//! - **Per-key order** among delayed events of one key is the order of their due times;
//!   events due at the same millisecond keep the order they were published in. An event
//!   published for later and an event published at once are ordered by when each is
//!   appended: the delayed one lands after every event of its key published before its due
//!   time.
//! - **Once.** An event is appended once. The scheduler appends due events in batches of
//!   up to [`APPEND_BATCH`], each with a mark that its entry was appended. On mem, SQLite
//!   and PostgreSQL (atomic batches) the events and their marks are stored in one
//!   transaction, so no event is appended twice. On NATS and Fluvio the marks follow the
//!   events: when the scheduler's process dies in between, the next scheduler appends
//!   those events again, and NATS drops the repeats (same `Nats-Msg-Id` within the
//!   stream's duplicate window) as Fluvio's readers do (same envelope id within
//!   `DEDUP_WINDOW` records).
//! - **Limits.** A scheduler holds at most [`SchedulerConfig::max_waiting`] entries not yet
//!   due (default [`DEFAULT_MAX_WAITING`]); past that it reads no further until some are
//!   appended, so an entry behind the limit that is due sooner is late (never early, never
//!   lost). The entry holds the sealed event, so a delayed event's body must fit the
//!   port's payload limit once encoded in the entry (about 4/3 of a sealed body).
//! - **Retention.** The schedule topic is a topic of the store: a port's retention that
//!   removes records older than the longest delay loses the entries it removes.

mod clock;
mod entry;
mod publish;
mod scheduler;

use std::time::Duration;

use photon_core::group::DEFAULT_LEASE;
use photon_core::{validate_topic_name, PhotonError, Result};

pub use clock::Clock;
pub(crate) use publish::due_after;
pub(crate) use scheduler::SchedulerTask;

/// The default schedule topic.
pub const SCHEDULE_TOPIC: &str = "photon.schedule";
/// The default name of the scheduler group.
pub const SCHEDULER_GROUP: &str = "photon-scheduler";
/// The most due events a scheduler appends with one append (one transaction on a store
/// with atomic batches): a burst of due events costs a commit per batch, not per event.
pub const APPEND_BATCH: usize = 256;
/// The default number of entries a scheduler holds before their time.
pub const DEFAULT_MAX_WAITING: usize = 100_000;

/// Where a [`Photon`](crate::Photon) keeps events published for later and how its
/// scheduler runs. Processes that share a schedule must use the same topic and group.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use photon_runtime::SchedulerConfig;
///
/// let config = SchedulerConfig::default()
///     .topic("billing.schedule")
///     .lease(Duration::from_secs(2));
/// assert_eq!(config.topic, "billing.schedule");
/// ```
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// The topic entries are stored in (default [`SCHEDULE_TOPIC`]).
    pub topic: String,
    /// The group whose lease elects the one scheduler that appends (default
    /// [`SCHEDULER_GROUP`]).
    pub group: String,
    /// How long a scheduler's lease lasts without renewal: the longest a due event waits
    /// when the scheduler's process dies (default 5 s).
    pub lease: Duration,
    /// The most entries a scheduler holds before their time (default
    /// [`DEFAULT_MAX_WAITING`]).
    pub max_waiting: usize,
    /// The clock events are due by (default the system's).
    pub clock: Clock,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            topic: SCHEDULE_TOPIC.to_owned(),
            group: SCHEDULER_GROUP.to_owned(),
            lease: DEFAULT_LEASE,
            max_waiting: DEFAULT_MAX_WAITING,
            clock: Clock::system(),
        }
    }
}

impl SchedulerConfig {
    /// Sets the schedule topic.
    #[must_use]
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = topic.into();
        self
    }

    /// Sets the scheduler group's name.
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// Sets the scheduler's lease.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the most entries held before their time.
    #[must_use]
    pub fn max_waiting(mut self, max_waiting: usize) -> Self {
        self.max_waiting = max_waiting;
        self
    }

    /// Sets the clock events are due by.
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the setting: a schedule topic that is no valid topic
    /// name, an empty group, no room for waiting entries, a lease under a second.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &str, value: String, expected: &str| PhotonError::Config {
            variable: format!("scheduler {name}"),
            value,
            expected: expected.to_owned(),
        };
        if let Err(err) = validate_topic_name(&self.topic) {
            return Err(bad("topic", self.topic.clone(), &err.to_string()));
        }
        if self.group.is_empty() {
            return Err(bad("group", String::new(), "a group needs a name"));
        }
        if self.max_waiting == 0 {
            return Err(bad("max_waiting", "0".into(), "at least one entry"));
        }
        if self.lease < Duration::from_secs(1) {
            return Err(bad("lease", format!("{:?}", self.lease), "at least 1s"));
        }
        Ok(())
    }
}

/// What [`Photon::publish_after`](crate::Photon::publish_after) and
/// [`Photon::publish_at`](crate::Photon::publish_at) stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// The envelope id the event is appended under (brokers deduplicate by it).
    pub envelope_id: String,
    /// When it is due, rounded up to the millisecond.
    pub due_at: chrono::DateTime<chrono::Utc>,
    /// The entry's seq in the schedule topic.
    pub entry_seq: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_named() {
        let named = |config: SchedulerConfig| match config.validate() {
            Err(PhotonError::Config { variable, .. }) => variable,
            other => panic!("expected a config error, got {other:?}"),
        };
        assert_eq!(
            named(SchedulerConfig::default().topic("Bad!")),
            "scheduler topic"
        );
        assert_eq!(
            named(SchedulerConfig::default().group("")),
            "scheduler group"
        );
        assert_eq!(
            named(SchedulerConfig::default().max_waiting(0)),
            "scheduler max_waiting"
        );
        assert_eq!(
            named(SchedulerConfig::default().lease(Duration::from_millis(500))),
            "scheduler lease"
        );
        assert!(SchedulerConfig::default().validate().is_ok());
    }
}
