//! Membership options of a consumer group member.

use std::time::Duration;

use crate::error::{PhotonError, Result};

/// Default partitions of a topic consumed by a group on a store without shards.
pub const DEFAULT_PARTITIONS: u32 = 8;
/// Default lease period.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5);
/// Default heartbeat (and lease renewal) period.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_millis(250);
/// Default period of partition checkpoint commits.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_millis(100);
/// Default events read ahead per owned partition and not yet acknowledged.
pub const DEFAULT_READ_AHEAD: usize = 256;

/// How a member takes part in its group.
///
/// - A member that cannot renew a lease stops handing out that partition's events at
///   `lease - lease / 5` after its last renewal request (its own monotonic clock), before
///   the lease expires in the store.
/// - A member that dies is replaced within `lease + heartbeat` (its heartbeat and leases
///   expire); a member that leaves hands over at once (next heartbeat of the others).
/// - A handover repeats at most the events the previous owner handled after its last
///   commit (`commit_interval`), and at most `read_ahead` per partition.
/// - When the assignment moves a partition away (a member joined), its owner stops handing
///   it out, waits for the events it handed out to be acknowledged (up to the lease), then
///   commits and releases it. An event still unacknowledged after that is handed to the
///   new owner and its late acknowledgement is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOptions {
    /// This member's name; members of one group have distinct names. A restarted member
    /// may reuse its name.
    pub member: String,
    /// Lease period: how long a partition stays owned without renewal.
    pub lease: Duration,
    /// Heartbeat and renewal period; well below `lease`.
    pub heartbeat: Duration,
    /// Partitions of the topic (stores without shards; on a sharded broker topic each
    /// shard is a partition and this is ignored), at most
    /// [`crate::group::MAX_PARTITIONS`]. The group stores its count: a member started with
    /// another count owns nothing while a member of the stored count is alive, then moves
    /// the group to its own count, each new partition starting from the lowest checkpoint
    /// of the old partitions that held its keys (events may repeat, none is lost). See
    /// [`crate::group::layout`].
    pub partitions: u32,
    /// Period of partition checkpoint commits.
    pub commit_interval: Duration,
    /// Events read ahead per owned partition and not yet acknowledged.
    pub read_ahead: usize,
}

impl GroupOptions {
    /// Defaults for a member named `member`.
    pub fn new(member: impl Into<String>) -> Self {
        Self {
            member: member.into(),
            lease: DEFAULT_LEASE,
            heartbeat: DEFAULT_HEARTBEAT,
            partitions: DEFAULT_PARTITIONS,
            commit_interval: DEFAULT_COMMIT_INTERVAL,
            read_ahead: DEFAULT_READ_AHEAD,
        }
    }

    /// Sets the lease period.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the heartbeat period.
    #[must_use]
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Sets the partition count.
    #[must_use]
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions;
        self
    }

    /// How long a heartbeat keeps the member in the others' view of the group: four
    /// heartbeats, at least a second, at most the lease. A member that stops heartbeating
    /// (killed, frozen) leaves the assignment after that, so its partitions go to members
    /// that are alive once its leases expire.
    pub fn presence(&self) -> Duration {
        (self.heartbeat * 4)
            .max(Duration::from_secs(1))
            .min(self.lease)
    }

    /// How long before the store's expiry the member stops handing out a partition's
    /// events: a fifth of the lease.
    pub fn safety_margin(&self) -> Duration {
        self.lease / 5
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the bad setting: an empty member name, no partitions,
    /// no read-ahead, a zero period, or a heartbeat not below the safety margin's rest.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &str, value: String, expected: &str| PhotonError::Config {
            variable: format!("group option {name}"),
            value,
            expected: expected.to_owned(),
        };
        if self.member.is_empty() {
            return Err(bad("member", String::new(), "a member needs a name"));
        }
        if self.partitions == 0 || self.partitions > crate::group::MAX_PARTITIONS {
            return Err(bad(
                "partitions",
                self.partitions.to_string(),
                "between 1 and 65536 partitions",
            ));
        }
        if self.read_ahead == 0 {
            return Err(bad("read_ahead", "0".into(), "at least one event"));
        }
        if self.commit_interval.is_zero() {
            return Err(bad("commit_interval", "0".into(), "must be positive"));
        }
        if self.heartbeat.is_zero() || self.heartbeat >= self.lease - self.safety_margin() {
            return Err(bad(
                "heartbeat",
                format!("{:?} (lease {:?})", self.heartbeat, self.lease),
                "must be positive and below four fifths of the lease",
            ));
        }
        Ok(())
    }
}
