//! Consumer groups of the mem port: the group protocol over leases and heartbeats kept in
//! the shared in-process store, so members on any clone of the port share the work.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::error::Result;
use crate::group::{
    Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember, PartitionLease,
};

#[derive(Debug)]
struct Lease {
    owner: String,
    epoch: u64,
    expires: Instant,
    checkpoint: Option<i64>,
}

#[derive(Debug, Default)]
struct GroupState {
    /// Heartbeats by owner token: name, partitions, expiry.
    members: HashMap<String, (String, u32, Instant)>,
    leases: BTreeMap<u32, Lease>,
}

/// Leases and heartbeats of the mem port's groups.
#[derive(Debug, Default)]
pub(super) struct MemCoordination {
    groups: Mutex<HashMap<GroupScope, GroupState>>,
}

impl MemCoordination {
    fn lock(&self) -> MutexGuard<'_, HashMap<GroupScope, GroupState>> {
        // Only plain values are changed under this lock, by non-panicking code.
        self.groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn live(lease: &Lease, now: Instant) -> bool {
    !lease.owner.is_empty() && lease.expires > now
}

#[async_trait]
impl GroupCoordination for MemCoordination {
    async fn heartbeat(&self, scope: &GroupScope, beat: Heartbeat<'_>) -> Result<Vec<LiveMember>> {
        let now = Instant::now();
        let mut groups = self.lock();
        let state = groups.entry(scope.clone()).or_default();
        state.members.insert(
            beat.owner.to_owned(),
            (beat.member.to_owned(), beat.partitions, now + beat.ttl),
        );
        state.members.retain(|_, (_, _, expires)| *expires > now);
        let mut members: Vec<LiveMember> = state
            .members
            .values()
            .map(|(name, partitions, _)| LiveMember {
                name: name.clone(),
                partitions: *partitions,
            })
            .collect();
        members.sort();
        members.dedup();
        Ok(members)
    }

    async fn members(&self, scope: &GroupScope) -> Result<Vec<LiveMember>> {
        let now = Instant::now();
        let groups = self.lock();
        let mut members: Vec<LiveMember> = groups
            .get(scope)
            .map(|state| {
                state
                    .members
                    .values()
                    .filter(|(_, _, expires)| *expires > now)
                    .map(|(name, partitions, _)| LiveMember {
                        name: name.clone(),
                        partitions: *partitions,
                    })
                    .collect()
            })
            .unwrap_or_default();
        members.sort();
        members.dedup();
        Ok(members)
    }

    async fn leave(&self, scope: &GroupScope, owner: &str) -> Result<()> {
        if let Some(state) = self.lock().get_mut(scope) {
            state.members.remove(owner);
        }
        Ok(())
    }

    async fn acquire(&self, scope: &GroupScope, claim: Claim<'_>) -> Result<Option<u64>> {
        let now = Instant::now();
        let mut groups = self.lock();
        let lease = groups
            .entry(scope.clone())
            .or_default()
            .leases
            .entry(claim.partition)
            .or_insert(Lease {
                owner: String::new(),
                epoch: 0,
                expires: now,
                checkpoint: None,
            });
        if live(lease, now) {
            return Ok(None);
        }
        lease.owner = claim.owner.to_owned();
        lease.epoch += 1;
        lease.expires = now + claim.ttl;
        Ok(Some(lease.epoch))
    }

    async fn renew(&self, scope: &GroupScope, held: HeldLease<'_>, ttl: Duration) -> Result<bool> {
        let now = Instant::now();
        let mut groups = self.lock();
        let Some(lease) = groups
            .get_mut(scope)
            .and_then(|state| state.leases.get_mut(&held.partition))
        else {
            return Ok(false);
        };
        if !live(lease, now) || lease.owner != held.owner || lease.epoch != held.epoch {
            return Ok(false);
        }
        lease.expires = now + ttl;
        Ok(true)
    }

    async fn release(&self, scope: &GroupScope, held: HeldLease<'_>) -> Result<()> {
        let mut groups = self.lock();
        if let Some(lease) = groups
            .get_mut(scope)
            .and_then(|state| state.leases.get_mut(&held.partition))
            .filter(|lease| lease.owner == held.owner && lease.epoch == held.epoch)
        {
            lease.owner.clear();
        }
        Ok(())
    }

    async fn load_checkpoint(&self, scope: &GroupScope, partition: u32) -> Result<Option<i64>> {
        Ok(self
            .lock()
            .get(scope)
            .and_then(|state| state.leases.get(&partition))
            .and_then(|lease| lease.checkpoint))
    }

    async fn commit(&self, scope: &GroupScope, held: HeldLease<'_>, seq: i64) -> Result<()> {
        let now = Instant::now();
        let mut groups = self.lock();
        match groups
            .get_mut(scope)
            .and_then(|state| state.leases.get_mut(&held.partition))
            .filter(|lease| {
                live(lease, now) && lease.owner == held.owner && lease.epoch == held.epoch
            }) {
            Some(lease) => {
                lease.checkpoint = Some(lease.checkpoint.map_or(seq, |c| c.max(seq)));
                Ok(())
            }
            None => Err(held.fenced(scope)),
        }
    }

    async fn leases(&self, scope: &GroupScope) -> Result<Vec<PartitionLease>> {
        let now = Instant::now();
        Ok(self
            .lock()
            .get(scope)
            .map(|state| {
                state
                    .leases
                    .iter()
                    .map(|(partition, lease)| PartitionLease {
                        partition: *partition,
                        owner: lease.owner.clone(),
                        epoch: lease.epoch,
                        live: live(lease, now),
                        checkpoint: lease.checkpoint,
                    })
                    .collect()
            })
            .unwrap_or_default())
    }
}
