//! Checkpoint coalescing: acknowledgements are kept in memory and committed in batches.
//!
//! A crash loses at most the acknowledgements of one flush window (`interval`, or
//! `max_pending` acknowledgements, whichever comes first); those events are delivered again
//! after a restart. Nothing is ever skipped: only acknowledged seqs are committed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::error::Result;
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
/// Committed values never regress. Dropping the last handle commits what is pending (in a
/// background task of the current tokio runtime); call [`CheckpointCommitter::flush`] to wait
/// for it.
pub struct CheckpointCommitter {
    port: Arc<dyn StoragePort>,
    key: CheckpointKey,
    policy: FlushPolicy,
    lanes: Mutex<Lanes>,
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
        let committer = Arc::new(Self {
            port,
            key,
            policy,
            lanes: Mutex::new(Lanes::default()),
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

    /// Commits everything acknowledged so far.
    ///
    /// # Errors
    /// The port's commit error; what failed stays pending.
    pub async fn flush(&self) -> Result<()> {
        let batch = {
            let mut lanes = self.lock();
            lanes.since_flush = 0;
            std::mem::take(&mut lanes.pending)
        };
        for (lane, seq) in batch {
            if let Err(err) = self.port.commit_checkpoint(&self.key, seq).await {
                let mut lanes = self.lock();
                let pending = lanes.pending.entry(lane).or_insert(seq);
                *pending = (*pending).max(seq);
                return Err(err);
            }
            let mut lanes = self.lock();
            let committed = lanes.committed.entry(lane).or_insert(seq);
            *committed = (*committed).max(seq);
        }
        Ok(())
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
        runtime.spawn(async move {
            for seq in pending.into_values() {
                if let Err(err) = port.commit_checkpoint(&key, seq).await {
                    tracing::warn!(checkpoint = ?key, %err, "final checkpoint commit failed");
                }
            }
        });
    }
}

async fn flush_periodically(committer: Weak<CheckpointCommitter>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(committer) = committer.upgrade() else {
            return;
        };
        if let Err(err) = committer.flush().await {
            tracing::warn!(checkpoint = ?committer.key, %err, "checkpoint flush failed; will retry");
        }
    }
}
