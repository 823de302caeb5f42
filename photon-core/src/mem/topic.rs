//! The per-topic log of the mem port.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::watch;

use crate::event::Record;
use crate::port::CheckpointKey;

/// One topic's records; `records[i].seq == first_seq + i`.
#[derive(Debug)]
pub(super) struct TopicLog {
    pub(super) records: VecDeque<Arc<Record>>,
    pub(super) first_seq: i64,
    /// Last appended seq, watched by live subscribers.
    pub(super) head: watch::Sender<i64>,
}

impl TopicLog {
    fn new() -> Self {
        Self {
            records: VecDeque::new(),
            first_seq: 1,
            head: watch::channel(0).0,
        }
    }

    pub(super) fn last_seq(&self) -> i64 {
        self.first_seq + self.records.len() as i64 - 1
    }

    /// Up to `limit` records with `seq > after` (and of `key`), and the last seq scanned.
    pub(super) fn read_after(&self, after: i64, key: Option<&str>, limit: usize) -> (Vec<Record>, i64) {
        let start = usize::try_from(after + 1 - self.first_seq).unwrap_or(0);
        let mut found = Vec::new();
        let mut scanned = after.max(self.first_seq - 1);
        for record in self.records.iter().skip(start) {
            scanned = record.seq;
            if key.is_none() || record.topic_key.as_deref() == key {
                found.push(Record::clone(record));
                if found.len() == limit {
                    break;
                }
            }
        }
        (found, scanned)
    }
}

/// Everything the mem port holds.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) topics: HashMap<String, TopicLog>,
    pub(super) ids: HashMap<String, (String, i64)>,
    pub(super) checkpoints: HashMap<CheckpointKey, i64>,
}

impl State {
    pub(super) fn topic_mut(&mut self, topic: &str) -> &mut TopicLog {
        if !self.topics.contains_key(topic) {
            self.topics.insert(topic.to_owned(), TopicLog::new());
        }
        // Inserted just above when missing.
        self.topics.get_mut(topic).expect("topic inserted above")
    }
}
