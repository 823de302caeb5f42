//! Consumer groups.
//!
//! [`join`](crate::raw::group::join): one protocol, written once here, over a primitive each
//! port provides ([`GroupCoordination`]: member heartbeats and compare-and-set partition
//! leases with an expiry and an epoch).
//!
//! - The unit of assignment is a partition: on a store without shards, a key-hash bucket
//!   ([`partition_of`], [`DEFAULT_PARTITIONS`] by default). A key lives in one partition.
//! - Every member computes the same sticky, balanced assignment ([`sticky`]) from the
//!   members that heartbeat and the current lease holders, acquires the free or expired
//!   leases of its partitions and drains, commits and releases the others. A join moves at
//!   most `ceil(partitions / members)` partitions; a member that stops heartbeating drops
//!   out of the assignment within about a second (its leases stay until they expire), so
//!   its partitions go to members that are alive.
//! - The group stores its partition count ([`layout`]); a member with another count waits
//!   until no member of the stored count is left, then moves the group to its count
//!   without losing events.
//! - A partition has at most one owner at a time. A member that could not renew stops
//!   handing out the partition's events a safety margin before the lease expires (its own
//!   monotonic clock); its late acknowledgements and commits are refused
//!   ([`crate::PhotonError::Fenced`]), the commit by the store's epoch check.
//! - Each partition keeps its own checkpoint; a new owner resumes after it, so a handover
//!   repeats at most the events acknowledged after the last commit.
//! - Read-ahead is bounded per partition ([`GroupOptions::read_ahead`]), also while one
//!   delivery stays unacknowledged.
//! - A member reads the topic once for all the partitions it owns and routes each record to
//!   its partition, unless the store reads a partition alone (broker shards,
//!   [`GroupCoordination::partition_records`]): then each partition has its own reader.

mod assignment;
mod coordination;
mod identity;
pub mod layout;
pub(crate) mod member;
mod options;
mod partition;
mod reader;

pub use assignment::{partition_of, sticky};
pub use coordination::{
    owner_name, Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember, Ownership,
    PartitionLease,
};
pub use identity::{default_member, nth_member, MEMBER_ENV};
pub use layout::{current_view, Layout, MAX_PARTITIONS};
pub use member::GroupMembership;
pub use options::{
    GroupOptions, DEFAULT_COMMIT_INTERVAL, DEFAULT_HEARTBEAT, DEFAULT_LEASE, DEFAULT_PARTITIONS,
    DEFAULT_READ_AHEAD,
};
pub use partition::UndecodableAcks;
