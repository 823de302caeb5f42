//! Consumer groups of the NATS port: the group protocol of `photon-core` over heartbeats and
//! partition leases kept on the shared server, so that members in any process or host
//! connected to it share the work.
//!
//! The stream `<prefix>_groups` is used as a compare-and-set key-value store (one message
//! per subject, like the checkpoint store):
//! - `photon.<prefix>.grp.<group>.<topic>.m.<owner>`: one subject per member incarnation,
//!   rewritten at every heartbeat (member name, partition count, lease period).
//! - `photon.<prefix>.grp.<group>.<topic>.p.<partition>`: one subject per partition: the
//!   lease (owner, epoch, period) and the partition's checkpoint. Every change reads the
//!   record with its subject sequence and publishes with `Nats-Expected-Last-Subject-Sequence`;
//!   a writer that raced and lost is refused (error 10071). So a commit moves the checkpoint
//!   only under the live lease it was acknowledged under, checked in the same write.
//!
//! Time: every expiry is measured on the server's clock, never on a host's wall clock. A
//! record expires at the server's timestamp of the stored message plus its period; "now"
//! is the server's timestamp of this member's latest heartbeat (or of a write to a clock
//! subject when no heartbeat is recent) plus the time elapsed since on this host's
//! monotonic clock. Hosts whose wall clocks disagree therefore agree on every expiry; the
//! estimate of "now" lags the server by at most one round trip, which only makes leases
//! look live a little longer to a member that wants to take them over.
//!
//! Partitions: with several stream shards (`PHOTON_NATS_SHARDS`), each shard is a
//! partition (`GroupOptions::partitions` is ignored); with one, key-hash buckets
//! (`GroupOptions::partitions`, [`photon_core::group::partition_of`]). Members read the
//! topic at full speed (no per-event round trip) with the port's ordinary subscriptions:
//! one per owned shard with several shards, the whole topic with one (keeping the events
//! of the owned buckets).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, DiscardPolicy, LastRawMessageErrorKind, StorageType};
use async_trait::async_trait;
use futures::TryStreamExt;
use photon_core::group::{
    Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember, PartitionLease,
};
use photon_core::{PhotonError, RecordStream, Result, StartAt};
use serde::{Deserialize, Serialize};

use crate::error::{storage, unavailable, LABEL};
use crate::port::NatsStoragePort;
use crate::topic::{key_token, topic_token};

/// Compare-and-set attempts of one call before it gives up (each lost race means another
/// writer changed the record; only pathological contention gets here).
const MAX_ATTEMPTS: usize = 64;
/// How long a heartbeat's server timestamp stands in for the server's clock.
const CLOCK_FRESH: Duration = Duration::from_secs(1);
/// A member record expired for this long is deleted by the next heartbeat of another
/// member (a member that comes back after that simply writes it again).
const FORGET_AFTER: Duration = Duration::from_secs(30);

/// A member incarnation's heartbeat.
#[derive(Debug, Serialize, Deserialize)]
struct MemberRecord {
    member: String,
    partitions: u32,
    ttl_ms: u64,
}

/// A partition's lease and checkpoint.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct LeaseRecord {
    /// Empty when released.
    owner: String,
    epoch: u64,
    ttl_ms: u64,
    seq: Option<i64>,
}

/// A stored record with its subject sequence and the server's timestamp.
struct Stored<T> {
    value: T,
    subject_seq: u64,
    /// Server time of the write, in nanoseconds since the Unix epoch.
    written: i128,
}

impl<T> Stored<T> {
    fn expires(&self, ttl_ms: u64) -> i128 {
        self.written + i128::from(ttl_ms) * 1_000_000
    }
}

impl LeaseRecord {
    fn live(stored: &Stored<Self>, now: i128) -> bool {
        !stored.value.owner.is_empty() && stored.expires(stored.value.ttl_ms) > now
    }

    fn held_by(stored: &Stored<Self>, owner: &str, epoch: u64, now: i128) -> bool {
        stored.value.owner == owner && stored.value.epoch == epoch && Self::live(stored, now)
    }
}

/// Outcome of a compare-and-set write.
enum Cas {
    Written,
    Raced,
}

/// Leases and heartbeats in the group stream of one port's prefix.
pub(crate) struct NatsCoordination {
    port: NatsStoragePort,
    /// Server time (ns since the epoch) last observed, and when it was observed here.
    clock: Mutex<Option<(i128, Instant)>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only a plain value is replaced under this lock: a panic cannot leave it torn.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn nanos(duration: Duration) -> i128 {
    i128::try_from(duration.as_nanos()).unwrap_or(i128::MAX)
}

impl NatsCoordination {
    pub(crate) fn new(port: NatsStoragePort) -> Self {
        Self {
            port,
            clock: Mutex::new(None),
        }
    }

    fn prefix(&self) -> &str {
        &self.port.inner.config.prefix
    }

    fn scope_subject(&self, scope: &GroupScope) -> String {
        format!(
            "photon.{}.grp.{}.{}",
            self.prefix(),
            key_token(Some(&scope.group)),
            topic_token(&scope.topic)
        )
    }

    fn member_subject(&self, scope: &GroupScope, owner: &str) -> String {
        format!("{}.m.{}", self.scope_subject(scope), key_token(Some(owner)))
    }

    fn lease_subject(&self, scope: &GroupScope, partition: u32) -> String {
        format!("{}.p.{partition}", self.scope_subject(scope))
    }

    fn clock_subject(&self) -> String {
        format!("photon.{}.grp.clock", self.prefix())
    }

    async fn stream(&self) -> Result<Arc<stream::Stream>> {
        let inner = &self.port.inner;
        let prefix = self.prefix().to_owned();
        inner
            .streams
            .ensure(format!("{prefix}_groups"), || stream::Config {
                subjects: vec![format!("photon.{prefix}.grp.>")],
                storage: StorageType::File,
                num_replicas: inner.config.replicas,
                max_messages_per_subject: 1,
                discard: DiscardPolicy::Old,
                allow_direct: true,
                allow_rollup: true,
                ..stream::Config::default()
            })
            .await
    }

    fn observe(&self, server: i128) {
        *lock(&self.clock) = Some((server, Instant::now()));
    }

    /// The server's current time as far as this host knows it (never ahead of it).
    ///
    /// # Errors
    /// The server does not answer the clock write.
    async fn now(&self) -> Result<i128> {
        if let Some((server, seen)) = *lock(&self.clock) {
            if seen.elapsed() < CLOCK_FRESH {
                return Ok(server + nanos(seen.elapsed()));
            }
        }
        let stream = self.stream().await?;
        let subject = self.clock_subject();
        self.publish(subject.clone(), Vec::new(), None).await?;
        // Any record read back here was written at or after our write, and before now.
        let stored: Stored<()> = self
            .read_raw(&stream, &subject, |_| Ok(()))
            .await?
            .ok_or_else(|| {
                storage(
                    "the group clock record vanished",
                    "no message on the clock subject",
                )
            })?;
        self.observe(stored.written);
        Ok(stored.written)
    }

    async fn publish(
        &self,
        subject: String,
        payload: Vec<u8>,
        expected: Option<u64>,
    ) -> Result<Cas> {
        let mut message = PublishMessage::build().payload(payload.into());
        if let Some(expected) = expected {
            message = message.expected_last_subject_sequence(expected);
        }
        let context = self.port.inner.streams.context();
        let acked = match context.send_publish(subject.clone(), message).await {
            Ok(pending) => pending.await,
            Err(err) => Err(err),
        };
        match acked {
            Ok(_) => Ok(Cas::Written),
            Err(err) if err.kind() == PublishErrorKind::WrongLastSequence => Ok(Cas::Raced),
            Err(err) => Err(unavailable(
                format!("cannot write group record {subject}"),
                err,
            )),
        }
    }

    async fn read_raw<T>(
        &self,
        stream: &stream::Stream,
        subject: &str,
        decode: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<Option<Stored<T>>> {
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(message) => Ok(Some(Stored {
                value: decode(&message.payload)?,
                subject_seq: message.sequence,
                written: message.time.unix_timestamp_nanos(),
            })),
            Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(err) => Err(unavailable(
                format!("cannot read group record {subject}"),
                err,
            )),
        }
    }

    async fn read<T: serde::de::DeserializeOwned>(
        &self,
        stream: &stream::Stream,
        subject: &str,
    ) -> Result<Option<Stored<T>>> {
        self.read_raw(stream, subject, |payload| {
            serde_json::from_slice(payload)
                .map_err(|err| storage(format!("group record {subject} is not readable"), err))
        })
        .await
    }

    async fn read_lease(
        &self,
        stream: &stream::Stream,
        scope: &GroupScope,
        partition: u32,
    ) -> Result<Option<Stored<LeaseRecord>>> {
        self.read(stream, &self.lease_subject(scope, partition))
            .await
    }

    async fn write_lease(
        &self,
        scope: &GroupScope,
        partition: u32,
        record: &LeaseRecord,
        expected: u64,
    ) -> Result<Cas> {
        let payload = serde_json::to_vec(record)
            .map_err(|err| storage("cannot encode a group lease", err))?;
        self.publish(
            self.lease_subject(scope, partition),
            payload,
            Some(expected),
        )
        .await
    }

    /// The subjects under `filter` that hold a record, with their records.
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        stream: &stream::Stream,
        filter: String,
    ) -> Result<Vec<(String, Stored<T>)>> {
        let subjects: Vec<(String, usize)> = stream
            .info_with_subjects(&filter)
            .await
            .map_err(|err| unavailable(format!("cannot list group records {filter}"), err))?
            .try_collect()
            .await
            .map_err(|err| unavailable(format!("cannot list group records {filter}"), err))?;
        let reads = subjects.into_iter().map(|(subject, _)| async move {
            let stored = self.read::<T>(stream, &subject).await;
            (subject, stored)
        });
        let mut records = Vec::new();
        for (subject, stored) in futures::future::join_all(reads).await {
            // A record deleted between the listing and the read is simply gone.
            if let Some(stored) = stored? {
                records.push((subject, stored));
            }
        }
        records.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(records)
    }

    fn live_members(records: &[(String, Stored<MemberRecord>)], now: i128) -> Vec<LiveMember> {
        let mut members: Vec<LiveMember> = records
            .iter()
            .filter(|(_, stored)| stored.expires(stored.value.ttl_ms) > now)
            .map(|(_, stored)| LiveMember {
                name: stored.value.member.clone(),
                partitions: stored.value.partitions,
            })
            .collect();
        members.sort();
        members.dedup();
        members
    }
}

#[async_trait]
impl GroupCoordination for NatsCoordination {
    async fn heartbeat(&self, scope: &GroupScope, beat: Heartbeat<'_>) -> Result<Vec<LiveMember>> {
        let stream = self.stream().await?;
        let subject = self.member_subject(scope, beat.owner);
        let record = MemberRecord {
            member: beat.member.to_owned(),
            partitions: beat.partitions,
            ttl_ms: millis(beat.ttl),
        };
        let payload = serde_json::to_vec(&record)
            .map_err(|err| storage("cannot encode a group heartbeat", err))?;
        self.publish(subject.clone(), payload, None).await?;
        let records: Vec<(String, Stored<MemberRecord>)> = self
            .list(&stream, format!("{}.m.*", self.scope_subject(scope)))
            .await?;
        // This beat.member's own heartbeat, just written, carries the server's "now".
        let now = match records.iter().find(|(s, _)| *s == subject) {
            Some((_, own)) => {
                self.observe(own.written);
                own.written
            }
            None => self.now().await?,
        };
        for (stale, stored) in &records {
            if stored.expires(stored.value.ttl_ms) + nanos(FORGET_AFTER) < now {
                // Best effort: a failed purge is retried by the next heartbeat.
                let _ = stream.purge().filter(stale.clone()).await;
            }
        }
        Ok(Self::live_members(&records, now))
    }

    async fn leave(&self, scope: &GroupScope, owner: &str) -> Result<()> {
        let stream = self.stream().await?;
        let subject = self.member_subject(scope, owner);
        stream
            .purge()
            .filter(subject.clone())
            .await
            .map_err(|err| unavailable(format!("cannot delete group member {subject}"), err))?;
        Ok(())
    }

    async fn acquire(&self, scope: &GroupScope, claim: Claim<'_>) -> Result<Option<u64>> {
        let stream = self.stream().await?;
        let current = self.read_lease(&stream, scope, claim.partition).await?;
        let now = self.now().await?;
        if current
            .as_ref()
            .is_some_and(|stored| LeaseRecord::live(stored, now))
        {
            return Ok(None);
        }
        let (previous, expected) = current.map_or((LeaseRecord::default(), 0), |stored| {
            (stored.value, stored.subject_seq)
        });
        let epoch = previous.epoch + 1;
        let record = LeaseRecord {
            owner: claim.owner.to_owned(),
            epoch,
            ttl_ms: millis(claim.ttl),
            seq: previous.seq,
        };
        // A lost race means another member took (or changed) the lease first.
        match self
            .write_lease(scope, claim.partition, &record, expected)
            .await?
        {
            Cas::Written => Ok(Some(epoch)),
            Cas::Raced => Ok(None),
        }
    }

    async fn renew(&self, scope: &GroupScope, held: HeldLease<'_>, ttl: Duration) -> Result<bool> {
        let stream = self.stream().await?;
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.read_lease(&stream, scope, held.partition).await? else {
                return Ok(false);
            };
            if !LeaseRecord::held_by(&current, held.owner, held.epoch, self.now().await?) {
                return Ok(false);
            }
            let record = LeaseRecord {
                ttl_ms: millis(ttl),
                ..current.value
            };
            match self
                .write_lease(scope, held.partition, &record, current.subject_seq)
                .await?
            {
                Cas::Written => return Ok(true),
                // Our own commit may have raced the renewal: look again.
                Cas::Raced => continue,
            }
        }
        Ok(false)
    }

    async fn release(&self, scope: &GroupScope, held: HeldLease<'_>) -> Result<()> {
        let stream = self.stream().await?;
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.read_lease(&stream, scope, held.partition).await? else {
                return Ok(());
            };
            if current.value.owner != held.owner || current.value.epoch != held.epoch {
                return Ok(());
            }
            let record = LeaseRecord {
                owner: String::new(),
                ttl_ms: 0,
                ..current.value
            };
            match self
                .write_lease(scope, held.partition, &record, current.subject_seq)
                .await?
            {
                Cas::Written => return Ok(()),
                Cas::Raced => continue,
            }
        }
        Ok(())
    }

    async fn load_checkpoint(&self, scope: &GroupScope, partition: u32) -> Result<Option<i64>> {
        let stream = self.stream().await?;
        Ok(self
            .read_lease(&stream, scope, partition)
            .await?
            .and_then(|stored| stored.value.seq))
    }

    async fn commit(&self, scope: &GroupScope, held: HeldLease<'_>, seq: i64) -> Result<()> {
        let stream = self.stream().await?;
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.read_lease(&stream, scope, held.partition).await? else {
                return Err(held.fenced(scope));
            };
            let now = self.now().await?;
            if !LeaseRecord::held_by(&current, held.owner, held.epoch, now) {
                return Err(held.fenced(scope));
            }
            if current.value.seq.is_some_and(|stored| stored >= seq) {
                return Ok(());
            }
            // The rewrite restarts the period from its own timestamp: keep the lease's
            // expiry where the last renewal put it (a commit is not a renewal).
            let remaining = (current.expires(current.value.ttl_ms) - now).max(0) / 1_000_000;
            let record = LeaseRecord {
                ttl_ms: u64::try_from(remaining).unwrap_or(u64::MAX),
                seq: Some(seq),
                ..current.value
            };
            match self
                .write_lease(scope, held.partition, &record, current.subject_seq)
                .await?
            {
                Cas::Written => return Ok(()),
                Cas::Raced => continue,
            }
        }
        Err(PhotonError::Storage {
            backend: LABEL,
            message: format!(
                "group {:?} partition {}: lost {MAX_ATTEMPTS} compare-and-set races",
                scope.group, held.partition
            ),
            source: None,
        })
    }

    fn topic_partitions(&self, _topic: &str) -> Option<u32> {
        // A key lives in one shard and seq = position × shards + shard, so with as many
        // partitions as shards `partition_of` is the shard (unkeyed events: shard 0).
        let shards = self.port.inner.names.shards();
        (shards > 1).then_some(shards)
    }

    fn partition_records(
        &self,
        topic: &str,
        partition: u32,
        start: StartAt,
    ) -> Option<RecordStream> {
        // A partition is a shard only with several shards; otherwise it is a bucket spread
        // over the topic's one stream.
        self.topic_partitions(topic)?;
        Some(self.port.open_shard_subscription(topic, partition, start))
    }

    async fn partition_head(&self, topic: &str, partition: u32) -> Option<Result<i64>> {
        // Each shard's own head: the topic's head is the fastest shard's, past the events
        // the other shards have not reached.
        self.topic_partitions(topic)?;
        Some(self.port.shard_head(topic, partition).await)
    }

    async fn members(&self, scope: &GroupScope) -> Result<Vec<LiveMember>> {
        let stream = self.stream().await?;
        let records: Vec<(String, Stored<MemberRecord>)> = self
            .list(&stream, format!("{}.m.*", self.scope_subject(scope)))
            .await?;
        let now = self.now().await?;
        Ok(Self::live_members(&records, now))
    }

    async fn leases(&self, scope: &GroupScope) -> Result<Vec<PartitionLease>> {
        let stream = self.stream().await?;
        let records: Vec<(String, Stored<LeaseRecord>)> = self
            .list(&stream, format!("{}.p.*", self.scope_subject(scope)))
            .await?;
        let now = self.now().await?;
        let mut leases: Vec<PartitionLease> = records
            .into_iter()
            .filter_map(|(subject, stored)| {
                let partition = subject.rsplit('.').next()?.parse().ok()?;
                Some(PartitionLease {
                    partition,
                    live: LeaseRecord::live(&stored, now),
                    owner: stored.value.owner.clone(),
                    epoch: stored.value.epoch,
                    checkpoint: stored.value.seq,
                })
            })
            .collect();
        leases.sort_by_key(|lease| lease.partition);
        Ok(leases)
    }
}

impl NatsStoragePort {
    /// The group primitive on this port's connection.
    pub(crate) fn coordination(&self) -> Arc<dyn GroupCoordination> {
        Arc::new(NatsCoordination::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use photon_core::group::partition_of;
    use photon_core::raw::shard::{shard_for_key, sharded_seq};

    #[test]
    fn with_as_many_partitions_as_shards_a_partition_is_a_shard() {
        for shards in [2_u32, 4, 7] {
            for key in ["a", "order-17", "k0", "ü.*>"] {
                let shard = shard_for_key(Some(key), shards);
                for position in [1_u64, 2, 99] {
                    let seq = sharded_seq(position, shard, shards);
                    assert_eq!(partition_of(Some(key), seq, shards), shard);
                }
            }
            for position in [1_u64, 5, 1000] {
                let seq = sharded_seq(position, 0, shards);
                assert_eq!(partition_of(None, seq, shards), 0);
            }
        }
    }
}
