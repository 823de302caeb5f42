//! The handler executor: runs handlers on durable subscriptions, with per-key order,
//! bounded parallelism, retries, dead letters and a graceful shutdown.
//!
//! # Delivery and ordering
//! - Each handler is a durable subscription (name, topic, optional key). It resumes after
//!   its committed checkpoint, which is loaded under the same name, topic and key it is
//!   committed to.
//! - Events of one key (`topic_key`; events without key form one partition too) run in
//!   publish order, one at a time. Different keys run in parallel, up to
//!   [`ExecutorConfig::parallelism`] per subscription, or the handler's own
//!   [`HandlerOptions::concurrency`], which replaces it.
//! - A checkpoint only moves over a contiguous run of finished events (handled or
//!   dead-lettered): an event still running or retrying holds it back, whatever finished
//!   after it.
//!
//! # Handler arguments
//! Besides its event (an [`Event`](photon_core::Event) or a `#[topic]` type), a handler
//! may take, in any order, [`State<T>`] (a value registered with
//! [`ExecutorBuilder::state`] or `PhotonBuilder::state`, cloned per call), `Photon` (the
//! instance the executor runs on, to publish) and [`Context`] (topic, key, seq, event id,
//! headers, attempt number, group partition): see [`Handler`]. [`ExecutorBuilder::start`]
//! refuses a handler without exactly one event argument, or taking a `State<T>` that was
//! never registered. Transactional handlers take their transaction and event only.
//!
//! # Group handlers
//! A handler with [`HandlerOptions::group`] (`#[subscribe(group = "...")]`) is a member of
//! that consumer group instead of a durable subscription of its own: the members, in this
//! and other processes, share the topic's events (each key to one member at a time). Keys
//! still run in order, retries and dead letters are the same, and each finished event is
//! acknowledged to the group, which keeps the position per partition (see
//! [`photon_core::group`]).
//!
//! A group handler starts an event, and each retry of it, only while its member still
//! hands out the event's partition under the lease the event was read with
//! ([`photon_core::Acknowledge::current`]). When the partition moves (another member
//! joined, the lease lapsed, the process was frozen past the lease), the events of that
//! partition waiting in its keys' queues are given back unstarted (counted in
//! [`HandlerSnapshot::given_back`]) and the attempts already running finish: the member
//! hands the partition over only once they are acknowledged, waiting at most the lease for
//! them. So a handler never runs at the same time as another member's handler of the same
//! key, except an attempt that outlives that wait (a handler slower than the lease, or a
//! process frozen mid-attempt): its acknowledgement is refused with
//! [`PhotonError::Fenced`]. An attempt longer than [`HandlerOptions::max_handler_time`]
//! (300 s by default) is cancelled and retried, so a hung handler does not hold its
//! partition for ever.
//!
//! # Batch handlers
//! A handler registered with [`ExecutorBuilder::batch_handler`] (`#[subscribe(batch_max =
//! .., batch_wait = "..")]`) is called with a `Vec` of up to [`BatchPolicy::max_events`]
//! events of every key, or what arrived within [`BatchPolicy::max_wait`] after the batch's
//! first. A key's events are in seq order inside a batch and batches run one at a time,
//! in order; a batch is acknowledged together once the handler returns `Ok`, retried
//! whole, and each of its events dead-lettered after the last attempt.
//!
//! # Transactional handlers
//! A handler registered with [`ExecutorBuilder::transactional_handler`] on a port that
//! implements [`photon_core::TransactionalPort`] (SQLite, PostgreSQL) writes through the
//! port's transaction, and the checkpoint advance commits in that same transaction; so
//! does a dead letter with the advance past its event. Its effects in that database are
//! exactly-once: no duplicates after a crash, a retry (a failed attempt rolls back) or a
//! second consumer of the subscription; effects outside the database stay at-least-once.
//! Its events run one at a time in seq order, whatever their keys. Its checkpoint is
//! written by those transactions only; what it publishes through its transaction is
//! exactly-once with the checkpoint, what it publishes with `Photon::publish` is an
//! independent append kept after a rollback (see
//! [`ExecutorBuilder::transactional_handler`]).
//!
//! # Failures
//! A handler error that [`PhotonError::is_retryable`] is retried with exponential backoff
//! and jitter ([`RetryPolicy`], or the handler's own: [`HandlerOptions::retry`]); the key
//! waits, other keys go on. Middleware registered with
//! [`ExecutorBuilder::handler_layered`] (`tower` layers) wraps each attempt, inside the
//! retry loop and inside [`HandlerOptions::max_handler_time`]. After the last attempt, at
//! once for other errors, and for panics, the event is stored as a [`DeadLetter`] on
//! `<topic>.dlq` (see [`ExecutorConfig::dead_letter_suffix`]) and the checkpoint moves on.
//! `Photon::dead_letters` lists them and `Photon::replay_dead_letter` re-publishes one.
//! A stored record that cannot be opened or decoded goes there at once (with its sealed
//! body or its stored bytes), in its key's order; the checkpoint never passes it before
//! its dead letter is stored.
//!
//! A dead letter keeps the original payload as it was, so an event that passed the
//! publish limits always has a storable letter. A letter the port still refuses for good
//! is stored without the original actor and payload ([`DeadEvent::omitted`] says why);
//! storage errors that retrying may fix are retried with the handler's backoff until
//! shutdown, other errors are never retried.
//!
//! # Duplicates after a crash
//! Delivery is at-least-once (a transactional handler's writes excepted, see above). After a crash, the events handled again are at most:
//! - the events whose acknowledgement was not yet committed: at most
//!   [`FlushPolicy::max_pending`] (fewer when [`FlushPolicy::interval`] elapsed first), plus
//! - the events read but not yet acknowledgeable: at most [`ExecutorConfig::max_in_flight`]
//!   (running handlers, and finished events waiting behind an unfinished one).
//!
//! So the bound is `max_pending + max_in_flight` events per subscription. A graceful
//! [`Executor::shutdown`] commits every acknowledgement; then only the finished events
//! behind an unfinished one (at most `max_in_flight`) are delivered again. A dead letter
//! whose store succeeded just before a crash may be stored twice.
//!
//! # Lifetime
//! The executor stops on [`Executor::shutdown`] or `Photon::shutdown`, and when the
//! [`Executor`] and every clone of its `Photon` are dropped. A handler that captures a
//! `Photon` clone keeps it alive: stop such an executor with a shutdown call.
//!
//! [`PhotonError::is_retryable`]: photon_core::PhotonError::is_retryable
//! [`FlushPolicy::max_pending`]: photon_core::FlushPolicy::max_pending
//! [`FlushPolicy::interval`]: photon_core::FlushPolicy::interval

pub(crate) mod arguments;
mod batch;
mod builder;
pub(crate) mod config;
mod dispatch;
mod fencing;
mod handler;
mod idle;
mod requeue;
pub(crate) mod retry;
mod service;
mod stats;
pub(crate) mod transactional;
mod typed;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use photon_core::{PhotonError, Result, StartPolicy, StoragePort};
use tokio::task::JoinHandle;

pub use crate::admin::{AdminSnapshot, DeadLetterCount, HandlerSnapshot, TopicSnapshot};
pub use crate::dead_letter::{DeadEvent, DeadLetter, StoredBody, UndecodableRecord};
pub use arguments::{BoxedHandler, Context, Handler, HandlerArgument, State};
pub use batch::{BatchHandler, BatchItem, BatchPolicy, MAX_BATCH_EVENTS, MAX_BATCH_WAIT};
pub use builder::ExecutorBuilder;
pub use config::{
    ExecutorConfig, ExecutorConfigBuilder, RetryPolicy, RetryPolicyBuilder, DEAD_LETTER_SUFFIX_ENV,
    INITIAL_BACKOFF_ENV, JITTER_ENV, MAX_ATTEMPTS_ENV, MAX_BACKOFF_ENV, MAX_IN_FLIGHT_ENV,
    PARALLELISM_ENV, SHUTDOWN_TIMEOUT_ENV, START_POLICY_ENV,
};
#[allow(deprecated)]
pub use config::{INITIAL_BACKOFF_MS_ENV, MAX_BACKOFF_MS_ENV, SHUTDOWN_TIMEOUT_MS_ENV};
pub use fencing::current_ownership;
pub use handler::{
    DeclaredPolicy, HandlerDescriptor, HandlerFn, HandlerFuture, HandlerInput, HandlerOptions,
    IntoHandlerResult, DEFAULT_MAX_HANDLER_TIME,
};
pub use requeue::{Retry, ATTEMPTS_HEADER, REQUEUED_FROM_HEADER};
pub use service::{HandlerRequest, HandlerService};
pub use transactional::{BindTransactional, TransactionalBinding};
pub use typed::{SubscribeOptions, TypedEvent, TypedStream, TypedTopic};

use crate::shutdown::StopSwitch;
use idle::ReadPosition;
use photon_core::Progress;
use stats::SubscriptionStats;

/// How long [`Executor::wait_idle`] waits before it fails with [`PhotonError::Timeout`].
pub const WAIT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running executor. Clones share it.
///
/// Dropping every `Executor` handle and every clone of the `Photon` it runs on stops its
/// tasks; [`Executor::shutdown`] stops it gracefully and waits.
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::{Event, PhotonError};
/// let photon = photon_runtime::Photon::builder().build()?;
/// let executor = photon
///     .executor()
///     .handler("billing", "orders", |_event: Event| async { Ok::<(), PhotonError>(()) })
///     .handler("audit", "orders", |_event: Event| async {})
///     .start()?;
/// assert_eq!(executor.handlers().len(), 2);
/// photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
/// executor.wait_idle().await?; // both handlers finished seq 1
/// executor.shutdown().await?; // drains in-flight handlers, commits checkpoints
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Executor {
    shared: Arc<ExecutorShared>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let handlers: Vec<_> = self.shared.running.iter().map(|r| &r.options).collect();
        f.debug_struct("Executor")
            .field("handlers", &handlers)
            .finish_non_exhaustive()
    }
}

/// What a `Photon` and the executor handles share; dropping the last one stops the tasks.
pub(crate) struct ExecutorShared {
    port: Arc<dyn StoragePort>,
    start_policy: StartPolicy,
    switch: StopSwitch,
    running: Vec<RunningHandler>,
    tasks: Mutex<Vec<JoinHandle<Result<()>>>>,
}

/// One started handler, as the admin snapshot sees it.
pub(crate) struct RunningHandler {
    pub(crate) options: HandlerOptions,
    pub(crate) stats: Arc<SubscriptionStats>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) position: Arc<ReadPosition>,
}

impl Executor {
    /// The handlers this executor runs.
    pub fn handlers(&self) -> Vec<HandlerOptions> {
        self.shared
            .running
            .iter()
            .map(|r| r.options.clone())
            .collect()
    }

    /// Waits until every handler is idle: it has no event in flight, and it has finished
    /// (handled or dead-lettered) every event stored up to its topic's head at the call.
    /// Waits at most [`WAIT_IDLE_TIMEOUT`] (30 s); [`Executor::wait_idle_for`] chooses.
    ///
    /// - The head is read once, at the call, per handler: the topic's highest seq (the
    ///   key's, for a handler of one key). Events published after the call are not waited
    ///   for, including those that handlers publish while it waits: call it again to wait
    ///   for those too.
    /// - Each stored event up to the head counts, on every shard of the topic, however its
    ///   seqs interleave: the stored records are read (`list`) and each checked.
    /// - A durable handler finished an event when its checkpoint covers it, or when this
    ///   executor handled or dead-lettered it and every event before it of its shard.
    ///   Events stored before a handler without checkpoint opened its stream at the tail
    ///   (`StartPolicy::Tail`) are not its to handle, and do not count.
    /// - A group handler waits for the group: every event up to the head is covered by its
    ///   partition's committed checkpoint, whichever member (in any process) handled it;
    ///   commits are made every `GroupOptions::commit_interval` (100 ms).
    /// - "In flight" means read and not yet acknowledgeable: running, retrying, waiting in
    ///   its key's queue, or finished behind an unfinished event.
    ///
    /// An executor without handlers is idle at once.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use photon_runtime::{Event, Photon, PhotonError};
    /// use serde_json::json;
    ///
    /// let photon = Photon::builder().build()?;
    /// let handled = Arc::new(AtomicUsize::new(0));
    /// let counter = handled.clone();
    /// let executor = photon
    ///     .executor()
    ///     .handler("billing", "orders", move |_event: Event| {
    ///         counter.fetch_add(1, Ordering::SeqCst);
    ///         async { Ok::<(), PhotonError>(()) }
    ///     })
    ///     .start()?;
    /// for n in 0..3 {
    ///     photon.publish("orders", Some("o-1"), json!(null), json!({ "n": n })).await?;
    /// }
    /// executor.wait_idle().await?;
    /// assert_eq!(handled.load(Ordering::SeqCst), 3);
    /// executor.shutdown().await?;
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// - [`PhotonError::Timeout`] after [`WAIT_IDLE_TIMEOUT`], naming a handler that is not
    ///   idle and the first event it has not finished.
    /// - [`PhotonError::Unsupported`] on a port without `head_seq` or `list` (Fluvio).
    /// - [`PhotonError::Closed`] when the executor stops while waiting.
    /// - The port's storage errors while reading heads, checkpoints and records.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn wait_idle(&self) -> Result<()> {
        self.wait_idle_for(WAIT_IDLE_TIMEOUT).await
    }

    /// [`Executor::wait_idle`], waiting at most `timeout`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use photon_runtime::{Event, Photon, PhotonError};
    ///
    /// let photon = Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("stuck", "orders", |_event: Event| std::future::pending::<()>())
    ///     .start()?;
    /// photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
    /// let waited = executor.wait_idle_for(Duration::from_millis(50)).await;
    /// assert!(matches!(waited, Err(PhotonError::Timeout { .. })));
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Executor::wait_idle`], with the timeout after `timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn wait_idle_for(&self, timeout: Duration) -> Result<()> {
        let shared = &self.shared;
        idle::wait(
            &shared.port,
            &shared.running,
            shared.start_policy,
            || shared.switch.is_stopped(),
            timeout,
        )
        .await
    }

    /// The head seq of each handler's topic (of its key, for a key handler), in handler
    /// order.
    #[cfg(feature = "testing")]
    pub(crate) async fn handler_heads(&self) -> Result<Vec<Option<i64>>> {
        let port = &self.shared.port;
        let mut heads = Vec::with_capacity(self.shared.running.len());
        for running in &self.shared.running {
            let key = match running.options.group_name() {
                Some(_) => None,
                None => running.options.topic_key(),
            };
            heads.push(port.head_seq(running.options.topic(), key).await?);
        }
        Ok(heads)
    }

    /// Stops taking new events, lets in-flight handlers finish (up to
    /// [`ExecutorConfig::shutdown_timeout`], then abandons them unacknowledged), and commits
    /// every checkpoint. Calling it again returns at once.
    ///
    /// # Errors
    /// The first checkpoint commit error; the other subscriptions still stop and flush.
    ///
    /// # Cancel safety
    /// Cancelling the wait does not cancel the stop: the tasks still drain and flush.
    pub async fn shutdown(&self) -> Result<()> {
        self.shared.shutdown().await
    }
}

impl ExecutorShared {
    pub(crate) async fn shutdown(&self) -> Result<()> {
        self.switch.stop();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let mut first_error = None;
        for task in tasks {
            let result = task
                .await
                .map_err(|err| PhotonError::Closed(format!("executor subscription task ({err})")))
                .and_then(|flushed| flushed);
            if let Err(err) = result {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    pub(crate) fn running(&self) -> &[RunningHandler] {
        &self.running
    }
}
