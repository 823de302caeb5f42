//! [`Photon`]: the handle applications publish and subscribe with.

use std::sync::{Arc, Mutex, Weak};

use photon_core::group::GroupOptions;
use photon_core::{
    validate_topic_name, Appended, BatchEvent, CheckpointCommitter, CheckpointKey, Event,
    EventStore, EventStream, FlushPolicy, GroupRequest, Headers, PhotonError, Result, StartAt,
    StartPolicy, StoragePort, TopicRegistry, TransportCrypto,
};
use serde_json::Value;

use crate::backend::{GenericPhotonBackend, PhotonBackend};
use crate::builder::PhotonBuilder;
use crate::executor::arguments::States;
use crate::executor::{Executor, ExecutorBuilder, ExecutorConfig, ExecutorShared};
use crate::group::{GroupStatus, GroupSubscription};
use crate::schedule::{SchedulerConfig, SchedulerTask};
use crate::shutdown::StopSwitch;
use crate::subscription::DurableSubscription;

/// A Photon instance over one storage port. Clones share everything.
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use futures::StreamExt;
/// use photon_runtime::Photon;
/// use serde_json::json;
///
/// let photon = Photon::builder().build()?; // the in-process store
/// let appended = photon.publish("orders", Some("o-1"), json!("alice"), json!({"total": 12})).await?;
/// let event = photon.subscribe("orders", None, None).next().await.unwrap()?;
/// assert_eq!((event.seq, event.event_id), (appended.seq, appended.event_id));
/// photon.shutdown().await?;
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Photon {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Arc<GenericPhotonBackend>,
    flush_policy: FlushPolicy,
    committers: Mutex<Vec<Weak<CheckpointCommitter>>>,
    executor_config: ExecutorConfig,
    executors: Mutex<Vec<Arc<ExecutorShared>>>,
    /// Ends the durable subscriptions of this instance on shutdown. Shared with them, so
    /// that a subscription outliving every `Photon` handle keeps running.
    durable_stop: Arc<StopSwitch>,
    /// Every `(group, topic)` joined through [`Photon::group_with`], for the admin snapshot.
    joined_groups: Mutex<std::collections::BTreeSet<(String, String)>>,
    /// Handler states registered with `PhotonBuilder::state`, the default of each executor.
    states: States,
    scheduler_config: SchedulerConfig,
    /// This instance's scheduler, once started.
    scheduler: Mutex<Option<SchedulerTask>>,
}

/// A [`Photon`] that does not keep it alive: what the executor's tasks hold to hand
/// handlers a `Photon` argument.
pub(crate) struct WeakPhoton(Weak<Inner>);

impl WeakPhoton {
    /// The `Photon`, unless every handle of it was dropped.
    pub(crate) fn upgrade(&self) -> Option<Photon> {
        self.0.upgrade().map(|inner| Photon { inner })
    }
}

impl std::fmt::Debug for Photon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Photon")
            .field("store", self.store())
            .field("topics", &self.registry().len())
            .finish_non_exhaustive()
    }
}

impl Photon {
    /// A builder (defaults: in-process store, keys from the environment).
    pub fn builder() -> PhotonBuilder {
        PhotonBuilder::new()
    }

    pub(crate) fn assemble(
        port: Arc<dyn StoragePort>,
        crypto: TransportCrypto,
        registry: TopicRegistry,
        flush_policy: FlushPolicy,
        executor_config: ExecutorConfig,
        scheduler_config: SchedulerConfig,
        states: States,
    ) -> Self {
        let store = EventStore::new(port, crypto);
        #[cfg(feature = "otel")]
        let store = store.with_header_injector(crate::otel::inject);
        Self {
            inner: Arc::new(Inner {
                backend: Arc::new(GenericPhotonBackend::from_store(store, registry)),
                flush_policy,
                committers: Mutex::new(Vec::new()),
                executor_config,
                executors: Mutex::new(Vec::new()),
                durable_stop: Arc::new(StopSwitch::new()),
                joined_groups: Mutex::default(),
                states,
                scheduler_config,
                scheduler: Mutex::new(None),
            }),
        }
    }

    /// Publishes an event.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::InvalidTopic`], `InvalidKey` or `PayloadTooLarge` before
    /// anything is stored; the port's errors after.
    ///
    /// # Cancel safety
    /// A cancelled publish may or may not be stored; one that returned `Ok` always is.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let first = photon.publish("orders", Some("o-1"), json!("alice"), json!({"total": 12})).await?;
    /// let second = photon.publish("orders", Some("o-1"), json!("alice"), json!({"total": 30})).await?;
    /// assert!(second.seq > first.seq); // one key keeps its publish order
    /// assert!(matches!(
    ///     photon.publish("Orders!", None, json!(null), json!(1)).await,
    ///     Err(photon_runtime::PhotonError::InvalidTopic { .. })
    /// ));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn publish(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
    ) -> Result<Appended> {
        self.store().publish(topic, key, actor, payload).await
    }

    /// Publishes an event with headers (see [`photon_core::headers`]): strings about the
    /// event, such as a request id, delivered with it on every backend and sealed with the
    /// payload when a transport key is set. With the `otel` feature, the trace context of
    /// the publish span is added as `traceparent` (replacing one given here).
    ///
    /// # Errors
    /// As [`Photon::publish`]; [`PhotonError::InvalidHeader`] naming a header that breaks
    /// a rule or limit, before anything is stored.
    ///
    /// # Cancel safety
    /// As [`Photon::publish`].
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use photon_runtime::Headers;
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let headers = Headers::from([("request-id".to_owned(), "r-7".to_owned())]);
    /// photon.publish_with_headers("orders", Some("o-1"), json!(null), json!(12), headers).await?;
    /// let event = photon.subscribe("orders", None, None).next().await.unwrap()?;
    /// assert_eq!(event.headers["request-id"], "r-7");
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn publish_with_headers(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        headers: Headers,
    ) -> Result<Appended> {
        self.store()
            .publish_with_headers(topic, key, actor, payload, headers)
            .await
    }

    /// Publishes a batch of events to one topic: every event is checked and sealed first,
    /// then all are handed to the storage port at once. Returns one [`Appended`] per
    /// event, in order; events of one key keep the batch's order. An empty batch stores
    /// nothing.
    ///
    /// Where the port claims `atomic_batches` (mem, SQLite, PostgreSQL) the batch is one
    /// transaction and one durable commit: stored whole or not at all, its events with
    /// consecutive seqs. Elsewhere (NATS, Fluvio) it is appended event by event (pipelined
    /// on NATS). Each event counts once in `photon_published_total` (or
    /// `photon_publish_errors_total` when not stored); the batch has one
    /// `photon.publish_batch` span.
    ///
    /// # Errors
    /// Before anything is stored: [`PhotonError::BatchTooLarge`] over
    /// [`photon_core::MAX_BATCH_EVENTS`] events, [`PhotonError::BatchEventRefused`] naming
    /// the index of the first event [`Photon::publish_with_headers`] would refuse (invalid
    /// topic, key or header, payload over a limit) with that error. After: the port's
    /// errors; on a port without atomic batches, [`PhotonError::BatchIncomplete`] holding
    /// the events stored before a failure part-way.
    ///
    /// # Cancel safety
    /// A cancelled batch may be stored whole, in part (without atomic batches) or not at
    /// all; one that returned `Ok` is stored whole.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::{BatchEvent, PhotonError};
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let batch = vec![
    ///     BatchEvent::new(json!({"total": 12})).key("o-1"),
    ///     BatchEvent::new(json!({"total": 30})).key("o-2").actor(json!("alice")),
    /// ];
    /// let appended = photon.publish_batch("orders", batch).await?;
    /// assert_eq!(appended.iter().map(|a| a.seq).collect::<Vec<_>>(), [1, 2]);
    /// // One bad event refuses the whole batch, naming its index.
    /// let refused = photon
    ///     .publish_batch("orders", vec![BatchEvent::new(json!(1)), BatchEvent::new(json!(2)).key("")])
    ///     .await;
    /// assert!(matches!(refused, Err(PhotonError::BatchEventRefused { index: 1, .. })));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn publish_batch(
        &self,
        topic: &str,
        events: impl IntoIterator<Item = BatchEvent>,
    ) -> Result<Vec<Appended>> {
        self.store()
            .publish_batch(events.into_iter().map(|event| (topic, event)))
            .await
    }

    /// Streams a topic (or one key of it) from the oldest event, or after `after_seq`.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// for n in 1..=3 {
    ///     photon.publish("orders", Some("o-1"), json!(null), json!(n)).await?;
    /// }
    /// // Everything after seq 1, then live events: the stream does not end by itself.
    /// let mut after_first = photon.subscribe("orders", Some("o-1"), Some(1));
    /// let next = after_first.next().await.unwrap()?;
    /// assert_eq!((next.seq, next.payload), (2, json!(2)));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn subscribe(&self, topic: &str, key: Option<&str>, after_seq: Option<i64>) -> EventStream {
        self.subscribe_at(
            topic,
            key,
            after_seq.map_or(StartAt::Beginning, StartAt::AfterSeq),
        )
    }

    /// Streams a topic from an explicit position (`StartAt::Tail` for live-only).
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use photon_runtime::StartAt;
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", None, json!(null), json!("old")).await?;
    /// let mut live = photon.subscribe_at("orders", None, StartAt::Tail);
    /// photon.publish("orders", None, json!(null), json!("new")).await?;
    /// assert_eq!(live.next().await.unwrap()?.payload, json!("new"));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn subscribe_at(&self, topic: &str, key: Option<&str>, start: StartAt) -> EventStream {
        self.store().subscribe(topic, key, start)
    }

    /// Opens the durable subscription `name` on a topic (or one key): it starts after the
    /// stored checkpoint, or from the oldest event when there is none. The checkpoint is
    /// loaded once the final commits of subscriptions of the same name dropped before (in
    /// this process) are stored. After [`Photon::shutdown`] the stream ends at once.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", None, json!(null), json!(1)).await?;
    /// photon.publish("orders", None, json!(null), json!(2)).await?;
    ///
    /// let mut billing = photon.durable("billing", "orders", None);
    /// let first = billing.next().await.unwrap()?;
    /// billing.ack(&first).await?;
    /// drop(billing); // its acknowledgements are committed
    ///
    /// let mut billing = photon.durable("billing", "orders", None); // resumes after seq 1
    /// assert_eq!(billing.next().await.unwrap()?.payload, json!(2));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn durable(&self, name: &str, topic: &str, key: Option<&str>) -> DurableSubscription {
        self.durable_with_policy(name, topic, key, StartPolicy::Beginning)
    }

    /// Like [`Photon::durable`], choosing where a subscription without checkpoint starts.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use photon_runtime::StartPolicy;
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", None, json!(null), json!("first")).await?;
    /// photon.publish("orders", None, json!(null), json!("second")).await?;
    /// // Without a checkpoint, `Tail` would skip both; with one, the policy does not apply.
    /// photon.set_checkpoint("alerts", "orders", None, 1).await?;
    /// let mut alerts = photon.durable_with_policy("alerts", "orders", None, StartPolicy::Tail);
    /// assert_eq!(alerts.next().await.unwrap()?.payload, json!("second"));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn durable_with_policy(
        &self,
        name: &str,
        topic: &str,
        key: Option<&str>,
        policy: StartPolicy,
    ) -> DurableSubscription {
        let checkpoint = CheckpointKey::new(name, topic, key);
        let committer = self.committer(checkpoint.clone());
        let dead_letter_topic = self.executor_config().dead_letter_topic(topic);
        let records = self.store().records_after_checkpoint(checkpoint, policy);
        DurableSubscription::new(
            records,
            self.store().clone(),
            committer,
            dead_letter_topic,
            self.inner.durable_stop.clone(),
        )
    }

    /// Joins consumer group `group` on `topic` as this process's next member
    /// ([`photon_core::group::nth_member`]: `PHOTON_GROUP_MEMBER`, else `<hostname>-<pid>`,
    /// then `-2`, `-3`, ... for further members of the group) with the default options: the members share the topic's
    /// events, each key handled by one member at a time, in order. See
    /// [`GroupSubscription`] and, for what each backend guarantees, `docs/guarantees.md`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// let photon = photon_runtime::Photon::builder().build().unwrap();
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!({"n": 1})).await.unwrap();
    /// let mut billing = photon.group("billing", "orders");
    /// let event = billing.next().await.unwrap().unwrap();
    /// assert_eq!(event.payload["n"], 1);
    /// billing.ack(&event).await.unwrap();
    /// billing.leave().await;
    /// # });
    /// ```
    pub fn group(&self, group: &str, topic: &str) -> GroupSubscription {
        let member = photon_core::group::nth_member(group, topic);
        self.group_with(group, topic, GroupOptions::new(member))
    }

    /// Joins consumer group `group` on `topic` with explicit membership options (member
    /// name, lease and heartbeat periods, partitions). Backends with their own groups
    /// (none of Photon's own) use only the member name; on NATS with several stream shards
    /// each shard is a partition (the `partitions` option is ignored).
    ///
    /// The stream's only item is an error when the topic or the options are refused, or
    /// when the backend has no consumer groups.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use photon_core::GroupOptions;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(1)).await?;
    /// let options = GroupOptions::new("worker-a").lease(Duration::from_secs(10)).partitions(4);
    /// let mut worker = photon.group_with("billing", "orders", options);
    /// let event = worker.next().await.unwrap()?;
    /// worker.ack(&event).await?;
    /// worker.leave().await;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn group_with(&self, group: &str, topic: &str, options: GroupOptions) -> GroupSubscription {
        let store = self.store().clone();
        let port = store.port().clone();
        let request = GroupRequest {
            group: group.to_owned(),
            member: options.member.clone(),
            topic: topic.to_owned(),
            start: StartAt::Beginning,
        };
        let refused = |err: PhotonError| {
            GroupSubscription::from_port(
                Box::pin(futures::stream::once(std::future::ready(Err(err)))),
                store.clone(),
                group,
                topic,
            )
        };
        if let Err(err) = validate_topic_name(topic) {
            return refused(err);
        }
        if group.is_empty() {
            return refused(PhotonError::InvalidInput("a group needs a name".into()));
        }
        match port.group_coordination() {
            Some(coordination) => {
                self.inner
                    .joined_groups
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert((group.to_owned(), topic.to_owned()));
                GroupSubscription::from_membership(
                    photon_core::raw::group::join(port, coordination, request, options),
                    store,
                    group,
                    topic,
                )
            }
            None if port.capabilities().consumer_groups => {
                GroupSubscription::from_port(port.subscribe_group(request), store, group, topic)
            }
            None => refused(port.unsupported("consumer groups across processes")),
        }
    }

    /// The live members of a group and, per partition, its owner, epoch, checkpoint and
    /// distance to the head.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] on backends whose groups do not run the lease protocol
    /// (none of Photon's own); the port's storage errors.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use photon_core::GroupOptions;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(1)).await?;
    /// let mut worker = photon.group_with("billing", "orders", GroupOptions::new("worker-a"));
    /// let event = worker.next().await.unwrap()?;
    /// worker.ack(&event).await?;
    /// let status = photon.group_status("billing", "orders").await?;
    /// assert_eq!(status.members, vec!["worker-a".to_owned()]);
    /// worker.leave().await;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn group_status(&self, group: &str, topic: &str) -> Result<GroupStatus> {
        validate_topic_name(topic)?;
        let port = self.store().port().clone();
        let Some(coordination) = port.group_coordination() else {
            return Err(port.unsupported("group status"));
        };
        crate::group::status(coordination.as_ref(), port.as_ref(), group, topic).await
    }

    /// Every `(group, topic)` this instance joined through [`Photon::group`] or
    /// [`Photon::group_with`], sorted.
    pub(crate) fn joined_groups(&self) -> Vec<(String, String)> {
        self.inner
            .joined_groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// A checkpoint committer registered for flushing on [`Photon::shutdown`].
    pub fn committer(&self, checkpoint: CheckpointKey) -> Arc<CheckpointCommitter> {
        let committer = CheckpointCommitter::new(
            self.store().port().clone(),
            checkpoint,
            self.inner.flush_policy,
        );
        let mut committers = self
            .inner
            .committers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        committers.retain(|weak| weak.strong_count() > 0);
        committers.push(Arc::downgrade(&committer));
        committer
    }

    /// Finds an event by id.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unsupported`] when the port cannot look up by id;
    /// `Crypto` when the event cannot be opened.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let appended = photon.publish("orders", None, serde_json::json!(null), serde_json::json!(7)).await?;
    /// let event = photon.get_event(&appended.event_id).await?.unwrap();
    /// assert_eq!(event.payload, serde_json::json!(7));
    /// assert!(photon.get_event("no-such-id").await?.is_none());
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn get_event(&self, event_id: &str) -> Result<Option<Event>> {
        self.store().get_event(event_id).await
    }

    /// The committed checkpoint of a subscription.
    ///
    /// # Errors
    /// The port's storage errors.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, None);
    /// photon.set_checkpoint("billing", "orders", None, 42).await?;
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(42));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn checkpoint(
        &self,
        name: &str,
        topic: &str,
        key: Option<&str>,
    ) -> Result<Option<i64>> {
        self.inner
            .backend
            .get_checkpoint_seq(name, topic, key)
            .await
    }

    /// Commits a checkpoint directly (never regresses).
    ///
    /// # Errors
    /// The port's storage errors.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.set_checkpoint("billing", "orders", None, 42).await?;
    /// photon.set_checkpoint("billing", "orders", None, 7).await?; // ignored: never moves back
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(42));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn set_checkpoint(
        &self,
        name: &str,
        topic: &str,
        key: Option<&str>,
        seq: i64,
    ) -> Result<()> {
        self.inner
            .backend
            .set_checkpoint(name, topic, key, seq)
            .await
    }

    /// Moves a checkpoint to `seq`, below the stored one too, or removes it with `None`:
    /// for operators who rewind or skip a subscription. Stop the subscription's consumers
    /// first: a running one keeps its position in memory and commits it again.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] where the port cannot (capability
    /// `checkpoint_reset`); [`PhotonError::InvalidTopic`] or `InvalidKey`;
    /// [`PhotonError::InvalidInput`] for a negative seq; the port's storage errors.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.set_checkpoint("billing", "orders", None, 42).await?;
    /// photon.reset_checkpoint("billing", "orders", None, Some(7)).await?;
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(7));
    /// photon.reset_checkpoint("billing", "orders", None, None).await?;
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, None);
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn reset_checkpoint(
        &self,
        name: &str,
        topic: &str,
        key: Option<&str>,
        seq: Option<i64>,
    ) -> Result<()> {
        validate_topic_name(topic)?;
        if let Some(key) = key {
            photon_core::validate_topic_key(topic, key)?;
        }
        if let Some(seq) = seq.filter(|seq| *seq < 0) {
            return Err(PhotonError::InvalidInput(format!(
                "checkpoint seq {seq}: must be 0 or more"
            )));
        }
        let port = self.store().port();
        if !port.capabilities().checkpoint_reset {
            return Err(port.unsupported("reset_checkpoint"));
        }
        port.reset_checkpoint(&CheckpointKey::new(name, topic, key), seq)
            .await
    }

    /// This instance as an object-safe backend.
    pub fn backend(&self) -> Arc<dyn PhotonBackend> {
        self.inner.backend.clone()
    }

    /// The event store (port, keys, validation).
    pub fn store(&self) -> &EventStore {
        self.inner.backend.store()
    }

    /// The declared topics.
    pub fn registry(&self) -> &TopicRegistry {
        self.inner.backend.registry()
    }

    /// The checkpoint flush policy of durable subscriptions.
    pub fn flush_policy(&self) -> FlushPolicy {
        self.inner.flush_policy
    }

    /// A builder for a handler executor on this instance (closures, typed handlers,
    /// `#[subscribe]` functions).
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::{Event, PhotonError};
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("billing", "orders", |event: Event| async move {
    ///         println!("billing {}", event.payload);
    ///         Ok::<(), PhotonError>(())
    ///     })
    ///     .start()?;
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!({"total": 12})).await?;
    /// executor.wait_idle().await?;
    /// executor.shutdown().await?;
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(1));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn executor(&self) -> ExecutorBuilder {
        ExecutorBuilder::new(self.clone())
    }

    /// Starts every handler declared with `#[subscribe]` in the linked program.
    ///
    /// # Errors
    /// As [`ExecutorBuilder::start`].
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let executor = photon.start_executor()?; // every #[subscribe] handler of the program
    /// executor.shutdown().await?;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn start_executor(&self) -> Result<Executor> {
        self.executor().declared_handlers().start()
    }

    /// The executor settings (`PhotonBuilder::executor_config`, else the environment).
    pub fn executor_config(&self) -> &ExecutorConfig {
        &self.inner.executor_config
    }

    /// The handler states registered with `PhotonBuilder::state`.
    pub(crate) fn states(&self) -> &States {
        &self.inner.states
    }

    /// Where events published for later are kept (`PhotonBuilder::scheduler`).
    pub fn scheduler_config(&self) -> &SchedulerConfig {
        &self.inner.scheduler_config
    }

    /// This instance's scheduler slot.
    pub(crate) fn scheduler_slot(&self) -> std::sync::MutexGuard<'_, Option<SchedulerTask>> {
        // Only set and taken: a poisoned lock still holds a valid slot.
        let slot = &self.inner.scheduler;
        slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn downgrade(&self) -> WeakPhoton {
        WeakPhoton(Arc::downgrade(&self.inner))
    }

    pub(crate) fn attach_executor(&self, executor: Arc<ExecutorShared>) {
        self.lock_executors().push(executor);
    }

    pub(crate) fn executors(&self) -> Vec<Arc<ExecutorShared>> {
        self.lock_executors().clone()
    }

    fn lock_executors(&self) -> std::sync::MutexGuard<'_, Vec<Arc<ExecutorShared>>> {
        // The list is only pushed to and cloned: a poisoned lock still holds a valid list.
        let executors = &self.inner.executors;
        executors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the executors started on this instance (in-flight handlers finish, bounded by
    /// the shutdown timeout) and its scheduler (another process's takes over at once), ends this instance's durable subscription streams (they
    /// return `None`), commits every pending checkpoint of its durable subscriptions (those
    /// still open and those dropped whose final commit is still running), and waits for
    /// the port to store accepted appends. Every acknowledgement made before it is stored
    /// when it returns `Ok`.
    ///
    /// # Errors
    /// The first commit or flush error; the other checkpoints are still flushed. A
    /// subscription dropped before the call commits its position in the background: when
    /// that commit failed, [`PhotonError::Storage`] names its checkpoint and the error.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
    /// let mut billing = photon.durable("billing", "orders", None);
    /// let event = billing.next().await.unwrap()?;
    /// billing.ack(&event).await?;
    /// photon.shutdown().await?;
    /// assert!(billing.next().await.is_none()); // the stream ended
    /// assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(1));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn shutdown(&self) -> Result<()> {
        let mut first_error = None;
        for executor in self.executors() {
            if let Err(err) = executor.shutdown().await {
                first_error.get_or_insert(err);
            }
        }
        let scheduler = self.scheduler_slot().take();
        if let Some(scheduler) = scheduler {
            scheduler.stop().await;
        }
        self.inner.durable_stop.stop();
        let committers: Vec<_> = {
            let committers = self
                .inner
                .committers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            committers.iter().filter_map(Weak::upgrade).collect()
        };
        for committer in committers {
            if let Err(err) = committer.flush().await {
                first_error.get_or_insert(err);
            }
        }
        CheckpointCommitter::all_settled().await;
        let port = self.store().port();
        let failed = CheckpointCommitter::take_final_failures(port);
        if !failed.is_empty() {
            first_error.get_or_insert(PhotonError::Storage {
                backend: port.label(),
                message: format!(
                    "the final checkpoint commit of {} dropped subscription(s) failed: {}",
                    failed.len(),
                    failed.join("; ")
                ),
                source: None,
            });
        }
        if let Err(err) = self.store().port().flush().await {
            first_error.get_or_insert(err);
        }
        first_error.map_or(Ok(()), Err)
    }
}
