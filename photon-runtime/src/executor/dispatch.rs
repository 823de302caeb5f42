//! One durable subscription of the executor: reads events after the checkpoint, runs the
//! events of one key in order and one at a time, different keys in parallel up to the
//! configured bound, and acknowledges only the contiguous run of finished events.
//!
//! A group handler reads its member's share of the group instead, and acknowledges each
//! finished event to the group (which keeps the contiguous run per partition).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use photon_core::group::Ownership;
use photon_core::metrics::ConsumerMetrics;
use photon_core::spans::record_error;
use photon_core::{
    Acknowledge, CheckpointCommitter, CheckpointKey, DeliveryStream, Event, EventStore,
    GroupRequest, PhotonError, RecordStream, Result, StartAt, StartPolicy, Unopened,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{Instrument, Span};

use super::arguments::Resources;
use super::config::{ExecutorConfig, RetryPolicy};
use super::handler::Registration;
use super::idle::ReadPosition;
use super::retry::{run_with_retries, Outcome};
use super::service::Layered;
use super::stats::SubscriptionStats;
use crate::dead_letter::{store_dead_letter, DeadLetter, Stored, Transactional};
use crate::shutdown::{drain_workers, log_join_error, StopSignal};
use crate::spans::{self, Position};
use photon_core::Progress;

/// A read record waiting for its key's worker (or its batch).
pub(super) struct Queued {
    pub(super) item: Item,
    pub(super) lane: u32,
    /// The `photon.deliver` span, open until the record is finished.
    pub(super) span: Span,
}

/// What was read: an event for the handler, or a record that cannot be opened or decoded,
/// which goes straight to the dead-letter topic (retrying cannot open it) in its key's
/// order.
pub(super) enum Item {
    Event(Event),
    Unopened(Box<Unopened>),
    /// A [`PhotonError::Undecodable`] error item.
    Undecodable(PhotonError),
}

impl Item {
    pub(super) fn seq(&self) -> i64 {
        match self {
            Self::Event(event) => event.seq,
            Self::Unopened(unopened) => unopened.record.seq,
            Self::Undecodable(error) => error.position().map_or(0, |(_, seq)| seq),
        }
    }

    fn topic_and_key(&self) -> (&str, Option<&str>) {
        match self {
            Self::Event(event) => (&event.topic_name, event.topic_key.as_deref()),
            Self::Unopened(unopened) => (
                &unopened.record.topic_name,
                unopened.record.topic_key.as_deref(),
            ),
            Self::Undecodable(PhotonError::Undecodable { topic, key, .. }) => {
                (topic, key.as_deref())
            }
            Self::Undecodable(_) => ("", None),
        }
    }

    fn position(&self) -> Position<'_> {
        match self {
            Self::Event(event) => Position::from(event),
            Self::Unopened(unopened) => Position::from(&unopened.record),
            // Only `PhotonError::Undecodable` is read into this variant.
            Self::Undecodable(error) => Position::of_undecodable(error).unwrap_or(Position {
                topic: "",
                key: None,
                seq: 0,
                event_id: "",
            }),
        }
    }
}

/// Everything the dispatcher and the workers of one subscription share.
pub(crate) struct Subscription {
    pub(crate) store: EventStore,
    pub(crate) registration: Registration,
    pub(crate) checkpoint: CheckpointKey,
    pub(crate) committer: Arc<CheckpointCommitter>,
    pub(crate) config: Arc<ExecutorConfig>,
    /// The handler's own retry policy, else the executor's.
    pub(crate) retry: RetryPolicy,
    /// The handler wrapped in its middleware, when it has any.
    pub(crate) layered: Option<Layered>,
    pub(crate) dead_letter_topic: String,
    pub(crate) stats: Arc<SubscriptionStats>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) position: Arc<ReadPosition>,
    /// What the handler's `Photon` and `State` arguments are taken from.
    pub(crate) resources: Arc<Resources>,
    pub(crate) stop: StopSignal,
    /// Events waiting per key; a key present here has a running worker.
    queues: Mutex<HashMap<Option<String>, VecDeque<Queued>>>,
    /// Parallelism slots: one per attempt running (so at most one per key). The handler's
    /// concurrency, else the executor's parallelism.
    pub(crate) slots: Arc<Semaphore>,
    /// Group handlers: the acknowledgement of each delivery read and not yet finished.
    group_acks: Arc<Mutex<HashMap<i64, Box<dyn Acknowledge>>>>,
    /// Group handlers: this member's name in its group, the same for every reopen.
    member_name: String,
}

impl Subscription {
    pub(crate) fn new(
        store: EventStore,
        registration: Registration,
        checkpoint: CheckpointKey,
        committer: Arc<CheckpointCommitter>,
        config: Arc<ExecutorConfig>,
        resources: Arc<Resources>,
        stop: StopSignal,
    ) -> Self {
        let metrics = ConsumerMetrics::new(
            store.port().label(),
            &checkpoint.topic,
            registration.options.consumer(),
        );
        let member_name = registration.options.member_name();
        let slots = registration
            .options
            .concurrency_limit()
            .unwrap_or(config.parallelism);
        let layered = registration
            .layer
            .as_ref()
            .map(|layer| Layered::new(layer, registration.handler.clone(), resources.clone()));
        Self {
            retry: registration.options.retry_policy().unwrap_or(config.retry),
            layered,
            stats: Arc::new(SubscriptionStats::new(metrics)),
            progress: Arc::default(),
            // A retry topic's events are the handler's own topic's: so are their dead letters.
            dead_letter_topic: config.dead_letter_topic(
                registration
                    .options
                    .retried_topic()
                    .unwrap_or(&checkpoint.topic),
            ),
            slots: Arc::new(Semaphore::new(slots)),
            store,
            registration,
            checkpoint,
            committer,
            config,
            position: Arc::default(),
            resources,
            stop,
            queues: Mutex::new(HashMap::new()),
            group_acks: Arc::default(),
            member_name,
        }
    }

    /// The records to handle: after the checkpoint, or this member's share of its group.
    fn open(&self) -> RecordStream {
        let Some(group) = self.registration.options.group_name() else {
            return self
                .store
                .records_after_checkpoint(self.checkpoint.clone(), self.config.start_policy);
        };
        let member = self.member_name.clone();
        let port = self.store.port().clone();
        let request = GroupRequest {
            group: group.to_owned(),
            member: member.clone(),
            topic: self.checkpoint.topic.clone(),
            start: match self.config.start_policy {
                StartPolicy::Beginning => StartAt::Beginning,
                StartPolicy::Tail => StartAt::Tail,
            },
        };
        let (deliveries, undecodable): (DeliveryStream, _) = match port.group_coordination() {
            Some(coordination) => {
                let membership = photon_core::raw::group::join(
                    port,
                    coordination,
                    request,
                    self.registration.options.group_options(member),
                );
                let undecodable = membership.undecodable_acks();
                (Box::pin(membership), Some(undecodable))
            }
            None => (port.subscribe_group(request), None),
        };
        let acks = Arc::clone(&self.group_acks);
        Box::pin(deliveries.map(move |item| match item {
            Ok(delivery) => {
                lock_acks(&acks).insert(delivery.record.seq, delivery.ack);
                Ok(delivery.record)
            }
            Err(err) => {
                // Acknowledged to the group like an event, once its dead letter is stored.
                if let (PhotonError::Undecodable { seq, .. }, Some(undecodable)) =
                    (&err, &undecodable)
                {
                    if let Some(ack) = undecodable.take(*seq) {
                        lock_acks(&acks).insert(*seq, ack);
                    }
                }
                Err(err)
            }
        }))
    }

    /// Before a durable stream opens at the tail, notes the head it passes over, for
    /// [`super::Executor::wait_idle`].
    async fn note_tail_start(&self) {
        let port = self.store.port();
        if self.config.start_policy != StartPolicy::Tail
            || self.registration.options.group_name().is_some()
            || !port.capabilities().head_seq
        {
            return;
        }
        match port
            .head_seq(&self.checkpoint.topic, self.checkpoint.key.as_deref())
            .await
        {
            Ok(head) => self.position.opened_at_tail(head),
            Err(err) => {
                tracing::debug!(checkpoint = ?self.checkpoint, %err, "head before a tail start unknown")
            }
        }
    }

    /// Acknowledges a finished event to the group.
    async fn ack_to_group(&self, seq: i64) {
        let ack = lock_acks(&self.group_acks).remove(&seq);
        let Some(ack) = ack else {
            return;
        };
        match ack.ack().await {
            Ok(()) => {}
            Err(err @ PhotonError::Fenced { .. }) => {
                tracing::warn!(checkpoint = ?self.checkpoint, seq, %err, "group acknowledgement refused: the partition moved to another member, which handles the event again");
            }
            Err(err) => {
                tracing::warn!(checkpoint = ?self.checkpoint, seq, %err, "group acknowledgement failed")
            }
        }
    }

    /// Whether work on the event at `seq` may start: always for a durable handler; for a
    /// group handler only while this member still hands out the event's partition under
    /// the lease it was read with (a delivery whose acknowledgement is gone was already
    /// finished or given back under that lease).
    pub(crate) fn may_start(&self, seq: i64) -> bool {
        if self.registration.options.group_name().is_none() {
            return true;
        }
        lock_acks(&self.group_acks)
            .get(&seq)
            .is_some_and(|ack| ack.current())
    }

    /// The lease a group handler's event at `seq` was read under.
    pub(crate) fn ownership(&self, seq: i64) -> Option<Ownership> {
        // Durable handlers have no lease: no lock on their attempts' path.
        self.registration.options.group_name()?;
        lock_acks(&self.group_acks)
            .get(&seq)
            .and_then(|ack| ack.ownership())
    }

    /// Gives a group handler's event back unstarted: its partition moved to another
    /// member, which handles it.
    async fn give_back_to_group(&self, seq: i64) {
        self.stats.record_given_back();
        let ack = lock_acks(&self.group_acks).remove(&seq);
        if let Some(ack) = ack {
            // Refused (Fenced) once the lease is gone: then it is the new owner's already.
            if let Err(err) = ack.release().await {
                tracing::debug!(checkpoint = ?self.checkpoint, seq, %err, "revoked event not given back; its partition's next owner reads it");
            }
        }
    }

    /// Counts a record handed to the handler and opens the span of its delivery.
    fn delivered(&self, item: &Item) -> Span {
        self.stats.record_delivered();
        let backend = self.store.port().label();
        spans::deliver(
            backend,
            self.registration.options.consumer(),
            item.position(),
        )
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, VecDeque<Queued>>> {
        // Only queue pushes and pops happen under this lock; they do not panic.
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn lock_acks(
    acks: &Mutex<HashMap<i64, Box<dyn Acknowledge>>>,
) -> std::sync::MutexGuard<'_, HashMap<i64, Box<dyn Acknowledge>>> {
    // Only inserts and removals happen under this lock.
    acks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a subscription until stop; then drains in-flight handlers (bounded by the shutdown
/// timeout) and flushes the checkpoint.
///
/// # Errors
/// The final checkpoint flush error.
pub(crate) async fn run(subscription: Arc<Subscription>) -> Result<()> {
    let window = Arc::new(Semaphore::new(subscription.config.max_in_flight));
    let mut workers = JoinSet::new();
    let mut stop = subscription.stop.clone();
    // Kept until the workers are drained, so that a group member acknowledges its
    // in-flight events before it leaves the group.
    let mut stream;
    loop {
        if stop.is_stopped() {
            stream = None;
            break;
        }
        subscription.note_tail_start().await;
        stream = Some(subscription.open());
        if let Some(records) = stream.as_mut() {
            let reading = match subscription.registration.options.batch_policy() {
                Some(policy) => {
                    super::batch::read(&subscription, policy, records, &window, &mut workers).await
                }
                None => read(&subscription, records, &window, &mut workers).await,
            };
            if !reading {
                break;
            }
        }
        // The stream ended (the port closed it): finish what was read, commit, reopen
        // after the checkpoint.
        tracing::warn!(checkpoint = ?subscription.checkpoint, "subscription stream ended; reopening");
        if !wait_idle(&window, subscription.config.max_in_flight, &mut stop).await {
            break;
        }
        while let Some(joined) = workers.try_join_next() {
            log_join_error(joined);
        }
        if let Err(err) = subscription.committer.flush().await {
            tracing::warn!(checkpoint = ?subscription.checkpoint, %err, "checkpoint flush failed");
        }
        tokio::select! {
            () = tokio::time::sleep(subscription.config.retry.initial_backoff) => {}
            () = stop.stopped() => break,
        }
    }
    let abandoned = drain_workers(&mut workers, subscription.config.shutdown_timeout).await;
    if abandoned > 0 {
        tracing::warn!(checkpoint = ?subscription.checkpoint, abandoned, "shutdown timeout: handlers abandoned");
    }
    drop(stream);
    subscription.stats.mark_stopped();
    subscription.committer.flush().await
}

/// Reads the stream into the key queues. Returns `false` on stop, `true` when the stream
/// ended by itself.
async fn read(
    subscription: &Arc<Subscription>,
    stream: &mut RecordStream,
    window: &Arc<Semaphore>,
    workers: &mut JoinSet<()>,
) -> bool {
    let mut stop = subscription.stop.clone();
    loop {
        while let Some(joined) = workers.try_join_next() {
            log_join_error(joined);
        }
        let Some(Ok(permit)) = stop.unless_stopped(window.clone().acquire_owned()).await else {
            return false;
        };
        let Some(item) = stop.unless_stopped(stream.next()).await else {
            return false;
        };
        match item {
            Some(read) => {
                if let Some(item) = subscription.item_of(read) {
                    dispatch(subscription, item, permit, workers);
                }
            }
            None => return true,
        }
    }
}

impl Subscription {
    /// What a read stream item is for the handler; `None` for an error that is not about
    /// one record (logged and counted: the stream goes on).
    pub(super) fn item_of(&self, read: Result<photon_core::Record>) -> Option<Item> {
        match read {
            Ok(record) => Some(match self.store.open_record(record) {
                Ok(event) => Item::Event(event),
                Err(unopened) => Item::Unopened(unopened),
            }),
            Err(err @ PhotonError::Undecodable { .. }) => {
                // Tracked like an event, so that the checkpoint stays before it until its
                // dead letter is stored.
                self.stats.record_stream_error();
                Some(Item::Undecodable(err))
            }
            Err(err) => {
                self.stats.record_stream_error();
                tracing::warn!(checkpoint = ?self.checkpoint, %err, "event could not be delivered to the handler");
                None
            }
        }
    }

    /// Counts a read item in flight (holding its read-ahead permit until it is
    /// acknowledgeable) and opens its delivery span.
    pub(super) fn track(&self, item: Item, window: OwnedSemaphorePermit) -> Queued {
        let span = self.delivered(&item);
        let (topic, _) = item.topic_and_key();
        let lane = self.store.port().checkpoint_lane(topic, item.seq());
        self.progress.received(lane, item.seq(), Some(window));
        self.position.read(lane, item.seq());
        Queued { item, lane, span }
    }
}

/// Waits until every read event finished (all read-ahead permits are back).
async fn wait_idle(window: &Arc<Semaphore>, permits: usize, stop: &mut StopSignal) -> bool {
    let permits = u32::try_from(permits).unwrap_or(u32::MAX);
    tokio::select! {
        acquired = window.acquire_many(permits) => acquired.is_ok(),
        () = stop.stopped() => false,
    }
}

/// Queues an item behind its key; starts a worker for the key when none runs.
fn dispatch(
    subscription: &Arc<Subscription>,
    item: Item,
    window: OwnedSemaphorePermit,
    workers: &mut JoinSet<()>,
) {
    // A transactional subscription runs everything in one queue: each transaction moves
    // the checkpoint to its own event, so every event before it must have committed.
    let key = match subscription.registration.transactional {
        Some(_) => None,
        None => item.topic_and_key().1.map(str::to_owned),
    };
    // The read-ahead permit is held until the event is acknowledgeable (see Progress).
    let queued = subscription.track(item, window);
    let mut queues = subscription.queues();
    if let Some(queue) = queues.get_mut(&key) {
        queue.push_back(queued);
        return;
    }
    queues.insert(key.clone(), VecDeque::from([queued]));
    drop(queues);
    workers.spawn(work_key(subscription.clone(), key));
}

/// Handles one key's events in order until its queue is empty or stop is requested.
async fn work_key(subscription: Arc<Subscription>, key: Option<String>) {
    let mut stop = subscription.stop.clone();
    // Whether the queue was found empty once: the worker then yields before it ends, so
    // that a reader about to queue the key's next event finds it still running instead of
    // starting another one.
    let mut found_empty = false;
    loop {
        let slot = stop
            .unless_stopped(subscription.slots.clone().acquire_owned())
            .await
            .and_then(Result::ok);
        let next = {
            let mut queues = subscription.queues();
            let stopping = slot.is_none() || stop.is_stopped();
            let popped = match queues.get_mut(&key) {
                Some(queue) if !stopping => queue.pop_front(),
                _ => None,
            };
            if popped.is_none() && (stopping || found_empty) {
                // Stopping, or nothing left: unread events stay unacknowledged.
                queues.remove(&key);
                return;
            }
            popped
        };
        let (Some(queued), Some(slot)) = (next, slot) else {
            found_empty = true;
            tokio::task::yield_now().await;
            continue;
        };
        found_empty = false;
        let span = queued.span.clone();
        if !handle(&subscription, &queued, slot, &mut stop)
            .instrument(span)
            .await
        {
            subscription.queues().remove(&key);
            return;
        }
    }
}

/// How one read item ended.
pub(super) enum Finish {
    /// Handled or dead-lettered: acknowledge it.
    Done,
    /// Abandoned by shutdown: it stays unacknowledged.
    Abandoned,
    /// A group handler's partition moved to another member before the item started.
    Revoked,
}

/// Runs one item to its end (handled or dead-lettered) and acknowledges what became
/// contiguous. Returns `false` when it was abandoned by shutdown.
async fn handle(
    subscription: &Subscription,
    queued: &Queued,
    slot: OwnedSemaphorePermit,
    stop: &mut StopSignal,
) -> bool {
    let seq = queued.item.seq();
    let finish = match &queued.item {
        _ if !subscription.may_start(seq) => Finish::Revoked,
        Item::Event(event) => handle_event(subscription, event, slot, stop).await,
        _ => {
            drop(slot);
            dead_letter_unreadable(subscription, queued, stop).await
        }
    };
    settle(subscription, queued.lane, seq, finish).await
}

/// Stores the dead letter of a record that cannot be opened or decoded (retrying cannot
/// open it).
pub(super) async fn dead_letter_unreadable(
    subscription: &Subscription,
    queued: &Queued,
    stop: &mut StopSignal,
) -> Finish {
    match &queued.item {
        Item::Event(_) => Finish::Done,
        Item::Unopened(unopened) => {
            record_error(&queued.span, "opening the record", &unopened.error);
            let options = &subscription.registration.options;
            tracing::warn!(
                handler = options.handler_name(), topic = %unopened.record.topic_name,
                seq = unopened.record.seq, error = %unopened.error,
                "event cannot be opened; storing a dead letter"
            );
            let letter = DeadLetter::unopened(options.durable(), options.handler_name(), unopened);
            dead_letter(subscription, &letter, stop).await
        }
        Item::Undecodable(error) => {
            record_error(&queued.span, "decoding the record", error);
            let options = &subscription.registration.options;
            tracing::warn!(
                handler = options.handler_name(), %error,
                "stored record cannot be decoded; storing a dead letter"
            );
            match DeadLetter::undecodable(options.durable(), options.handler_name(), error) {
                Some(letter) => dead_letter(subscription, &letter, stop).await,
                None => Finish::Done,
            }
        }
    }
}

/// Takes a finished item off the books: gives a revoked one back to its group, and
/// acknowledges what became contiguous (to the group, or the checkpoint). Returns `false`
/// when it was abandoned by shutdown.
pub(super) async fn settle(
    subscription: &Subscription,
    lane: u32,
    seq: i64,
    finish: Finish,
) -> bool {
    let acknowledgeable = match finish {
        Finish::Abandoned => return false,
        Finish::Revoked => {
            subscription.give_back_to_group(seq).await;
            // Off this subscription's books: the window and the idle position move on.
            subscription.progress.finished(lane, seq)
        }
        Finish::Done => {
            subscription.stats.record_acknowledged();
            subscription.progress.finished(lane, seq)
        }
    };
    if let Some(last) = acknowledgeable.last() {
        subscription.position.finished_through(lane, *last);
    }
    if subscription.registration.options.group_name().is_some() {
        if matches!(finish, Finish::Done) {
            subscription.ack_to_group(seq).await;
        }
        return true;
    }
    // A transactional subscription's checkpoint is written only by its handler's (or its
    // dead letter's) transaction: a commit here would wait for that transaction's lock.
    if subscription.registration.transactional.is_some() {
        return true;
    }
    for seq in acknowledgeable {
        if let Err(err) = subscription.committer.ack(seq).await {
            tracing::warn!(checkpoint = ?subscription.checkpoint, %err, "checkpoint commit failed; will retry");
        }
    }
    true
}

/// Runs the handler on one event, dead-lettering it when the handler gives up.
async fn handle_event(
    subscription: &Subscription,
    event: &Event,
    slot: OwnedSemaphorePermit,
    stop: &mut StopSignal,
) -> Finish {
    let registration = &subscription.registration;
    let outcome = run_with_retries(subscription, event, slot, stop).await;
    match outcome {
        Outcome::Handled => {
            subscription.stats.record_handled();
            Finish::Done
        }
        Outcome::Failed { error, attempts } => {
            let options = &registration.options;
            tracing::warn!(
                handler = options.handler_name(), topic = %event.topic_name, seq = event.seq,
                attempts, %error, "handler gave up; storing a dead letter"
            );
            let letter = DeadLetter::new(
                options.durable(),
                options.handler_name(),
                event,
                &error,
                attempts,
            );
            dead_letter(subscription, &letter, stop).await
        }
        Outcome::Requeued => {
            subscription.stats.record_handled();
            Finish::Done
        }
        Outcome::Abandoned => Finish::Abandoned,
        Outcome::Revoked => Finish::Revoked,
    }
}

/// Stores a dead letter; `Abandoned` when shutdown came first (delivered again after a
/// restart), `Revoked` when a group handler's partition moved before it was stored (the
/// next owner handles the event again).
///
/// A letter the port refuses even without its original (an error retrying cannot fix) is
/// logged and the event finished: retrying it would stop this subscription for good.
pub(super) async fn dead_letter(
    subscription: &Subscription,
    letter: &DeadLetter,
    stop: &mut StopSignal,
) -> Finish {
    if !subscription.may_start(letter.original.seq) {
        return Finish::Revoked;
    }
    let transaction = subscription
        .registration
        .transactional
        .as_deref()
        .map(|letters| Transactional {
            letters,
            checkpoint: &subscription.checkpoint,
        });
    let stored = store_dead_letter(
        &subscription.store,
        &subscription.dead_letter_topic,
        letter,
        transaction,
        Some((&subscription.config.retry, stop)),
    )
    .await;
    match stored {
        Stored::Whole | Stored::Reference => {
            subscription.stats.record_dead_letter();
            Finish::Done
        }
        Stored::Abandoned => Finish::Abandoned,
        Stored::Refused(error) => {
            tracing::error!(
                checkpoint = ?subscription.checkpoint, seq = letter.original.seq, %error,
                "dead letter refused for good; the event is passed over"
            );
            Finish::Done
        }
    }
}
