//! [`DurableSubscription`]: a named subscription that resumes after its checkpoint and
//! commits what the caller acknowledges.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use futures::Stream;
use photon_core::metrics::{Consumer, ConsumerMetrics};
use photon_core::{
    CheckpointCommitter, CheckpointKey, Event, EventStore, PhotonError, Progress, Record,
    RecordStream, Result, Unopened,
};

use crate::dead_letter::{store_dead_letter, DeadLetter, Stored};
use crate::shutdown::{StopSignal, StopSwitch};
use crate::spans::{self, Position};

/// A durable subscription: a stream of events after the stored checkpoint.
///
/// # Acknowledging
/// Acknowledge each handled event with [`DurableSubscription::ack`], in any order. The
/// checkpoint only moves over the contiguous run of acknowledged events from the oldest
/// one delivered (per checkpoint lane, as the executor does): acking 3..=100 while 1 and 2
/// are not commits nothing, and 1 and 2 are delivered again after a reopen. Acknowledging
/// an event this subscription did not deliver, or twice, does nothing.
///
/// Acknowledgements are coalesced (see `FlushPolicy`) and committed on the flush interval,
/// on [`DurableSubscription::flush`], when the subscription is dropped, and on
/// `Photon::shutdown`. Committed checkpoints never regress. A subscription opened with the
/// same name in the same process, even right after this one is dropped, starts after every
/// acknowledgement of this one.
///
/// # Handing an event back
/// [`DurableSubscription::release`] hands an event back: it is delivered again by this
/// stream, before any other event (like a NATS `nak`), and the checkpoint stays before it
/// until it is acknowledged. A released event that is never acknowledged is also delivered
/// again after a reopen.
///
/// # Error items
/// A stored record that cannot be opened ([`PhotonError::Crypto`]) or decoded
/// ([`PhotonError::Undecodable`]) is an error item carrying its position
/// ([`PhotonError::position`]); the checkpoint stays before it until it is handled with
/// [`DurableSubscription::dead_letter`] (stores it on `<topic>.dlq` and acknowledges it) or
/// [`DurableSubscription::ack_error`] (passes over it). Other error items (an unavailable
/// backend, a gap) hold no record and need nothing.
///
/// The loop in the example below handles both.
///
/// After a crash, the events acknowledged within the last flush window are delivered again:
/// delivery is at-least-once. `Photon::shutdown` ends the stream (it returns `None`).
///
/// # Cancel safety
/// Dropping the subscription (or a pending `next()`) loses nothing: unacknowledged events
/// are delivered again to the next subscription with the same name.
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use futures::StreamExt;
/// use serde_json::json;
/// let photon = photon_runtime::Photon::builder().build()?;
/// photon.publish("orders", Some("o-1"), json!("shop"), json!({"total": 12})).await?;
/// photon.publish("orders", Some("o-2"), json!("shop"), json!({"total": 30})).await?;
///
/// let mut billing = photon.durable("billing", "orders", None);
/// let mut totals = Vec::new();
/// while let Some(item) = billing.next().await {
///     match item {
///         Ok(event) => {
///             totals.push(event.payload["total"].clone());
///             billing.ack(&event).await?;
///         }
///         // A record that cannot be opened or decoded: kept on `orders.dlq`.
///         Err(err) if err.position().is_some() => billing.dead_letter(&err).await?,
///         Err(err) => eprintln!("stream error: {err}"),
///     }
///     if totals.len() == 2 {
///         break;
///     }
/// }
/// billing.flush().await?;
/// assert_eq!(totals, vec![json!(12), json!(30)]);
/// assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(2));
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
pub struct DurableSubscription {
    records: RecordStream,
    shared: Arc<Shared>,
    stop: StopSignal,
    stop_wait: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Keeps the switch alive: only `Photon::shutdown` stops this stream.
    _switch: Arc<StopSwitch>,
}

/// What `ack`, `release` and the stream share. The futures of `ack` and `dead_letter` hold
/// this and no borrow of the subscription, so that they are `Send + 'static`.
struct Shared {
    store: EventStore,
    committer: Arc<CheckpointCommitter>,
    dead_letter_topic: String,
    progress: Progress,
    held: Mutex<Held>,
    waker: AtomicWaker,
    metrics: ConsumerMetrics,
}

#[derive(Default)]
struct Held {
    /// Released events, delivered again before anything else.
    released: VecDeque<Event>,
    /// Records that could not be opened, by seq, until acknowledged: what their dead
    /// letter keeps.
    unopened: HashMap<i64, Record>,
}

impl Shared {
    fn lane(&self, topic: &str, seq: i64) -> u32 {
        self.store.port().checkpoint_lane(topic, seq)
    }

    async fn ack_position(self: Arc<Self>, lane: u32, seq: i64) -> Result<()> {
        let (pending, ready) = self.progress.finish(lane, seq);
        if pending {
            self.metrics.acknowledged();
        }
        if !ready.is_empty() {
            let mut held = self.held();
            if !held.unopened.is_empty() {
                for seq in &ready {
                    held.unopened.remove(seq);
                }
            }
        }
        match ready.last() {
            Some(last) => self.committer.ack(*last).await,
            None => Ok(()),
        }
    }

    /// Counts a record handed out and opens the span of its delivery.
    fn delivered(&self, at: Position<'_>) -> tracing::Span {
        self.metrics.delivered();
        let name = &self.committer.key().subscription;
        spans::deliver(self.store.port().label(), Consumer::Subscription(name), at)
    }

    /// Counts a released event handed out again, in a span of its own.
    fn redelivered(&self, event: Event) -> Event {
        drop(self.delivered(Position::from(&event)));
        event
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // Only queue and map operations run under this lock.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for DurableSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableSubscription")
            .field("checkpoint", self.shared.committer.key())
            .field("outstanding", &self.shared.progress.outstanding())
            .finish_non_exhaustive()
    }
}

impl DurableSubscription {
    pub(crate) fn new(
        records: RecordStream,
        store: EventStore,
        committer: Arc<CheckpointCommitter>,
        dead_letter_topic: String,
        switch: Arc<StopSwitch>,
    ) -> Self {
        let stop = switch.signal();
        let mut waiting = stop.clone();
        let checkpoint = committer.key();
        let metrics = ConsumerMetrics::new(
            store.port().label(),
            &checkpoint.topic,
            Consumer::Subscription(&checkpoint.subscription),
        );
        Self {
            records,
            shared: Arc::new(Shared {
                metrics,
                store,
                committer,
                dead_letter_topic,
                progress: Progress::default(),
                held: Mutex::default(),
                waker: AtomicWaker::new(),
            }),
            stop,
            stop_wait: Box::pin(async move { waiting.stopped().await }),
            _switch: switch,
        }
    }

    /// Marks an event handled; the checkpoint moves over it once every event delivered
    /// before it is acknowledged too.
    ///
    /// # Errors
    /// The port's commit error when this acknowledgement triggered a flush; it stays
    /// pending and is retried by the next flush.
    pub fn ack(&self, event: &Event) -> impl Future<Output = Result<()>> + Send + 'static {
        // The lane is found now, so that the future holds no copy of the topic name.
        let lane = self.shared.lane(&event.topic_name, event.seq);
        self.shared.clone().ack_position(lane, event.seq)
    }

    /// Acknowledges an error item that stands for a stored record (see
    /// [`PhotonError::position`]) without storing it anywhere: the checkpoint passes over
    /// it, and the record is not delivered again.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] when the error holds no position; otherwise as
    /// [`DurableSubscription::ack`].
    pub fn ack_error(
        &self,
        error: &PhotonError,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let shared = self.shared.clone();
        let position = error
            .position()
            .map(|(topic, seq)| (shared.lane(topic, seq), seq));
        let refused = position.is_none().then(|| {
            PhotonError::InvalidInput(format!(
                "this error item stands for no stored record, there is nothing to acknowledge: {error}"
            ))
        });
        async move {
            match (position, refused) {
                (Some((lane, seq)), _) => shared.ack_position(lane, seq).await,
                (None, refused) => Err(err_or_closed(refused)),
            }
        }
    }

    /// Stores the record of an error item on the dead-letter topic (`<topic>.dlq`, see
    /// `ExecutorConfig::dead_letter_suffix`) and then acknowledges it: a record that
    /// cannot be opened keeps its sealed body, one that cannot be decoded its stored bytes.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] for an error that stands for no stored record or that
    /// this subscription did not deliver (or already acknowledged); the port's error when
    /// the letter cannot be stored, and then nothing is acknowledged.
    pub fn dead_letter(
        &self,
        error: &PhotonError,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let shared = self.shared.clone();
        let letter = self.letter_of(error);
        let acked = self.ack_error(error);
        async move {
            let letter = letter?;
            match store_dead_letter(
                &shared.store,
                &shared.dead_letter_topic,
                &letter,
                None,
                None,
            )
            .await
            {
                Stored::Whole | Stored::Reference => {
                    shared.metrics.dead_letter();
                    acked.await
                }
                Stored::Refused(err) => Err(err),
                Stored::Abandoned => Err(PhotonError::Closed("dead-letter store".into())),
            }
        }
    }

    fn letter_of(&self, error: &PhotonError) -> Result<DeadLetter> {
        let name = &self.shared.committer.key().subscription;
        let letter = match error {
            PhotonError::Undecodable { .. } => DeadLetter::undecodable(name, "durable", error),
            PhotonError::Crypto { seq, .. } => {
                let record = self.shared.held().unopened.get(seq).cloned();
                record.map(|record| {
                    DeadLetter::unopened(
                        name,
                        "durable",
                        &Unopened {
                            record,
                            error: PhotonError::InvalidInput(error.to_string()),
                        },
                    )
                })
            }
            _ => None,
        };
        let Some(mut letter) = letter else {
            return Err(PhotonError::InvalidInput(format!(
                "not a record this subscription delivered and holds: {error}"
            )));
        };
        letter.error = error.to_string();
        Ok(letter)
    }

    /// Hands a delivered event back: this stream delivers it again before any other
    /// event, and the checkpoint stays before it until it is acknowledged.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] when this subscription did not deliver the event or
    /// it was already acknowledged.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
    /// let mut billing = photon.durable("billing", "orders", None);
    /// let event = billing.next().await.unwrap()?;
    /// billing.release(&event)?; // not now: deliver it again
    /// let again = billing.next().await.unwrap()?;
    /// assert_eq!(again.event_id, event.event_id);
    /// billing.ack(&again).await?;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn release(&self, event: &Event) -> Result<()> {
        let lane = self.shared.lane(&event.topic_name, event.seq);
        if !self.shared.progress.is_pending(lane, event.seq) {
            return Err(PhotonError::InvalidInput(format!(
                "event {} (seq {}) was not delivered by this subscription or is already acknowledged",
                event.event_id, event.seq
            )));
        }
        self.shared.held().released.push_back(event.clone());
        self.shared.waker.wake();
        Ok(())
    }

    /// Commits every acknowledgement now, after any commit in flight.
    ///
    /// # Errors
    /// The port's commit error.
    pub fn flush(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let committer = self.shared.committer.clone();
        async move { committer.flush().await }
    }

    /// Events delivered and not yet committable (unacknowledged, or acknowledged behind
    /// an unacknowledged one).
    pub fn outstanding(&self) -> usize {
        self.shared.progress.outstanding()
    }

    /// Name, topic and key of this subscription's checkpoint.
    pub fn checkpoint_key(&self) -> &CheckpointKey {
        self.shared.committer.key()
    }
}

impl Stream for DurableSubscription {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.stop.is_stopped() || self.stop_wait.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        if let Some(event) = self.shared.held().released.pop_front() {
            return Poll::Ready(Some(Ok(self.shared.redelivered(event))));
        }
        self.shared.waker.register(cx.waker());
        if let Some(event) = self.shared.held().released.pop_front() {
            return Poll::Ready(Some(Ok(self.shared.redelivered(event))));
        }
        let item = match self.records.as_mut().poll_next(cx) {
            Poll::Ready(Some(item)) => item,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let this = &*self.shared;
        Poll::Ready(Some(match item {
            Ok(record) => {
                let lane = this.lane(&record.topic_name, record.seq);
                this.progress.received(lane, record.seq, None);
                let span = this.delivered(Position::from(&record));
                let _opening = span.enter();
                match this.store.open_record(record) {
                    Ok(event) => Ok(event),
                    Err(unopened) => {
                        let Unopened { record, error } = *unopened;
                        photon_core::spans::record_error(&span, "opening the record", &error);
                        this.held().unopened.insert(record.seq, record);
                        Err(error)
                    }
                }
            }
            Err(error) => {
                if let Some((topic, seq)) = error.position() {
                    let lane = this.lane(topic, seq);
                    this.progress.received(lane, seq, None);
                    this.metrics.delivered();
                }
                Err(error)
            }
        }))
    }
}

fn err_or_closed(err: Option<PhotonError>) -> PhotonError {
    err.unwrap_or_else(|| PhotonError::Closed("subscription".into()))
}
