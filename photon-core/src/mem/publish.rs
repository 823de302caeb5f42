//! Appends to the mem port.

use std::sync::Arc;

use super::port::MemStoragePort;
use super::topic::{event_id, parse_event_id, StoredRecord};
use crate::error::Result;
use crate::event::{Appended, Record, RecordDraft};

impl MemStoragePort {
    /// Stores a draft.
    ///
    /// # Errors
    /// As [`StoredRecord::encode`]; nothing is stored then.
    pub(super) fn append_now(&self, draft: &RecordDraft) -> Result<Appended> {
        // Encoded before the lock is taken, so that appends and reads wait only for pushes.
        let record = StoredRecord::encode(draft)?;
        let (number, seq, waiting) = {
            let mut state = self.shared.lock();
            let (number, log) = state.topic_mut(&draft.topic_name);
            let (seq, waiting) = log.push(record);
            (number, seq, waiting)
        };
        waiting.wake();
        Ok(Appended {
            event_id: event_id(number, seq),
            seq,
        })
    }

    /// Stores drafts under one lock: all or (when one cannot be encoded) none, and the
    /// events of one topic with consecutive seqs.
    ///
    /// # Errors
    /// As [`StoredRecord::encode`]; nothing is stored then.
    pub(super) fn append_batch_now(&self, drafts: &[RecordDraft]) -> Result<Vec<Appended>> {
        let records = drafts
            .iter()
            .map(StoredRecord::encode)
            .collect::<Result<Vec<_>>>()?;
        let mut woken = Vec::new();
        let appended = {
            let mut state = self.shared.lock();
            drafts
                .iter()
                .zip(records)
                .map(|(draft, record)| {
                    let (number, log) = state.topic_mut(&draft.topic_name);
                    let (seq, waiting) = log.push(record);
                    woken.push(waiting);
                    Appended {
                        event_id: event_id(number, seq),
                        seq,
                    }
                })
                .collect()
        };
        for waiting in woken {
            waiting.wake();
        }
        Ok(appended)
    }

    /// Appends a record whose stored form is `stored`, which subscriptions cannot decode:
    /// they yield [`crate::PhotonError::Undecodable`] for it, as a durable port does for a
    /// corrupted record. For tests of consumers; the mem port never stores bytes otherwise.
    ///
    /// # Panics
    /// When `topic` or `key` is longer than 65,534 bytes (no valid name is).
    pub fn append_undecodable(&self, topic: &str, key: Option<&str>, stored: &[u8]) -> Appended {
        let draft = RecordDraft {
            envelope_id: String::new(),
            topic_name: topic.to_owned(),
            topic_key: key.map(str::to_owned),
            created_at: chrono::Utc::now(),
            body: crate::event::Body::Plain {
                actor: serde_json::Value::Null,
                payload: serde_json::Value::Null,
                headers: crate::headers::Headers::new(),
            },
        };
        let record = StoredRecord::encode(&draft)
            .expect("a draft of the current time, nulls and names of at most 65,534 bytes encodes");
        let (number, seq, waiting) = {
            let mut state = self.shared.lock();
            let (number, log) = state.topic_mut(topic);
            let (seq, waiting) = log.push(record);
            log.undecodable.insert(seq, stored.to_vec());
            (number, seq, waiting)
        };
        waiting.wake();
        Appended {
            event_id: event_id(number, seq),
            seq,
        }
    }

    /// The record with this id, if stored.
    ///
    /// # Errors
    /// As [`StoredRecord::decode`].
    pub(super) fn find(&self, event_id: &str) -> Result<Option<Record>> {
        let Some((number, seq)) = parse_event_id(event_id) else {
            return Ok(None);
        };
        let stored = {
            let state = self.shared.lock();
            let Some(log) = state.logs.get(number) else {
                return Ok(None);
            };
            let Ok(index) = usize::try_from(seq - log.first_seq) else {
                return Ok(None);
            };
            log.records.get(index).map(Arc::clone)
        };
        stored.map(|stored| stored.decode(number)).transpose()
    }

    /// Up to `limit` records with `seq > after_seq`, oldest first.
    ///
    /// # Errors
    /// As [`StoredRecord::decode`].
    pub(super) fn list_after(
        &self,
        topic: &str,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<Record>> {
        let (number, stored) = {
            let state = self.shared.lock();
            let Some((number, log)) = state.numbered_topic(topic) else {
                return Ok(Vec::new());
            };
            (number, log.read_after(after_seq, None, limit).0)
        };
        stored.iter().map(|r| r.decode(number)).collect()
    }

    /// The `limit` newest records, newest first.
    ///
    /// # Errors
    /// As [`StoredRecord::decode`].
    pub(super) fn newest(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        let (number, stored) = {
            let state = self.shared.lock();
            let Some((number, log)) = state.numbered_topic(topic) else {
                return Ok(Vec::new());
            };
            let newest: Vec<_> = log.records.iter().rev().take(limit).cloned().collect();
            (number, newest)
        };
        stored.iter().map(|r| r.decode(number)).collect()
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
