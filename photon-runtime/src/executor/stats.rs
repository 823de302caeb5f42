//! Counters of one running subscription, read by the admin snapshot.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What one subscription of the executor did so far.
#[derive(Debug, Default)]
pub(crate) struct SubscriptionStats {
    handled: AtomicU64,
    retries: AtomicU64,
    dead_lettered: AtomicU64,
    stream_errors: AtomicU64,
    stopped: AtomicBool,
}

impl SubscriptionStats {
    pub(crate) fn record_handled(&self) {
        self.handled.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_dead_letter(&self) {
        self.dead_lettered.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_stream_error(&self) {
        self.stream_errors.fetch_add(1, Ordering::Relaxed);
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
