//! [`GroupSubscription`]: one member's share of a consumer group, as opened events.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use futures::Stream;
use photon_core::group::{owner_name, GroupMembership, DEFAULT_PARTITIONS};
use photon_core::metrics::{Consumer, ConsumerMetrics};
use photon_core::{Acknowledge, DeliveryStream, Event, EventStore, PhotonError, Result};

use crate::executor::{TypedEvent, TypedTopic};
use crate::spans::{self, Position};

enum Deliveries {
    /// The lease protocol of `photon-core` (mem, SQLite, NATS, Fluvio): can leave
    /// gracefully.
    Member(GroupMembership),
    /// The port's own groups (a port without the lease protocol). In a mutex only so that the subscription is
    /// `Sync` (acknowledging borrows it across an await); only `poll_next` locks it.
    Port(Mutex<DeliveryStream>),
}

/// One member of a consumer group: a stream of the events of the partitions it owns, each
/// partition in seq order (so each key in order), opened (sealed bodies are opened with the
/// instance's key ring).
///
/// - [`GroupSubscription::ack`] marks an event handled; the group's position moves over
///   the contiguous run of acknowledged events of each partition.
/// - [`GroupSubscription::release`] gives an event back: it is delivered again.
/// - An event that cannot be opened or decoded is an error item ([`PhotonError::Crypto`]
///   or [`PhotonError::Undecodable`], naming its event id); the partition's position stays
///   before it until it is acknowledged with [`GroupSubscription::ack_id`] once stored
///   aside, and it is delivered again after a handover.
/// - A member that lost a partition gets [`PhotonError::Fenced`] from `ack`: another
///   member handles (or handled) the event.
/// - Dropping the subscription leaves the group at once; [`GroupSubscription::leave`]
///   first waits for the events handed out to be acknowledged.
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use futures::StreamExt;
/// let photon = photon_runtime::Photon::builder().build()?;
/// for n in 0..4 {
///     let key = format!("o-{n}");
///     photon.publish("orders", Some(&key), serde_json::json!(null), serde_json::json!(n)).await?;
/// }
/// // The only member: it owns every partition and gets every event.
/// let mut worker = photon.group("billing", "orders");
/// let mut seen = Vec::new();
/// while seen.len() < 4 {
///     let event = worker.next().await.unwrap()?;
///     seen.push(event.seq);
///     worker.ack(&event).await?;
/// }
/// seen.sort_unstable();
/// assert_eq!(seen, vec![1, 2, 3, 4]);
/// worker.leave().await; // hands its partitions over at once
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
pub struct GroupSubscription {
    deliveries: Deliveries,
    store: EventStore,
    pending: Mutex<HashMap<String, Box<dyn Acknowledge>>>,
    group: String,
    metrics: ConsumerMetrics,
}

impl std::fmt::Debug for GroupSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupSubscription")
            .field("pending", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl GroupSubscription {
    pub(crate) fn from_membership(
        membership: GroupMembership,
        store: EventStore,
        group: &str,
        topic: &str,
    ) -> Self {
        Self::new(Deliveries::Member(membership), store, group, topic)
    }

    pub(crate) fn from_port(
        stream: DeliveryStream,
        store: EventStore,
        group: &str,
        topic: &str,
    ) -> Self {
        Self::new(Deliveries::Port(Mutex::new(stream)), store, group, topic)
    }

    fn new(deliveries: Deliveries, store: EventStore, group: &str, topic: &str) -> Self {
        let metrics = ConsumerMetrics::new(store.port().label(), topic, Consumer::Group(group));
        Self {
            deliveries,
            store,
            pending: Mutex::new(HashMap::new()),
            group: group.to_owned(),
            metrics,
        }
    }

    /// Counts a record handed out and opens the span of its delivery.
    fn delivered(&self, at: Position<'_>) -> tracing::Span {
        self.metrics.delivered();
        spans::deliver(self.store.port().label(), Consumer::Group(&self.group), at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Box<dyn Acknowledge>>> {
        // Only inserts and removals happen under this lock.
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn take(&self, event_id: &str) -> Result<Box<dyn Acknowledge>> {
        self.lock().remove(event_id).ok_or_else(|| {
            PhotonError::InvalidInput(format!(
                "event {event_id} is not an unacknowledged delivery of this group member"
            ))
        })
    }

    /// Marks an event handled.
    ///
    /// # Errors
    /// [`PhotonError::Fenced`] when this member no longer owns the event's partition;
    /// [`PhotonError::InvalidInput`] when the event is not an unacknowledged delivery of
    /// this member.
    pub async fn ack(&self, event: &Event) -> Result<()> {
        self.ack_id(&event.event_id).await
    }

    /// Marks the delivery with this event id handled (also one that could not be opened
    /// or decoded).
    ///
    /// # Errors
    /// As [`GroupSubscription::ack`].
    pub async fn ack_id(&self, event_id: &str) -> Result<()> {
        self.take(event_id)?.ack().await?;
        self.metrics.acknowledged();
        Ok(())
    }

    /// Gives an event back: it is delivered again (to this member, ahead of its later
    /// events, while it owns the partition).
    ///
    /// # Errors
    /// As [`GroupSubscription::ack`]; [`PhotonError::Unsupported`] on a backend whose
    /// groups cannot give an event back.
    pub async fn release(&self, event: &Event) -> Result<()> {
        self.take(&event.event_id)?.release().await
    }

    /// Leaves the group gracefully: stops taking events, waits (up to the lease) for the
    /// events handed out to be acknowledged, commits, and hands the partitions over at
    /// once. On backends with their own groups, the same as dropping.
    pub async fn leave(self) {
        if let Deliveries::Member(membership) = self.deliveries {
            membership.leave().await;
        }
    }

    /// Decodes this member's events as values of a `#[topic]` type.
    pub fn typed<T: TypedTopic>(self) -> TypedGroupSubscription<T> {
        TypedGroupSubscription {
            inner: self,
            _type: PhantomData,
        }
    }
}

impl Stream for GroupSubscription {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = match &mut self.deliveries {
            Deliveries::Member(membership) => Pin::new(membership).poll_next(cx),
            Deliveries::Port(stream) => stream
                .get_mut()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .as_mut()
                .poll_next(cx),
        };
        let delivery = match polled {
            Poll::Ready(Some(Ok(delivery))) => delivery,
            Poll::Ready(Some(Err(err))) => {
                if let (
                    PhotonError::Undecodable { event_id, seq, .. },
                    Deliveries::Member(membership),
                ) = (&err, &self.deliveries)
                {
                    if let Some(ack) = membership.undecodable_acks().take(*seq) {
                        self.lock().insert(event_id.clone(), ack);
                        if let Some(at) = Position::of_undecodable(&err) {
                            let span = self.delivered(at);
                            photon_core::spans::record_error(&span, "decoding the record", &err);
                        }
                    }
                }
                return Poll::Ready(Some(Err(err)));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let span = self.delivered(Position::from(&delivery.record));
        let _opening = span.enter();
        let event_id = delivery.record.event_id.clone();
        let opened = self.store.open_record(delivery.record);
        self.lock().insert(event_id, delivery.ack);
        Poll::Ready(Some(opened.map_err(|unopened| {
            photon_core::spans::record_error(&span, "opening the record", &unopened.error);
            unopened.error
        })))
    }
}

/// A [`GroupSubscription`] whose events are decoded as `T`. An event that cannot be opened
/// or decoded is an error item; acknowledge it by id once stored aside.
pub struct TypedGroupSubscription<T> {
    inner: GroupSubscription,
    _type: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for TypedGroupSubscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedGroupSubscription")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T: TypedTopic> TypedGroupSubscription<T> {
    /// Marks a value's event handled.
    ///
    /// # Errors
    /// As [`GroupSubscription::ack`].
    pub async fn ack(&self, value: &TypedEvent<T>) -> Result<()> {
        self.inner.ack(&value.event).await
    }

    /// Marks the delivery with this event id handled.
    ///
    /// # Errors
    /// As [`GroupSubscription::ack`].
    pub async fn ack_id(&self, event_id: &str) -> Result<()> {
        self.inner.ack_id(event_id).await
    }

    /// Gives a value's event back.
    ///
    /// # Errors
    /// As [`GroupSubscription::release`].
    pub async fn release(&self, value: &TypedEvent<T>) -> Result<()> {
        self.inner.release(&value.event).await
    }

    /// Leaves the group gracefully, as [`GroupSubscription::leave`].
    pub async fn leave(self) {
        self.inner.leave().await;
    }
}

impl<T: TypedTopic> Stream for TypedGroupSubscription<T> {
    type Item = Result<TypedEvent<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = match futures::ready!(Pin::new(&mut self.inner).poll_next(cx)) {
            None => None,
            Some(Err(err)) => Some(Err(err)),
            Some(Ok(event)) => Some(T::from_event(&event).map(|value| TypedEvent { value, event })),
        };
        Poll::Ready(item)
    }
}

/// What a group looks like now: its live members, and per partition its owner, epoch,
/// checkpoint and distance to the topic's head.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupStatus {
    /// Group name.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Live members by name.
    pub members: Vec<String>,
    /// The partitions of the group's current partition count that ever had a lease, by
    /// partition.
    pub partitions: Vec<PartitionStatus>,
}

/// One partition of a [`GroupStatus`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionStatus {
    /// The partition.
    pub partition: u32,
    /// The member holding a live lease, if any.
    pub owner: Option<String>,
    /// Epoch of the last acquisition.
    pub epoch: u64,
    /// The partition's committed seq.
    pub checkpoint: Option<i64>,
    /// The topic's head seq minus the checkpoint: an upper bound of the partition's
    /// backlog (the seqs in between belong to every partition). `None` without `head_seq`.
    pub behind_head: Option<i64>,
}

pub(crate) async fn status(
    coordination: &dyn photon_core::GroupCoordination,
    port: &dyn photon_core::StoragePort,
    group: &str,
    topic: &str,
) -> Result<GroupStatus> {
    let scope = photon_core::GroupScope::new(group, topic);
    let members = coordination
        .members(&scope)
        .await?
        .into_iter()
        .map(|member| member.name)
        .collect();
    let head = if port.capabilities().head_seq {
        Some(port.head_seq(topic, None).await?.unwrap_or(0))
    } else {
        None
    };
    let (_, leases) =
        photon_core::group::current_view(coordination, &scope, DEFAULT_PARTITIONS).await?;
    let partitions = leases
        .into_iter()
        .map(|(partition, lease)| PartitionStatus {
            partition,
            owner: lease.live.then(|| owner_name(&lease.owner).to_owned()),
            epoch: lease.epoch,
            checkpoint: lease.checkpoint,
            behind_head: head.map(|head| head - lease.checkpoint.unwrap_or(0)),
        })
        .collect();
    Ok(GroupStatus {
        group: group.to_owned(),
        topic: topic.to_owned(),
        members,
        partitions,
    })
}
