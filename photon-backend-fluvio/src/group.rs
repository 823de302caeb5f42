//! Consumer groups of the Fluvio port: the group protocol of `photon-core` over a command
//! log kept on the cluster itself, so that members in any process or host connected to it
//! share the work.
//!
//! - The coordination topic [`groups_topic_name`] (`{prefix}-checkpoints-groups`: a name no
//!   Photon topic maps to, see [`crate::topic`]) has one partition, so it has one order.
//!   Every call of [`GroupCoordination`] that changes state appends one command (heartbeat,
//!   leave, acquire, renew, release or commit, with a unique id, the writer's wall-clock
//!   time and the group) and waits until this port's reader has applied the log up to it.
//!   The renewals of one heartbeat (`renew_many`) are one command: each command costs a
//!   produce and a read-back (about 45 ms on a local cluster, mostly the broker's delayed
//!   ACK), so a member with 8 partitions renews in one round trip instead of 8.
//!   Its result is what the deterministic state machine ([`crate::group_machine`]) decided
//!   at the command's position: an acquire wins iff the lease is free or expired there, a
//!   commit is made iff its owner holds the lease at its epoch there and it has not expired
//!   (otherwise [`PhotonError::Fenced`]). Two writers racing for a lease are ordered by the
//!   log, and every port instance derives the same winner.
//! - One reader task per port instance applies the log from the newest snapshot's offset
//!   (its beginning when there is none; see "Growth" below), on the port's stream
//!   connection; it reopens its stream when it fails (replacing the connection from
//!   the second failure in a row) and checks a quiet stream against the end offset.
//! - `load_checkpoint`, `members` and `leases` first catch up with the end of the log, so
//!   a newly started process sees what earlier ones committed. (`load_checkpoint` of a
//!   partition whose live lease was won through this instance reads the applied state at
//!   once: only its holder can have committed since.)
//! - Every wait is bounded ([`COMMAND_DEADLINE`]): a call that cannot reach or apply the
//!   log in time fails with [`PhotonError::Unavailable`] naming the coordination topic.
//!
//! Time: Fluvio has no server clock a client can use, so expiries are judged on the log
//! clock: the largest writer time among the commands applied so far (it only moves
//! forward). A lease renewed by a command at log time `t` expires at `t + lease`. A host
//! whose wall clock runs `d` ahead of the others moves the log clock `d` early, so the
//! others' leases end `d` early in real time; a member stops handing out a partition a
//! safety margin (a fifth of the lease) before its lease ends on its own clock. The hosts'
//! clocks must therefore agree to well within that margin (400 ms for a 2 s lease, 1 s for
//! the default 5 s), minus a round trip to the cluster, as for any wall-clock lease. A
//! lagging clock only makes its own commands count as earlier, never brings a lease back.
//! `members` and `leases` judge liveness at the later of the log clock and this host's
//! clock.
//!
//! Growth: Fluvio cannot compact a topic, so the log is bounded by snapshots and
//! retention ([`crate::group_snapshot`]):
//! - Any port instance writes a snapshot of the state machine (the log clock, every lease
//!   with its epoch and checkpoint, the members not expired on the log clock) to
//!   [`groups_snapshot_topic_name`] (`{prefix}-checkpoints-groups-snapshot`) once it has
//!   applied 10,000 records since the newest snapshot it knows of (plus a stagger of its
//!   own below 1,250, so that instances do not all write at the same offset), or once
//!   10 minutes of log time passed since it. The snapshot is parts plus a manifest naming
//!   the log offset it covers, in the format of the checkpoint snapshots
//!   ([`crate::snapshot`]). One write at a time per instance, which first reads the newest
//!   manifest and skips when another instance's already covers enough. Two instances
//!   writing at once are harmless: each snapshot is the one deterministic state at its
//!   offset, and readers take the one covering the most.
//! - A port loads the newest snapshot when it first uses groups, then applies the log from
//!   the offset it covers: at most 11,250 records plus those applied while the newest
//!   snapshot was being written, whatever the log's age. (Measured, debug build, local
//!   cluster, `catch_up_after_a_long_log` in `tests/group_snapshots.rs`: after 1.63
//!   million commands a fresh instance caught up in 0.67 s, a snapshot and 10,000
//!   records. The running instance applied the log at about 18,000 records a second, so
//!   replaying it from the start would take about 90 s, far past [`COMMAND_DEADLINE`].)
//! - The coordination topic is created with a retention of one day ([`LOG_RETENTION`]):
//!   Fluvio removes whole segments older than that, never the active one, while a written
//!   log gets a snapshot every 10,000 records or 10 minutes. A topic created by an earlier
//!   version keeps the retention it was created with (the longest Fluvio stores): it keeps
//!   growing, but catch-up is bounded all the same. The snapshot topic keeps the longest
//!   retention (its newest snapshot is the groups' state once the log's head is gone): it
//!   grows by one snapshot, about 150 bytes per lease and live member, per 10,000 commands
//!   (more only when instances race).
//! - Records that no snapshot covers and that are gone (a retention shortened by hand, a
//!   log created with a short one, a hole in the offsets that stays after reopening) are
//!   never skipped: the reader logs an error and every call of this instance fails with
//!   [`PhotonError::Unavailable`] naming the coordination topic, the missing offsets and
//!   the snapshot topic, until an instance that applied them writes a snapshot covering
//!   them (the reader checks again at each retry and then goes on from it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use fluvio::consumer::{ConsumerStream, Record};
use fluvio::dataplane::link::ErrorCode;
use fluvio::{Offset, RecordKey};
use futures::StreamExt;
use photon_core::group::{
    Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember, PartitionLease,
};
use photon_core::{PhotonError, RecordStream, Result, StartAt};
use tokio::sync::{oneshot, watch, OnceCell};

use crate::error::unavailable;
use crate::group_machine::{Command, Machine, Op, Outcome};
use crate::group_snapshot::{
    load_newest, lost_records, snapshot_topic_config, SnapshotState, SNAPSHOT_STAGGER,
};
use crate::port::{FluvioStoragePort, Inner};
use crate::query::{end_offset, open, Hole, HoleGuard};
use crate::topic::{ensure_topic, groups_snapshot_topic_name, groups_topic_name};

/// How long one call may take to reach the log and see it applied.
pub(crate) const COMMAND_DEADLINE: Duration = Duration::from_secs(10);

/// How long the reader may receive nothing before it checks that its stream still works.
const PROBE_EVERY: Duration = Duration::from_secs(2);

/// Pause before reopening a failed stream, times the failures in a row (at most 10).
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The longest retention Fluvio stores: that of the snapshot topic (its newest snapshot is
/// the groups' state once the log's head is gone).
pub(crate) const KEEP: Duration = Duration::from_secs(4_294_967_295);

/// Retention of the coordination topic: a day, against a snapshot at least every
/// [`crate::group_snapshot::SNAPSHOT_EVERY`] records or [`crate::group_snapshot::SNAPSHOT_AGE`] of log time while
/// the log is written.
pub(crate) const LOG_RETENTION: Duration = Duration::from_secs(24 * 3600);

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only map operations and plain assignments happen under these locks.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The applied state of one port instance's coordination log.
pub(crate) struct GroupLog {
    pub(crate) machine: Mutex<Machine>,
    /// Calls waiting for their command to be applied, by command id.
    waiters: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    /// The offset of the next record to apply; changed only under `machine`'s lock, so
    /// that the two always match.
    pub(crate) applied: watch::Sender<i64>,
    /// Leases won by calls through this instance: (owner, epoch) by scope and partition.
    acquired: Mutex<HashMap<(GroupScope, u32), (String, u64)>>,
    /// Set once the topic exists and the reader runs.
    started: OnceCell<()>,
    /// The snapshots this instance knows of and writes.
    pub(crate) snapshots: Mutex<SnapshotState>,
    /// This instance's extra records before it writes a snapshot (below
    /// [`SNAPSHOT_STAGGER`]).
    pub(crate) stagger: i64,
    /// Records applied by this instance's reader.
    applied_records: AtomicU64,
    /// Snapshots written by this instance.
    pub(crate) writes: AtomicU64,
    /// Why the log cannot be applied (records removed that no snapshot covers).
    lost: watch::Sender<Option<String>>,
}

impl Default for GroupLog {
    fn default() -> Self {
        let random = uuid::Uuid::new_v4().as_u128();
        Self {
            machine: Mutex::default(),
            waiters: Mutex::default(),
            applied: watch::Sender::new(0),
            acquired: Mutex::default(),
            started: OnceCell::new(),
            snapshots: Mutex::default(),
            stagger: i64::try_from(random % SNAPSHOT_STAGGER.unsigned_abs() as u128).unwrap_or(0),
            applied_records: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            lost: watch::Sender::new(None),
        }
    }
}

impl GroupLog {
    /// Applies the record at `offset` and hands its outcome to the call that wrote it;
    /// returns the next offset and the log clock.
    fn apply(&self, name: &str, record: &Record) -> (i64, i64) {
        let next = record.offset() + 1;
        self.applied_records.fetch_add(1, Ordering::Relaxed);
        match serde_json::from_slice::<Command>(record.value()) {
            Ok(command) => {
                let (outcome, clock) = {
                    let mut machine = lock(&self.machine);
                    let outcome = machine.apply(&command);
                    self.applied.send_replace(next);
                    (outcome, machine.clock_ms())
                };
                if let Some(waiter) = lock(&self.waiters).remove(&command.id) {
                    // The caller may have given up meanwhile.
                    let _ = waiter.send(outcome);
                }
                (next, clock)
            }
            Err(err) => {
                // Not a command of this port: it changes no state, on any instance.
                tracing::warn!(port = "fluvio", topic = %name, offset = record.offset(), %err, "unreadable group command skipped");
                let machine = lock(&self.machine);
                self.applied.send_replace(next);
                (next, machine.clock_ms())
            }
        }
    }

    /// The error of a log that cannot be applied, if it cannot.
    fn lost(&self) -> Result<()> {
        match self.lost.borrow().as_ref() {
            None => Ok(()),
            Some(message) => Err(PhotonError::Unavailable {
                backend: crate::error::LABEL,
                message: message.clone(),
                source: None,
            }),
        }
    }

    /// Figures of this instance's log, for tests and benchmarks.
    pub(crate) fn stats(&self) -> GroupLogStats {
        let snapshots = lock(&self.snapshots);
        GroupLogStats {
            loaded_snapshot: snapshots.loaded,
            applied_records: self.applied_records.load(Ordering::Relaxed),
            next_offset: *self.applied.borrow(),
            newest_snapshot: snapshots.covers,
            snapshots_written: self.writes.load(Ordering::Relaxed),
            snapshot_writing: snapshots.writing,
        }
    }
}

/// Figures of one port instance's group coordination log (see
/// [`FluvioStoragePort::group_log_stats`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupLogStats {
    /// The log offset of the snapshot this instance started from, if any.
    pub loaded_snapshot: Option<i64>,
    /// Records of the log this instance applied (not counting those in its snapshot).
    pub applied_records: u64,
    /// The offset of the next record to apply.
    pub next_offset: i64,
    /// The offset the newest snapshot this instance knows of covers (0: none).
    pub newest_snapshot: i64,
    /// Snapshots this instance wrote.
    pub snapshots_written: u64,
    /// Whether this instance is writing a snapshot now.
    pub snapshot_writing: bool,
}

/// The group primitive of one port instance.
pub(crate) struct FluvioCoordination {
    port: FluvioStoragePort,
}

impl FluvioCoordination {
    fn inner(&self) -> &Arc<Inner> {
        &self.port.inner
    }

    fn log(&self) -> &Arc<GroupLog> {
        &self.port.inner.groups
    }

    fn timed_out(name: &str, what: &str) -> PhotonError {
        PhotonError::Unavailable {
            backend: crate::error::LABEL,
            message: format!(
                "group coordination topic {name}: {what} not done within {COMMAND_DEADLINE:?}"
            ),
            source: None,
        }
    }

    /// Makes sure the coordination topic exists and this instance's reader runs; returns
    /// the topic's name.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the topic cannot be created.
    async fn ready(&self) -> Result<String> {
        let inner = self.inner();
        let name = groups_topic_name(&inner.config.prefix);
        inner
            .groups
            .started
            // Boxed, as it runs once: its reads nest deep enough to overflow the layout of
            // every caller's future.
            .get_or_try_init(|| Box::pin(async {
                let config = crate::config::FluvioConfig {
                    retention_max_age: LOG_RETENTION,
                    ..inner.config.clone()
                };
                ensure_topic(&inner.fluvio(), &config, &name).await?;
                let snapshots = groups_snapshot_topic_name(&inner.config.prefix);
                ensure_topic(
                    &inner.fluvio(),
                    &snapshot_topic_config(&inner.config),
                    &snapshots,
                )
                .await?;
                // The newest snapshot first: only the records after it are read.
                if let Some(covers) = load_newest(inner, &inner.groups).await? {
                    let end = end_offset(&inner.fluvio(), &name).await?;
                    if end < covers {
                        return Err(PhotonError::Unavailable {
                            backend: crate::error::LABEL,
                            message: format!(
                                "group coordination topic {name} ends at offset {end}, but the newest snapshot in {snapshots} covers offsets below {covers}: the topic was recreated without its snapshots; delete {snapshots} too (it holds the groups' state)"
                            ),
                            source: None,
                        });
                    }
                }
                tokio::spawn(read_log(
                    Arc::downgrade(inner),
                    Arc::clone(&inner.groups),
                    name.clone(),
                ));
                Ok::<_, PhotonError>(())
            }))
            .await?;
        Ok(name)
    }

    /// Appends a command and returns what the state machine decided at its position.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the command is not stored, or not applied within
    /// [`COMMAND_DEADLINE`].
    async fn call(&self, scope: &GroupScope, op: Op) -> Result<Outcome> {
        let name = self.ready().await?;
        self.log().lost()?;
        let command = Command {
            id: uuid::Uuid::new_v4().simple().to_string(),
            at_ms: now_ms(),
            group: scope.group.clone(),
            topic: scope.topic.clone(),
            op,
        };
        let value =
            serde_json::to_vec(&command).map_err(|e| PhotonError::codec("group command", e))?;
        let (done, outcome) = oneshot::channel();
        lock(&self.log().waiters).insert(command.id.clone(), done);
        let mut lost = self.log().lost.subscribe();
        let result = tokio::time::timeout(COMMAND_DEADLINE, async {
            self.append(&name, value).await?;
            tokio::select! {
                outcome = outcome => outcome
                    .map_err(|_| PhotonError::Closed(format!("group coordination topic {name}"))),
                // A log that cannot be applied never decides the command.
                _ = lost.wait_for(Option::is_some) => self.log().lost().map(|()| Outcome::Done),
            }
        })
        .await;
        lock(&self.log().waiters).remove(&command.id);
        result.unwrap_or_else(|_| Err(Self::timed_out(&name, "a command")))
    }

    /// Sends one record to the coordination topic and waits for its ack.
    async fn append(&self, name: &str, value: Vec<u8>) -> Result<()> {
        let inner = self.inner();
        let open = inner
            .topics
            .producer(|| inner.fluvio(), &inner.config, name)
            .await?;
        let sent = match open.producer.send(RecordKey::NULL, value).await {
            Ok(output) => output
                .wait()
                .await
                .map(|_| ())
                .map_err(|err| unavailable(format!("no ack from {name}"), err)),
            Err(err) => Err(unavailable(format!("cannot append to {name}"), err)),
        };
        if sent.is_err() {
            self.port.drop_producer(&open, name).await;
        }
        sent
    }

    /// Waits until this instance has applied the log up to its current end.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the end cannot be read or reached in time.
    async fn catch_up(&self) -> Result<()> {
        let name = self.ready().await?;
        let inner = self.inner();
        tokio::time::timeout(COMMAND_DEADLINE, async {
            let end = end_offset(&inner.fluvio(), &name).await?;
            let mut applied = self.log().applied.subscribe();
            let mut lost = self.log().lost.subscribe();
            let closed = |_| PhotonError::Closed(format!("group coordination topic {name}"));
            loop {
                lost.borrow_and_update();
                self.log().lost()?;
                if *applied.borrow_and_update() >= end {
                    return Ok(());
                }
                tokio::select! {
                    changed = applied.changed() => changed.map_err(closed)?,
                    changed = lost.changed() => changed.map_err(closed)?,
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(Self::timed_out(&name, "catching up")))
    }

    fn unexpected(outcome: &Outcome) -> PhotonError {
        PhotonError::Storage {
            backend: crate::error::LABEL,
            message: format!("group command answered with {outcome:?}"),
            source: None,
        }
    }

    /// Liveness is judged at the later of the log clock and this host's clock.
    fn read_now(&self) -> i64 {
        lock(&self.log().machine).clock_ms().max(now_ms())
    }
}

#[async_trait]
impl GroupCoordination for FluvioCoordination {
    async fn heartbeat(&self, scope: &GroupScope, beat: Heartbeat<'_>) -> Result<Vec<LiveMember>> {
        let op = Op::Heartbeat {
            member: beat.member.to_owned(),
            owner: beat.owner.to_owned(),
            partitions: beat.partitions,
            ttl_ms: ms(beat.ttl),
        };
        match self.call(scope, op).await? {
            Outcome::Members(members) => Ok(members),
            other => Err(Self::unexpected(&other)),
        }
    }

    async fn leave(&self, scope: &GroupScope, owner: &str) -> Result<()> {
        let op = Op::Leave {
            owner: owner.to_owned(),
        };
        self.call(scope, op).await.map(|_| ())
    }

    async fn acquire(&self, scope: &GroupScope, claim: Claim<'_>) -> Result<Option<u64>> {
        let op = Op::Acquire {
            partition: claim.partition,
            owner: claim.owner.to_owned(),
            ttl_ms: ms(claim.ttl),
        };
        match self.call(scope, op).await? {
            Outcome::Acquired(epoch) => {
                if let Some(epoch) = epoch {
                    lock(&self.log().acquired).insert(
                        (scope.clone(), claim.partition),
                        (claim.owner.to_owned(), epoch),
                    );
                }
                Ok(epoch)
            }
            other => Err(Self::unexpected(&other)),
        }
    }

    async fn renew(&self, scope: &GroupScope, held: HeldLease<'_>, ttl: Duration) -> Result<bool> {
        let op = Op::Renew {
            partition: held.partition,
            owner: held.owner.to_owned(),
            epoch: held.epoch,
            ttl_ms: ms(ttl),
        };
        match self.call(scope, op).await? {
            Outcome::Renewed(renewed) => Ok(renewed),
            other => Err(Self::unexpected(&other)),
        }
    }

    async fn renew_many(
        &self,
        scope: &GroupScope,
        owner: &str,
        leases: &[(u32, u64)],
        ttl: Duration,
    ) -> Vec<Result<bool>> {
        // One command for all: one round trip per heartbeat instead of one per partition.
        let op = Op::RenewMany {
            owner: owner.to_owned(),
            leases: leases.to_vec(),
            ttl_ms: ms(ttl),
        };
        match self.call(scope, op).await {
            Ok(Outcome::RenewedMany(renewed)) if renewed.len() == leases.len() => {
                renewed.into_iter().map(Ok).collect()
            }
            Ok(other) => leases
                .iter()
                .map(|_| Err(Self::unexpected(&other)))
                .collect(),
            Err(err) => {
                // One command failed for all of them, each gets its own copy of why.
                let message = err.to_string();
                leases
                    .iter()
                    .map(|_| {
                        Err(PhotonError::Unavailable {
                            backend: crate::error::LABEL,
                            message: message.clone(),
                            source: None,
                        })
                    })
                    .collect()
            }
        }
    }

    async fn release(&self, scope: &GroupScope, held: HeldLease<'_>) -> Result<()> {
        let op = Op::Release {
            partition: held.partition,
            owner: held.owner.to_owned(),
            epoch: held.epoch,
        };
        self.call(scope, op).await.map(|_| ())
    }

    async fn load_checkpoint(&self, scope: &GroupScope, partition: u32) -> Result<Option<i64>> {
        // Right after a lease won here (a member taking a partition), the applied state
        // already holds every commit that can matter: commits before the acquire are
        // applied, and after it only the holder (a caller of this instance, whose commits
        // return once applied) can commit while the lease is live. A later owner would
        // fence the holder anyway; a stale value could only be lower (more repeats, never
        // a skip). Otherwise the log is read to its end first.
        let held_here = lock(&self.log().acquired)
            .get(&(scope.clone(), partition))
            .cloned();
        if let Some((owner, epoch)) = held_here {
            let now = self.read_now();
            let machine = lock(&self.log().machine);
            if machine.held_by(scope, partition, &owner, epoch, now) {
                return Ok(machine.checkpoint(scope, partition));
            }
        }
        self.catch_up().await?;
        Ok(lock(&self.log().machine).checkpoint(scope, partition))
    }

    async fn commit(&self, scope: &GroupScope, held: HeldLease<'_>, seq: i64) -> Result<()> {
        let op = Op::Commit {
            partition: held.partition,
            owner: held.owner.to_owned(),
            epoch: held.epoch,
            seq,
        };
        match self.call(scope, op).await? {
            Outcome::Committed(true) => Ok(()),
            Outcome::Committed(false) => Err(held.fenced(scope)),
            other => Err(Self::unexpected(&other)),
        }
    }

    fn topic_partitions(&self, _topic: &str) -> Option<u32> {
        // A key lives in one shard and seq = (offset + 1) × shards + shard, so with as many
        // partitions as shards `partition_of` is the shard (unkeyed events: shard 0), and a
        // partition is read from its shard alone, in seq order.
        let shards = self.port.inner.config.shards;
        (shards > 1).then_some(shards)
    }

    fn partition_records(
        &self,
        topic: &str,
        partition: u32,
        start: StartAt,
    ) -> Option<RecordStream> {
        self.topic_partitions(topic)?;
        Some(self.port.open_shard_subscription(topic, partition, start))
    }

    async fn partition_head(&self, topic: &str, partition: u32) -> Option<Result<i64>> {
        // Without `head_seq`, the shard's end is where a tail start is pinned; with one
        // shard that is the topic's end.
        let shard = if self.topic_partitions(topic).is_some() {
            partition
        } else {
            0
        };
        Some(self.port.shard_head(topic, shard).await)
    }

    async fn members(&self, scope: &GroupScope) -> Result<Vec<LiveMember>> {
        self.catch_up().await?;
        let now = self.read_now();
        Ok(lock(&self.log().machine).members(scope, now))
    }

    async fn leases(&self, scope: &GroupScope) -> Result<Vec<PartitionLease>> {
        self.catch_up().await?;
        let now = self.read_now();
        Ok(lock(&self.log().machine).leases(scope, now))
    }
}

/// Why the reader's stream ended.
enum Ended {
    /// The port is gone: the reader stops.
    PortGone,
    /// The stream failed; `applied` says whether records were applied before.
    Failed { cause: String, applied: bool },
    /// The fetch left out records (see [`HoleGuard`]): reopen at once at the first one.
    Skipped { applied: bool },
    /// Records from the next offset to apply up to `first` are gone (retention).
    Evicted { first: i64 },
}

/// The reader of one port instance: applies the coordination log in order, from its
/// beginning, for as long as the port lives.
async fn read_log(port: Weak<Inner>, log: Arc<GroupLog>, name: String) {
    let mut failures = 0_u32;
    let mut failing_since: Option<Instant> = None;
    let mut holes = HoleGuard::default();
    loop {
        let Some(client) = port.upgrade().map(|inner| inner.stream.current()) else {
            return;
        };
        let next = *log.applied.borrow();
        let start = Offset::absolute(next).unwrap_or_else(|_| Offset::beginning());
        let (cause, applied) = match open(&client, &name, start, true).await {
            Ok(stream) => match follow(&port, &log, &name, stream, &mut holes).await {
                Ended::PortGone => return,
                Ended::Evicted { first } => {
                    let Some(inner) = port.upgrade() else {
                        return;
                    };
                    let next = *log.applied.borrow();
                    if !recover(&inner, &log, &name, next, first).await {
                        // Not a connection problem: look for a snapshot again after a pause.
                        tokio::time::sleep(RETRY_PAUSE * 10).await;
                    }
                    failures = 0;
                    failing_since = None;
                    continue;
                }
                Ended::Skipped { applied } => {
                    if applied {
                        failures = 0;
                        failing_since = None;
                    }
                    continue;
                }
                Ended::Failed { cause, applied } => (cause, applied),
            },
            Err(err) => (err.to_string(), false),
        };
        if applied {
            failures = 0;
            failing_since = None;
        }
        failures += 1;
        let since = *failing_since.get_or_insert_with(Instant::now);
        tracing::debug!(port = "fluvio", topic = %name, %cause, failures, "reopening the group coordination log");
        if since.elapsed() >= crate::consumer::WARN_AFTER && failures.is_multiple_of(10) {
            tracing::warn!(port = "fluvio", topic = %name, %cause, "group coordination log unreadable for {:?}; still retrying", since.elapsed());
        }
        if failures >= 2 {
            let Some(inner) = port.upgrade() else {
                return;
            };
            // A failed reconnect is logged by `replace`; the next round tries again.
            let _ = inner.stream.replace(&client).await;
        }
        tokio::time::sleep(RETRY_PAUSE * failures.min(10)).await;
    }
}

/// Applies records until the stream fails or the port is gone.
async fn follow(
    port: &Weak<Inner>,
    log: &Arc<GroupLog>,
    name: &str,
    mut stream: impl ConsumerStream<Item = std::result::Result<Record, ErrorCode>>,
    holes: &mut HoleGuard,
) -> Ended {
    let probe = tokio::time::sleep(PROBE_EVERY);
    tokio::pin!(probe);
    let mut received = false;
    let mut applied = false;
    let mut behind = 0_u32;
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = &mut probe => {
                probe.as_mut().reset(tokio::time::Instant::now() + PROBE_EVERY);
                let Some(inner) = port.upgrade() else {
                    return Ended::PortGone;
                };
                if std::mem::take(&mut received) {
                    behind = 0;
                    continue;
                }
                // Quiet: nothing was appended, or the stream silently stopped (a socket to
                // a restarted SPU). The end offset, read on the publish connection, tells.
                let publish = inner.fluvio();
                let end = tokio::time::timeout(PROBE_EVERY, end_offset(&publish, name)).await;
                if !matches!(end, Ok(Ok(_))) {
                    inner.reconnect(&publish).await;
                }
                let next = *log.applied.borrow();
                match end {
                    Ok(Ok(end)) if end <= next => {
                        behind = 0;
                        continue;
                    }
                    Ok(Ok(end)) => {
                        behind += 1;
                        if behind < 2 {
                            continue;
                        }
                        return Ended::Failed {
                            cause: format!("no record although the log ends at {end} and the next to apply is {next}"),
                            applied,
                        };
                    }
                    Ok(Err(err)) => return Ended::Failed { cause: format!("cannot read the end offset: {err}"), applied },
                    Err(_) => return Ended::Failed { cause: format!("no end offset within {PROBE_EVERY:?}"), applied },
                }
            }
        };
        match item {
            Some(Ok(record)) => {
                received = true;
                let next = *log.applied.borrow();
                if record.offset() < next {
                    continue;
                }
                if record.offset() > next {
                    let Some(inner) = port.upgrade() else {
                        return Ended::PortGone;
                    };
                    // Never apply past missing commands: read them, or recover past them.
                    match holes
                        .judge(&inner.fluvio(), name, next, record.offset())
                        .await
                    {
                        Ok(Hole::Reopen) if holes.quick() => return Ended::Skipped { applied },
                        Ok(Hole::Removed { first }) => return Ended::Evicted { first },
                        // A hole that persists past the quick reopens although the log
                        // holds its commands (or that cannot be judged): recover from a
                        // snapshot covering it at once rather than reopen again.
                        Ok(Hole::Reopen) | Err(_) => {
                            return Ended::Evicted {
                                first: record.offset(),
                            }
                        }
                    }
                }
                let (next, clock) = log.apply(name, &record);
                log.after_apply(port, next, clock);
                applied = true;
            }
            Some(Err(ErrorCode::OffsetEvicted { next_available, .. })) => {
                return Ended::Evicted {
                    first: next_available,
                };
            }
            Some(Err(code)) => {
                return Ended::Failed {
                    cause: format!("stream error: {code}"),
                    applied,
                }
            }
            None => {
                return Ended::Failed {
                    cause: "stream ended".to_owned(),
                    applied,
                }
            }
        }
    }
}

/// Moves past records `next..first` removed by retention when a snapshot covers them;
/// otherwise marks the log lost (every call fails with [`PhotonError::Unavailable`] naming
/// the topic and the offsets, and the error is logged) until one does.
async fn recover(inner: &Inner, log: &GroupLog, name: &str, next: i64, first: i64) -> bool {
    let newest = match load_newest(inner, log).await {
        Ok(newest) => newest,
        Err(err) => {
            tracing::warn!(port = "fluvio", topic = %name, %err, "cannot read the group coordination snapshots");
            None
        }
    };
    if newest.is_some_and(|covers| covers >= first) {
        log.lost.send_replace(None);
        tracing::info!(port = "fluvio", topic = %name, next, first, "group coordination records removed by retention are covered by a snapshot");
        return true;
    }
    let err = lost_records(&inner.config.prefix, name, next, first, newest);
    let message = err.to_string();
    let changed = log.lost.send_if_modified(|lost| {
        if lost.as_deref() == Some(message.as_str()) {
            return false;
        }
        *lost = Some(message.clone());
        true
    });
    if changed {
        tracing::error!(port = "fluvio", topic = %name, next, first, %err, "group coordination records lost");
    }
    false
}

impl FluvioStoragePort {
    /// Figures of this port instance's group coordination log: where it started, how many
    /// records it applied, the snapshots it knows of and wrote. For tests and benchmarks.
    #[doc(hidden)]
    pub fn group_log_stats(&self) -> GroupLogStats {
        self.inner.groups.stats()
    }

    /// The group primitive of this port instance (its reader starts on first use).
    pub(crate) fn coordination(&self) -> Arc<dyn GroupCoordination> {
        Arc::new(FluvioCoordination { port: self.clone() })
    }
}
