//! Truncation of the mem port.

use super::port::MemStoragePort;

impl MemStoragePort {
    /// Removes the records of `topic` with `seq < before_seq`.
    pub(super) fn drop_before(&self, topic: &str, before_seq: i64) -> u64 {
        let mut state = self.shared.lock();
        let Some(log) = state.existing_topic_mut(topic) else {
            return 0;
        };
        let mut removed = 0;
        while log.records.front().is_some_and(|r| r.seq < before_seq) {
            if let Some(record) = log.records.pop_front() {
                log.first_seq = record.seq + 1;
                removed += 1;
            }
        }
        removed
    }
}
