//! Appends to the mem port.

use std::sync::Arc;

use super::port::MemStoragePort;
use super::topic::{event_id, parse_event_id};
use crate::event::{Appended, Record, RecordDraft};

impl MemStoragePort {
    /// Stores a draft.
    pub(super) fn append_now(&self, draft: RecordDraft) -> Appended {
        let mut state = self.shared.lock();
        let (number, log) = state.topic_mut(&draft.topic_name);
        let seq = log.last_seq() + 1;
        let event_id = event_id(number, seq);
        log.records
            .push_back(Arc::new(Record::from_draft(draft, event_id.clone(), seq)));
        log.head.send_replace(seq);
        Appended { event_id, seq }
    }

    /// Appends a record whose stored form is `stored`, which subscriptions cannot decode:
    /// they yield [`crate::PhotonError::Undecodable`] for it, as a durable port does for a
    /// corrupted record. For tests of consumers; the mem port never stores bytes otherwise.
    pub fn append_undecodable(&self, topic: &str, key: Option<&str>, stored: &[u8]) -> Appended {
        let draft = RecordDraft {
            envelope_id: String::new(),
            topic_name: topic.to_owned(),
            topic_key: key.map(str::to_owned),
            created_at: chrono::Utc::now(),
            body: crate::event::Body::Plain {
                actor: serde_json::Value::Null,
                payload: serde_json::Value::Null,
            },
        };
        let mut state = self.shared.lock();
        let (number, log) = state.topic_mut(topic);
        let seq = log.last_seq() + 1;
        let event_id = event_id(number, seq);
        log.records
            .push_back(Arc::new(Record::from_draft(draft, event_id.clone(), seq)));
        log.undecodable.insert(seq, stored.to_vec());
        log.head.send_replace(seq);
        Appended { event_id, seq }
    }

    /// The record with this id, if stored.
    pub(super) fn find(&self, event_id: &str) -> Option<Record> {
        let (number, seq) = parse_event_id(event_id)?;
        let state = self.shared.lock();
        let log = state.logs.get(number)?;
        let index = usize::try_from(seq - log.first_seq).ok()?;
        log.records.get(index).map(|r| Record::clone(r))
    }

    /// Up to `limit` records with `seq > after_seq`, oldest first.
    pub(super) fn list_after(&self, topic: &str, after_seq: i64, limit: usize) -> Vec<Record> {
        let state = self.shared.lock();
        state
            .topic(topic)
            .map(|log| log.read_after(after_seq, None, limit).0)
            .unwrap_or_default()
            .into_iter()
            .map(|r| Record::clone(&r))
            .collect()
    }

    /// The `limit` newest records, newest first.
    pub(super) fn newest(&self, topic: &str, limit: usize) -> Vec<Record> {
        let state = self.shared.lock();
        state
            .topic(topic)
            .map(|log| {
                log.records
                    .iter()
                    .rev()
                    .take(limit)
                    .map(|r| Record::clone(r))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Highest seq of the topic, or of one key.
    pub(super) fn head(&self, topic: &str, key: Option<&str>) -> Option<i64> {
        let state = self.shared.lock();
        let log = state.topic(topic)?;
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
