//! The scheduler: one per group of processes sharing a store, it reads the schedule topic
//! and appends each waiting event to its topic when it is due.
//!
//! - One scheduler runs at a time: every process that runs one is a member of the
//!   scheduler group over the schedule topic with one partition, and the partition's
//!   lease elects the one that appends (a killed or frozen one is replaced within the
//!   lease).
//! - Waiting entries stay unacknowledged, so the group's position never passes an event
//!   not yet appended: a scheduler that takes over reads every entry after it again.
//! - The scheduler appends due events in batches, each event with a `done` mark for its
//!   entry, then acknowledges the entries. On a store with atomic batches (mem, SQLite,
//!   PostgreSQL) a batch's events and marks are stored in one transaction; on a broker the
//!   marks are appended once every event of the batch is stored. A scheduler that takes
//!   over appends nothing until it has read the schedule up to the head it saw when its
//!   lease began, so every mark written before then is known, and a marked entry is not
//!   appended twice. Only on a broker, events appended just before their scheduler died
//!   and not yet marked are appended again (the broker's readers drop the repeats by
//!   envelope id within their window).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use photon_core::group::{GroupOptions, DEFAULT_HEARTBEAT};
use photon_core::port::{Acknowledge, Delivery};
use photon_core::{
    EventStore, GroupCoordination, GroupMembership, GroupRequest, PhotonError, RecordDraft, Result,
    StartAt, StoragePort,
};

use super::entry::ScheduleEntry;
use super::{Clock, SchedulerConfig, APPEND_BATCH};
use crate::shutdown::{StopSignal, StopSwitch};

/// First wait before appending again after a failed append; doubled up to
/// [`MAX_RETRY_BACKOFF`].
const FIRST_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two tries of a failing append.
const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(5);
/// Tries at reading the schedule's head when a lease begins.
const HEAD_TRIES: u32 = 5;

/// The scheduler of one [`crate::Photon`]: its task, stopped by [`SchedulerTask::stop`] or
/// when the last handle is dropped.
pub(crate) struct SchedulerTask {
    switch: StopSwitch,
    task: tokio::task::JoinHandle<()>,
}

impl SchedulerTask {
    /// Joins the scheduler group on the store's port and starts reading the schedule.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] on a port without the group lease protocol.
    pub(crate) fn start(store: EventStore, config: &SchedulerConfig) -> Result<Self> {
        let port = store.port().clone();
        let Some(coordination) = port.group_coordination() else {
            return Err(port.unsupported("delayed delivery (the scheduler needs consumer groups)"));
        };
        let member = format!(
            "scheduler-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let heartbeat = DEFAULT_HEARTBEAT.min(config.lease / 8);
        let options = GroupOptions::new(member)
            .partitions(1)
            .lease(config.lease)
            .heartbeat(heartbeat);
        let options = GroupOptions {
            read_ahead: config.max_waiting,
            ..options
        };
        let request = GroupRequest {
            group: config.group.clone(),
            member: options.member.clone(),
            topic: config.topic.clone(),
            start: StartAt::Beginning,
        };
        let membership = photon_core::raw::group::join(
            Arc::clone(&port),
            Arc::clone(&coordination),
            request,
            options,
        );
        let switch = StopSwitch::new();
        let scheduler = Scheduler {
            store,
            port,
            coordination,
            topic: config.topic.clone(),
            clock: config.clock.clone(),
            max_waiting: config.max_waiting,
            waiting: HashMap::new(),
            queue: BinaryHeap::new(),
            ownership: None,
            catch_up_to: None,
            retry: None,
        };
        let task = tokio::spawn(scheduler.run(membership, switch.signal()));
        Ok(Self { switch, task })
    }

    /// Stops the scheduler: it leaves the group (another process's scheduler takes over at
    /// once) and returns when its task ended.
    pub(crate) async fn stop(self) {
        self.switch.stop();
        if let Err(err) = self.task.await {
            tracing::warn!(error = %err, "the scheduler task ended abnormally");
        }
    }
}

/// An entry waiting for its time.
struct Waiting {
    draft: RecordDraft,
    ack: Box<dyn Acknowledge>,
}

/// An entry taken out of the queue to be appended now.
struct Due {
    due_ms: i64,
    /// The schedule record's seq.
    seq: i64,
    /// The schedule record's event id.
    id: String,
    waiting: Waiting,
}

/// A failed append and when to try again.
struct Retry {
    at: DateTime<Utc>,
    backoff: Duration,
}

struct Scheduler {
    /// Appends due events as publishes (span, metrics).
    store: EventStore,
    /// Reads the schedule and writes its marks.
    port: Arc<dyn StoragePort>,
    coordination: Arc<dyn GroupCoordination>,
    topic: String,
    clock: Clock,
    max_waiting: usize,
    /// Entries not yet appended, by the schedule record's event id.
    waiting: HashMap<String, Waiting>,
    /// `(due, seq, event id)` of waiting entries, soonest first: per-key order is due-time
    /// order, ties in the order the entries were stored. An entry read again after a new
    /// lease has a second item here; the first one popped appends it.
    queue: BinaryHeap<Reverse<(i64, i64, String)>>,
    /// `(partition, epoch)` of the lease deliveries came under last.
    ownership: Option<(u32, u64)>,
    /// While set, nothing is appended: the schedule's head when the lease began, up to
    /// which entries and marks are read first.
    catch_up_to: Option<i64>,
    retry: Option<Retry>,
}

impl Scheduler {
    async fn run(mut self, mut membership: GroupMembership, mut stop: StopSignal) {
        loop {
            let wake = self.next_wake();
            tokio::select! {
                biased;
                () = stop.stopped() => break,
                item = membership.next() => match item {
                    Some(Ok(delivery)) => self.receive(delivery).await,
                    Some(Err(err)) => {
                        tracing::warn!(topic = %self.topic, error = %err, "the scheduler could not read the schedule");
                    }
                    None => break,
                },
                () = sleep_until(&self.clock, wake) => self.append_due().await,
            }
        }
        // Dropped, not left gracefully: waiting entries are never acknowledged, so a
        // graceful leave would wait out the lease before handing the schedule over.
        drop(membership);
    }

    /// When the next entry is due (or a failed append is tried again), unless catching up.
    fn next_wake(&self) -> Option<DateTime<Utc>> {
        if self.catch_up_to.is_some() {
            return None;
        }
        let Reverse((due_ms, _, _)) = self.queue.peek()?;
        let due = DateTime::from_timestamp_millis(*due_ms).unwrap_or(DateTime::<Utc>::MAX_UTC);
        Some(match &self.retry {
            Some(retry) => due.max(retry.at),
            None => due,
        })
    }

    async fn receive(&mut self, delivery: Delivery) {
        let Delivery { record, ack } = delivery;
        if let Some(ownership) = ack.ownership() {
            let lease = (ownership.partition, ownership.epoch);
            if self.ownership != Some(lease) {
                self.ownership = Some(lease);
                // Entries read under an earlier lease belong to whoever holds it now.
                self.waiting.retain(|_, waiting| waiting.ack.current());
                self.catch_up_to = self.head(ownership.partition).await;
            }
        }
        let seq = record.seq;
        match ScheduleEntry::read(&record) {
            Ok(ScheduleEntry::Due { due_ms, draft }) => {
                self.queue
                    .push(Reverse((due_ms, seq, record.event_id.clone())));
                self.waiting.insert(record.event_id, Waiting { draft, ack });
            }
            Ok(ScheduleEntry::Done { entry }) => {
                if let Some(appended) = self.waiting.remove(&entry) {
                    acknowledge(appended.ack.as_ref(), &self.topic).await;
                }
                acknowledge(ack.as_ref(), &self.topic).await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "the scheduler skips a record");
                acknowledge(ack.as_ref(), &self.topic).await;
            }
        }
        let read_up = self.catch_up_to.is_some_and(|head| seq >= head);
        if read_up || self.waiting.len() >= self.max_waiting {
            if !read_up && self.catch_up_to.is_some() {
                tracing::warn!(
                    topic = %self.topic,
                    waiting = self.waiting.len(),
                    "the scheduler holds its most waiting entries before the schedule's head: \
                     appending now (an event appended by the previous scheduler and not yet \
                     read as done may be appended again)"
                );
            }
            self.catch_up_to = None;
        }
    }

    /// The seq of the schedule's last record when a lease of `partition` begins, `None`
    /// when it holds none (or cannot be read: then nothing is waited for, at the risk of a
    /// repeat, with a warning).
    async fn head(&self, partition: u32) -> Option<i64> {
        let mut backoff = FIRST_RETRY_BACKOFF;
        for _ in 0..HEAD_TRIES {
            let head = match self
                .coordination
                .partition_head(&self.topic, partition)
                .await
            {
                Some(head) => head.map(Some),
                None => self.port.head_seq(&self.topic, None).await,
            };
            match head {
                Ok(head) => return head.filter(|seq| *seq > 0),
                Err(err) => {
                    tracing::warn!(topic = %self.topic, error = %err, "the scheduler cannot read the schedule's head");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_RETRY_BACKOFF);
                }
            }
        }
        None
    }

    /// Appends every entry due by now, soonest first, in batches of at most
    /// [`APPEND_BATCH`]: the events and then their `done` marks with one append (one
    /// transaction on a port with atomic batches, so that no event is stored without its
    /// mark).
    async fn append_due(&mut self) {
        let now = self.clock.now();
        if self.retry.as_ref().is_some_and(|retry| retry.at > now) {
            return;
        }
        loop {
            let mut due = self.take_due(now.timestamp_millis());
            if due.is_empty() {
                return;
            }
            let events = due.len();
            let drafts = due.iter().map(|due| due.waiting.draft.clone()).collect();
            let stored = self.store.publish_drafts(drafts, self.marks(&due)).await;
            let (stored, failure) = match stored {
                Ok(appended) => (appended.len(), None),
                Err(PhotonError::BatchIncomplete { stored, source, .. }) => {
                    (stored.len(), Some(*source))
                }
                Err(err) => (0, Some(err)),
            };
            let not_stored = due.split_off(stored.min(events));
            for appended in &due {
                acknowledge(appended.waiting.ack.as_ref(), &self.topic).await;
            }
            match failure {
                Some(err) if stored < events => {
                    self.failed(&err, now);
                    for entry in not_stored {
                        self.queue
                            .push(Reverse((entry.due_ms, entry.seq, entry.id.clone())));
                        self.waiting.insert(entry.id, entry.waiting);
                    }
                    return;
                }
                Some(err) => tracing::warn!(
                    topic = %self.topic,
                    error = %err,
                    "the scheduler could not mark appended events done: a scheduler taking \
                     over before their entries are acknowledged appends them again"
                ),
                None => {}
            }
            self.retry = None;
        }
    }

    /// The `done` marks of `due`, none when they cannot be encoded (with a warning: the
    /// entries are still acknowledged once appended).
    fn marks(&self, due: &[Due]) -> Vec<RecordDraft> {
        let marks = due
            .iter()
            .map(|due| {
                ScheduleEntry::Done {
                    entry: due.id.clone(),
                }
                .draft(&self.topic)
            })
            .collect::<Result<Vec<RecordDraft>>>();
        marks.unwrap_or_else(|err| {
            tracing::warn!(topic = %self.topic, error = %err, "the scheduler cannot encode done marks");
            Vec::new()
        })
    }

    /// Takes out up to [`APPEND_BATCH`] entries due by `now_ms` under the current lease,
    /// soonest first.
    fn take_due(&mut self, now_ms: i64) -> Vec<Due> {
        let mut due = Vec::new();
        while due.len() < APPEND_BATCH {
            let Some(Reverse((due_ms, seq, id))) = self.queue.peek().cloned() else {
                break;
            };
            if due_ms > now_ms {
                break;
            }
            self.queue.pop();
            // Gone: appended, or read again under a later lease (a second queue item).
            let Some(waiting) = self.waiting.remove(&id) else {
                continue;
            };
            if waiting.ack.current() {
                due.push(Due {
                    due_ms,
                    seq,
                    id,
                    waiting,
                });
            }
        }
        due
    }

    fn failed(&mut self, err: &PhotonError, now: DateTime<Utc>) {
        let backoff = self.retry.as_ref().map_or(FIRST_RETRY_BACKOFF, |retry| {
            (retry.backoff * 2).min(MAX_RETRY_BACKOFF)
        });
        tracing::warn!(
            topic = %self.topic,
            error = %err,
            retry_in = ?backoff,
            "the scheduler could not append a due event; it tries again"
        );
        let at = now + chrono::Duration::from_std(backoff).unwrap_or(chrono::Duration::MAX);
        self.retry = Some(Retry { at, backoff });
    }
}

/// Acknowledges a schedule record. A refusal means the lease moved on: the next scheduler
/// reads the record again, which the `done` marks make harmless.
async fn acknowledge(ack: &dyn Acknowledge, topic: &str) {
    if let Err(err) = ack.ack().await {
        tracing::debug!(topic, error = %err, "a schedule record's acknowledgement was refused");
    }
}

/// Sleeps until `at` by `clock`, or forever without one.
async fn sleep_until(clock: &Clock, at: Option<DateTime<Utc>>) {
    match at {
        Some(at) => clock.sleep_until(at).await,
        None => std::future::pending().await,
    }
}
