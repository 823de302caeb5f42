//! [`ConsumerMetrics`]: the metric keys of one consumer, built once.

use std::time::Duration;

use metrics::{Key, Label};

use super::{
    increment, record_histogram, set_gauge, ACKNOWLEDGED, BACKEND, CHECKPOINT_COMMITS,
    CHECKPOINT_COMMIT_ERRORS, DEAD_LETTERS, DELIVERED, GROUP, GROUP_PARTITION_LAG,
    HANDLER_DURATION, PARTITION, RETRIES, SUBSCRIPTION, SUBSCRIPTION_LAG, TOPIC,
};

/// A lag figure as a gauge value: never below 0.
fn lag_value(head: i64, committed: i64) -> f64 {
    // Lags fit an f64 exactly below 2^53 seqs; beyond that a rounded figure is still useful.
    head.saturating_sub(committed).max(0) as f64
}

/// Who consumes: a durable subscription or a consumer group, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer<'a> {
    /// A durable subscription (or an executor handler without group: its durable name).
    Subscription(&'a str),
    /// A consumer group.
    Group(&'a str),
}

impl<'a> Consumer<'a> {
    /// The subscription's name, `None` for a group.
    pub fn subscription(self) -> Option<&'a str> {
        match self {
            Self::Subscription(name) => Some(name),
            Self::Group(_) => None,
        }
    }

    /// The group's name, `None` for a subscription.
    pub fn group(self) -> Option<&'a str> {
        match self {
            Self::Group(name) => Some(name),
            Self::Subscription(_) => None,
        }
    }
}

/// The metric keys of one consumer on one topic, built once so that recording allocates
/// nothing. Used by durable subscriptions, group members, the executor and checkpoint
/// committers; port authors need it only for consumers of their own.
///
/// ```
/// use photon_core::metrics::{Consumer, ConsumerMetrics};
/// let billing = ConsumerMetrics::new("mem", "orders", Consumer::Subscription("billing"));
/// billing.delivered();
/// billing.acknowledged();
/// ```
#[derive(Debug, Clone)]
pub struct ConsumerMetrics {
    delivered: Key,
    acknowledged: Key,
    handler_duration: Key,
    retries: Key,
    dead_letters: Key,
    commits: Key,
    commit_errors: Key,
    lag: Key,
}

impl ConsumerMetrics {
    /// The keys of `consumer` on `topic` of the port labelled `backend`.
    pub fn new(backend: &'static str, topic: &str, consumer: Consumer<'_>) -> Self {
        let (consumer_label, name, lag) = match consumer {
            Consumer::Subscription(name) => (SUBSCRIPTION, name, SUBSCRIPTION_LAG),
            Consumer::Group(name) => (GROUP, name, GROUP_PARTITION_LAG),
        };
        let labels = vec![
            Label::new(BACKEND, backend),
            Label::new(TOPIC, topic.to_owned()),
            Label::new(consumer_label, name.to_owned()),
        ];
        let key = |name: &'static str| Key::from_parts(name, labels.clone());
        Self {
            delivered: key(DELIVERED),
            acknowledged: key(ACKNOWLEDGED),
            handler_duration: key(HANDLER_DURATION),
            retries: key(RETRIES),
            dead_letters: key(DEAD_LETTERS),
            commits: key(CHECKPOINT_COMMITS),
            commit_errors: key(CHECKPOINT_COMMIT_ERRORS),
            lag: key(lag),
        }
    }

    /// A record was handed to the consumer.
    pub fn delivered(&self) {
        increment(&self.delivered);
    }

    /// A delivered record was acknowledged.
    pub fn acknowledged(&self) {
        increment(&self.acknowledged);
    }

    /// A handler attempt took `elapsed`.
    pub fn handler_attempt(&self, elapsed: Duration) {
        record_histogram(&self.handler_duration, elapsed.as_secs_f64());
    }

    /// A retry was scheduled.
    pub fn retry(&self) {
        increment(&self.retries);
    }

    /// A dead letter was stored.
    pub fn dead_letter(&self) {
        increment(&self.dead_letters);
    }

    /// The port accepted a checkpoint write.
    pub fn commit(&self) {
        increment(&self.commits);
    }

    /// A checkpoint write failed or was refused.
    pub fn commit_error(&self) {
        increment(&self.commit_errors);
    }

    /// Sets a subscription's lag: `head` seq minus `committed` seq (never below 0).
    pub fn lag(&self, head: i64, committed: i64) {
        set_gauge(&self.lag, lag_value(head, committed));
    }

    /// Sets a group partition's lag: `head` seq minus the partition's `committed` seq. The
    /// key is built per call: partitions are committed at most once per commit interval.
    pub fn partition_lag(&self, partition: u32, head: i64, committed: i64) {
        let key = self
            .lag
            .with_extra_labels(vec![Label::new(PARTITION, partition.to_string())]);
        set_gauge(&key, lag_value(head, committed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{recorded, row};
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn consumer_keys_carry_subscription_or_group_and_lag_never_goes_negative() {
        let recorder = DebuggingRecorder::new();
        metrics::with_local_recorder(&recorder, || {
            let billing = ConsumerMetrics::new("nats", "orders", Consumer::Subscription("billing"));
            billing.delivered();
            billing.lag(10, 4);
            let group = ConsumerMetrics::new("nats", "orders", Consumer::Group("audit"));
            group.commit_error();
            group.partition_lag(3, 5, 9);
        });
        let billing = [
            ("backend", "nats"),
            ("topic", "orders"),
            ("subscription", "billing"),
        ];
        let audit = [("backend", "nats"), ("topic", "orders"), ("group", "audit")];
        let partition = [&audit[..], &[("partition", "3")]].concat();
        assert_eq!(
            recorded(&recorder),
            vec![
                row(CHECKPOINT_COMMIT_ERRORS, &audit, DebugValue::Counter(1)),
                row(DELIVERED, &billing, DebugValue::Counter(1)),
                row(
                    GROUP_PARTITION_LAG,
                    &partition,
                    DebugValue::Gauge(0.0.into())
                ),
                row(SUBSCRIPTION_LAG, &billing, DebugValue::Gauge(6.0.into())),
            ]
        );
    }
}
