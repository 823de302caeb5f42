//! [`PublishMetrics`]: the publish metric keys of a store, per topic.

use std::collections::HashMap;
use std::sync::RwLock;

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
    backend: &'static str,
    topics: RwLock<HashMap<String, PublishKeys>>,
}

impl PublishMetrics {
    pub(crate) fn new(backend: &'static str) -> Self {
        Self {
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
        // Only map reads and inserts happen under this lock: a panic cannot leave it torn.
        if let Some(keys) = self
            .topics
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(topic)
        {
            return record(keys);
        }
        let keys = PublishKeys::new(self.backend, topic);
        record(&keys);
        let mut topics = self
            .topics
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if topics.len() < MAX_CACHED_TOPICS {
            topics.entry(topic.to_owned()).or_insert(keys);
        }
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
}
