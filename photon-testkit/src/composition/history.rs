//! What one run of a schedule observed.

use std::collections::BTreeMap;
use std::time::Instant;

/// One event handed to a durable subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Its seq.
    pub seq: i64,
    /// Its key.
    pub key: Option<String>,
    /// Whether it was acknowledged (the acknowledgement was accepted).
    pub acked: bool,
}

/// Everything one durable subscription saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableLog {
    /// Deliveries, one list per opening of the subscription.
    pub runs: Vec<Vec<Delivered>>,
    /// `Gap { from, to }` items received.
    pub gaps: Vec<(i64, i64)>,
    /// The run each of `gaps` was received in.
    pub gap_runs: Vec<usize>,
    /// The stored checkpoint read after each flush.
    pub checkpoints: Vec<Option<i64>>,
    /// Per run: the highest `before` of the retention sweeps made until the run ended.
    pub truncated_by_run: Vec<i64>,
}

/// One event handed to a group member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDelivery {
    /// Which member.
    pub member: u8,
    /// Which joining of that member (0 for its first).
    pub run: usize,
    /// Its seq.
    pub seq: i64,
    /// Its key.
    pub key: Option<String>,
    /// The partition id and epoch of the lease it was handed out under.
    pub lease: (u32, u64),
    /// When it was handed out.
    pub delivered_at: Instant,
    /// When its acknowledgement was accepted, if it was.
    pub acked_at: Option<Instant>,
}

/// One finished attempt of the schedule's executor handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// The event's seq.
    pub seq: i64,
    /// Its key.
    pub key: Option<String>,
    /// Which instance of the port (restarts count up) ran it.
    pub run: usize,
    /// What the handler did.
    pub behaviour: super::handlers::Behaviour,
    /// Whether the attempt succeeded.
    pub succeeded: bool,
    /// Whether the attempt failed for good (its event is dead-lettered, not retried): it
    /// failed for good itself, or (a batch handler) a batch-mate did.
    pub for_good: bool,
    /// The batch attempt it was part of (an id unique in the schedule) and its position
    /// in that batch; `None` for a single-event handler.
    pub batch: Option<(u64, usize)>,
    /// When the attempt started.
    pub started: Instant,
    /// When it finished.
    pub finished: Instant,
}

/// A delayed event as it appeared on its topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appeared {
    /// The operation that published it for later.
    pub op: usize,
    /// The seq it was appended at.
    pub seq: i64,
    /// Its key.
    pub key: Option<String>,
    /// When a subscriber reading the topic live saw it.
    pub seen_at: chrono::DateTime<chrono::Utc>,
}

/// What a run of a schedule observed.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The schedule's seed.
    pub seed: u64,
    /// Every stored event: seq and key (delayed events once they appeared).
    pub published: BTreeMap<i64, Option<String>>,
    /// Events published for later, by operation: key and due time.
    pub scheduled: BTreeMap<usize, (Option<String>, chrono::DateTime<chrono::Utc>)>,
    /// Delayed events as a live subscriber of the topic saw them appear.
    pub appeared: Vec<Appeared>,
    /// `Gap { from, to }` items that subscriber received (a retention sweep passed it).
    pub watcher_gaps: Vec<(i64, i64)>,
    /// The highest `before` of the retention sweeps that ran (`0` without one).
    pub truncated_before: i64,
    /// Per durable subscription.
    pub durable: BTreeMap<u8, DurableLog>,
    /// Every group delivery.
    pub group: Vec<GroupDelivery>,
    /// `Gap { from, to }` items received by group members.
    pub group_gaps: Vec<(i64, i64)>,
    /// Whether the schedule ran an executor handler.
    pub handler: bool,
    /// The batch size of the handler when it is a batch handler.
    pub handler_batch: Option<usize>,
    /// Every finished attempt of the executor handler.
    pub handled: Vec<Handled>,
    /// The seqs of the dead letters the handler left, as listed at the end (`None` on a
    /// port that cannot list a topic).
    pub dead_letters: Option<Vec<i64>>,
    /// Unexpected errors and operations that did not finish within their bound.
    pub failures: Vec<String>,
    /// A line per operation played: what it did and saw.
    pub trace: Vec<String>,
}
