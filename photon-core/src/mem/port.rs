//! [`MemStoragePort`]: the `StoragePort` impl of the in-process store.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::topic::State;
use crate::capabilities::{StorageCapabilities, DEFAULT_MAX_PAYLOAD_BYTES};
use crate::error::Result;
use crate::event::{Appended, Record, RecordDraft};
use crate::group::GroupCoordination;
use crate::port::{
    CheckpointKey, DeliveryStream, GroupRequest, RecordStream, StoragePort, StoredCheckpoint,
    SubscribeRequest, TopicInfo,
};

/// In-process storage: the default port, for development and tests.
///
/// Clones share the same store.
///
/// ```
/// # tokio_test_shim::block_on(async {
/// use photon_core::{mem::MemStoragePort, StoragePort};
/// let port = MemStoragePort::new();
/// assert_eq!(port.label(), "mem");
/// # });
/// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
/// ```
#[derive(Debug, Clone)]
pub struct MemStoragePort {
    pub(super) shared: Arc<Shared>,
}

#[derive(Debug, Default)]
pub(super) struct Shared {
    state: Mutex<State>,
    pub(super) coordination: Arc<super::group::MemCoordination>,
    max_payload_bytes: usize,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only mutated by short, non-panicking sections.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Default for MemStoragePort {
    fn default() -> Self {
        Self::new()
    }
}

impl MemStoragePort {
    /// An empty store with the default 1 MiB body limit.
    pub fn new() -> Self {
        Self::with_max_payload_bytes(DEFAULT_MAX_PAYLOAD_BYTES)
    }

    /// A builder; unset fields come from the `PHOTON_MEM_*` variables, then defaults.
    ///
    /// ```
    /// let port = photon_core::mem::MemStoragePort::builder().build().unwrap();
    /// ```
    pub fn builder() -> super::MemStoragePortBuilder {
        super::MemStoragePortBuilder::new()
    }

    /// An empty store configured by the `PHOTON_MEM_*` variables and defaults.
    ///
    /// # Errors
    /// [`crate::PhotonError::Config`] naming the variable of a refused value.
    pub fn from_env() -> Result<Self> {
        Self::builder().build()
    }

    /// An empty store with a resolved (or deserialized) configuration.
    ///
    /// # Errors
    /// [`crate::PhotonError::Config`] naming the field of a value that cannot work.
    pub fn with_config(config: super::MemConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::with_max_payload_bytes(config.max_payload_bytes))
    }

    /// An empty store with another body limit.
    pub fn with_max_payload_bytes(max_payload_bytes: usize) -> Self {
        Self {
            shared: Arc::new(Shared {
                max_payload_bytes,
                ..Shared::default()
            }),
        }
    }
}

#[async_trait]
impl StoragePort for MemStoragePort {
    fn label(&self) -> &'static str {
        "mem"
    }

    fn capabilities(&self) -> StorageCapabilities {
        StorageCapabilities {
            atomic_batches: true,
            durable: false,
            max_payload_bytes: self.shared.max_payload_bytes,
            ..StorageCapabilities::queryable()
        }
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        // An append never waits, so a tight publish loop would never yield to the
        // scheduler (and could not be cancelled): spend cooperative budget instead.
        tokio::task::consume_budget().await;
        self.append_now(&draft)
    }

    async fn append_batch(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        tokio::task::consume_budget().await;
        self.append_batch_now(&drafts)
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.open_subscription(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.find(event_id)
    }

    async fn list_by_topic(&self, topic: &str, after: i64, limit: usize) -> Result<Vec<Record>> {
        self.list_after(topic, after, limit)
    }

    async fn list_recent(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        self.newest(topic, limit)
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>> {
        Ok(self.topics())
    }

    async fn list_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        Ok(self.checkpoints())
    }

    async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        Ok(self.head(topic, key))
    }

    async fn truncate_before(&self, topic: &str, before_seq: i64) -> Result<u64> {
        Ok(self.drop_before(topic, before_seq))
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        Ok(self.checkpoint(key))
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        self.raise_checkpoint(key, seq);
        Ok(())
    }

    async fn reset_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) -> Result<()> {
        self.replace_checkpoint(key, seq);
        Ok(())
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        crate::raw::group::subscribe_group(self, request)
    }

    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        Some(Arc::clone(&self.shared.coordination) as Arc<dyn GroupCoordination>)
    }
}
