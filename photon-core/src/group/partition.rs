//! One partition owned by a member at one epoch: its read-ahead bound, its own reader where
//! the store reads partitions alone, its acknowledgements and the position they make committable.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::error::{PhotonError, Result};
use crate::event::Record;
use crate::group::coordination::{GroupScope, Ownership};
use crate::port::{Acknowledge, RecordStream};
use crate::progress::Progress;

/// The acknowledgements of the undecodable records a member handed out as error items
/// ([`PhotonError::Undecodable`]), by seq: the partition's position stays before such a
/// record until its acknowledgement is taken from here and acknowledged (once the record
/// is stored aside, e.g. dead-lettered).
#[derive(Clone, Default)]
pub struct UndecodableAcks(Arc<Mutex<std::collections::HashMap<i64, Box<dyn Acknowledge>>>>);

impl std::fmt::Debug for UndecodableAcks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UndecodableAcks")
            .field("pending", &lock(&self.0).len())
            .finish()
    }
}

impl UndecodableAcks {
    /// Takes the acknowledgement of the undecodable record at `seq`, when this member
    /// handed one out and it was not taken yet.
    pub fn take(&self, seq: i64) -> Option<Box<dyn Acknowledge>> {
        lock(&self.0).remove(&seq)
    }

    pub(crate) fn insert(&self, seq: i64, ack: Box<dyn Acknowledge>) {
        lock(&self.0).insert(seq, ack);
    }
}

/// Events given back, handed out again before anything else.
pub(crate) type Redelivery = Arc<Mutex<std::collections::VecDeque<(Arc<Owned>, Record)>>>;

/// What a partition's reader hands to the member's stream.
pub(crate) enum Handout {
    /// A record of an owned partition.
    Record(Arc<Owned>, Record),
    /// A record of an owned partition that cannot be decoded: handed out as an error item
    /// with its stored bytes, and acknowledged through [`UndecodableAcks`] once the
    /// consumer stored it aside.
    Undecodable(Arc<Owned>, i64, PhotonError),
    /// An error of the group itself.
    Error(PhotonError),
    /// Something was given back: look at the redelivery queue.
    Wake,
}

/// Positions of one owned partition.
#[derive(Debug, Default)]
struct Positions {
    /// Highest seq of the contiguous acknowledged run.
    acknowledged: Option<i64>,
    /// Highest seq stored for this epoch.
    committed: Option<i64>,
}

/// A partition this member holds a lease on.
pub(crate) struct Owned {
    pub(crate) scope: GroupScope,
    /// The partition's index in the group's layout (what events hash to).
    pub(crate) partition: u32,
    /// The partition's id in the store: its lease and checkpoint (see
    /// [`crate::group::layout`]).
    pub(crate) id: u32,
    pub(crate) epoch: u64,
    /// The lease owner token.
    pub(crate) owner: String,
    /// Past this instant (own monotonic clock) nothing is handed out or acknowledged.
    deadline: Mutex<Instant>,
    /// Hands out new events (false while draining before a release).
    active: AtomicBool,
    /// Lost or released: acknowledgements are refused.
    fenced: AtomicBool,
    /// An event of this ownership was read and not handed out because the local deadline
    /// had passed: a renewal that lands afterwards must not keep this ownership, whose
    /// position is then before an event nobody will hand out.
    passed_over: AtomicBool,
    /// Handed out and neither acknowledged nor given back.
    in_flight: AtomicUsize,
    progress: Progress,
    positions: Mutex<Positions>,
    permits: Arc<Semaphore>,
    reader: Mutex<Option<JoinHandle<()>>>,
    /// When draining started.
    draining_since: Mutex<Option<Instant>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain values are replaced under these locks: a panic cannot leave them torn.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Owned {
    pub(crate) fn new(
        scope: GroupScope,
        (partition, id): (u32, u32),
        epoch: u64,
        owner: String,
        deadline: Instant,
        read_ahead: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            scope,
            partition,
            id,
            epoch,
            owner,
            deadline: Mutex::new(deadline),
            active: AtomicBool::new(true),
            fenced: AtomicBool::new(false),
            passed_over: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            progress: Progress::default(),
            positions: Mutex::new(Positions::default()),
            permits: Arc::new(Semaphore::new(read_ahead)),
            reader: Mutex::new(None),
            draining_since: Mutex::new(None),
        })
    }

    /// Moves the local deadline after a successful renewal.
    pub(crate) fn extend(&self, deadline: Instant) {
        let mut current = lock(&self.deadline);
        *current = (*current).max(deadline);
    }

    fn within_deadline(&self) -> bool {
        Instant::now() < *lock(&self.deadline)
    }

    /// Whether the local deadline passed while the ownership was not ended: the member
    /// stopped handing out this partition and may have passed over events read meanwhile
    /// (also when a late renewal moved the deadline again since).
    pub(crate) fn lapsed(&self) -> bool {
        !self.fenced.load(Ordering::SeqCst)
            && (!self.within_deadline() || self.passed_over.load(Ordering::SeqCst))
    }

    /// Records that an event of this partition was dropped instead of handed out. Only an
    /// ownership that still hands out after a renewal needs to know: a drained or fenced
    /// one is given back and read again by the next owner anyway.
    pub(crate) fn pass_over(&self) {
        if self.active.load(Ordering::SeqCst) && !self.fenced.load(Ordering::SeqCst) {
            self.passed_over.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a new event of this partition may be handed out now.
    pub(crate) fn hands_out(&self) -> bool {
        self.active.load(Ordering::SeqCst)
            && !self.fenced.load(Ordering::SeqCst)
            && self.within_deadline()
    }

    /// Whether an acknowledgement of this partition is accepted now.
    pub(crate) fn accepts_acks(&self) -> bool {
        !self.fenced.load(Ordering::SeqCst) && self.within_deadline()
    }

    /// Stops handing out (before a release); returns when draining started.
    pub(crate) fn drain(&self) -> Instant {
        self.active.store(false, Ordering::SeqCst);
        // A reader waiting for read-ahead room stops waiting: nothing more is handed out.
        self.permits.close();
        *lock(&self.draining_since).get_or_insert_with(Instant::now)
    }

    /// Whether the partition is being drained.
    pub(crate) fn draining(&self) -> bool {
        !self.active.load(Ordering::SeqCst)
    }

    /// Ends this ownership: nothing more is handed out or acknowledged.
    pub(crate) fn fence(&self) {
        self.active.store(false, Ordering::SeqCst);
        self.fenced.store(true, Ordering::SeqCst);
        self.permits.close();
        if let Some(reader) = lock(&self.reader).take() {
            reader.abort();
        }
    }

    /// Handed out and not yet acknowledged or given back.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The acknowledged seq not yet committed, if any.
    pub(crate) fn to_commit(&self) -> Option<i64> {
        let positions = lock(&self.positions);
        match (positions.acknowledged, positions.committed) {
            (Some(acknowledged), Some(committed)) if acknowledged <= committed => None,
            (acknowledged, _) => acknowledged,
        }
    }

    /// Records a stored commit.
    pub(crate) fn committed(&self, seq: i64) {
        let mut positions = lock(&self.positions);
        positions.committed = Some(positions.committed.map_or(seq, |c| c.max(seq)));
    }

    fn finished(&self, seq: i64) {
        if let Some(last) = self.progress.finished(0, seq).last() {
            let mut positions = lock(&self.positions);
            positions.acknowledged = Some(positions.acknowledged.map_or(*last, |a| a.max(*last)));
        }
    }

    /// Waits for read-ahead room for one more record of this partition; `None` once the
    /// partition stops handing out (drained, fenced, or past its local deadline), so that a
    /// reader shared with other partitions is never held by one that hands nothing out.
    pub(crate) async fn admit(&self) -> Option<OwnedSemaphorePermit> {
        loop {
            if !self.hands_out() {
                return None;
            }
            let deadline = *lock(&self.deadline);
            tokio::select! {
                permit = Arc::clone(&self.permits).acquire_owned() => return permit.ok(),
                // A renewal may have moved the deadline meanwhile: look again.
                () = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    /// Records that `seq` was read for this partition (in seq order), holding `permit`
    /// until it is acknowledged.
    pub(crate) fn received(&self, seq: i64, permit: OwnedSemaphorePermit) {
        self.progress.received(0, seq, Some(permit));
    }

    /// Counts a record as handed out.
    pub(crate) fn handed_out(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn ownership(&self) -> Ownership {
        Ownership {
            partition: self.id,
            epoch: self.epoch,
            owner: self.owner.clone(),
        }
    }

    fn fenced_error(&self) -> PhotonError {
        PhotonError::Fenced {
            group: self.scope.group.clone(),
            topic: self.scope.topic.clone(),
            partition: self.id,
            epoch: self.epoch,
        }
    }

    /// Starts this partition's own reader over `records`, the store's read of this
    /// partition alone ([`crate::group::GroupCoordination::partition_records`]): at most
    /// `read_ahead` of them received and not yet acknowledged.
    pub(crate) fn start_reader(
        self: &Arc<Self>,
        records: RecordStream,
        out: mpsc::UnboundedSender<Handout>,
    ) {
        let owned = Arc::clone(self);
        let reader = tokio::spawn(read(owned, records, out));
        let mut slot = lock(&self.reader);
        if self.fenced.load(Ordering::SeqCst) {
            reader.abort();
        } else {
            *slot = Some(reader);
        }
    }
}

async fn read(owned: Arc<Owned>, mut records: RecordStream, out: mpsc::UnboundedSender<Handout>) {
    loop {
        // Closed once the partition is drained or fenced.
        let Ok(permit) = Arc::clone(&owned.permits).acquire_owned().await else {
            return;
        };
        let handout = match records.next().await {
            None => return,
            Some(Ok(record)) => {
                owned.received(record.seq, permit);
                Handout::Record(Arc::clone(&owned), record)
            }
            Some(Err(err)) => match &err {
                PhotonError::Undecodable { seq, .. } => {
                    owned.received(*seq, permit);
                    Handout::Undecodable(Arc::clone(&owned), *seq, err)
                }
                _ => Handout::Error(err),
            },
        };
        if out.send(handout).is_err() {
            return;
        }
    }
}

/// Acknowledgement of one delivery, tied to the partition ownership it came from.
pub(crate) struct GroupAck {
    pub(crate) owned: Arc<Owned>,
    pub(crate) record: Record,
    pub(crate) redeliver: Redelivery,
    pub(crate) out: mpsc::WeakUnboundedSender<Handout>,
    pub(crate) done: AtomicBool,
}

#[async_trait]
impl Acknowledge for GroupAck {
    async fn ack(&self) -> Result<()> {
        if !self.owned.accepts_acks() {
            return Err(self.owned.fenced_error());
        }
        if self.done.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.owned.finished(self.record.seq);
        self.owned.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    async fn release(&self) -> Result<()> {
        if !self.owned.accepts_acks() {
            return Err(self.owned.fenced_error());
        }
        if self.done.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        lock(&self.redeliver).push_back((Arc::clone(&self.owned), self.record.clone()));
        self.owned.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(out) = self.out.upgrade() {
            let _ = out.send(Handout::Wake);
        }
        Ok(())
    }

    fn ownership(&self) -> Option<Ownership> {
        Some(self.owned.ownership())
    }

    fn current(&self) -> bool {
        self.owned.hands_out()
    }
}

/// Acknowledgement of an undecodable record handed out as an error item: the partition's
/// position passes the record only once this is acknowledged (after its dead letter is
/// stored), and only under the ownership it was handed out by.
pub(crate) struct UndecodableAck {
    pub(crate) owned: Arc<Owned>,
    pub(crate) seq: i64,
    pub(crate) done: AtomicBool,
}

#[async_trait]
impl Acknowledge for UndecodableAck {
    async fn ack(&self) -> Result<()> {
        if !self.owned.accepts_acks() {
            return Err(self.owned.fenced_error());
        }
        if self.done.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.owned.finished(self.seq);
        self.owned.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    async fn release(&self) -> Result<()> {
        Err(PhotonError::InvalidInput(format!(
            "the undecodable record at seq {} cannot be handed back: store it aside and acknowledge it",
            self.seq
        )))
    }

    fn ownership(&self) -> Option<Ownership> {
        Some(self.owned.ownership())
    }

    fn current(&self) -> bool {
        self.owned.hands_out()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn owned(deadline: Instant) -> Arc<Owned> {
        Owned::new(
            GroupScope::new("g", "t"),
            (3, 3),
            1,
            "m#1".into(),
            deadline,
            4,
        )
    }

    #[test]
    fn a_late_renewal_does_not_keep_an_ownership_that_passed_an_event_over() {
        let past = owned(Instant::now() - Duration::from_millis(1));
        assert!(past.lapsed());
        past.pass_over();
        past.extend(Instant::now() + Duration::from_secs(60));
        assert!(past.hands_out());
        assert!(past.lapsed(), "an event was dropped during the lapse");
    }

    #[test]
    fn a_renewal_in_time_keeps_the_ownership() {
        let live = owned(Instant::now() + Duration::from_secs(60));
        live.extend(Instant::now() + Duration::from_secs(120));
        assert!(!live.lapsed());
        // Dropping the events of a drained partition is its hand-over, not a lapse.
        live.drain();
        live.pass_over();
        assert!(!live.lapsed());
    }
}
