//! For port authors: [`CommitWakers`], the per-topic signal a port's live subscribers wait
//! on, sent when the port learns of a commit to the topic (its own, or one another process
//! announced).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

/// Watchers of commits per topic. A subscriber re-reads its topic after each change; the
/// value is only a counter of commits seen.
#[derive(Debug, Default)]
pub struct CommitWakers {
    watchers: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl CommitWakers {
    /// A receiver that changes whenever a commit to `topic` is reported.
    pub fn watch(&self, topic: &str) -> watch::Receiver<u64> {
        let mut watchers = self.lock();
        match watchers.get(topic) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = watch::channel(0);
                watchers.insert(topic.to_owned(), sender);
                receiver
            }
        }
    }

    /// Wakes the subscribers of `topic`; forgets topics nobody watches any more.
    pub fn committed(&self, topic: &str) {
        let mut watchers = self.lock();
        if let Some(sender) = watchers.get(topic) {
            if sender.receiver_count() == 0 {
                watchers.remove(topic);
            } else {
                sender.send_modify(|commits| *commits = commits.wrapping_add(1));
            }
        }
    }

    /// Wakes every subscriber, for when commit reports may have been lost.
    pub fn wake_all(&self) {
        let mut watchers = self.lock();
        watchers.retain(|_, sender| sender.receiver_count() > 0);
        for sender in watchers.values() {
            sender.send_modify(|commits| *commits = commits.wrapping_add(1));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        // Only map inserts, removals and counter bumps happen under this lock: a panic
        // cannot leave it torn.
        self.watchers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watched_topics_wake_and_unwatched_ones_are_forgotten() {
        let wakers = CommitWakers::default();
        let mut orders = wakers.watch("orders");
        let audit = wakers.watch("audit");
        wakers.committed("orders");
        assert!(orders.has_changed().unwrap());
        assert!(!audit.has_changed().unwrap());
        orders.borrow_and_update();
        drop(audit);
        wakers.committed("audit");
        assert_eq!(wakers.lock().len(), 1);
        wakers.wake_all();
        assert!(orders.has_changed().unwrap());
    }
}
