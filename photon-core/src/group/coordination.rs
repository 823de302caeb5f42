//! The primitive a port provides so that a group spans processes: member heartbeats and
//! compare-and-set partition leases with an expiry and an epoch (fencing token), plus a
//! checkpoint per partition that only the current lease holder can move.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::{PhotonError, Result};
use crate::port::{RecordStream, StartAt};

/// One group on one topic: the namespace of its members, leases and checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupScope {
    /// Group name.
    pub group: String,
    /// Topic.
    pub topic: String,
}

impl GroupScope {
    /// A scope.
    pub fn new(group: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            topic: topic.into(),
        }
    }
}

/// A live member as its last heartbeat described it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LiveMember {
    /// The member's name (two incarnations of one member share it).
    pub name: String,
    /// The partition count the member splits the topic into.
    pub partitions: u32,
}

/// The lease a delivery was handed out under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The partition's id in the store: its index while the group keeps its first
    /// partition count; after a change of count, `generation << 16 | index` (see
    /// [`crate::group::layout`]), so that `(partition, epoch)` never repeats.
    pub partition: u32,
    /// The lease's epoch.
    pub epoch: u64,
    /// The owner token (this member incarnation).
    pub owner: String,
}

/// One member's heartbeat: who beats, for how long, and how it splits the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat<'a> {
    /// The member's name (two incarnations of one member share it).
    pub member: &'a str,
    /// The owner token of this incarnation (`<member name>#<incarnation>`).
    pub owner: &'a str,
    /// The partition count the member splits the topic into.
    pub partitions: u32,
    /// How long the member counts as alive without another beat.
    pub ttl: Duration,
}

/// A claim on a partition's lease, by one member incarnation, for `ttl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The partition's id in the store (see [`Ownership::partition`]).
    pub partition: u32,
    /// The claiming owner token.
    pub owner: &'a str,
    /// How long the lease lasts without a renewal.
    pub ttl: Duration,
}

/// A lease as its holder knows it: the fencing token every renewal, release and commit
/// presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease<'a> {
    /// The partition's id in the store (see [`Ownership::partition`]).
    pub partition: u32,
    /// The holder's owner token.
    pub owner: &'a str,
    /// The epoch the lease was acquired at.
    pub epoch: u64,
}

impl HeldLease<'_> {
    /// The refusal of a call made under this lease after it expired or moved.
    pub fn fenced(&self, scope: &GroupScope) -> PhotonError {
        PhotonError::Fenced {
            group: scope.group.clone(),
            topic: scope.topic.clone(),
            partition: self.partition,
            epoch: self.epoch,
        }
    }
}

impl Ownership {
    /// The lease this ownership was handed out under.
    pub fn held(&self) -> HeldLease<'_> {
        HeldLease {
            partition: self.partition,
            owner: &self.owner,
            epoch: self.epoch,
        }
    }
}

/// The member name in an owner token (`<member name>#<incarnation>`).
pub fn owner_name(owner: &str) -> &str {
    owner.rsplit_once('#').map_or(owner, |(name, _)| name)
}

/// A partition's lease as stored, for visibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLease {
    /// The partition.
    pub partition: u32,
    /// Owner token of the holder (`<member name>#<incarnation>`), empty when released.
    pub owner: String,
    /// Epoch of the last acquisition.
    pub epoch: u64,
    /// Whether the lease is still live.
    pub live: bool,
    /// The partition's committed seq.
    pub checkpoint: Option<i64>,
}

/// Leases and heartbeats of consumer groups, stored where every member (in any process)
/// sees them. Implementations make each call atomic in their store; expiries are measured
/// on the store's clock (or, for a file shared by processes of one host, the host's).
///
/// An owner is a token unique to one member incarnation: a restarted member takes its old
/// partitions over only once the old incarnation's leases expired.
#[async_trait]
pub trait GroupCoordination: Send + Sync + 'static {
    /// Records the beat's member (incarnation `owner`) alive for its `ttl`, splitting the
    /// topic into its `partitions`, and returns the live members, sorted by name, one entry per name and
    /// partition count.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn heartbeat(&self, scope: &GroupScope, beat: Heartbeat<'_>) -> Result<Vec<LiveMember>>;

    /// Removes the heartbeat of incarnation `owner`.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn leave(&self, scope: &GroupScope, owner: &str) -> Result<()>;

    /// Takes the lease of the claimed partition for the claim's `ttl` when nobody holds a
    /// live one; returns the
    /// new epoch (one more than the previous holder's), or `None` when another owner holds
    /// a live lease.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn acquire(&self, scope: &GroupScope, claim: Claim<'_>) -> Result<Option<u64>>;

    /// Extends a live lease held by the lease's `owner` at its `epoch` to `ttl` from now;
    /// `false` when the lease expired or moved (the caller lost the partition).
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn renew(&self, scope: &GroupScope, held: HeldLease<'_>, ttl: Duration) -> Result<bool>;

    /// Renews several leases of `owner` (one heartbeat's renewals), each as
    /// [`GroupCoordination::renew`] would; the results come in the order of `leases`
    /// (`(partition, epoch)` pairs). The default renews them one by one; a store where each
    /// call is a round trip through a log writes them as one command.
    async fn renew_many(
        &self,
        scope: &GroupScope,
        owner: &str,
        leases: &[(u32, u64)],
        ttl: Duration,
    ) -> Vec<Result<bool>> {
        let mut renewed = Vec::with_capacity(leases.len());
        for (partition, epoch) in leases {
            let lease = HeldLease {
                partition: *partition,
                owner,
                epoch: *epoch,
            };
            renewed.push(self.renew(scope, lease, ttl).await);
        }
        renewed
    }

    /// Gives the lease back at once when its `owner` still holds it at its `epoch`.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn release(&self, scope: &GroupScope, held: HeldLease<'_>) -> Result<()>;

    /// The committed seq of a partition, `None` when never committed.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn load_checkpoint(&self, scope: &GroupScope, partition: u32) -> Result<Option<i64>>;

    /// Raises the lease's partition's checkpoint to `seq` (never lowers it), atomically with
    /// the check that the lease's `owner` holds a live lease at its `epoch`.
    ///
    /// # Errors
    /// [`crate::PhotonError::Fenced`] when the lease expired or moved (nothing is stored);
    /// storage errors of the port.
    async fn commit(&self, scope: &GroupScope, held: HeldLease<'_>, seq: i64) -> Result<()>;

    /// The partition count of `topic` when the store splits it itself (broker shards), so
    /// that a partition is a shard: an event's partition ([`crate::group::partition_of`])
    /// is then its shard, and each partition is read in seq order. Members use this count
    /// instead of `GroupOptions::partitions`. `None` (the default): key-hash buckets.
    fn topic_partitions(&self, topic: &str) -> Option<u32> {
        let _ = topic;
        None
    }

    /// The records of one partition after `start`, in seq order, when the store can read a
    /// partition alone (a broker shard, see [`GroupCoordination::topic_partitions`]).
    /// `None` (the default): the member reads the whole topic and keeps the partition's
    /// records.
    fn partition_records(
        &self,
        topic: &str,
        partition: u32,
        start: StartAt,
    ) -> Option<RecordStream> {
        let _ = (topic, partition, start);
        None
    }

    /// The seq of the last record of one partition (`0` when it holds none) when the store
    /// reads partitions alone ([`GroupCoordination::partition_records`]), or when it can
    /// tell the topic's end without the `head_seq` capability: where a partition that
    /// starts at the tail is pinned. `None` (the default): the port's `head_seq` of the
    /// topic.
    async fn partition_head(&self, topic: &str, partition: u32) -> Option<Result<i64>> {
        let _ = (topic, partition);
        None
    }

    /// The live members, sorted by name, one entry per name and partition count (as
    /// [`GroupCoordination::heartbeat`] returns them, without recording one).
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn members(&self, scope: &GroupScope) -> Result<Vec<LiveMember>>;

    /// Every partition lease of the group, by partition.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn leases(&self, scope: &GroupScope) -> Result<Vec<PartitionLease>>;
}
