//! The per-topic log of the mem port.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::task::Waker;

use crate::error::Result;
use crate::event::{Record, RecordDraft};
use crate::port::CheckpointKey;
use crate::raw::wire;

/// A record as the log keeps it: its wire form ([`crate::raw::wire`]). The mem port keeps every
/// record it was given, and the encoded form takes about a fifth of the memory of the
/// decoded one (a JSON object alone allocates a 640-byte map node), which is what an
/// append spent most of its time on: fresh pages. Readers decode their own copy, as they
/// deep-copied the decoded record before.
#[derive(Debug)]
pub(super) struct StoredRecord {
    pub(super) seq: i64,
    /// The key, kept beside the bytes so that keyed reads filter without decoding.
    pub(super) topic_key: Option<Box<str>>,
    bytes: Box<[u8]>,
}

impl StoredRecord {
    /// The stored form of a draft; its seq is set when it is appended.
    ///
    /// # Errors
    /// [`crate::PhotonError::Codec`] for a draft the wire form cannot hold (a name longer
    /// than 65,534 bytes, a time outside 1677–2262; neither passes Photon's validation).
    pub(super) fn encode(draft: &RecordDraft) -> Result<Self> {
        thread_local! {
            // Encoding into a growing buffer reallocated it two or three times per record,
            // each time in fresh memory; one reused buffer and one exact copy do not.
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        let bytes = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            scratch.clear();
            wire::encode_draft_into(draft, &mut scratch)?;
            Ok::<_, crate::PhotonError>(Box::<[u8]>::from(scratch.as_slice()))
        })?;
        Ok(Self {
            seq: 0,
            topic_key: draft.topic_key.as_deref().map(Box::from),
            bytes,
        })
    }

    /// The record, with its event id in topic `number`.
    ///
    /// # Errors
    /// [`crate::PhotonError::Codec`] when the bytes do not decode (a draft appended to the
    /// port directly with a body nested deeper than JSON decoding allows).
    pub(super) fn decode(&self, number: usize) -> Result<Record> {
        wire::decode_record("mem", &self.bytes, event_id(number, self.seq), self.seq)
    }
}

/// One topic's records; `records[i].seq == first_seq + i`.
#[derive(Debug)]
pub(super) struct TopicLog {
    pub(super) records: VecDeque<Arc<StoredRecord>>,
    pub(super) first_seq: i64,
    /// Subscriptions that found nothing new, woken by the next append: each one's liveness
    /// token and waker. Kept under the state lock that appends take anyway, so an append
    /// with nobody waiting costs one emptiness check (a watch channel took eight mutexes
    /// per append).
    waiting: Vec<(Weak<()>, Waker)>,
    /// Records stored as bytes that do not decode (see
    /// [`super::MemStoragePort::append_undecodable`]), by seq.
    pub(super) undecodable: HashMap<i64, Vec<u8>>,
}

impl TopicLog {
    fn new() -> Self {
        Self {
            records: VecDeque::new(),
            first_seq: 1,
            waiting: Vec::new(),
            undecodable: HashMap::new(),
        }
    }

    /// Appends a record with the next seq; returns the subscriptions to wake (after the
    /// state lock is released).
    pub(super) fn push(&mut self, mut record: StoredRecord) -> (i64, Woken) {
        let seq = self.last_seq() + 1;
        record.seq = seq;
        self.records.push_back(Arc::new(record));
        (seq, Woken(std::mem::take(&mut self.waiting)))
    }

    /// Wakes `waker` at the next append, for the subscription whose liveness token is
    /// `alive`. Each subscription has one entry (its latest waker); entries of dropped
    /// subscriptions are removed here, so an idle topic does not collect them.
    pub(super) fn wake_at_next_append(&mut self, alive: &Arc<()>, waker: &Waker) {
        self.waiting.retain(|(token, _)| token.strong_count() > 0);
        let token = Arc::downgrade(alive);
        match self
            .waiting
            .iter_mut()
            .find(|(other, _)| other.ptr_eq(&token))
        {
            Some((_, registered)) if registered.will_wake(waker) => {}
            Some((_, registered)) => registered.clone_from(waker),
            None => self.waiting.push((token, waker.clone())),
        }
    }

    pub(super) fn last_seq(&self) -> i64 {
        self.first_seq + self.records.len() as i64 - 1
    }

    /// Up to `limit` records with `seq > after` (and of `key`), and the last seq scanned.
    pub(super) fn read_after(
        &self,
        after: i64,
        key: Option<&str>,
        limit: usize,
    ) -> (Vec<Arc<StoredRecord>>, i64) {
        let start = usize::try_from(after + 1 - self.first_seq).unwrap_or(0);
        let mut found = Vec::new();
        let mut scanned = after.max(self.first_seq - 1);
        for record in self.records.iter().skip(start) {
            scanned = record.seq;
            if key.is_none() || record.topic_key.as_deref() == key {
                found.push(Arc::clone(record));
                if found.len() == limit {
                    break;
                }
            }
        }
        (found, scanned)
    }
}

/// The subscriptions an append woke; [`Woken::wake`] them once the state lock is released.
#[must_use = "the waiting subscriptions sleep until they are woken"]
pub(super) struct Woken(Vec<(Weak<()>, Waker)>);

impl Woken {
    /// Wakes every subscription (a dropped one's waker does nothing).
    pub(super) fn wake(self) {
        for (_, waker) in self.0 {
            waker.wake();
        }
    }
}

/// Everything the mem port holds.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Topic logs in creation order; event ids name a topic by its position here.
    pub(super) logs: Vec<TopicLog>,
    pub(super) topic_numbers: HashMap<String, usize>,
    pub(super) checkpoints: HashMap<CheckpointKey, i64>,
}

impl State {
    /// The log of a topic and its number, created when missing.
    pub(super) fn topic_mut(&mut self, topic: &str) -> (usize, &mut TopicLog) {
        let number = match self.topic_numbers.get(topic) {
            Some(number) => *number,
            None => {
                self.logs.push(TopicLog::new());
                self.topic_numbers
                    .insert(topic.to_owned(), self.logs.len() - 1);
                self.logs.len() - 1
            }
        };
        (number, &mut self.logs[number])
    }

    /// The number and log of a topic, if it exists.
    pub(super) fn numbered_topic(&self, topic: &str) -> Option<(usize, &TopicLog)> {
        let number = *self.topic_numbers.get(topic)?;
        Some((number, &self.logs[number]))
    }

    /// The log of a topic, if it exists.
    pub(super) fn topic(&self, topic: &str) -> Option<&TopicLog> {
        self.topic_numbers
            .get(topic)
            .map(|number| &self.logs[*number])
    }

    /// The log of a topic, if it exists.
    pub(super) fn existing_topic_mut(&mut self, topic: &str) -> Option<&mut TopicLog> {
        let number = *self.topic_numbers.get(topic)?;
        self.logs.get_mut(number)
    }
}

/// Event ids of the mem port: `mem-<topic number>-<seq>`.
pub(super) fn event_id(topic_number: usize, seq: i64) -> String {
    // Written without the formatting machinery: this runs for every append and delivery.
    let mut number = itoa::Buffer::new();
    let mut seq_digits = itoa::Buffer::new();
    let (number, seq) = (number.format(topic_number), seq_digits.format(seq));
    let mut id = String::with_capacity(5 + number.len() + seq.len());
    id.push_str("mem-");
    id.push_str(number);
    id.push('-');
    id.push_str(seq);
    id
}

/// The topic number and seq of an event id, `None` when malformed.
pub(super) fn parse_event_id(event_id: &str) -> Option<(usize, i64)> {
    let (topic, seq) = event_id.strip_prefix("mem-")?.split_once('-')?;
    Some((topic.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::{FutureExt, StreamExt};
    use serde_json::json;

    use crate::mem::MemStoragePort;
    use crate::port::{StartAt, StoragePort, SubscribeRequest};
    use crate::{EventStore, TransportCrypto};

    fn tail(port: &MemStoragePort) -> crate::port::RecordStream {
        port.subscribe(SubscribeRequest {
            topic: "t".into(),
            key: None,
            start: StartAt::Tail,
            durable: None,
        })
    }

    #[tokio::test]
    async fn dropped_subscriptions_leave_no_waker_behind_and_a_live_one_is_woken() {
        let port = MemStoragePort::new();
        for _ in 0..100 {
            let mut parked = tail(&port);
            assert!(parked.next().now_or_never().is_none());
        }
        let mut live = tail(&port);
        assert!(live.next().now_or_never().is_none());
        let waiting =
            |port: &MemStoragePort| port.shared.lock().topic("t").map(|log| log.waiting.len());
        assert_eq!(waiting(&port), Some(1));
        let store = EventStore::new(Arc::new(port.clone()), TransportCrypto::plaintext());
        let waiter = tokio::spawn(async move { live.next().await.map(|r| r.map(|r| r.seq)) });
        tokio::task::yield_now().await;
        store
            .publish("t", None, json!(null), json!(1))
            .await
            .unwrap();
        let woken = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the append wakes the waiting subscription")
            .unwrap();
        assert_eq!(woken.map(Result::ok), Some(Some(1)));
        assert_eq!(waiting(&port), Some(0));
    }
}
