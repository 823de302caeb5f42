//! The storage contract every backend implements.
//!
//! Each bullet under a method is a conformance scenario in `photon-testkit`.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;

use crate::capabilities::StorageCapabilities;
use crate::error::{PhotonError, Result};
use crate::event::{Appended, Record, RecordDraft};
use crate::group::{GroupCoordination, Ownership};

/// Appends `drafts` one after the other with [`StoragePort::append`], stopping at the first
/// failure: what [`StoragePort::append_batch`] does on a port without atomic batches.
///
/// # Errors
/// The first append's error when it is the first draft's; otherwise
/// [`PhotonError::BatchIncomplete`] holding the stored leading events and that error.
pub async fn append_each<P: StoragePort + ?Sized>(
    port: &P,
    drafts: Vec<RecordDraft>,
) -> Result<Vec<Appended>> {
    let events = drafts.len();
    let mut stored = Vec::with_capacity(events);
    for draft in drafts {
        match port.append(draft).await {
            Ok(appended) => stored.push(appended),
            Err(error) => return Err(PhotonError::batch_incomplete(stored, events, error)),
        }
    }
    Ok(stored)
}

/// A stream of stored records. Errors are per item: the stream continues after one unless
/// the port says it ended.
pub type RecordStream = Pin<Box<dyn Stream<Item = Result<Record>> + Send>>;

/// A stream of group deliveries.
pub type DeliveryStream = Pin<Box<dyn Stream<Item = Result<Delivery>> + Send>>;

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The oldest retained event.
    Beginning,
    /// The first event with `seq > n`.
    AfterSeq(i64),
    /// Only events appended after the subscription is established.
    Tail,
}

/// A stored topic, as [`StoragePort::list_topics`] describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Highest stored seq, `None` when empty.
    pub head_seq: Option<i64>,
    /// Events stored now (after retention), when the port can tell.
    pub events: Option<u64>,
    /// Bytes stored for the topic, when the port can tell.
    pub bytes: Option<u64>,
    /// Broker streams (shards) the topic is spread over; 1 on stores without shards.
    pub shards: u32,
}

/// A stored checkpoint, as [`StoragePort::list_checkpoints`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredCheckpoint {
    /// Whose checkpoint.
    pub subscription: String,
    /// Topic.
    pub topic: String,
    /// Key filter, `None` for the whole topic.
    pub key: Option<String>,
    /// The committed seq, as [`StoragePort::load_checkpoint`] returns it.
    pub seq: i64,
}

impl StoredCheckpoint {
    /// Each of `keys` as `port.load_checkpoint` reads it, in the order given, leaving out
    /// those with nothing stored: how a port that stores a checkpoint as several positions
    /// (one per shard) lists them, so that a listing never says other than a load.
    ///
    /// # Errors
    /// The first error of `load_checkpoint`.
    pub async fn load_each<P: StoragePort + ?Sized>(
        port: &P,
        keys: impl IntoIterator<Item = CheckpointKey>,
    ) -> Result<Vec<Self>> {
        let mut listed = Vec::new();
        for key in keys {
            if let Some(seq) = port.load_checkpoint(&key).await? {
                listed.push(Self {
                    subscription: key.subscription,
                    topic: key.topic,
                    key: key.key,
                    seq,
                });
            }
        }
        Ok(listed)
    }
}

/// Identity of a checkpoint: one per subscription name, topic and key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CheckpointKey {
    /// The durable subscription's name.
    pub subscription: String,
    /// Topic.
    pub topic: String,
    /// Key filter of the subscription, `None` for the whole topic.
    pub key: Option<String>,
}

impl CheckpointKey {
    /// A checkpoint key.
    pub fn new(
        subscription: impl Into<String>,
        topic: impl Into<String>,
        key: Option<&str>,
    ) -> Self {
        Self {
            subscription: subscription.into(),
            topic: topic.into(),
            key: key.map(str::to_owned),
        }
    }
}

/// A subscription request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeRequest {
    /// Validated topic.
    pub topic: String,
    /// Only events of this key, filtered as close to storage as the port can.
    pub key: Option<String>,
    /// Where to start.
    pub start: StartAt,
    /// Set for durable subscriptions. A port whose resume position is more than one seq
    /// (a sharded broker topic) resumes each part from its own stored position under this
    /// key and ignores `start` for parts that have one; other ports ignore it.
    pub durable: Option<CheckpointKey>,
}

/// A request to join a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRequest {
    /// Group name: members of one group share the topic's events.
    pub group: String,
    /// This member's unique name within the group.
    pub member: String,
    /// Validated topic.
    pub topic: String,
    /// Where the group starts when it has no stored position.
    pub start: StartAt,
}

/// Acknowledges one group delivery.
#[async_trait]
pub trait Acknowledge: Send + Sync {
    /// Marks the delivery handled. Unacknowledged deliveries of a member that leaves go to
    /// another member.
    ///
    /// # Errors
    /// Storage errors of the port; [`PhotonError::Fenced`] when the member no longer owns
    /// the delivery's partition (the event goes, or went, to its new owner).
    async fn ack(&self) -> Result<()>;

    /// Gives the delivery back: it is handed out again, before the member's later events.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] where the port cannot give an event back;
    /// [`PhotonError::Fenced`] as for [`Acknowledge::ack`].
    async fn release(&self) -> Result<()> {
        Err(PhotonError::Unsupported {
            backend: "group",
            operation: "release",
        })
    }

    /// The partition ownership this delivery was handed out under, where the group runs
    /// the lease protocol ([`crate::raw::group::join`]).
    fn ownership(&self) -> Option<Ownership> {
        None
    }

    /// Whether work on this delivery may start now. `false` once the member stopped
    /// handing out the delivery's partition (its lease was lost or lapsed, or the partition
    /// is being handed over): the event belongs to the partition's next owner, so a
    /// consumer that has not started it yet gives it back instead. Always `true` outside
    /// lease-based groups.
    fn current(&self) -> bool {
        true
    }
}

/// One event delivered to one member of a group.
pub struct Delivery {
    /// The record.
    pub record: Record,
    /// Its acknowledgement.
    pub ack: Box<dyn Acknowledge>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

/// A storage backend: appends records, streams them, keeps checkpoints.
///
/// Ports are cheap handles (`Arc` inside); streams they return own what they need
/// (`'static`). The runtime validates names, seals bodies and enforces
/// `max_payload_bytes` before calling the port.
#[async_trait]
pub trait StoragePort: Send + Sync + 'static {
    /// Stable label for logs and metrics, e.g. `"mem"`.
    fn label(&self) -> &'static str;

    /// What this port supports.
    fn capabilities(&self) -> StorageCapabilities;

    /// Appends a record.
    ///
    /// - Returns only once the record is stored as durably as the port promises.
    /// - Seq strictly increases within `(topic, key)` in append order.
    /// - Topics are isolated: `a.b`, `a-b` and `a_b` are three topics.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the backend cannot be reached (retryable), or
    /// [`PhotonError::Storage`]. A failed append stored nothing that will be delivered,
    /// or (brokers) the retry with the same `envelope_id` is deduplicated.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not store the record; a retry with the same draft
    /// does not store it twice where the port deduplicates by `envelope_id`.
    async fn append(&self, draft: RecordDraft) -> Result<Appended>;

    /// Appends drafts in order, which may name different topics and keys; returns one
    /// [`Appended`] per draft, in order.
    ///
    /// - Within a `(topic, key)`, seqs strictly increase in batch order, after every
    ///   earlier append.
    /// - With capability `atomic_batches`: stored all-or-nothing in one transaction, and the
    ///   events of one topic get consecutive seqs.
    /// - Without it (this default): appended one after the other, stopping at the first
    ///   failure, which is the plain error when nothing was stored and
    ///   [`PhotonError::BatchIncomplete`] with the stored leading events otherwise.
    ///
    /// # Errors
    /// As [`StoragePort::append`] when nothing of the batch was stored;
    /// [`PhotonError::BatchIncomplete`] (ports without atomic batches) when some was.
    ///
    /// # Cancel safety
    /// Dropping the future may store some, all or none of the batch (with atomic
    /// batches: all or none).
    async fn append_batch(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        append_each(self, drafts).await
    }

    /// Streams records of a topic in seq order per partition.
    ///
    /// - With `StartAt::AfterSeq(s)`, yields exactly the records with `seq > s`, then live ones.
    /// - With a key, yields only that key's records.
    /// - Never ends by itself; a record that cannot be decoded is a
    ///   [`PhotonError::Undecodable`] error item, at its place in the order, holding its
    ///   topic, seq (the one the record would have had), event id and stored bytes; the
    ///   stream continues. (Conformance scenario `undecodable_record`.)
    ///
    /// # Cancel safety
    /// Dropping the stream releases its resources; nothing is acknowledged by reading.
    fn subscribe(&self, request: SubscribeRequest) -> RecordStream;

    /// Finds a record by its event id.
    ///
    /// - Requires capability `get_event`.
    /// - Every id returned by `append` is found; an unknown or malformed id is `Ok(None)`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability.
    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        let _ = event_id;
        Err(self.unsupported("get_event"))
    }

    /// Up to `limit` records of a topic with `seq > after`, oldest first.
    ///
    /// - Requires capability `list`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability.
    async fn list_by_topic(&self, topic: &str, after: i64, limit: usize) -> Result<Vec<Record>> {
        let _ = (topic, after, limit);
        Err(self.unsupported("list_by_topic"))
    }

    /// The `limit` newest records of a topic, newest first.
    ///
    /// - Requires capability `list`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability.
    async fn list_recent(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        let _ = (topic, limit);
        Err(self.unsupported("list_recent"))
    }

    /// Every topic the store holds (dead-letter topics included, Photon's own bookkeeping
    /// excluded), sorted by name.
    ///
    /// - Requires capability `catalog`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability; storage errors.
    async fn list_topics(&self) -> Result<Vec<TopicInfo>> {
        Err(self.unsupported("list_topics"))
    }

    /// Every durable subscription's stored checkpoint (consumer groups excluded), sorted by
    /// subscription, topic and key.
    ///
    /// - Requires capability `catalog`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability; storage errors.
    async fn list_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        Err(self.unsupported("list_checkpoints"))
    }

    /// The highest seq stored for a topic (and key), `None` when empty.
    ///
    /// - Requires capability `head_seq`.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability.
    async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        let _ = (topic, key);
        Err(self.unsupported("head_seq"))
    }

    /// Deletes the records of a topic with `seq < before_seq`; returns how many.
    ///
    /// - Requires capability `truncate`.
    /// - Records at or above the bound stay intact and keep their seq.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability.
    async fn truncate_before(&self, topic: &str, before_seq: i64) -> Result<u64> {
        let _ = (topic, before_seq);
        Err(self.unsupported("truncate_before"))
    }

    /// Marks `topic` as a dead-letter topic, whatever its name: retention by age, count or
    /// size leaves it alone unless the port is configured to apply it to dead letters
    /// too. Names ending in [`crate::DEAD_LETTER_SUFFIX`] are dead-letter topics without
    /// this call; the executor calls it for the topics of another dead-letter suffix
    /// before storing a letter there. Idempotent, and stored where the port keeps its
    /// topics, so that every process sharing the store treats the topic alike.
    ///
    /// The default does nothing: for ports without retention of their own (`truncate_before`
    /// is explicit and removes dead letters too).
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn declare_dead_letter_topic(&self, topic: &str) -> Result<()> {
        let _ = topic;
        Ok(())
    }

    /// The last committed seq of a checkpoint, `None` if never committed.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>>;

    /// Commits a checkpoint.
    ///
    /// - Never regresses: a seq lower than the stored one is ignored, also with two
    ///   writers racing.
    /// - Checkpoints of different subscriptions, topics and keys are independent.
    ///
    /// # Errors
    /// Storage errors of the port.
    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()>;

    /// Moves a checkpoint to `seq`, below the stored position too, or removes it (`None`):
    /// an operator's rewind or skip, never the consumers' commit path.
    ///
    /// - Requires capability `checkpoint_reset`.
    /// - Afterwards `load_checkpoint` returns `seq` (`None` after a removal), and a durable
    ///   subscription opened on the key starts at the first event with a seq above `seq`
    ///   in every shard (after a removal: where its start policy says).
    /// - Later commits raise the new position as usual; one below it is ignored.
    /// - Other checkpoints (subscriptions, topics, keys) are untouched.
    /// - A consumer already running on the checkpoint keeps the position it holds in
    ///   memory, and its next commit raises the checkpoint again: stop it first.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] without the capability; storage errors of the port.
    async fn reset_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) -> Result<()> {
        let _ = (key, seq);
        Err(self.unsupported("reset_checkpoint"))
    }

    /// Which independent position a seq of this topic belongs to. Sharded ports whose seqs
    /// are only ordered within a shard return the shard; checkpoint coalescing keeps one
    /// pending value per lane so that no lane's progress hides another's.
    fn checkpoint_lane(&self, topic: &str, seq: i64) -> u32 {
        let _ = (topic, seq);
        0
    }

    /// Joins a consumer group.
    ///
    /// Ports with a [`GroupCoordination`] primitive implement this with
    /// [`crate::raw::group::join`] (default options, member named by the request), so that their
    /// groups span processes; `Photon::group` calls `join` itself to pass options.
    ///
    /// - Requires capability `consumer_groups`.
    /// - Each event goes to exactly one live member; a key's events go to one member at a
    ///   time, in order.
    /// - When a member leaves, its unacknowledged events and its keys go to the others.
    /// - The group's position is durable: a group joined again on a newly opened port
    ///   resumes after its acknowledged events; `start` applies only to a new group.
    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        let _ = request;
        Box::pin(futures::stream::once(std::future::ready(Err(
            self.unsupported("subscribe_group")
        ))))
    }

    /// The group primitive of this port, when its groups span processes: members in any
    /// process joined through it (with [`crate::raw::group::join`]) share the work.
    ///
    /// - A port claiming capability `consumer_groups` returns it; one without the
    ///   capability returns `None`.
    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        None
    }

    /// This port as [`std::any::Any`] when it implements
    /// [`crate::TransactionalPort`], so that the runtime can reach that side from an
    /// `Arc<dyn StoragePort>` (handlers declared with `#[subscribe(transactional)]`).
    ///
    /// - A port implementing `TransactionalPort` returns `Some(self)`; others `None`.
    fn transactional_port(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// Waits until every accepted append is stored (ports that acknowledge before storing).
    ///
    /// # Errors
    /// The first failed append since the last flush.
    async fn flush(&self) -> Result<()> {
        Ok(())
    }

    /// An [`PhotonError::Unsupported`] for this port.
    fn unsupported(&self, operation: &'static str) -> PhotonError {
        PhotonError::Unsupported {
            backend: self.label(),
            operation,
        }
    }
}
