//! The mem port's listing of its topics and checkpoints.

use super::port::MemStoragePort;
use crate::port::{StoredCheckpoint, TopicInfo};

impl MemStoragePort {
    /// Every topic with a log, sorted by name.
    pub(super) fn topics(&self) -> Vec<TopicInfo> {
        let state = self.shared.lock();
        let mut topics: Vec<TopicInfo> = state
            .topic_numbers
            .iter()
            .map(|(name, number)| {
                let log = &state.logs[*number];
                TopicInfo {
                    name: name.clone(),
                    head_seq: log.records.back().map(|record| record.seq),
                    events: Some(log.records.len() as u64),
                    bytes: None,
                    shards: 1,
                }
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        topics
    }

    /// Every stored checkpoint, sorted by subscription, topic and key.
    pub(super) fn checkpoints(&self) -> Vec<StoredCheckpoint> {
        let state = self.shared.lock();
        let mut stored: Vec<StoredCheckpoint> = state
            .checkpoints
            .iter()
            .map(|(key, seq)| StoredCheckpoint {
                subscription: key.subscription.clone(),
                topic: key.topic.clone(),
                key: key.key.clone(),
                seq: *seq,
            })
            .collect();
        stored.sort_by(|a, b| {
            (&a.subscription, &a.topic, &a.key).cmp(&(&b.subscription, &b.topic, &b.key))
        });
        stored
    }
}
