//! Dropping the second copy of an event a retried append stored twice.
//!
//! Fluvio has no idempotent producer: an append whose ack did not come (an SPU restart, the
//! port's ack timeout) may still have been stored, and its retry with the same draft then
//! stores the event a second time, at another offset. Every record carries its draft's
//! `envelope_id`, so each shard reader remembers the envelope ids of the last
//! [`DEDUP_WINDOW`] records it read and drops a record whose id it has seen.
//!
//! The window, as documented for users: a copy is dropped when it lies at most
//! [`DEDUP_WINDOW`] records after the first copy in the same shard topic, and the
//! subscription read the first copy (a subscription that starts between the two copies
//! delivers the second one). Both copies stay stored, each with its own seq: `get_event`
//! finds either, and `AfterSeq` positions count both. Ids are remembered as 64-bit hashes;
//! two different ids colliding within one window is about a one in 10^11 chance.

use std::collections::{HashSet, VecDeque};

use photon_core::raw::shard::fnv1a;

/// Records per shard reader whose envelope ids are remembered.
pub const DEDUP_WINDOW: usize = 8192;

/// The envelope ids of a reader's latest records.
#[derive(Debug, Default)]
pub(crate) struct RecentIds {
    order: VecDeque<u64>,
    seen: HashSet<u64>,
}

impl RecentIds {
    /// Whether `envelope_id` is new within the window (and remembers it).
    pub(crate) fn first_time(&mut self, envelope_id: &str) -> bool {
        let hash = fnv1a(envelope_id.as_bytes());
        if !self.seen.insert(hash) {
            return false;
        }
        self.order.push_back(hash);
        if self.order.len() > DEDUP_WINDOW {
            if let Some(oldest) = self.order.pop_front() {
                self.seen.remove(&oldest);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_dropped_within_the_window_only() {
        let mut recent = RecentIds::default();
        assert!(recent.first_time("a"));
        assert!(!recent.first_time("a"));
        for i in 0..DEDUP_WINDOW {
            assert!(recent.first_time(&format!("id-{i}")));
        }
        // `a` left the window: a copy this far behind is delivered.
        assert!(recent.first_time("a"));
        assert!(!recent.first_time(&format!("id-{}", DEDUP_WINDOW - 1)));
        assert_eq!(recent.order.len(), DEDUP_WINDOW);
        assert_eq!(recent.seen.len(), DEDUP_WINDOW);
    }
}
