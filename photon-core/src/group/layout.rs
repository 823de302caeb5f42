//! The partition count a group stores, and the move to another count without losing events.
//!
//! A group's layout is its partition count and a generation, kept in the store as the
//! checkpoint of a reserved partition ([`LAYOUT_PARTITION`]), so every port stores it with
//! the primitive it already has. Partition `index` of generation `g` is stored as partition
//! id `g << 16 | index`: generation 0 keeps the plain indexes of groups created before
//! layouts existed, and every count change starts fresh leases and checkpoints.
//!
//! A member with another count than the stored one waits (it heartbeats and owns nothing)
//! while a member of the stored count is live or one of its leases is; once none is, it
//! switches the layout. The switch first gives each new partition the lowest checkpoint of
//! the old partitions that hold some of its keys (so events may repeat, never go missing),
//! then stores the new layout. Members never stop over a count they disagree with.

use std::time::Duration;

use crate::error::Result;
use crate::group::coordination::{Claim, GroupCoordination, GroupScope, HeldLease, PartitionLease};

/// The reserved partition whose checkpoint holds the layout.
pub const LAYOUT_PARTITION: u32 = u32::MAX;
/// The most partitions a group may have.
pub const MAX_PARTITIONS: u32 = 1 << 16;
/// Generations wrap before they would reach the reserved partition's id.
const MAX_GENERATION: u32 = (1 << 16) - 2;
/// How long a switching member holds the layout's lease.
const SWITCH_LEASE: Duration = Duration::from_secs(30);

/// A group's partition count at one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bumped on every change of count.
    pub generation: u32,
    /// Partitions.
    pub count: u32,
}

impl Layout {
    /// Generation 0 with `count` partitions: a group's first layout.
    pub fn first(count: u32) -> Self {
        Self {
            generation: 0,
            count,
        }
    }

    /// The stored id of partition `index`.
    pub fn id(&self, index: u32) -> u32 {
        (self.generation << 16) | (index & 0xFFFF)
    }

    /// The index of the stored partition `id` when it belongs to this layout.
    pub fn index_of(&self, id: u32) -> Option<u32> {
        let index = id & 0xFFFF;
        (id != LAYOUT_PARTITION && id >> 16 == self.generation && index < self.count)
            .then_some(index)
    }

    fn encode(&self) -> i64 {
        (i64::from(self.generation) << 32) | i64::from(self.count)
    }

    fn decode(value: i64) -> Option<Self> {
        let generation = u32::try_from(value >> 32).ok()?;
        let count = u32::try_from(value & 0xFFFF_FFFF).ok()?;
        (count > 0).then_some(Self { generation, count })
    }

    /// The layout after this one, with `count` partitions.
    fn next(&self, count: u32) -> Self {
        Self {
            generation: if self.generation >= MAX_GENERATION {
                1
            } else {
                self.generation + 1
            },
            count,
        }
    }
}

/// The stored layout, `None` before the group's first member stored one.
///
/// # Errors
/// Storage errors of the port.
pub async fn load(
    coordination: &dyn GroupCoordination,
    scope: &GroupScope,
) -> Result<Option<Layout>> {
    let stored = coordination
        .load_checkpoint(scope, LAYOUT_PARTITION)
        .await?;
    Ok(stored.and_then(Layout::decode))
}

/// The group's current layout and the leases of its partitions, by index: the stored
/// layout, else (sharded topics, or no member stored one yet) `fallback` partitions at
/// generation 0.
///
/// # Errors
/// Storage errors of the port.
pub async fn current_view(
    coordination: &dyn GroupCoordination,
    scope: &GroupScope,
    fallback: u32,
) -> Result<(Layout, Vec<(u32, PartitionLease)>)> {
    let layout = match coordination.topic_partitions(&scope.topic) {
        Some(shards) => Layout::first(shards),
        None => load(coordination, scope)
            .await?
            .unwrap_or(Layout::first(fallback)),
    };
    let leases = coordination.leases(scope).await?;
    Ok((layout, current_leases(&layout, &leases)))
}

/// The leases of `layout`'s partitions, by index.
pub fn current_leases(layout: &Layout, leases: &[PartitionLease]) -> Vec<(u32, PartitionLease)> {
    leases
        .iter()
        .filter_map(|lease| Some((layout.index_of(lease.partition)?, lease.clone())))
        .collect()
}

/// Stores `count` as the group's layout in place of `from` (the first layout when `from` is
/// `None`), carrying each new partition's position over from the old ones. Returns the
/// stored layout, or `None` when another member changed the layout meanwhile or holds the
/// switch.
///
/// The caller checked that no member of `from`'s count is live; this checks, under the
/// layout's lease, that no lease of `from` is.
///
/// # Errors
/// Storage errors of the port.
pub async fn switch(
    coordination: &dyn GroupCoordination,
    scope: &GroupScope,
    owner: &str,
    from: Option<Layout>,
    count: u32,
) -> Result<Option<Layout>> {
    let Some(lease) = claim(coordination, scope, LAYOUT_PARTITION, owner).await? else {
        return Ok(None);
    };
    let switched = switch_held(coordination, scope, lease, from, count).await;
    if let Err(err) = coordination.release(scope, lease).await {
        tracing::warn!(?scope, %err, "group layout lease not released; it will expire");
    }
    switched
}

async fn switch_held(
    coordination: &dyn GroupCoordination,
    scope: &GroupScope,
    lease: HeldLease<'_>,
    from: Option<Layout>,
    count: u32,
) -> Result<Option<Layout>> {
    if load(coordination, scope).await? != from {
        return Ok(None);
    }
    let to = from.map_or(Layout::first(count), |from| from.next(count));
    if let Some(from) = from {
        let leases = coordination.leases(scope).await?;
        if current_leases(&from, &leases).iter().any(|(_, l)| l.live) {
            return Ok(None);
        }
        let mut old = Vec::with_capacity(from.count as usize);
        for index in 0..from.count {
            old.push(coordination.load_checkpoint(scope, from.id(index)).await?);
        }
        for index in 0..to.count {
            let Some(seq) = covering(&from, &old, &to, index) else {
                continue;
            };
            if !carry_over(coordination, scope, lease.owner, to.id(index), seq).await? {
                // Left leased by a switch that stopped half-way: try again once it expired.
                return Ok(None);
            }
        }
    }
    coordination.commit(scope, lease, to.encode()).await?;
    tracing::info!(?scope, from = ?from, to = ?to, "group partition count changed");
    Ok(Some(to))
}

/// Where new partition `index` of `to` starts: the lowest checkpoint of the old partitions
/// that hold some of its keys (`fnv1a(key) % count`: old partition `j` shares keys with new
/// partition `i` exactly when `i ≡ j (mod gcd(old, new))`); `None` when one of them never
/// committed (the new partition then starts where the group's request says).
pub fn covering(from: &Layout, old: &[Option<i64>], to: &Layout, index: u32) -> Option<i64> {
    let step = gcd(from.count, to.count);
    let mut lowest: Option<i64> = None;
    for (j, checkpoint) in old.iter().enumerate() {
        let j = u32::try_from(j).ok()?;
        if j % step != index % step {
            continue;
        }
        let seq = (*checkpoint)?;
        lowest = Some(lowest.map_or(seq, |l| l.min(seq)));
    }
    lowest
}

async fn carry_over(
    coordination: &dyn GroupCoordination,
    scope: &GroupScope,
    owner: &str,
    id: u32,
    seq: i64,
) -> Result<bool> {
    let Some(lease) = claim(coordination, scope, id, owner).await? else {
        return Ok(false);
    };
    let committed = coordination.commit(scope, lease, seq).await;
    coordination.release(scope, lease).await?;
    committed.map(|()| true)
}

/// Takes partition `id`'s lease for a switch, `None` while another owner holds it.
async fn claim<'a>(
    coordination: &dyn GroupCoordination,
    scope: &GroupScope,
    partition: u32,
    owner: &'a str,
) -> Result<Option<HeldLease<'a>>> {
    let claim = Claim {
        partition,
        owner,
        ttl: SWITCH_LEASE,
    };
    let epoch = coordination.acquire(scope, claim).await?;
    Ok(epoch.map(|epoch| HeldLease {
        partition,
        owner,
        epoch,
    }))
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::assignment::partition_of;

    #[test]
    fn ids_keep_generations_apart_and_generation_zero_plain() {
        let first = Layout::first(16);
        assert_eq!(first.id(5), 5);
        let next = first.next(8);
        assert_eq!(next.id(5), (1 << 16) | 5);
        assert_eq!(next.index_of(next.id(5)), Some(5));
        assert_eq!(first.index_of(next.id(5)), None);
        assert_eq!(next.index_of(LAYOUT_PARTITION), None);
        assert_eq!(Layout::decode(next.encode()), Some(next));
    }

    #[test]
    fn a_new_partition_starts_no_later_than_any_old_one_holding_its_keys() {
        for (old_count, new_count) in [(16, 8), (8, 16), (6, 4), (3, 5)] {
            let from = Layout::first(old_count);
            let to = from.next(new_count);
            let old: Vec<Option<i64>> = (0..old_count).map(|j| Some(100 + i64::from(j))).collect();
            for n in 0..500 {
                let key = format!("k{n}");
                let before = partition_of(Some(&key), 0, old_count);
                let after = partition_of(Some(&key), 0, new_count);
                let start = covering(&from, &old, &to, after).expect("every old one committed");
                assert!(
                    start <= old[before as usize].unwrap(),
                    "{key}: {old_count} -> {new_count}"
                );
            }
        }
        let from = Layout::first(4);
        assert_eq!(
            covering(&from, &[Some(1), None, Some(3), Some(4)], &from.next(2), 1),
            None
        );
        assert_eq!(
            covering(&from, &[Some(1), None, Some(3), Some(4)], &from.next(2), 0),
            Some(1)
        );
    }
}
