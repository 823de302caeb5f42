//! Batch handlers: a handler called with up to [`BatchPolicy::max_events`] events at once
//! (or what arrived within [`BatchPolicy::max_wait`] after the first), acknowledged
//! together.
//!
//! A batch subscription reads like any other (the same stream, read-ahead window,
//! progress and acknowledgements as `dispatch`), but instead of one worker per key it
//! gathers what it reads into batches and hands them, in read order, to one worker that
//! runs them one after the other. So the events of a key are in seq order inside a batch,
//! and the batches holding a key's events run in order; the retry loop, dead letters and
//! group fencing are the single-event handler's (`retry`, `dispatch`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_core::group::Ownership;
use photon_core::{Event, PhotonError, RecordStream, Result};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::Span;

use super::arguments::sealed::{ArgumentKind, Call};
use super::arguments::{BoxedHandler, HandlerArgument};
use super::dispatch::{
    dead_letter, dead_letter_unreadable, settle, Finish, Item, Queued, Subscription,
};
use super::handler::{HandlerFuture, HandlerOptions, IntoHandlerResult};
use super::retry::{guarded, run_with_retries, Attempts, Outcome};
use super::typed::{TypedEvent, TypedTopic};
use crate::dead_letter::DeadLetter;
use crate::shutdown::StopSignal;

/// The most events a batch may hold: a batch is held in memory and handed over at once.
pub const MAX_BATCH_EVENTS: usize = 100_000;

/// The longest a batch may wait for more events after its first: a longer wait holds the
/// first event unacknowledged (and a group handler's partition) for longer than any
/// batching gains.
pub const MAX_BATCH_WAIT: Duration = Duration::from_secs(3600);

/// How a batch handler's batches are made: up to `max_events` events, or what arrived
/// within `max_wait` after the first event of the batch was read, whichever comes first.
///
/// ```
/// use std::time::Duration;
/// use photon_runtime::executor::BatchPolicy;
///
/// let policy = BatchPolicy::new(100, Duration::from_millis(50));
/// assert_eq!((policy.max_events(), policy.max_wait()), (100, Duration::from_millis(50)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPolicy {
    max_events: usize,
    max_wait: Duration,
}

impl BatchPolicy {
    /// Batches of at most `max_events` events, each handed to the handler at most
    /// `max_wait` after its first event was read.
    ///
    /// # Errors
    /// None here; `ExecutorBuilder::start` refuses a `max_events` of 0, above
    /// [`MAX_BATCH_EVENTS`] or above `ExecutorConfig::max_in_flight` (the read-ahead
    /// window, which a batch waits in), and a `max_wait` of 0 or above
    /// [`MAX_BATCH_WAIT`], with [`PhotonError::Config`] naming the handler, its topic
    /// and the limit.
    pub const fn new(max_events: usize, max_wait: Duration) -> Self {
        Self {
            max_events,
            max_wait,
        }
    }

    /// The most events of one batch.
    pub fn max_events(&self) -> usize {
        self.max_events
    }

    /// How long a batch waits for more events after its first.
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Checks the policy of `handler` on `topic`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the handler, the topic and the limit.
    pub(crate) fn validate(&self, handler: &str, topic: &str, max_in_flight: usize) -> Result<()> {
        let setting = |name: &str| format!("handler {handler} on topic {topic:?}: batch {name}");
        let limit = MAX_BATCH_EVENTS.min(max_in_flight);
        if self.max_events == 0 || self.max_events > limit {
            return Err(PhotonError::config(
                setting("max_events"),
                self.max_events.to_string(),
                format!(
                    "1 to {limit} events (at most {MAX_BATCH_EVENTS}, and at most ExecutorConfig::max_in_flight, {max_in_flight}, the read-ahead a batch fills)"
                ),
            ));
        }
        if self.max_wait.is_zero() || self.max_wait > MAX_BATCH_WAIT {
            return Err(PhotonError::config(
                setting("max_wait"),
                format!("{:?}", self.max_wait),
                format!("a duration above zero and at most {MAX_BATCH_WAIT:?}"),
            ));
        }
        Ok(())
    }
}

mod sealed {
    /// Implemented for the batch item types of this module only.
    pub trait Sealed {}
}

/// What a batch holds: [`Event`]s, or [`TypedEvent<T>`]s of a `#[topic]` type `T`
/// (each payload decoded as `T`, with its event beside it).
///
/// Implemented by Photon for those types only (the trait is sealed).
pub trait BatchItem: sealed::Sealed + Sized + Send + 'static {
    /// The topic of a typed item; `None` for [`Event`].
    const TOPIC: Option<&'static str>;

    /// The item of one event.
    ///
    /// # Errors
    /// [`PhotonError::Codec`] for a payload that does not decode as a typed item.
    #[doc(hidden)]
    fn from_event(event: &Event) -> Result<Self>;

    /// Whether `event` makes an item (its payload decodes), without keeping it.
    ///
    /// # Errors
    /// As [`BatchItem::from_event`].
    #[doc(hidden)]
    fn check(event: &Event) -> Result<()>;
}

impl sealed::Sealed for Event {}

impl BatchItem for Event {
    const TOPIC: Option<&'static str> = None;

    fn from_event(event: &Event) -> Result<Self> {
        Ok(event.clone())
    }

    fn check(_event: &Event) -> Result<()> {
        Ok(())
    }
}

impl<T: TypedTopic> sealed::Sealed for TypedEvent<T> {}

impl<T: TypedTopic> BatchItem for TypedEvent<T> {
    const TOPIC: Option<&'static str> = Some(T::TOPIC);

    fn from_event(event: &Event) -> Result<Self> {
        Ok(TypedEvent {
            value: T::from_event(event)?,
            event: event.clone(),
        })
    }

    fn check(event: &Event) -> Result<()> {
        T::from_event(event).map(drop)
    }
}

/// A function the executor can run as a batch handler: its first argument is the batch,
/// a `Vec<I>` of [`BatchItem`]s (`Vec<Event>` or `Vec<TypedEvent<T>>`), followed by up
/// to three of [`State<T>`](super::State) and `Photon`, in any order; it returns a `Send`
/// future of `()` or `Result<(), E>` ([`IntoHandlerResult`]). `Args` is the tuple of the
/// other arguments' types; it is inferred.
///
/// A batch handler takes no [`Context`](super::Context): a batch has no single position;
/// each item carries its event (topic, key, seq, id, headers).
///
/// Implemented by Photon only (the trait is sealed).
pub trait BatchHandler<I, Args>: Send + Sync + 'static {
    /// The kinds of the arguments, the batch counted as the event argument.
    #[doc(hidden)]
    fn arguments() -> Vec<ArgumentKind>;

    /// Takes the other arguments from `call` and calls the function with `batch`.
    #[doc(hidden)]
    fn call(&self, batch: Vec<I>, call: &Call<'_>) -> HandlerFuture;
}

macro_rules! impl_batch_handler {
    ($($argument:ident $value:ident),*) => {
        impl<F, Fut, R, I, $($argument,)*> BatchHandler<I, ($($argument,)*)> for F
        where
            F: Fn(Vec<I> $(, $argument)*) -> Fut + Send + Sync + 'static,
            Fut: std::future::Future<Output = R> + Send + 'static,
            R: IntoHandlerResult,
            I: BatchItem,
            $($argument: HandlerArgument,)*
        {
            fn arguments() -> Vec<ArgumentKind> {
                vec![ArgumentKind::Event { topic: I::TOPIC } $(, $argument::kind())*]
            }

            #[allow(unused_variables)]
            fn call(&self, batch: Vec<I>, call: &Call<'_>) -> HandlerFuture {
                $(
                    let $value = match $argument::extract(call) {
                        Ok(value) => value,
                        Err(error) => return Box::pin(std::future::ready(Err(error))),
                    };
                )*
                let future = self(batch $(, $value)*);
                Box::pin(async move { future.await.into_handler_result() })
            }
        }
    };
}

impl_batch_handler!();
impl_batch_handler!(A a);
impl_batch_handler!(A a, B b);
impl_batch_handler!(A a, B b, C c);

/// Decodes a batch's events into items and calls the handler (one attempt).
type CallFn = dyn Fn(&[Event], &Call<'_>) -> HandlerFuture + Send + Sync;

/// Whether an event's payload decodes as an item.
type CheckFn = dyn Fn(&Event) -> Result<()> + Send + Sync;

/// A batch handler with its item and argument types erased.
#[derive(Clone)]
pub(crate) struct BatchCall {
    call: Arc<CallFn>,
    check: Arc<CheckFn>,
}

impl BoxedHandler {
    /// Erases a batch handler's item and argument types. `#[subscribe(batch_max = ..,
    /// batch_wait = "..")]` makes its handlers with it; on the builder, use
    /// `ExecutorBuilder::batch_handler`.
    ///
    /// ```
    /// use photon_runtime::executor::BoxedHandler;
    /// use photon_runtime::Event;
    /// let handler = BoxedHandler::batch(|events: Vec<Event>| async move {
    ///     println!("{} events", events.len());
    /// });
    /// # let _ = handler;
    /// ```
    pub fn batch<H, I, Args>(handler: H) -> Self
    where
        H: BatchHandler<I, Args>,
        I: BatchItem,
    {
        let call = move |events: &[Event], call: &Call<'_>| -> HandlerFuture {
            let items: Result<Vec<I>> = events.iter().map(I::from_event).collect();
            match items {
                Ok(items) => handler.call(items, call),
                Err(error) => Box::pin(std::future::ready(Err(error))),
            }
        };
        Self::of_batch(
            BatchCall {
                call: Arc::new(call),
                check: Arc::new(I::check),
            },
            H::arguments(),
        )
    }
}

/// Reads the stream into batches, handed in read order to one worker that runs them one
/// after the other. Returns `false` on stop, `true` when the stream ended by itself.
pub(super) async fn read(
    subscription: &Arc<Subscription>,
    policy: BatchPolicy,
    stream: &mut RecordStream,
    window: &Arc<Semaphore>,
    workers: &mut JoinSet<()>,
) -> bool {
    // One batch waits while one runs: reading goes on meanwhile, bounded by the window.
    let (batches, queue) = mpsc::channel(1);
    workers.spawn(work_batches(subscription.clone(), queue));
    let mut stop = subscription.stop.clone();
    loop {
        let mut batch = Vec::with_capacity(policy.max_events.min(1024));
        let mut deadline = None;
        let ended = loop {
            match next(subscription, stream, window, &mut stop, deadline).await {
                Next::Item(queued) => {
                    batch.push(*queued);
                    // The wait runs from the batch's first event.
                    deadline.get_or_insert_with(|| Instant::now() + policy.max_wait);
                    if batch.len() >= policy.max_events {
                        break false;
                    }
                }
                Next::Skipped => {}
                Next::Elapsed => break false,
                Next::Ended => break true,
                Next::Stopped => return false,
            }
        };
        if !batch.is_empty() {
            let sent = tokio::select! {
                biased;
                () = stop.stopped() => return false,
                sent = batches.send(batch) => sent.is_ok(),
            };
            if !sent {
                return false;
            }
        }
        if ended {
            return true;
        }
    }
}

/// What reading the next record gave.
enum Next {
    /// Boxed: a record in flight is much larger than the other outcomes.
    Item(Box<Queued>),
    /// A stream error about no record in particular: logged, the stream goes on.
    Skipped,
    /// The batch's wait is over.
    Elapsed,
    Ended,
    Stopped,
}

/// Reads the next record under a read-ahead permit, until `deadline` if there is one.
async fn next(
    subscription: &Subscription,
    stream: &mut RecordStream,
    window: &Arc<Semaphore>,
    stop: &mut StopSignal,
    deadline: Option<Instant>,
) -> Next {
    let elapsed = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(elapsed);
    let permit = tokio::select! {
        biased;
        () = stop.stopped() => return Next::Stopped,
        acquired = window.clone().acquire_owned() => match acquired {
            Ok(permit) => permit,
            Err(_) => return Next::Stopped,
        },
        () = &mut elapsed => return Next::Elapsed,
    };
    // `next` is cancel safe: a record not yet returned stays in the stream.
    let read = tokio::select! {
        biased;
        () = stop.stopped() => return Next::Stopped,
        read = stream.next() => read,
        () = &mut elapsed => return Next::Elapsed,
    };
    match read {
        Some(read) => match subscription.item_of(read) {
            Some(item) => Next::Item(Box::new(subscription.track(item, permit))),
            None => Next::Skipped,
        },
        None => Next::Ended,
    }
}

/// Runs the batches one after the other until the reader is done or stop is requested.
async fn work_batches(subscription: Arc<Subscription>, mut queue: mpsc::Receiver<Vec<Queued>>) {
    let mut stop = subscription.stop.clone();
    let Some(call) = subscription.registration.handler.batch_call().cloned() else {
        return;
    };
    loop {
        let batch = tokio::select! {
            biased;
            () = stop.stopped() => return,
            batch = queue.recv() => batch,
        };
        // Stopping, or nothing left: unstarted batches stay unacknowledged.
        let Some(batch) = batch else {
            return;
        };
        if stop.is_stopped() || !handle(&subscription, &call, batch, &mut stop).await {
            return;
        }
    }
}

/// Runs one batch to its end (handled, or each event dead-lettered) and acknowledges its
/// events. Returns `false` when it was abandoned by shutdown.
async fn handle(
    subscription: &Subscription,
    call: &BatchCall,
    batch: Vec<Queued>,
    stop: &mut StopSignal,
) -> bool {
    // What cannot be handled is dead-lettered first, as a single handler would, so that
    // the handler gets only what it can decode.
    let mut runnable = Vec::with_capacity(batch.len());
    for queued in batch {
        let seq = queued.item.seq();
        let unusable = match &queued.item {
            _ if !subscription.may_start(seq) => Some(Finish::Revoked),
            Item::Event(event) => match (call.check)(event) {
                Ok(()) => None,
                Err(error) => Some(undecodable(subscription, event, &error, stop).await),
            },
            _ => Some(dead_letter_unreadable(subscription, &queued, stop).await),
        };
        match unusable {
            None => runnable.push(queued),
            Some(finish) => {
                if !settle(subscription, queued.lane, seq, finish).await {
                    return false;
                }
            }
        }
    }
    while !runnable.is_empty() {
        let slot = tokio::select! {
            biased;
            () = stop.stopped() => return false,
            acquired = subscription.slots.clone().acquire_owned() => match acquired {
                Ok(slot) => slot,
                Err(_) => return false,
            },
        };
        let attempt = BatchAttempt {
            events: runnable
                .iter()
                .filter_map(|queued| event_of(&queued.item))
                .collect(),
            call,
        };
        match run_with_retries(subscription, &attempt, slot, stop).await {
            // A batch is never requeued (the executor refuses the option on batch handlers).
            Outcome::Handled | Outcome::Requeued => {
                for queued in runnable {
                    subscription.stats.record_handled();
                    settle(subscription, queued.lane, queued.item.seq(), Finish::Done).await;
                }
                return true;
            }
            Outcome::Failed { error, attempts } => {
                return dead_letter_batch(subscription, runnable, &error, attempts, stop).await;
            }
            Outcome::Abandoned => return false,
            Outcome::Revoked => {
                // Some partitions moved: theirs go back to the group, the rest is tried
                // again as a batch.
                let mut kept = Vec::with_capacity(runnable.len());
                for queued in runnable {
                    let seq = queued.item.seq();
                    if subscription.may_start(seq) {
                        kept.push(queued);
                    } else {
                        settle(subscription, queued.lane, seq, Finish::Revoked).await;
                    }
                }
                runnable = kept;
            }
        }
    }
    true
}

fn event_of(item: &Item) -> Option<Event> {
    match item {
        Item::Event(event) => Some(event.clone()),
        _ => None,
    }
}

/// Dead-letters an event whose payload does not decode as the batch's item type.
async fn undecodable(
    subscription: &Subscription,
    event: &Event,
    error: &PhotonError,
    stop: &mut StopSignal,
) -> Finish {
    let options = &subscription.registration.options;
    tracing::warn!(
        handler = options.handler_name(), topic = %event.topic_name, seq = event.seq, %error,
        "payload does not decode for the batch handler; storing a dead letter"
    );
    let letter = DeadLetter::new(options.durable(), options.handler_name(), event, error, 1);
    dead_letter(subscription, &letter, stop).await
}

/// Dead-letters each event of a batch the handler gave up on, in order, each with the
/// batch's last error.
async fn dead_letter_batch(
    subscription: &Subscription,
    batch: Vec<Queued>,
    error: &PhotonError,
    attempts: u32,
    stop: &mut StopSignal,
) -> bool {
    let options = &subscription.registration.options;
    tracing::warn!(
        handler = options.handler_name(), topic = %subscription.checkpoint.topic,
        events = batch.len(), attempts, %error,
        "batch handler gave up; storing a dead letter per event"
    );
    for queued in batch {
        let Item::Event(event) = &queued.item else {
            continue;
        };
        let letter = DeadLetter::new(
            options.durable(),
            options.handler_name(),
            event,
            error,
            attempts,
        );
        let finish = dead_letter(subscription, &letter, stop).await;
        if !settle(subscription, queued.lane, event.seq, finish).await {
            return false;
        }
    }
    true
}

/// One batch for the retry loop.
struct BatchAttempt<'a> {
    /// In read order: a key's events in seq order.
    events: Vec<Event>,
    call: &'a BatchCall,
}

impl Attempts for BatchAttempt<'_> {
    fn may_start(&self, subscription: &Subscription) -> bool {
        self.events
            .iter()
            .all(|event| subscription.may_start(event.seq))
    }

    fn ownership(&self, subscription: &Subscription) -> Option<Ownership> {
        // A lease to fence writes with exists only when the whole batch is under one.
        let mut leases = self
            .events
            .iter()
            .map(|event| subscription.ownership(event.seq));
        let first = leases.next()??;
        leases
            .all(|lease| lease.as_ref() == Some(&first))
            .then_some(first)
    }

    fn span(&self, options: &HandlerOptions, attempt: u32) -> Span {
        let first = &self.events[0];
        let span = tracing::info_span!(
            "photon.handle",
            handler = options.handler_name(),
            topic = first.topic_name.as_str(),
            key = Empty,
            seq = first.seq,
            event_id = first.event_id.as_str(),
            batch_size = self.events.len(),
            subscription = options.consumer().subscription(),
            group = options.consumer().group(),
            attempt,
            error = Empty,
        );
        crate::spans::continue_trace(&span, &first.headers);
        span
    }

    fn attempt<'a>(
        &'a self,
        subscription: &'a Subscription,
        attempt: u32,
        partition: Option<u32>,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let call = Call {
            event: &self.events[0],
            attempt,
            partition,
            resources: &subscription.resources,
        };
        guarded(move || (self.call.call)(&self.events, &call))
    }

    fn describe(&self) -> String {
        let (first, last) = (&self.events[0], &self.events[self.events.len() - 1]);
        format!(
            "a batch of {} events of {} (seqs {} to {})",
            self.events.len(),
            first.topic_name,
            first.seq,
            last.seq
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_refused_outside_its_limits_naming_the_handler() {
        let ok = BatchPolicy::new(100, Duration::from_millis(50));
        ok.validate("bill", "orders", 256).unwrap();
        let empty = BatchPolicy::new(0, Duration::from_millis(50))
            .validate("bill", "orders", 256)
            .unwrap_err();
        assert_eq!(
            empty.to_string(),
            "invalid configuration handler bill on topic \"orders\": batch max_events=\"0\": expected 1 to 256 events (at most 100000, and at most ExecutorConfig::max_in_flight, 256, the read-ahead a batch fills)"
        );
        let wide = BatchPolicy::new(300, Duration::from_millis(50)).validate("bill", "orders", 256);
        assert!(matches!(wide, Err(PhotonError::Config { .. })), "{wide:?}");
        let instant = BatchPolicy::new(10, Duration::ZERO)
            .validate("bill", "orders", 256)
            .unwrap_err();
        assert!(instant.to_string().contains("batch max_wait"), "{instant}");
        let forever =
            BatchPolicy::new(10, Duration::from_secs(86_400)).validate("bill", "orders", 256);
        assert!(
            matches!(forever, Err(PhotonError::Config { .. })),
            "{forever:?}"
        );
    }

    #[test]
    fn a_batch_handler_describes_its_arguments() {
        let handler = BoxedHandler::batch(|_: Vec<Event>, _: crate::Photon| async {});
        assert_eq!(handler.input_topic(), None);
        assert!(handler.batch_call().is_some());
    }
}
