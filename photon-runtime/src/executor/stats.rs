//! Counters of one running subscription, read by the admin snapshot and recorded through
//! the metrics facade (see [`photon_core::metrics`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use photon_core::metrics::ConsumerMetrics;

/// What one subscription of the executor did so far.
#[derive(Debug)]
pub(crate) struct SubscriptionStats {
    handled: AtomicU64,
    retries: AtomicU64,
    dead_lettered: AtomicU64,
    stream_errors: AtomicU64,
    given_back: AtomicU64,
    stopped: AtomicBool,
    metrics: ConsumerMetrics,
}

impl SubscriptionStats {
    pub(crate) fn new(metrics: ConsumerMetrics) -> Self {
        Self {
            handled: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            dead_lettered: AtomicU64::new(0),
            stream_errors: AtomicU64::new(0),
            given_back: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            metrics,
        }
    }

    /// The metric keys of this subscription.
    pub(crate) fn metrics(&self) -> &ConsumerMetrics {
        &self.metrics
    }

    pub(crate) fn record_delivered(&self) {
        self.metrics.delivered();
    }

    pub(crate) fn record_attempt(&self, elapsed: Duration) {
        self.metrics.handler_attempt(elapsed);
    }

    pub(crate) fn record_handled(&self) {
        self.handled.fetch_add(1, Ordering::Relaxed);
    }

    /// A read record finished (handled or dead-lettered) and is acknowledged.
    pub(crate) fn record_acknowledged(&self) {
        self.metrics.acknowledged();
    }

    pub(crate) fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        self.metrics.retry();
    }

    pub(crate) fn record_dead_letter(&self) {
        self.dead_lettered.fetch_add(1, Ordering::Relaxed);
        self.metrics.dead_letter();
    }

    pub(crate) fn record_stream_error(&self) {
        self.stream_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A group handler's event whose partition this member lost before the event started:
    /// given back to the group, handled by the partition's next owner.
    pub(crate) fn record_given_back(&self) {
        self.given_back.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn given_back(&self) -> u64 {
        self.given_back.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_stopped(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    pub(crate) fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }

    pub(crate) fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub(crate) fn dead_lettered(&self) -> u64 {
        self.dead_lettered.load(Ordering::Relaxed)
    }

    pub(crate) fn stream_errors(&self) -> u64 {
        self.stream_errors.load(Ordering::Relaxed)
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}
