//! [`PublishMetrics`]: the publish metric keys of a store, per topic.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use metrics::{Key, Label};

use super::{increment, BACKEND, PUBLISHED, PUBLISH_ERRORS, TOPIC};

/// Topics whose publish keys are kept per store; the keys of further topics are built on
/// each publish, so that a program publishing to ever new topics does not grow the cache.
const MAX_CACHED_TOPICS: usize = 4096;

/// The publish keys of one topic.
#[derive(Debug)]
struct PublishKeys {
    published: Key,
    errors: Key,
}

impl PublishKeys {
    fn new(backend: &'static str, topic: &str) -> Self {
        let labels = vec![
            Label::new(BACKEND, backend),
            Label::new(TOPIC, topic.to_owned()),
        ];
        Self {
            published: Key::from_parts(PUBLISHED, labels.clone()),
            errors: Key::from_parts(PUBLISH_ERRORS, labels),
        }
    }
}

/// The publish keys of a store, per topic, built on a topic's first publish.
#[derive(Debug)]
pub(crate) struct PublishMetrics {
    /// Tells this instance's entries in the per-thread cache from another's.
    id: u64,
    backend: &'static str,
    topics: RwLock<HashMap<String, Arc<PublishKeys>>>,
}

/// The keys a thread used last: its publishes usually go to one topic in a row, and this
/// finds their keys without the shared lock (whose cache line every publishing thread
/// would otherwise write), with or without a recorder installed.
struct LastUsed {
    metrics: u64,
    topic: String,
    keys: Arc<PublishKeys>,
}

thread_local! {
    static LAST_USED: RefCell<Option<LastUsed>> = const { RefCell::new(None) };
}

impl PublishMetrics {
    pub(crate) fn new(backend: &'static str) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            backend,
            topics: RwLock::default(),
        }
    }

    /// A publish on `topic` was stored.
    pub(crate) fn published(&self, topic: &str) {
        self.with_keys(topic, |keys| increment(&keys.published));
    }

    /// A publish on `topic` returned an error.
    pub(crate) fn publish_error(&self, topic: &str) {
        self.with_keys(topic, |keys| increment(&keys.errors));
    }

    fn with_keys(&self, topic: &str, record: impl FnOnce(&PublishKeys)) {
        let mut record = Some(record);
        LAST_USED.with(|last| {
            let last = last.borrow();
            if let Some(last) = last
                .as_ref()
                .filter(|last| last.metrics == self.id && last.topic == topic)
            {
                // No reference count is touched here: that would be a shared write again.
                if let Some(record) = record.take() {
                    record(&last.keys);
                }
            }
        });
        let Some(record) = record else {
            return;
        };
        let keys = self.shared_keys(topic);
        record(&keys);
        LAST_USED.with(|last| {
            *last.borrow_mut() = Some(LastUsed {
                metrics: self.id,
                topic: topic.to_owned(),
                keys,
            });
        });
    }

    fn shared_keys(&self, topic: &str) -> Arc<PublishKeys> {
        // Only map reads and inserts happen under this lock: a panic cannot leave it torn.
        if let Some(keys) = self
            .topics
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(topic)
        {
            return Arc::clone(keys);
        }
        let keys = Arc::new(PublishKeys::new(self.backend, topic));
        let mut topics = self
            .topics
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if topics.len() < MAX_CACHED_TOPICS {
            topics
                .entry(topic.to_owned())
                .or_insert_with(|| Arc::clone(&keys));
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{recorded, row};
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn publish_keys_are_cached_per_topic_and_count_exactly() {
        let recorder = DebuggingRecorder::new();
        let publish = PublishMetrics::new("mem");
        metrics::with_local_recorder(&recorder, || {
            publish.published("orders");
            publish.published("orders");
            publish.published("audit");
            publish.publish_error("orders");
        });
        assert_eq!(publish.topics.read().unwrap().len(), 2);
        let orders = [("backend", "mem"), ("topic", "orders")];
        assert_eq!(
            recorded(&recorder),
            vec![
                row(PUBLISH_ERRORS, &orders, DebugValue::Counter(1)),
                row(
                    PUBLISHED,
                    &[("backend", "mem"), ("topic", "audit")],
                    DebugValue::Counter(1)
                ),
                row(PUBLISHED, &orders, DebugValue::Counter(2)),
            ]
        );
    }

    #[test]
    fn the_per_thread_cache_keeps_two_stores_of_one_topic_apart() {
        let recorder = DebuggingRecorder::new();
        let (mem, sqlite) = (PublishMetrics::new("mem"), PublishMetrics::new("sqlite"));
        metrics::with_local_recorder(&recorder, || {
            mem.published("orders");
            sqlite.published("orders");
            sqlite.published("orders");
            mem.published("orders");
            mem.published("orders");
            sqlite.publish_error("orders");
        });
        assert_eq!(
            recorded(&recorder),
            vec![
                row(
                    PUBLISH_ERRORS,
                    &[("backend", "sqlite"), ("topic", "orders")],
                    DebugValue::Counter(1)
                ),
                row(
                    PUBLISHED,
                    &[("backend", "mem"), ("topic", "orders")],
                    DebugValue::Counter(3)
                ),
                row(
                    PUBLISHED,
                    &[("backend", "sqlite"), ("topic", "orders")],
                    DebugValue::Counter(2)
                ),
            ]
        );
    }
}
