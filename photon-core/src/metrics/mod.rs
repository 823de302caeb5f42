//! Photon's metrics, recorded through the [`metrics`] facade.
//!
//! Photon installs no recorder: without one every recording is a no-op. An application
//! that wants the figures installs the exporter of its choice (Prometheus, StatsD, ...)
//! with `metrics::set_global_recorder` or the exporter's own installer, then may call
//! [`describe`] to hand it the units and descriptions below.
//!
//! Every figure is recorded by `photon-core` and `photon-runtime`, in front of the storage
//! port, so that every backend reports the same set without code of its own. The `backend`
//! label is the port's [`crate::StoragePort::label`] (`mem`, `sqlite`, `nats`, `fluvio`, `postgres`).
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
//! SQLite, NATS and PostgreSQL; on Fluvio the gauges are never set). Where
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

mod consumer;
mod publish;

use metrics::{Key, Level, Metadata, Unit};

pub use consumer::{Consumer, ConsumerMetrics};
pub(crate) use publish::PublishMetrics;

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

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The type of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up.
    Counter,
    /// Set to a value.
    Gauge,
    /// A distribution of recorded values.
    Histogram,
}

/// One row of the metrics table: what [`describe`] hands the recorder.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct MetricSpec {
    /// The metric's name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Its unit, when the facade has one for it.
    pub unit: Option<Unit>,
    /// What it counts or measures.
    pub description: &'static str,
}

/// Every metric Photon records, in the order of the table above.
pub const CATALOGUE: &[MetricSpec] = &[
    spec(
        PUBLISHED,
        MetricKind::Counter,
        Some(Unit::Count),
        "Events stored by a publish.",
    ),
    spec(
        PUBLISH_ERRORS,
        MetricKind::Counter,
        Some(Unit::Count),
        "Publishes that returned an error.",
    ),
    spec(
        DELIVERED,
        MetricKind::Counter,
        Some(Unit::Count),
        "Records handed to a consumer.",
    ),
    spec(
        ACKNOWLEDGED,
        MetricKind::Counter,
        Some(Unit::Count),
        "Delivered records acknowledged.",
    ),
    spec(
        HANDLER_DURATION,
        MetricKind::Histogram,
        Some(Unit::Seconds),
        "Duration of executor handler attempts.",
    ),
    spec(
        RETRIES,
        MetricKind::Counter,
        Some(Unit::Count),
        "Handler retries scheduled by the executor.",
    ),
    spec(
        DEAD_LETTERS,
        MetricKind::Counter,
        Some(Unit::Count),
        "Dead letters stored.",
    ),
    spec(
        CHECKPOINT_COMMITS,
        MetricKind::Counter,
        Some(Unit::Count),
        "Checkpoint writes the port accepted.",
    ),
    spec(
        CHECKPOINT_COMMIT_ERRORS,
        MetricKind::Counter,
        Some(Unit::Count),
        "Checkpoint writes that failed or were refused.",
    ),
    spec(
        SUBSCRIPTION_LAG,
        MetricKind::Gauge,
        None,
        "Head seq minus the subscription's committed checkpoint.",
    ),
    spec(
        GROUP_PARTITION_LAG,
        MetricKind::Gauge,
        None,
        "Head seq minus the group partition's committed checkpoint.",
    ),
];

const fn spec(
    name: &'static str,
    kind: MetricKind,
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
                MetricKind::Counter => recorder.describe_counter(name, unit, description),
                MetricKind::Gauge => recorder.describe_gauge(name, unit, description),
                MetricKind::Histogram => recorder.describe_histogram(name, unit, description),
            }
        }
    });
}

/// Adds one to the counter `key` of the current recorder.
pub(crate) fn increment(key: &Key) {
    metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
}

/// Sets the gauge `key` of the current recorder.
pub(crate) fn set_gauge(key: &Key, value: f64) {
    metrics::with_recorder(|recorder| recorder.register_gauge(key, &METADATA).set(value));
}

/// Records a value in the histogram `key` of the current recorder.
pub(crate) fn record_histogram(key: &Key, value: f64) {
    metrics::with_recorder(|recorder| recorder.register_histogram(key, &METADATA).record(value));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// A recorded series: name, labels, value.
    pub(crate) type Row = (String, Vec<(String, String)>, DebugValue);

    /// What `recorder` holds, sorted by name and labels.
    pub(crate) fn recorded(recorder: &DebuggingRecorder) -> Vec<Row> {
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

    /// A row of `recorded`.
    pub(crate) fn row(name: &str, labels: &[(&str, &str)], value: DebugValue) -> Row {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        (name.to_owned(), labels, value)
    }

    #[test]
    fn describe_hands_every_unit_and_description_to_the_recorder() {
        let recorder = DebuggingRecorder::new();
        metrics::with_local_recorder(&recorder, || {
            describe();
            ConsumerMetrics::new("mem", "t", Consumer::Subscription("s"))
                .handler_attempt(std::time::Duration::from_millis(250));
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
    fn the_observability_page_lists_every_metric_of_the_catalogue() {
        let page = include_str!("../../../docs/observability.md");
        let section = page
            .split("\n## Metrics\n")
            .nth(1)
            .expect("docs/observability.md has a Metrics section");
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
