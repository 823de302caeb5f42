//! Photon's metrics, recorded through the [`metrics`] facade.
//!
//! Photon installs no recorder: without one every recording is a no-op. An application
//! that wants the figures installs the exporter of its choice (Prometheus, StatsD, ...)
//! with `metrics::set_global_recorder` or the exporter's own installer, then may call
//! [`describe`] to hand it the units and descriptions below.
//!
//! Every figure is recorded by `photon-core` and `photon-runtime`, in front of the storage
//! port, so that every backend reports the same set without code of its own. The `backend`
//! label is the port's [`crate::StoragePort::label`] (`mem`, `sqlite`, `nats`, `fluvio`).
//! A consumer is labelled `subscription` (a durable subscription, or an executor handler
//! without group: its durable name) or `group` (a consumer group, or an executor handler
//! with one), never both.
//!
//! | name | type | unit | labels | recorded |
//! |---|---|---|---|---|
//! | `photon_published_total` | counter | events | backend, topic | each publish the port stored (dead letters too, on their dead-letter topic) |
//! | `photon_publish_errors_total` | counter | events | backend, topic | each publish that returned an error (refused input or limits, or the port failed), once the topic name is valid |
//! | `photon_delivered_total` | counter | events | backend, topic, subscription or group | each record handed to a consumer: a durable or group subscription stream, or an executor handler; an event handed back and delivered again counts again; a record that cannot be opened or decoded counts too |
//! | `photon_acknowledged_total` | counter | events | backend, topic, subscription or group | each delivered record acknowledged: the first `ack`, `ack_error` or `dead_letter` of a durable subscription for it, a successful `ack`/`ack_id` of a group subscription, each record an executor handler finished (handled or dead-lettered) |
//! | `photon_handler_duration_seconds` | histogram | seconds | backend, topic, subscription or group | each executor handler attempt, failed and panicked ones included |
//! | `photon_handler_retries_total` | counter | attempts | backend, topic, subscription or group | each retry the executor schedules after a retryable failure |
//! | `photon_dead_letters_total` | counter | events | backend, topic, subscription or group | each dead letter stored (by the executor or `DurableSubscription::dead_letter`); `topic` is the original topic |
//! | `photon_checkpoint_commits_total` | counter | commits | backend, topic, subscription or group | each checkpoint write the port accepted: per checkpoint lane for a subscription, per partition for a group |
//! | `photon_checkpoint_commit_errors_total` | counter | commits | backend, topic, subscription or group | each checkpoint write that failed, or that the group refused because the partition moved to another member |
//! | `photon_subscription_lag` | gauge | seqs | backend, topic, subscription | see below |
//! | `photon_group_partition_lag` | gauge | seqs | backend, topic, group, partition | see below |
//!
//! # Lag
//! Lag is the topic's head seq minus the committed checkpoint (the lowest committed lane
//! of a subscription), never below 0, on ports with the `head_seq` capability (mem,
//! SQLite and NATS; on the others, Fluvio among them, the gauges are never set). Where
//! seqs have gaps (NATS topics with several stream shards) it is an upper bound of the
//! backlog, as in the admin snapshot.
//!
//! - `photon_subscription_lag` is set after every checkpoint commit of the subscription
//!   that stored something (at most once per flush interval, or per `max_pending`
//!   acknowledgements, see [`crate::FlushPolicy`]), reading the head once then; and by
//!   `Photon::admin_snapshot` for the executor's durable handlers. A subscription that
//!   commits nothing keeps its last value.
//! - `photon_group_partition_lag` is set by the member owning the partition after every
//!   commit of the partition (on each commit interval with new acknowledgements, and when
//!   it hands the partition back). A process that no longer owns a partition keeps
//!   exporting the last value it set until it exits.
//!
//! # Cost
//! Label values are built once per topic (publish) or per consumer and kept with it, so
//! recording allocates nothing; without a recorder each recording is one thread-local
//! lookup and a no-op.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use metrics::{Key, Label, Level, Metadata, Unit};

/// Counter: events stored by a publish.
pub const PUBLISHED: &str = "photon_published_total";
/// Counter: publishes that returned an error.
pub const PUBLISH_ERRORS: &str = "photon_publish_errors_total";
/// Counter: records handed to a consumer.
pub const DELIVERED: &str = "photon_delivered_total";
/// Counter: delivered records acknowledged.
pub const ACKNOWLEDGED: &str = "photon_acknowledged_total";
/// Histogram, seconds: executor handler attempts.
pub const HANDLER_DURATION: &str = "photon_handler_duration_seconds";
/// Counter: retries scheduled by the executor.
pub const RETRIES: &str = "photon_handler_retries_total";
/// Counter: dead letters stored.
pub const DEAD_LETTERS: &str = "photon_dead_letters_total";
/// Counter: checkpoint writes the port accepted.
pub const CHECKPOINT_COMMITS: &str = "photon_checkpoint_commits_total";
/// Counter: checkpoint writes that failed or were refused.
pub const CHECKPOINT_COMMIT_ERRORS: &str = "photon_checkpoint_commit_errors_total";
/// Gauge, seqs: head seq minus a subscription's committed checkpoint.
pub const SUBSCRIPTION_LAG: &str = "photon_subscription_lag";
/// Gauge, seqs: head seq minus a group partition's committed checkpoint.
pub const GROUP_PARTITION_LAG: &str = "photon_group_partition_lag";

/// Label: the storage port's label.
pub const BACKEND: &str = "backend";
/// Label: the topic.
pub const TOPIC: &str = "topic";
/// Label: the durable subscription.
pub const SUBSCRIPTION: &str = "subscription";
/// Label: the consumer group.
pub const GROUP: &str = "group";
/// Label: the group partition.
pub const PARTITION: &str = "partition";

/// Topics whose publish keys are kept per store; the keys of further topics are built on
/// each publish, so that a program publishing to ever new topics does not grow the cache.
const MAX_CACHED_TOPICS: usize = 4096;

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// One row of the metrics table: what [`describe`] hands the recorder.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct MetricSpec {
    /// The metric's name.
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Its unit, when the facade has one for it.
    pub unit: Option<Unit>,
    /// What it counts or measures.
    pub description: &'static str,
}

/// Every metric Photon records, in the order of the table above.
pub const CATALOGUE: &[MetricSpec] = &[
    spec(
        PUBLISHED,
        "counter",
        Some(Unit::Count),
        "Events stored by a publish.",
    ),
    spec(
        PUBLISH_ERRORS,
        "counter",
        Some(Unit::Count),
        "Publishes that returned an error.",
    ),
    spec(
        DELIVERED,
        "counter",
        Some(Unit::Count),
        "Records handed to a consumer.",
    ),
    spec(
        ACKNOWLEDGED,
        "counter",
        Some(Unit::Count),
        "Delivered records acknowledged.",
    ),
    spec(
        HANDLER_DURATION,
        "histogram",
        Some(Unit::Seconds),
        "Duration of executor handler attempts.",
    ),
    spec(
        RETRIES,
        "counter",
        Some(Unit::Count),
        "Handler retries scheduled by the executor.",
    ),
    spec(
        DEAD_LETTERS,
        "counter",
        Some(Unit::Count),
        "Dead letters stored.",
    ),
    spec(
        CHECKPOINT_COMMITS,
        "counter",
        Some(Unit::Count),
        "Checkpoint writes the port accepted.",
    ),
    spec(
        CHECKPOINT_COMMIT_ERRORS,
        "counter",
        Some(Unit::Count),
        "Checkpoint writes that failed or were refused.",
    ),
    spec(
        SUBSCRIPTION_LAG,
        "gauge",
        None,
        "Head seq minus the subscription's committed checkpoint.",
    ),
    spec(
        GROUP_PARTITION_LAG,
        "gauge",
        None,
        "Head seq minus the group partition's committed checkpoint.",
    ),
];

const fn spec(
    name: &'static str,
    kind: &'static str,
    unit: Option<Unit>,
    description: &'static str,
) -> MetricSpec {
    MetricSpec {
        name,
        kind,
        unit,
        description,
    }
}

/// Hands the unit and description of every metric in [`CATALOGUE`] to the current
/// recorder. Call it once after installing one; recording works without it.
///
/// ```
/// let recorder = metrics_util::debugging::DebuggingRecorder::new();
/// metrics::with_local_recorder(&recorder, photon_core::metrics::describe);
/// ```
pub fn describe() {
    metrics::with_recorder(|recorder| {
        for spec in CATALOGUE {
            let (name, unit, description) = (spec.name.into(), spec.unit, spec.description.into());
            match spec.kind {
                "counter" => recorder.describe_counter(name, unit, description),
                "gauge" => recorder.describe_gauge(name, unit, description),
                _ => recorder.describe_histogram(name, unit, description),
            }
        }
    });
}

fn increment(key: &Key) {
    metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
}

fn set_gauge(key: &Key, value: f64) {
    metrics::with_recorder(|recorder| recorder.register_gauge(key, &METADATA).set(value));
}

fn record_histogram(key: &Key, value: f64) {
    metrics::with_recorder(|recorder| recorder.register_histogram(key, &METADATA).record(value));
}

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

    fn with_keys(&self, topic: &str, record: impl Fn(&PublishKeys)) {
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
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    fn recorded(recorder: &DebuggingRecorder) -> Vec<(String, Vec<(String, String)>, DebugValue)> {
        let mut rows: Vec<_> = recorder
            .snapshotter()
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let key = key.key();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (key.name().to_owned(), labels, value)
            })
            .collect();
        rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        rows
    }

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

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
        assert_eq!(
            recorded(&recorder),
            vec![
                (
                    PUBLISH_ERRORS.to_owned(),
                    labels(&[("backend", "mem"), ("topic", "orders")]),
                    DebugValue::Counter(1)
                ),
                (
                    PUBLISHED.to_owned(),
                    labels(&[("backend", "mem"), ("topic", "audit")]),
                    DebugValue::Counter(1)
                ),
                (
                    PUBLISHED.to_owned(),
                    labels(&[("backend", "mem"), ("topic", "orders")]),
                    DebugValue::Counter(2)
                ),
            ]
        );
    }

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
        assert_eq!(
            recorded(&recorder),
            vec![
                (
                    CHECKPOINT_COMMIT_ERRORS.to_owned(),
                    labels(&[("backend", "nats"), ("topic", "orders"), ("group", "audit")]),
                    DebugValue::Counter(1)
                ),
                (
                    DELIVERED.to_owned(),
                    labels(&[
                        ("backend", "nats"),
                        ("topic", "orders"),
                        ("subscription", "billing")
                    ]),
                    DebugValue::Counter(1)
                ),
                (
                    GROUP_PARTITION_LAG.to_owned(),
                    labels(&[
                        ("backend", "nats"),
                        ("topic", "orders"),
                        ("group", "audit"),
                        ("partition", "3")
                    ]),
                    DebugValue::Gauge(0.0.into())
                ),
                (
                    SUBSCRIPTION_LAG.to_owned(),
                    labels(&[
                        ("backend", "nats"),
                        ("topic", "orders"),
                        ("subscription", "billing")
                    ]),
                    DebugValue::Gauge(6.0.into())
                ),
            ]
        );
    }

    #[test]
    fn describe_hands_every_unit_and_description_to_the_recorder() {
        let recorder = DebuggingRecorder::new();
        metrics::with_local_recorder(&recorder, || {
            describe();
            ConsumerMetrics::new("mem", "t", Consumer::Subscription("s"))
                .handler_attempt(Duration::from_millis(250));
        });
        let snapshot = recorder.snapshotter().snapshot().into_vec();
        assert_eq!(snapshot.len(), 1);
        let (key, unit, description, value) = &snapshot[0];
        assert_eq!(key.key().name(), HANDLER_DURATION);
        assert_eq!(*unit, Some(Unit::Seconds));
        assert_eq!(
            description.as_deref(),
            Some("Duration of executor handler attempts.")
        );
        assert_eq!(*value, DebugValue::Histogram(vec![0.25.into()]));
    }

    #[test]
    fn the_readme_table_lists_every_metric_of_the_catalogue() {
        let readme = include_str!("../../README.md");
        let section = readme
            .split("\n## Metrics\n")
            .nth(1)
            .expect("README has a Metrics section");
        let table_names: Vec<&str> = section
            .lines()
            .take_while(|line| !line.starts_with("## "))
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|line| line.split('`').next())
            .collect();
        let catalogue: Vec<&str> = CATALOGUE.iter().map(|spec| spec.name).collect();
        assert_eq!(table_names, catalogue);
    }
}
