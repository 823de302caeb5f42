//! The handler executor: runs handlers on durable subscriptions, with per-key order,
//! bounded parallelism, retries, dead letters and a graceful shutdown.
//!
//! # Delivery and ordering
//! - Each handler is a durable subscription (name, topic, optional key). It resumes after
//!   its committed checkpoint, which is loaded under the same name, topic and key it is
//!   committed to.
//! - Events of one key (`topic_key`; events without key form one partition too) run in
//!   publish order, one at a time. Different keys run in parallel, up to
//!   [`ExecutorConfig::parallelism`] per subscription.
//! - A checkpoint only moves over a contiguous run of finished events (handled or
//!   dead-lettered): an event still running or retrying holds it back, whatever finished
//!   after it.
//!
//! # Group handlers
//! A handler with [`HandlerOptions::group`] (`#[subscribe(group = "...")]`) is a member of
//! that consumer group instead of a durable subscription of its own: the members, in this
//! and other processes, share the topic's events (each key to one member at a time). Keys
//! still run in order, retries and dead letters are the same, and each finished event is
//! acknowledged to the group, which keeps the position per partition (see
//! [`photon_core::group`]).
//!
//! # Failures
//! A handler error that [`PhotonError::is_retryable`] is retried with exponential backoff
//! and jitter ([`RetryPolicy`]); the key waits, other keys go on. After the last attempt, at
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
//! Delivery is at-least-once. After a crash, the events handled again are at most:
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

mod admin;
mod builder;
mod config;
pub(crate) mod dead_letter;
mod dispatch;
mod handler;
mod retry;
pub(crate) mod shutdown;
mod stats;
mod typed;

use std::sync::{Arc, Mutex};

use photon_core::{PhotonError, Result};
use tokio::task::JoinHandle;

pub use admin::{AdminSnapshot, DeadLetterCount, HandlerSnapshot, TopicSnapshot};
pub use builder::ExecutorBuilder;
pub use config::{
    ExecutorConfig, ExecutorConfigBuilder, RetryPolicy, DEAD_LETTER_SUFFIX_ENV,
    INITIAL_BACKOFF_ENV, JITTER_ENV, MAX_ATTEMPTS_ENV, MAX_BACKOFF_ENV, MAX_IN_FLIGHT_ENV,
    PARALLELISM_ENV, SHUTDOWN_TIMEOUT_ENV, START_POLICY_ENV,
};
#[allow(deprecated)]
pub use config::{INITIAL_BACKOFF_MS_ENV, MAX_BACKOFF_MS_ENV, SHUTDOWN_TIMEOUT_MS_ENV};
pub use dead_letter::{DeadEvent, DeadLetter, StoredBody, UndecodableRecord};
pub use handler::{
    HandlerDescriptor, HandlerFn, HandlerFuture, HandlerInput, HandlerOptions, IntoHandlerResult,
};
pub use typed::{SubscribeOptions, TypedEvent, TypedStream, TypedTopic};

use photon_core::Progress;
use shutdown::StopSwitch;
use stats::SubscriptionStats;

/// A running executor. Clones share it.
///
/// Dropping every `Executor` handle and every clone of the `Photon` it runs on stops its
/// tasks; [`Executor::shutdown`] stops it gracefully and waits.
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
    switch: StopSwitch,
    running: Vec<RunningHandler>,
    tasks: Mutex<Vec<JoinHandle<Result<()>>>>,
}

/// One started handler, as the admin snapshot sees it.
pub(crate) struct RunningHandler {
    pub(crate) options: HandlerOptions,
    pub(crate) stats: Arc<SubscriptionStats>,
    pub(crate) progress: Arc<Progress>,
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
