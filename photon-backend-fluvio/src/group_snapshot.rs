//! Snapshots of the group coordination log (see [`crate::group`], "Growth").
//!
//! - A snapshot is the [`Machine`]'s [`Fact`]s at a log offset, written in parts with a
//!   manifest (the format of the checkpoint snapshots, [`crate::snapshot`]) to
//!   [`groups_snapshot_topic_name`], kept as long as Fluvio keeps anything.
//! - Any port instance writes one once the records it applied since the newest snapshot it
//!   knows of reach [`SNAPSHOT_EVERY`] plus a stagger of its own (below
//!   [`SNAPSHOT_STAGGER`], so that instances reading the same log do not all write at the
//!   same offset: the first one's snapshot is seen by the others before they reach their
//!   own threshold), or once [`SNAPSHOT_AGE`] of log time passed since it. One write at a
//!   time per instance; it first reads the newest manifest and skips when another
//!   instance's snapshot already covers enough. Two writers racing are harmless: each
//!   snapshot is the one deterministic state at its offset, and a reader takes the
//!   snapshot covering the most.
//! - A starting reader loads the newest snapshot and applies the log from its offset on:
//!   fewer than [`SNAPSHOT_EVERY`] + [`SNAPSHOT_STAGGER`] records, plus those appended
//!   while the last snapshot was written, whatever the log's age.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use photon_core::{PhotonError, Result};

use crate::group::{lock, GroupLog};
use crate::group_machine::{Fact, Machine};
use crate::port::Inner;
use crate::snapshot;
use crate::topic::groups_snapshot_topic_name;

/// Records applied after the newest snapshot that make an instance write the next one.
pub(crate) const SNAPSHOT_EVERY: i64 = 10_000;

/// Upper bound (excluded) of an instance's extra records before it writes a snapshot.
pub(crate) const SNAPSHOT_STAGGER: i64 = SNAPSHOT_EVERY / 8;

/// Log time after the newest snapshot that makes an instance write the next one (a quiet
/// group's records are snapshotted long before retention can reach them).
pub(crate) const SNAPSHOT_AGE: Duration = Duration::from_secs(600);

/// Pause after a failed snapshot write before an instance tries again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// What an instance knows of the snapshots of its log.
#[derive(Debug, Default)]
pub(crate) struct SnapshotState {
    /// The log offset the newest known snapshot covers (0: none).
    pub(crate) covers: i64,
    /// The log clock at that offset, when known (set at the first record otherwise).
    pub(crate) clock_at_covers: Option<i64>,
    /// The offset of the snapshot this instance started from.
    pub(crate) loaded: Option<i64>,
    /// Whether this instance is writing one.
    pub(crate) writing: bool,
    /// When this instance last failed to write one (it waits [`RETRY_AFTER`] then).
    pub(crate) failed_at: Option<Instant>,
}

impl GroupLog {
    /// Replaces the applied state with a loaded snapshot.
    pub(crate) fn install(&self, loaded: snapshot::Loaded<Fact>) {
        let machine = Machine::from(loaded.entries);
        let clock = machine.clock_ms();
        {
            let mut current = lock(&self.machine);
            *current = machine;
            self.applied.send_replace(loaded.covers_through);
        }
        let mut state = lock(&self.snapshots);
        state.covers = state.covers.max(loaded.covers_through);
        state.clock_at_covers = Some(clock);
        state.loaded = Some(loaded.covers_through);
    }

    /// Whether a snapshot at `next` (log clock `clock`) is due.
    fn snapshot_due(&self, next: i64, clock: i64) -> bool {
        let mut state = lock(&self.snapshots);
        if next <= state.covers
            || state
                .failed_at
                .is_some_and(|failed| failed.elapsed() < RETRY_AFTER)
        {
            return false;
        }
        let since = *state.clock_at_covers.get_or_insert(clock);
        next - state.covers >= SNAPSHOT_EVERY + self.stagger
            || clock.saturating_sub(since) >= crate::group::ms(SNAPSHOT_AGE)
    }

    /// Starts a snapshot writer when one is due and none runs (called by the reader after
    /// each record).
    pub(crate) fn after_apply(self: &Arc<Self>, port: &Weak<Inner>, next: i64, clock: i64) {
        if !self.snapshot_due(next, clock) {
            return;
        }
        {
            let mut state = lock(&self.snapshots);
            if state.writing {
                return;
            }
            state.writing = true;
        }
        tokio::spawn(write_snapshots(port.clone(), Arc::clone(self)));
    }

    /// Records a snapshot covering `covers`, at log clock `clock`.
    fn saw_snapshot(&self, covers: i64, clock: i64) {
        let mut state = lock(&self.snapshots);
        if covers > state.covers {
            state.covers = covers;
            state.clock_at_covers = Some(clock);
        }
    }
}

/// Writes snapshots while they are due, then clears the writing flag.
async fn write_snapshots(port: Weak<Inner>, log: Arc<GroupLog>) {
    while let Some(inner) = port.upgrade() {
        match write_one(&inner, &log).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(err) => {
                lock(&log.snapshots).failed_at = Some(Instant::now());
                tracing::warn!(port = "fluvio", %err, "group coordination snapshot not written");
                break;
            }
        }
    }
    lock(&log.snapshots).writing = false;
}

/// Writes one snapshot of the applied state if still due; whether it wrote one.
async fn write_one(inner: &Inner, log: &GroupLog) -> Result<bool> {
    let name = groups_snapshot_topic_name(&inner.config.prefix);
    let client = inner.fluvio();
    // Another instance's snapshot may have made this one unnecessary.
    if let Some(covers) = snapshot::newest_covers(&client, &name).await? {
        let clock = lock(&log.machine).clock_ms();
        log.saw_snapshot(covers, clock);
    }
    // The applied offset only changes under the machine's lock: the facts are its state.
    let (facts, covers, clock) = {
        let machine = lock(&log.machine);
        (machine.facts(), *log.applied.borrow(), machine.clock_ms())
    };
    if !log.snapshot_due(covers, clock) {
        return Ok(false);
    }
    let parts = snapshot::parts_of(&facts, "group coordination snapshot part")?;
    let config = snapshot_topic_config(&inner.config);
    let open = inner
        .topics
        .producer(|| client.clone(), &config, &name)
        .await?;
    snapshot::write(&open.producer, &inner.topics, &name, covers, parts).await?;
    log.writes.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(port = "fluvio", topic = %name, covers, facts = facts.len(), "group coordination snapshot written");
    log.saw_snapshot(covers, clock);
    Ok(true)
}

/// The settings the snapshot topic is created with: the longest retention Fluvio stores
/// (the newest snapshot is the groups' state once the log's head is gone).
pub(crate) fn snapshot_topic_config(
    config: &crate::config::FluvioConfig,
) -> crate::config::FluvioConfig {
    crate::config::FluvioConfig {
        retention_max_age: crate::group::KEEP,
        ..config.clone()
    }
}

/// Loads the newest snapshot into `log` when it covers more than `log` applied; returns
/// the offset it covers, `None` when there is none.
///
/// # Errors
/// [`PhotonError::Unavailable`] naming the snapshot topic when it cannot be read.
pub(crate) async fn load_newest(inner: &Inner, log: &GroupLog) -> Result<Option<i64>> {
    let name = groups_snapshot_topic_name(&inner.config.prefix);
    let Some(loaded) = snapshot::load::<Fact>(&inner.fluvio(), &name).await? else {
        return Ok(None);
    };
    let covers = loaded.covers_through;
    if covers > *log.applied.borrow() {
        log.install(loaded);
    }
    Ok(Some(covers))
}

/// The error of a log whose records `next..first` were removed with no snapshot covering
/// them.
pub(crate) fn lost_records(
    prefix: &str,
    log_name: &str,
    next: i64,
    first: i64,
    newest: Option<i64>,
) -> PhotonError {
    let snapshots = groups_snapshot_topic_name(prefix);
    let newest = newest.map_or_else(
        || "it holds none".to_owned(),
        |covers| format!("the newest covers offsets below {covers}"),
    );
    PhotonError::Unavailable {
        backend: crate::error::LABEL,
        message: format!(
            "group coordination topic {log_name}: records {next}..{first} were removed by retention and no snapshot in {snapshots} covers them ({newest}); the groups' state is unknown until an instance that applied them writes a snapshot"
        ),
        source: None,
    }
}
