//! Checkpoint coalescing: acknowledgements are kept in memory and committed in batches.
//!
//! A crash loses at most the acknowledgements of one flush window (`interval`, or
//! `max_pending` acknowledgements, whichever comes first); those events are delivered again
//! after a restart. Nothing is ever skipped: only acknowledged seqs are committed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Result;
use crate::metrics::{Consumer, ConsumerMetrics};
use crate::port::{CheckpointKey, StoragePort};

/// When coalesced checkpoints are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushPolicy {
    /// Longest time an acknowledgement waits before it is committed.
    pub interval: Duration,
    /// Number of acknowledgements that forces a commit.
    pub max_pending: u32,
}

impl Default for FlushPolicy {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(100),
            max_pending: 256,
        }
    }
}

impl FlushPolicy {
    /// Commits every acknowledgement at once (no duplicates after a crash, slowest).
    pub fn immediate() -> Self {
        Self {
            interval: Duration::from_millis(100),
            max_pending: 1,
        }
    }
}

#[derive(Debug, Default)]
struct Lanes {
    pending: BTreeMap<u32, i64>,
    committed: BTreeMap<u32, i64>,
    since_flush: u32,
}

/// Coalesces the acknowledgements of one checkpoint.
///
/// Committed values never regress. Commits are made one at a time, so that
/// [`CheckpointCommitter::flush`] returns only once every acknowledgement made before it,
/// including those a periodic commit already took, is stored.
///
/// Dropping the last handle commits what is pending in a background task of the current
/// tokio runtime. That commit is visible to this process: opening the same checkpoint
/// again ([`crate::EventStore::records_after_checkpoint`]) waits for it first, and
/// [`CheckpointCommitter::all_settled`] waits for every one of them.
///
/// Each write is counted in `photon_checkpoint_commits_total` (or
/// `photon_checkpoint_commit_errors_total`), and a flush that stored something sets
/// `photon_subscription_lag` (see [`crate::metrics`]).
pub struct CheckpointCommitter {
    port: Arc<dyn StoragePort>,
    key: CheckpointKey,
    policy: FlushPolicy,
    metrics: ConsumerMetrics,
    lanes: Mutex<Lanes>,
    /// Held across a commit: a flush waits for the commit in flight.
    committing: tokio::sync::Mutex<()>,
}

/// Commits still running in the background, per checkpoint: final commits of dropped
/// committers and periodic flushes. Each is a receiver whose sender the commit holds until
/// it ended.
static FINAL_COMMITS: LazyLock<Mutex<HashMap<CheckpointKey, Vec<watch::Receiver<()>>>>> =
    LazyLock::new(Mutex::default);

/// Final commits of dropped committers that failed, by the port they were made on (the
/// address of its allocation): reported by [`CheckpointCommitter::take_final_failures`].
static FAILED_FINAL_COMMITS: LazyLock<Mutex<HashMap<usize, Vec<String>>>> =
    LazyLock::new(Mutex::default);

fn port_id(port: &Arc<dyn StoragePort>) -> usize {
    Arc::as_ptr(port).cast::<()>() as usize
}

fn final_commits(
) -> std::sync::MutexGuard<'static, HashMap<CheckpointKey, Vec<watch::Receiver<()>>>> {
    // Only receivers are pushed and removed under this lock.
    FINAL_COMMITS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn wait_all(receivers: Vec<watch::Receiver<()>>) {
    for mut receiver in receivers {
        // Err means the commit task ended (its sender is gone): what we wait for.
        while receiver.changed().await.is_ok() {}
    }
}

impl std::fmt::Debug for CheckpointCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointCommitter")
            .field("key", &self.key)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl CheckpointCommitter {
    /// A committer for `key`; starts its interval flusher on the current tokio runtime.
    pub fn new(port: Arc<dyn StoragePort>, key: CheckpointKey, policy: FlushPolicy) -> Arc<Self> {
        let metrics = ConsumerMetrics::new(
            port.label(),
            &key.topic,
            Consumer::Subscription(&key.subscription),
        );
        let committer = Arc::new(Self {
            port,
            key,
            policy,
            metrics,
            lanes: Mutex::new(Lanes::default()),
            committing: tokio::sync::Mutex::new(()),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(flush_periodically(
                Arc::downgrade(&committer),
                policy.interval,
            ));
        }
        committer
    }

    /// The checkpoint this committer writes.
    pub fn key(&self) -> &CheckpointKey {
        &self.key
    }

    /// Records that `seq` was handled, and commits when `max_pending` is reached.
    ///
    /// The caller acknowledges in order per lane (the durable subscription and the executor
    /// do); a lower seq than one already acknowledged is ignored.
    ///
    /// # Errors
    /// The port's commit error; the acknowledgement stays pending and is retried.
    pub async fn ack(&self, seq: i64) -> Result<()> {
        let lane = self.port.checkpoint_lane(&self.key.topic, seq);
        let due = {
            let mut lanes = self.lock();
            let pending = lanes.pending.entry(lane).or_insert(seq);
            *pending = (*pending).max(seq);
            lanes.since_flush += 1;
            lanes.since_flush >= self.policy.max_pending
        };
        if due {
            self.flush().await?;
        }
        Ok(())
    }

    /// The highest acknowledged seq per lane, committed or not.
    pub fn acknowledged(&self) -> BTreeMap<u32, i64> {
        let lanes = self.lock();
        let mut all = lanes.committed.clone();
        for (lane, seq) in &lanes.pending {
            let entry = all.entry(*lane).or_insert(*seq);
            *entry = (*entry).max(*seq);
        }
        all
    }

    /// Waits until the final commits of dropped committers of `key` (in this process) have
    /// ended, so that loading the checkpoint sees them.
    pub async fn settled(key: &CheckpointKey) {
        let receivers = final_commits().get(key).cloned().unwrap_or_default();
        wait_all(receivers).await;
    }

    /// The final commits of dropped committers on `port` that failed since the last call,
    /// each as `<checkpoint>: <error>`. Call it after [`CheckpointCommitter::all_settled`]
    /// to know whether every dropped subscription's position was stored.
    pub fn take_final_failures(port: &Arc<dyn StoragePort>) -> Vec<String> {
        FAILED_FINAL_COMMITS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&port_id(port))
            .unwrap_or_default()
    }

    /// Waits until the final commits of every dropped committer (in this process) have
    /// ended.
    pub async fn all_settled() {
        let receivers: Vec<_> = final_commits().values().flatten().cloned().collect();
        wait_all(receivers).await;
    }

    /// Commits everything acknowledged so far, after any commit in flight has ended.
    ///
    /// # Errors
    /// The port's commit error; what failed stays pending.
    pub async fn flush(&self) -> Result<()> {
        let stored_any = {
            let _turn = self.committing.lock().await;
            self.commit_pending().await?
        };
        if stored_any {
            // Outside the turn: a slow head read does not hold the next commit back.
            self.refresh_lag().await;
        }
        Ok(())
    }

    /// Commits the pending batch; whether anything was stored.
    async fn commit_pending(&self) -> Result<bool> {
        let batch = {
            let mut lanes = self.lock();
            lanes.since_flush = 0;
            std::mem::take(&mut lanes.pending)
        };
        let stored_any = !batch.is_empty();
        let mut batch = batch.into_iter();
        while let Some((lane, seq)) = batch.next() {
            if let Err(err) = self.port.commit_checkpoint(&self.key, seq).await {
                self.metrics.commit_error();
                // This lane and every lane not tried yet stay pending for the next flush.
                let mut lanes = self.lock();
                for (lane, seq) in std::iter::once((lane, seq)).chain(batch) {
                    let pending = lanes.pending.entry(lane).or_insert(seq);
                    *pending = (*pending).max(seq);
                }
                return Err(err);
            }
            self.metrics.commit();
            let mut lanes = self.lock();
            let committed = lanes.committed.entry(lane).or_insert(seq);
            *committed = (*committed).max(seq);
        }
        Ok(stored_any)
    }

    /// Sets the lag gauge: the head seq minus the lowest committed lane.
    async fn refresh_lag(&self) {
        if !self.port.capabilities().head_seq {
            return;
        }
        let Some(committed) = self.lock().committed.values().min().copied() else {
            return;
        };
        match self
            .port
            .head_seq(&self.key.topic, self.key.key.as_deref())
            .await
        {
            Ok(head) => self.metrics.lag(head.unwrap_or(0), committed),
            Err(err) => {
                tracing::debug!(checkpoint = ?self.key, %err, "head seq unreadable; lag not updated")
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lanes> {
        // A panic while holding this lock leaves plain integers behind: still consistent.
        self.lanes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for CheckpointCommitter {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut self.lock().pending);
        if pending.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(checkpoint = ?self.key, "dropped outside a tokio runtime: pending checkpoint not committed");
            return;
        };
        let port = self.port.clone();
        let key = self.key.clone();
        let metrics = self.metrics.clone();
        let running = RunningCommit::register(&mut final_commits(), key.clone());
        runtime.spawn(async move {
            for seq in pending.into_values() {
                match port.commit_checkpoint(&key, seq).await {
                    Ok(()) => metrics.commit(),
                    Err(err) => {
                        metrics.commit_error();
                        tracing::warn!(checkpoint = ?key, %err, "final checkpoint commit failed");
                        FAILED_FINAL_COMMITS
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .entry(port_id(&port))
                            .or_default()
                            .push(format!("{key:?}: {err}"));
                    }
                }
            }
            drop(running);
        });
    }
}

async fn flush_periodically(committer: Weak<CheckpointCommitter>, interval: Duration) {
    // Nothing is acknowledged at creation: the first flush is one interval later.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some((live, running)) = upgrade_registered(&committer) else {
            return;
        };
        if let Err(err) = live.flush().await {
            tracing::warn!(checkpoint = ?live.key, %err, "checkpoint flush failed; will retry");
        }
        // If this was the last handle, its drop registers its own final commit first.
        drop(live);
        drop(running);
    }
}

/// Takes a handle on a live committer for a background flush, and registers that flush as
/// a commit [`CheckpointCommitter::settled`] waits for.
///
/// Both happen under the registry lock: a subscription dropped while this flush holds the
/// last handle does not commit on drop (this flush does), and a reopen that looks at the
/// registry after that drop finds this flush there and waits for it.
fn upgrade_registered(
    committer: &Weak<CheckpointCommitter>,
) -> Option<(Arc<CheckpointCommitter>, RunningCommit)> {
    let mut registry = final_commits();
    let committer = committer.upgrade()?;
    let running = RunningCommit::register(&mut registry, committer.key.clone());
    Some((committer, running))
}

/// A commit that [`CheckpointCommitter::settled`] waits for, registered until dropped.
struct RunningCommit {
    key: CheckpointKey,
    done: Option<watch::Sender<()>>,
}

impl RunningCommit {
    fn register(
        registry: &mut HashMap<CheckpointKey, Vec<watch::Receiver<()>>>,
        key: CheckpointKey,
    ) -> Self {
        let (done, receiver) = watch::channel(());
        let running = registry.entry(key.clone()).or_default();
        running.retain(|receiver| receiver.has_changed().is_ok());
        running.push(receiver);
        Self {
            key,
            done: Some(done),
        }
    }
}

impl Drop for RunningCommit {
    fn drop(&mut self) {
        drop(self.done.take());
        let mut registry = final_commits();
        if let Some(running) = registry.get_mut(&self.key) {
            running.retain(|receiver| receiver.has_changed().is_ok());
            if running.is_empty() {
                registry.remove(&self.key);
            }
        }
    }
}
