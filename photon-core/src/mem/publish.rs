//! Appends to the mem port.

use std::sync::Arc;

use super::port::MemStoragePort;
use crate::event::{Appended, Record, RecordDraft};

impl MemStoragePort {
    /// Stores a draft; its envelope id is its event id.
    pub(super) fn append_now(&self, draft: RecordDraft) -> Appended {
        let mut state = self.shared.lock();
        let topic = draft.topic_name.clone();
        let log = state.topic_mut(&topic);
        let seq = log.last_seq() + 1;
        let event_id = draft.envelope_id.clone();
        log.records
            .push_back(Arc::new(Record::from_draft(draft, event_id.clone(), seq)));
        log.head.send_replace(seq);
        state.ids.insert(event_id.clone(), (topic, seq));
        Appended { event_id, seq }
    }

    /// The record with this id, if stored.
    pub(super) fn find(&self, event_id: &str) -> Option<Record> {
        let state = self.shared.lock();
        let (topic, seq) = state.ids.get(event_id)?;
        let log = state.topics.get(topic)?;
        let index = usize::try_from(seq - log.first_seq).ok()?;
        log.records.get(index).map(|r| Record::clone(r))
    }

    /// Up to `limit` records with `seq > after_seq`, oldest first.
    pub(super) fn list_after(&self, topic: &str, after_seq: i64, limit: usize) -> Vec<Record> {
        let state = self.shared.lock();
        state
            .topics
            .get(topic)
            .map(|log| log.read_after(after_seq, None, limit).0)
            .unwrap_or_default()
    }

    /// The `limit` newest records, newest first.
    pub(super) fn newest(&self, topic: &str, limit: usize) -> Vec<Record> {
        let state = self.shared.lock();
        state
            .topics
            .get(topic)
            .map(|log| log.records.iter().rev().take(limit).map(|r| Record::clone(r)).collect())
            .unwrap_or_default()
    }

    /// Highest seq of the topic, or of one key.
    pub(super) fn head(&self, topic: &str, key: Option<&str>) -> Option<i64> {
        let state = self.shared.lock();
        let log = state.topics.get(topic)?;
        match key {
            None => log.records.back().map(|r| r.seq),
            Some(key) => log
                .records
                .iter()
                .rev()
                .find(|r| r.topic_key.as_deref() == Some(key))
                .map(|r| r.seq),
        }
    }
}
