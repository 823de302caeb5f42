//! One reader per member on a store that reads a topic only whole (no per-partition reads,
//! see [`crate::group::GroupCoordination::partition_records`]): the member reads the topic
//! once and routes each record to the owned partition it belongs to, instead of reading it
//! once per owned partition.
//!
//! - Each owned partition keeps the highest seq handed to it (at first its checkpoint) and
//!   takes only later records, so its records arrive once each, in seq order.
//! - A newly owned partition that needs records the reader has already passed restarts the
//!   reader from the lowest position any owned partition still needs; every other partition
//!   passes over what it already has. A restart costs one re-read of the topic from that
//!   position (records before each partition's own position are read and dropped); it
//!   happens only when a partition is taken over behind the reader, e.g. after a rebalance.
//!   The partitions taken in one heartbeat are added together, so that joining costs at
//!   most one restart.
//! - A partition whose read-ahead is exhausted holds the reader until one of its events is
//!   acknowledged (or until it stops handing out: drained, lost, released, lapsed), so a slow
//!   partition slows the others of its member down to its pace. Records already routed to
//!   the other partitions are in the member's stream by then and are handed out regardless.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::PhotonError;
use crate::group::assignment::partition_of;
use crate::group::partition::{Handout, Owned};
use crate::port::{RecordStream, StartAt, StoragePort, SubscribeRequest};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain values and maps are updated under this lock, by non-panicking code.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A member's one reader of its topic, shared by the partitions it owns.
pub(crate) struct SharedReader {
    topic: String,
    partitions: u32,
    port: Arc<dyn StoragePort>,
    out: mpsc::UnboundedSender<Handout>,
    state: Arc<Mutex<State>>,
}

/// Where an owned partition stands in the topic.
struct Route {
    owned: Arc<Owned>,
    /// Where the partition started when it has received nothing yet.
    start: StartAt,
    /// The highest seq handed to this partition (its checkpoint at first).
    received: Option<i64>,
}

impl Route {
    /// The first records this partition still needs.
    fn need(&self) -> StartAt {
        self.received.map_or(self.start, StartAt::AfterSeq)
    }

    fn wants(&self, seq: i64) -> bool {
        self.received.is_none_or(|received| seq > received)
    }
}

#[derive(Default)]
struct State {
    routes: BTreeMap<u32, Route>,
    /// Bumped at every (re)start and stop: a reader of an older generation routes nothing.
    generation: u64,
    /// The running reader, if any.
    task: Option<JoinHandle<()>>,
    /// Where the running reader started.
    from: Option<StartAt>,
    /// The highest seq the running reader routed or passed over.
    passed: Option<i64>,
}

impl State {
    /// Whether the running reader will still read every record after `need`.
    fn covers(&self, need: StartAt) -> bool {
        let Some(from) = self.from.filter(|_| self.task.is_some()) else {
            return false;
        };
        match (need, self.passed, from) {
            (StartAt::Tail, _, _) => true,
            (StartAt::Beginning, None, StartAt::Beginning) => true,
            (StartAt::Beginning, _, _) => false,
            (StartAt::AfterSeq(seq), Some(passed), _) => passed <= seq,
            (StartAt::AfterSeq(_), None, StartAt::Beginning) => true,
            (StartAt::AfterSeq(seq), None, StartAt::AfterSeq(from)) => from <= seq,
            (StartAt::AfterSeq(_), None, StartAt::Tail) => false,
        }
    }

    fn stop(&mut self) {
        self.generation += 1;
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.from = None;
        self.passed = None;
    }
}

/// The lowest of two positions: the beginning, then seqs in order, then the tail.
fn lowest(a: StartAt, b: StartAt) -> StartAt {
    match (a, b) {
        (StartAt::Beginning, _) | (_, StartAt::Beginning) => StartAt::Beginning,
        (StartAt::AfterSeq(a), StartAt::AfterSeq(b)) => StartAt::AfterSeq(a.min(b)),
        (StartAt::AfterSeq(seq), StartAt::Tail) | (StartAt::Tail, StartAt::AfterSeq(seq)) => {
            StartAt::AfterSeq(seq)
        }
        (StartAt::Tail, StartAt::Tail) => StartAt::Tail,
    }
}

impl SharedReader {
    /// A reader of `topic` split into `partitions`, handing records out through `out`; it
    /// starts reading once a partition is added.
    pub(crate) fn new(
        topic: String,
        partitions: u32,
        port: Arc<dyn StoragePort>,
        out: mpsc::UnboundedSender<Handout>,
    ) -> Self {
        Self {
            topic,
            partitions,
            port,
            out,
            state: Arc::default(),
        }
    }

    /// Routes the records of newly owned partitions, each from its start (after its
    /// checkpoint), to them; restarts the reader once when one of them needs records it
    /// has already passed.
    pub(crate) fn add(&self, taken: Vec<(Arc<Owned>, StartAt)>) {
        let mut state = lock(&self.state);
        let mut restart = false;
        for (owned, start) in taken {
            let mut route = Route {
                received: match start {
                    StartAt::AfterSeq(seq) => Some(seq),
                    StartAt::Beginning | StartAt::Tail => None,
                },
                owned,
                start,
            };
            if start == StartAt::Tail && state.task.is_some() {
                // The tail of a partition joining a running reader is where the reader is.
                route.received = state.passed.or(match state.from {
                    Some(StartAt::AfterSeq(seq)) => Some(seq),
                    _ => None,
                });
            }
            restart |= !state.covers(route.need());
            state.routes.insert(route.owned.partition, route);
        }
        if restart {
            self.restart(&mut state);
        }
    }

    /// Stops routing records to `owned` (lost, released); stops the reader when no owned
    /// partition is left.
    pub(crate) fn remove(&self, owned: &Arc<Owned>) {
        let mut state = lock(&self.state);
        if state
            .routes
            .get(&owned.partition)
            .is_some_and(|route| Arc::ptr_eq(&route.owned, owned))
        {
            state.routes.remove(&owned.partition);
        }
        if state.routes.is_empty() {
            state.stop();
        }
    }

    /// Starts a reader from the lowest position a partition still handing out needs.
    fn restart(&self, state: &mut State) {
        state.stop();
        let Some(from) = state
            .routes
            .values()
            .filter(|route| route.owned.hands_out())
            .map(Route::need)
            .reduce(lowest)
        else {
            return;
        };
        let records = self.port.subscribe(SubscribeRequest {
            topic: self.topic.clone(),
            key: None,
            start: from,
            durable: None,
        });
        state.from = Some(from);
        state.task = Some(tokio::spawn(route(
            Arc::clone(&self.state),
            state.generation,
            records,
            self.partitions,
            self.out.clone(),
        )));
    }
}

/// What the reader hands to a partition: a record, or the error item of an undecodable one.
enum Item {
    Record(crate::event::Record),
    Undecodable(PhotonError),
}

/// Reads the topic and hands each record to its owned partition, within the partition's
/// read-ahead; records of other partitions, and those a partition already has, are passed
/// over.
async fn route(
    state: Arc<Mutex<State>>,
    generation: u64,
    mut records: RecordStream,
    partitions: u32,
    out: mpsc::UnboundedSender<Handout>,
) {
    while let Some(next) = records.next().await {
        let (seq, partition, item) = match next {
            Ok(record) => (
                record.seq,
                partition_of(record.topic_key.as_deref(), record.seq, partitions),
                Item::Record(record),
            ),
            Err(err) => match &err {
                PhotonError::Undecodable { key, seq, .. } => (
                    *seq,
                    partition_of(key.as_deref(), *seq, partitions),
                    Item::Undecodable(err),
                ),
                _ => {
                    if lock(&state).generation != generation
                        || out.send(Handout::Error(err)).is_err()
                    {
                        return;
                    }
                    continue;
                }
            },
        };
        let owned = {
            let mut state = lock(&state);
            if state.generation != generation {
                return;
            }
            state.passed = Some(state.passed.map_or(seq, |passed| passed.max(seq)));
            match state.routes.get(&partition) {
                Some(route) if route.wants(seq) => Arc::clone(&route.owned),
                _ => continue,
            }
        };
        // Holds the reader while the partition's read-ahead is exhausted.
        let Some(permit) = owned.admit().await else {
            // The partition stopped handing out; the member gives it back (or, when a late
            // renewal keeps it, reads it again: see `Owned::lapsed`).
            owned.pass_over();
            continue;
        };
        let mut guard = lock(&state);
        if guard.generation != generation {
            return;
        }
        let Some(route) = guard.routes.get_mut(&partition) else {
            continue;
        };
        if !Arc::ptr_eq(&route.owned, &owned) || !route.wants(seq) {
            continue;
        }
        // Under the lock, so that a restart between routing and handing out cannot hand
        // the record out twice.
        route.received = Some(seq);
        owned.received(seq, permit);
        let handout = match item {
            Item::Record(record) => Handout::Record(owned, record),
            Item::Undecodable(err) => Handout::Undecodable(owned, seq, err),
        };
        if out.send(handout).is_err() {
            return;
        }
    }
    let mut state = lock(&state);
    if state.generation == generation {
        // The stream ended: the next partition added starts a new reader.
        state.task = None;
        state.from = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_order_beginning_seqs_tail() {
        use StartAt::{AfterSeq, Beginning, Tail};
        assert_eq!(lowest(Tail, AfterSeq(4)), AfterSeq(4));
        assert_eq!(lowest(AfterSeq(9), AfterSeq(4)), AfterSeq(4));
        assert_eq!(lowest(AfterSeq(9), Beginning), Beginning);
        assert_eq!(lowest(Tail, Tail), Tail);
    }

    #[test]
    fn a_reader_covers_only_what_it_has_not_passed() {
        use StartAt::{AfterSeq, Beginning, Tail};
        let mut state = State {
            task: None,
            from: Some(AfterSeq(10)),
            ..State::default()
        };
        assert!(!state.covers(AfterSeq(20)), "no reader runs");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        state.task = Some(runtime.spawn(async {}));
        assert!(state.covers(AfterSeq(10)));
        assert!(state.covers(AfterSeq(11)));
        assert!(!state.covers(AfterSeq(9)));
        assert!(!state.covers(Beginning));
        assert!(state.covers(Tail));
        state.passed = Some(15);
        assert!(state.covers(AfterSeq(15)));
        assert!(!state.covers(AfterSeq(14)));
        state.from = Some(Beginning);
        state.passed = None;
        assert!(state.covers(Beginning));
        state.from = Some(Tail);
        assert!(!state.covers(AfterSeq(3)));
    }
}
