//! [`PhotonBackend`]: the object-safe backend trait, and [`GenericPhotonBackend`], any
//! [`StoragePort`] lifted to it.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;
use photon_core::{
    CheckpointKey, Event, EventStore, PhotonError, StartAt, StorageCapabilities, StoragePort,
    TopicRegistry, TransportCrypto,
};
use serde_json::Value;

/// Backend for publish/subscribe delivery and checkpoint persistence.
#[async_trait]
pub trait PhotonBackend: Send + Sync {
    /// Append an event and return its event id.
    ///
    /// # Contract
    /// - Returns the stable `event_id` assigned by the underlying storage port.
    /// - Ordering and dedupe are per `(topic_name, topic_key)` partition, not global.
    ///
    /// # Errors
    /// Invalid topic, key or size before anything is stored; the port's errors after.
    async fn publish(
        &self,
        topic_name: &str,
        topic_key: Option<&str>,
        actor_json: Value,
        payload_json: Value,
    ) -> Result<String, PhotonError>;

    /// Stream events for a topic partition, optionally replaying after `after_seq`.
    ///
    /// # Contract
    /// - `after_seq = Some(s)` yields exactly the events with `seq > s`, then live ones.
    /// - `after_seq = None` replays from the oldest retained event.
    /// - An event that cannot be opened is an error item; the stream continues.
    fn subscribe(
        &self,
        topic_name: String,
        topic_key_filter: Option<String>,
        after_seq: Option<i64>,
    ) -> Pin<Box<dyn Stream<Item = Result<Event, PhotonError>> + Send>>;

    /// Load a single event by id.
    ///
    /// # Contract
    /// - Every id returned by `publish` is found; an unknown or malformed id is `Ok(None)`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] when the port cannot look events up by id.
    async fn get_event(&self, event_id: &str) -> Result<Option<Event>, PhotonError>;

    /// Inventory-discovered topic descriptors.
    fn registry(&self) -> &TopicRegistry;

    /// Load the last committed checkpoint seq for a subscription partition.
    ///
    /// # Contract
    /// - Returns `None` when no checkpoint exists.
    /// - [`subscribe`](Self::subscribe) with `after_seq` set to the returned seq never
    ///   skips an event that was not acknowledged. On a sharded broker topic (NATS, Fluvio
    ///   with several shards) every shard keeps its own position and the returned seq is
    ///   the lowest of them (0 when a shard of the checkpoint has none), so events of the
    ///   shards that were further along are delivered again: duplicates, never losses.
    ///   A durable subscription (`subscribe_after_checkpoint`) resumes each shard exactly.
    ///
    /// # Errors
    /// The port's storage errors.
    async fn get_checkpoint_seq(
        &self,
        subscription_name: &str,
        topic_name: &str,
        topic_key: Option<&str>,
    ) -> Result<Option<i64>, PhotonError>;

    /// Persist the high-water checkpoint seq for a subscription partition.
    ///
    /// # Contract
    /// - `last_seq` must not regress; coalesced writes may batch behind the scenes.
    ///
    /// # Errors
    /// The port's storage errors.
    async fn set_checkpoint(
        &self,
        subscription_name: &str,
        topic_name: &str,
        topic_key: Option<&str>,
        last_seq: i64,
    ) -> Result<(), PhotonError>;

    /// Stable telemetry label for ops metrics (e.g. `"mem"`, `"nats"`).
    fn telemetry_label(&self) -> &'static str {
        "photon"
    }

    /// Adapter capabilities (replay window, get-by-id support, …).
    fn capabilities(&self) -> StorageCapabilities {
        StorageCapabilities::default()
    }
}

/// Any [`StoragePort`] as a [`PhotonBackend`], with validation and sealing in front.
///
/// ```
/// use std::sync::Arc;
/// use photon_core::{mem::MemStoragePort, TopicRegistry, TransportCrypto};
/// use photon_runtime::{GenericPhotonBackend, PhotonBackend};
///
/// let backend: Arc<dyn PhotonBackend> = Arc::new(GenericPhotonBackend::new(
///     MemStoragePort::new(),
///     TransportCrypto::plaintext(),
///     TopicRegistry::new(),
/// ));
/// assert_eq!(backend.telemetry_label(), "mem");
/// ```
#[derive(Debug, Clone)]
pub struct GenericPhotonBackend {
    store: EventStore,
    registry: TopicRegistry,
}

impl GenericPhotonBackend {
    /// Lifts a port.
    pub fn new(port: impl StoragePort, crypto: TransportCrypto, registry: TopicRegistry) -> Self {
        Self::from_store(EventStore::new(Arc::new(port), crypto), registry)
    }

    /// Lifts an event store that already wraps a port.
    pub fn from_store(store: EventStore, registry: TopicRegistry) -> Self {
        Self { store, registry }
    }

    /// The event store behind this backend.
    pub fn store(&self) -> &EventStore {
        &self.store
    }
}

#[async_trait]
impl PhotonBackend for GenericPhotonBackend {
    async fn publish(
        &self,
        topic_name: &str,
        topic_key: Option<&str>,
        actor_json: Value,
        payload_json: Value,
    ) -> Result<String, PhotonError> {
        let appended = self
            .store
            .publish(topic_name, topic_key, actor_json, payload_json)
            .await?;
        Ok(appended.event_id)
    }

    fn subscribe(
        &self,
        topic_name: String,
        topic_key_filter: Option<String>,
        after_seq: Option<i64>,
    ) -> Pin<Box<dyn Stream<Item = Result<Event, PhotonError>> + Send>> {
        let start = after_seq.map_or(StartAt::Beginning, StartAt::AfterSeq);
        self.store
            .subscribe(&topic_name, topic_key_filter.as_deref(), start)
    }

    async fn get_event(&self, event_id: &str) -> Result<Option<Event>, PhotonError> {
        self.store.get_event(event_id).await
    }

    fn registry(&self) -> &TopicRegistry {
        &self.registry
    }

    async fn get_checkpoint_seq(
        &self,
        subscription_name: &str,
        topic_name: &str,
        topic_key: Option<&str>,
    ) -> Result<Option<i64>, PhotonError> {
        let key = CheckpointKey::new(subscription_name, topic_name, topic_key);
        self.store.port().load_checkpoint(&key).await
    }

    async fn set_checkpoint(
        &self,
        subscription_name: &str,
        topic_name: &str,
        topic_key: Option<&str>,
        last_seq: i64,
    ) -> Result<(), PhotonError> {
        let key = CheckpointKey::new(subscription_name, topic_name, topic_key);
        self.store.port().commit_checkpoint(&key, last_seq).await
    }

    fn telemetry_label(&self) -> &'static str {
        self.store.port().label()
    }

    fn capabilities(&self) -> StorageCapabilities {
        self.store.port().capabilities()
    }
}
