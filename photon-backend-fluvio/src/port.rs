//! [`FluvioStoragePort`]: the `StoragePort` impl on a Fluvio cluster.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use fluvio::{Fluvio, FluvioClusterConfig};
use photon_core::{
    Appended, CheckpointKey, DeliveryStream, GroupDispatchers, GroupRequest, PhotonError, Record,
    RecordDraft, RecordStream, ReplayWindow, Result, StorageCapabilities, StoragePort,
    SubscribeRequest, DEFAULT_MAX_PAYLOAD_BYTES,
};
use tokio::sync::{mpsc, Semaphore};

use crate::checkpoint::{Checkpoints, Context};
use crate::codec::{decode_value, parse_event_id};
use crate::config::{FluvioConfig, ReplayCursor};
use crate::consumer::mirror_consumer_offsets;
use crate::fetch::record_at;
use crate::publish::{watch_acks, AckWatch, FailedSend, Permits};
use crate::stream_shard::{seq_of, shard_of_seq};
use crate::topic::{
    checkpoints_topic_name, consumer_group_for, ensure_topic, fluvio_topic_name,
    snapshot_topic_name, unavailable, Topics,
};

/// How long connecting to the SC may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Fluvio-backed storage port.
///
/// Clones share one connection, producers and checkpoint state. Build it with
/// [`FluvioStoragePortBuilder`](crate::FluvioStoragePortBuilder).
///
/// Capabilities: `get_event`, consumer groups (Photon's in-process dispatcher over the
/// topic stream, its position stored as a checkpoint), durable, replay within retention
/// (or tail only), bodies up to 1 MiB. No listing, truncation or `head_seq`.
#[derive(Clone)]
pub struct FluvioStoragePort {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: FluvioConfig,
    client: RwLock<Arc<Fluvio>>,
    reconnecting: tokio::sync::Mutex<()>,
    pub(crate) topics: Topics,
    pub(crate) permits: Permits,
    pub(crate) failed_send: FailedSend,
    pub(crate) acks: AckWatch,
    pub(crate) checkpoints: Checkpoints,
    groups: GroupDispatchers,
    mirror: mpsc::UnboundedSender<(CheckpointKey, i64)>,
}

impl Inner {
    /// The current client.
    pub(crate) fn fluvio(&self) -> Arc<Fluvio> {
        // Only a clone of the Arc happens under this lock.
        self.client
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces `failed` with a new connection (once, however many callers saw it fail):
    /// after an SPU restart a client's SPU sockets do not always recover by themselves.
    pub(crate) async fn reconnect(&self, failed: &Arc<Fluvio>) {
        let _one_at_a_time = self.reconnecting.lock().await;
        if !Arc::ptr_eq(&self.fluvio(), failed) {
            return;
        }
        match open_client(&self.config).await {
            Ok(fresh) => {
                *self.client.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
                self.topics.clear();
                tracing::info!(port = "fluvio", "reconnected after a failed send");
            }
            Err(err) => tracing::warn!(port = "fluvio", %err, "reconnect failed; will retry"),
        }
    }
}

/// Connects to the SC within [`CONNECT_TIMEOUT`].
async fn open_client(config: &FluvioConfig) -> Result<Fluvio> {
    let cluster = FluvioClusterConfig::new(config.endpoint.clone());
    match tokio::time::timeout(CONNECT_TIMEOUT, Fluvio::connect_with_config(&cluster)).await {
        Ok(Ok(fluvio)) => Ok(fluvio),
        Ok(Err(err)) => Err(unavailable(
            format!("cannot connect to {}", config.endpoint),
            err,
        )),
        Err(_) => Err(PhotonError::Unavailable {
            backend: "fluvio",
            message: format!(
                "no answer from {} within {CONNECT_TIMEOUT:?}",
                config.endpoint
            ),
            source: None,
        }),
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
    /// Connects with resolved settings and makes sure the checkpoint topics exist.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the cluster cannot be reached in 20 s.
    pub async fn connect(config: FluvioConfig) -> Result<Self> {
        let fluvio = open_client(&config).await?;
        ensure_topic(&fluvio, &config, &checkpoints_topic_name(&config.prefix)).await?;
        ensure_topic(&fluvio, &config, &snapshot_topic_name(&config.prefix)).await?;
        let (mirror, updates) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            permits: Arc::new(Semaphore::new(config.max_inflight)),
            config,
            client: RwLock::new(Arc::new(fluvio)),
            reconnecting: tokio::sync::Mutex::new(()),
            topics: Topics::default(),
            failed_send: FailedSend::default(),
            acks: AckWatch::default(),
            checkpoints: Checkpoints::default(),
            groups: GroupDispatchers::default(),
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

    async fn find(&self, event_id: &str) -> Result<Option<Record>> {
        let Some((name, partition, offset)) = parse_event_id(event_id) else {
            return Ok(None);
        };
        if partition != 0 {
            return Ok(None);
        }
        let Some(record) = record_at(&self.inner.fluvio(), &name, offset).await? else {
            return Ok(None);
        };
        let Some(topic) = photon_core::wire::topic_of(record.value()) else {
            return Ok(None);
        };
        // Only ids of this port's topic layout: the Fluvio topic must be a shard of `topic`.
        let shards = self.inner.config.topic_shards;
        let Some(shard) = (0..shards).find(|shard| {
            fluvio_topic_name(&self.inner.config.prefix, &topic, *shard, shards) == name
        }) else {
            return Ok(None);
        };
        decode_value(
            record.value(),
            &topic,
            event_id.to_owned(),
            seq_of(offset, shard, shards),
        )
        .map(Some)
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
            // `subscribe_group` dispatches within this port instance only: members in two
            // processes would each receive every event, so groups are not claimed.
            consumer_groups: false,
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

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.open_subscription(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.find(event_id).await
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        let positions = self
            .inner
            .checkpoints
            .positions(&self.checkpoint_context(), key)
            .await?;
        Ok(positions.into_values().max())
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        let written = self
            .inner
            .checkpoints
            .commit(&self.checkpoint_context(), key, seq)
            .await?;
        if written {
            // The mirror is best effort: the checkpoint topic is authoritative.
            let _ = self.inner.mirror.send((key.clone(), seq));
        }
        Ok(())
    }

    fn checkpoint_lane(&self, topic: &str, seq: i64) -> u32 {
        let _ = topic;
        shard_of_seq(seq, self.inner.config.topic_shards)
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        let port = self.clone();
        let request = GroupRequest {
            group: consumer_group_for(&request.group, &request.topic),
            ..request
        };
        self.inner
            .groups
            .join(request, Arc::new(self.clone()), move |subscription| {
                port.open_subscription(subscription)
            })
    }

    async fn flush(&self) -> Result<()> {
        self.flush_sends().await
    }
}
