//! [`FluvioStoragePort`]: the `StoragePort` impl on a Fluvio cluster.

use std::sync::Arc;

use async_trait::async_trait;
use fluvio::Fluvio;
use photon_core::{
    Appended, CheckpointKey, DeliveryStream, GroupCoordination, GroupRequest, Record, RecordDraft,
    RecordStream, ReplayWindow, Result, StorageCapabilities, StoragePort, StoredCheckpoint,
    SubscribeRequest, TopicInfo, DEFAULT_MAX_PAYLOAD_BYTES,
};
use tokio::sync::{mpsc, Semaphore};

use crate::checkpoint::{Checkpoints, Context};
use crate::config::{FluvioConfig, FluvioStoragePortBuilder, ReplayCursor};
use crate::connection::{Connection, Role};
use crate::consumer::mirror_consumer_offsets;
use crate::group::GroupLog;
use crate::layout::Layouts;
use crate::publish::{watch_acks, AckWatch, FailedSend, Permits};
use crate::stream_shard::shard_of_seq;
use crate::topic::{checkpoints_topic_name, ensure_topic, snapshot_topic_name, Topics};

/// Fluvio-backed storage port.
///
/// Clones share the port's two connections (one for publishing, one for streaming
/// subscriptions), producers and checkpoint state. Build it with
/// [`FluvioStoragePort::builder`].
///
/// Capabilities: `get_event`, consumer groups across processes (the group protocol over a
/// coordination log on the cluster, see `group.rs`), durable, replay within retention
/// (or tail only), bodies up to 1 MiB, the catalog (topics from the cluster's layout
/// records, see `catalog.rs`). No `list_by_topic`, truncation or `head_seq`.
#[derive(Clone)]
pub struct FluvioStoragePort {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: FluvioConfig,
    /// Producers, admin, checkpoints and bounded reads.
    pub(crate) publish: Connection,
    /// Streaming consumers of subscriptions.
    pub(crate) stream: Connection,
    pub(crate) topics: Topics,
    pub(crate) permits: Permits,
    pub(crate) failed_send: FailedSend,
    pub(crate) acks: AckWatch,
    pub(crate) checkpoints: Checkpoints,
    pub(crate) layouts: Layouts,
    /// The applied coordination log of this instance's groups.
    pub(crate) groups: Arc<GroupLog>,
    mirror: mpsc::UnboundedSender<(CheckpointKey, i64)>,
}

impl Inner {
    /// The current publish client.
    pub(crate) fn fluvio(&self) -> Arc<Fluvio> {
        self.publish.current()
    }

    /// Replaces the publish connection `failed` (see [`Connection::replace`]) and drops
    /// every producer opened on it.
    pub(crate) async fn reconnect(&self, failed: &Arc<Fluvio>) {
        if let Ok(true) = self.publish.replace(failed).await {
            self.topics.clear();
        }
    }
}

impl std::fmt::Debug for FluvioStoragePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FluvioStoragePort")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl FluvioStoragePort {
    /// A builder; unset fields come from the `PHOTON_FLUVIO_*` variables, then defaults.
    ///
    /// ```
    /// let builder = photon_backend_fluvio::FluvioStoragePort::builder().prefix("shop");
    /// ```
    pub fn builder() -> FluvioStoragePortBuilder {
        FluvioStoragePortBuilder::new()
    }

    /// Connects with the settings of the `PHOTON_FLUVIO_*` variables and defaults.
    ///
    /// # Errors
    /// As [`FluvioStoragePortBuilder::build`].
    pub async fn from_env() -> Result<Self> {
        Self::builder().build().await
    }

    /// Connects with resolved (or deserialized) settings and makes sure the checkpoint
    /// topics exist.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] for a value that cannot work
    /// ([`FluvioConfig::validate`], which reads the TLS files);
    /// [`photon_core::PhotonError::Unavailable`] when the cluster cannot be reached in 20 s
    /// or a TLS handshake fails (the message names the cause).
    pub async fn connect(config: FluvioConfig) -> Result<Self> {
        config.check_settings()?;
        let connector = config.connector()?;
        let publish = Connection::open(Role::Publish, &config.endpoint, connector.clone()).await?;
        let fluvio = publish.current();
        ensure_topic(&fluvio, &config, &checkpoints_topic_name(&config.prefix)).await?;
        ensure_topic(&fluvio, &config, &snapshot_topic_name(&config.prefix)).await?;
        let stream = Connection::open(Role::Stream, &config.endpoint, connector).await?;
        let (mirror, updates) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            permits: Arc::new(Semaphore::new(config.max_in_flight)),
            config,
            publish,
            stream,
            topics: Topics::default(),
            failed_send: FailedSend::default(),
            acks: AckWatch::default(),
            checkpoints: Checkpoints::default(),
            layouts: Layouts::default(),
            groups: Arc::default(),
            mirror,
        });
        tokio::spawn(mirror_consumer_offsets(Arc::downgrade(&inner), updates));
        tokio::spawn(watch_acks(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The resolved settings.
    pub fn config(&self) -> &FluvioConfig {
        &self.inner.config
    }

    pub(crate) fn checkpoint_context(&self) -> Context<'_> {
        Context {
            fluvio: self.inner.fluvio(),
            config: &self.inner.config,
            topics: &self.inner.topics,
        }
    }

    /// The context of checkpoint commits: on the stream connection. The SPU serves the
    /// requests of one connection one at a time, so a commit on the publish connection
    /// waited behind every produce request queued there by publishers, and a durable
    /// subscriber waits for its commits (measured: see `photon-bench/PERFORMANCE_STUDY.md`).
    pub(crate) fn commit_context(&self) -> Context<'_> {
        Context {
            fluvio: self.inner.stream.current(),
            config: &self.inner.config,
            topics: &self.inner.topics,
        }
    }

    /// Refuses a topic stored in another layout (see [`crate::layout`]).
    ///
    /// The check reads and writes the layouts topic under a lock. It runs in a task of its
    /// own, so that a caller that gives up (a subscription dropped while it opens) does not
    /// cancel it half-way: after such a cancelled check, the next check's requests on the
    /// layouts topic were seen to get no answer while it held the lock, so that every
    /// later check, and every publish to a new topic, waited for good (composition seed
    /// 301010).
    pub(crate) async fn check_layout(&self, topic: &str) -> Result<()> {
        if self.inner.layouts.is_checked(topic) {
            return Ok(());
        }
        let port = self.clone();
        let topic = topic.to_owned();
        tokio::spawn(async move {
            let inner = &port.inner;
            inner
                .layouts
                .check(&inner.fluvio(), &inner.config, &inner.topics, &topic)
                .await
        })
        .await
        .map_err(|err| {
            photon_core::PhotonError::storage("fluvio", "checking a topic layout", err)
        })?
    }
}

#[async_trait]
impl StoragePort for FluvioStoragePort {
    fn label(&self) -> &'static str {
        "fluvio"
    }

    fn capabilities(&self) -> StorageCapabilities {
        StorageCapabilities {
            get_event: true,
            consumer_groups: true,
            catalog: true,
            // A batch is appended event by event (the default `append_batch`): Fluvio has
            // no transaction over several records.
            atomic_batches: false,
            durable: true,
            replay: match self.inner.config.replay_cursor {
                ReplayCursor::StreamSeq => ReplayWindow::Retention,
                ReplayCursor::TailOnly => ReplayWindow::TailOnly,
            },
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            ..StorageCapabilities::default()
        }
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        self.append_draft(draft).await
    }

    async fn declare_dead_letter_topic(&self, topic: &str) -> Result<()> {
        photon_core::validate_topic_name(topic)?;
        self.keep_dead_letters(topic).await
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.open_subscription(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.find(event_id).await
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>> {
        self.catalog_topics().await
    }

    async fn list_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        self.catalog_checkpoints().await
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        self.check_layout(&key.topic).await?;
        let positions = self
            .inner
            .checkpoints
            .positions(&self.checkpoint_context(), key)
            .await?;
        // The lowest shard position: resuming every shard after it loses nothing (see
        // `photon_core::raw::shard::resume_seq`); durable subscriptions resume shard by shard.
        // A key lives in one shard: its positions come from that shard's seqs.
        let wanted: Vec<u32> = match key.key {
            Some(_) => positions.keys().copied().collect(),
            None => (0..self.inner.config.shards).collect(),
        };
        Ok(photon_core::raw::shard::resume_seq(&positions, wanted))
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        self.check_layout(&key.topic).await?;
        let context = self.commit_context();
        let written = match self.inner.checkpoints.commit(&context, key, seq).await {
            // A request on the stream connection got no answer: once more on a new one.
            Err(err) if crate::error::is_unanswered(&err) => {
                // A failed reconnect is logged; the retry then fails as the cluster does.
                let _ = self.inner.stream.replace(&context.fluvio).await;
                self.inner
                    .checkpoints
                    .commit(&self.commit_context(), key, seq)
                    .await?
            }
            result => result?,
        };
        if written {
            // The mirror is best effort: the checkpoint topic is authoritative.
            let _ = self.inner.mirror.send((key.clone(), seq));
        }
        Ok(())
    }

    fn checkpoint_lane(&self, topic: &str, seq: i64) -> u32 {
        let _ = topic;
        shard_of_seq(seq, self.inner.config.shards)
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        photon_core::raw::group::subscribe_group(self, request)
    }

    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        Some(self.coordination())
    }

    async fn flush(&self) -> Result<()> {
        self.flush_sends().await
    }
}
