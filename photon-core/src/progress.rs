//! Contiguous checkpoint advance: a checkpoint only moves over a run of finished events,
//! so an event that is still running or retrying is never skipped because a later one
//! finished first. Used by the executor and by consumer groups.
//!
//! A received event can hold a read-ahead permit until it is acknowledgeable, so that the
//! events read and not yet acknowledged stay bounded, however far one slow key holds the
//! checkpoint back.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use tokio::sync::OwnedSemaphorePermit;

/// Events received by one subscription, per checkpoint lane, in the order received.
#[derive(Debug, Default)]
pub struct Progress {
    lanes: Mutex<BTreeMap<u32, VecDeque<Slot>>>,
}

#[derive(Debug)]
struct Slot {
    seq: i64,
    finished: bool,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Progress {
    /// Records that `seq` was read from the stream (in stream order); `permit` is released
    /// when the event becomes acknowledgeable.
    pub fn received(&self, lane: u32, seq: i64, permit: Option<OwnedSemaphorePermit>) {
        self.lock().entry(lane).or_default().push_back(Slot {
            seq,
            finished: false,
            _permit: permit,
        });
    }

    /// Marks `seq` finished and returns the seqs that became acknowledgeable, in order: the
    /// finished run at the front of its lane.
    pub fn finished(&self, lane: u32, seq: i64) -> Vec<i64> {
        self.finish(lane, seq).1
    }

    /// As [`Progress::finished`], in one lock with [`Progress::is_pending`]: whether `seq`
    /// was pending before, and the seqs that became acknowledgeable.
    pub fn finish(&self, lane: u32, seq: i64) -> (bool, Vec<i64>) {
        let mut lanes = self.lock();
        let Some(slots) = lanes.get_mut(&lane) else {
            return (false, Vec::new());
        };
        let pending = slots
            .iter_mut()
            .find(|slot| slot.seq == seq && !slot.finished)
            .map(|slot| slot.finished = true)
            .is_some();
        let mut ready = Vec::new();
        while slots.front().is_some_and(|slot| slot.finished) {
            if let Some(slot) = slots.pop_front() {
                ready.push(slot.seq);
            }
        }
        (pending, ready)
    }

    /// Whether `seq` was received on `lane` and is not finished yet.
    pub fn is_pending(&self, lane: u32, seq: i64) -> bool {
        self.lock()
            .get(&lane)
            .is_some_and(|slots| slots.iter().any(|slot| slot.seq == seq && !slot.finished))
    }

    /// Events received and not yet acknowledgeable (running, queued, or finished behind an
    /// unfinished one).
    pub fn outstanding(&self) -> usize {
        self.lock().values().map(VecDeque::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, VecDeque<Slot>>> {
        // Only plain data is mutated under this lock, by non-panicking code.
        self.lanes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_only_over_a_contiguous_run() {
        let progress = Progress::default();
        for seq in 1..=5 {
            progress.received(0, seq, None);
        }
        assert_eq!(progress.finished(0, 2), Vec::<i64>::new());
        assert_eq!(progress.finished(0, 3), Vec::<i64>::new());
        assert_eq!(progress.finished(0, 1), vec![1, 2, 3]);
        assert_eq!(progress.finished(0, 5), Vec::<i64>::new());
        assert_eq!(progress.outstanding(), 2);
        assert_eq!(progress.finish(0, 4), (true, vec![4, 5]));
        assert_eq!(progress.outstanding(), 0);
        assert_eq!(progress.finish(0, 4), (false, vec![]));
    }

    #[test]
    fn lanes_advance_independently() {
        let progress = Progress::default();
        progress.received(0, 10, None);
        progress.received(1, 3, None);
        progress.received(0, 11, None);
        assert_eq!(progress.finished(0, 11), Vec::<i64>::new());
        assert_eq!(progress.finished(1, 3), vec![3]);
        assert_eq!(progress.finished(0, 10), vec![10, 11]);
    }
}
