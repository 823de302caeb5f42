//! Hooks for this crate's tests and benchmarks: not part of the port's API, no stability
//! promise.

use crate::group_machine::{Command, Op};

pub use crate::group::GroupLogStats;
/// Records applied after the newest snapshot that make an instance write the next one.
pub const GROUP_SNAPSHOT_EVERY: i64 = crate::group_snapshot::SNAPSHOT_EVERY;
/// Upper bound (excluded) of an instance's extra records before it writes a snapshot.
pub const GROUP_SNAPSHOT_STAGGER: i64 = crate::group_snapshot::SNAPSHOT_STAGGER;
pub use crate::topic::{fluvio_topic_name, groups_snapshot_topic_name, groups_topic_name};

/// A command of the group coordination log as this port writes it (JSON), with a fresh id.
fn record(at_ms: i64, group: &str, topic: &str, op: Op) -> Vec<u8> {
    let command = Command {
        id: uuid::Uuid::new_v4().simple().to_string(),
        at_ms,
        group: group.to_owned(),
        topic: topic.to_owned(),
        op,
    };
    // A struct of strings and numbers always serializes.
    serde_json::to_vec(&command).unwrap_or_default()
}

/// The record of a heartbeat of `owner` (member `member`), alive for `ttl_ms`.
pub fn heartbeat_record(
    at_ms: i64,
    group: &str,
    topic: &str,
    member: &str,
    owner: &str,
    ttl_ms: i64,
) -> Vec<u8> {
    let op = Op::Heartbeat {
        member: member.to_owned(),
        owner: owner.to_owned(),
        partitions: 8,
        ttl_ms,
    };
    record(at_ms, group, topic, op)
}

/// The record of an acquire of `partition` by `owner` for `ttl_ms`.
pub fn acquire_record(
    at_ms: i64,
    group: &str,
    topic: &str,
    partition: u32,
    owner: &str,
    ttl_ms: i64,
) -> Vec<u8> {
    let op = Op::Acquire {
        partition,
        owner: owner.to_owned(),
        ttl_ms,
    };
    record(at_ms, group, topic, op)
}

/// The record of one heartbeat's renewals of `leases` (partition, epoch) by `owner`.
pub fn renew_many_record(
    at_ms: i64,
    group: &str,
    topic: &str,
    owner: &str,
    leases: &[(u32, u64)],
    ttl_ms: i64,
) -> Vec<u8> {
    let op = Op::RenewMany {
        owner: owner.to_owned(),
        leases: leases.to_vec(),
        ttl_ms,
    };
    record(at_ms, group, topic, op)
}

/// The record of a commit of `seq` on `partition` by `owner` at `epoch`.
pub fn commit_record(
    at_ms: i64,
    group: &str,
    topic: &str,
    partition: u32,
    owner: &str,
    epoch: u64,
    seq: i64,
) -> Vec<u8> {
    let op = Op::Commit {
        partition,
        owner: owner.to_owned(),
        epoch,
        seq,
    };
    record(at_ms, group, topic, op)
}
