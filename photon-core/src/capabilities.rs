//! What a storage port can do, read by the runtime and the conformance suite. The suite
//! runs each scenario that needs a capability only where it is claimed; where it is not,
//! it checks that the port refuses the capability's calls with `PhotonError::Unsupported`.

/// How far back a port can replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplayWindow {
    /// Everything ever appended (until `truncate_before`).
    #[default]
    Full,
    /// What the broker's retention still holds.
    Retention,
    /// Only events appended after the subscription started.
    TailOnly,
}

/// Capabilities of a storage port. Build with `StorageCapabilities { .., ..Default::default() }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageCapabilities {
    /// `get_record` finds an event by id.
    pub get_event: bool,
    /// `list_by_topic` and `list_recent` work.
    pub list: bool,
    /// `truncate_before` works.
    pub truncate: bool,
    /// `subscribe_group` works (competing consumers), and `group_coordination` returns the
    /// port's group primitive (the conformance suite runs its lease and fencing scenarios
    /// through it).
    pub consumer_groups: bool,
    /// `head_seq` works (used for lag).
    pub head_seq: bool,
    /// `list_topics` and `list_checkpoints` work.
    pub catalog: bool,
    /// `reset_checkpoint` works: a checkpoint can be moved back or removed.
    pub checkpoint_reset: bool,
    /// `append_batch` stores a batch all-or-nothing, in one transaction: a failed batch
    /// stored none of its events, and the events of one topic in a batch get consecutive
    /// seqs. Without it a batch is appended event by event, and a failure part-way is a
    /// [`crate::PhotonError::BatchIncomplete`] holding the events stored before it.
    pub atomic_batches: bool,
    /// Replay reach.
    pub replay: ReplayWindow,
    /// Events survive a process restart.
    pub durable: bool,
    /// Largest accepted body (encoded actor, payload and headers), in bytes.
    pub max_payload_bytes: usize,
}

/// 1 MiB: the default body limit.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

impl StorageCapabilities {
    /// Every query and administration capability on (`get_event`, `list`, `truncate`,
    /// `consumer_groups`, `head_seq`, `catalog`, `checkpoint_reset`), the rest as
    /// [`Default`]: the start of a port that answers every query, which then says what it adds.
    ///
    /// ```
    /// use photon_core::StorageCapabilities;
    ///
    /// let capabilities = StorageCapabilities {
    ///     durable: true,
    ///     ..StorageCapabilities::queryable()
    /// };
    /// assert!(capabilities.list && capabilities.catalog && !capabilities.atomic_batches);
    /// ```
    pub fn queryable() -> Self {
        Self {
            get_event: true,
            list: true,
            truncate: true,
            consumer_groups: true,
            head_seq: true,
            catalog: true,
            checkpoint_reset: true,
            ..Self::default()
        }
    }
}

impl Default for StorageCapabilities {
    fn default() -> Self {
        Self {
            get_event: false,
            list: false,
            truncate: false,
            consumer_groups: false,
            head_seq: false,
            catalog: false,
            checkpoint_reset: false,
            atomic_batches: false,
            replay: ReplayWindow::Full,
            durable: false,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
}
