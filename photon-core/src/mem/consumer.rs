//! Subscriptions of the mem port: replay from the log, then wait for the head to move.
//!
//! A cursor positioned after seq `s ≥ 1` whose next seq `s + 1` was truncated away yields
//! one [`PhotonError::Gap`] naming the removed range, then continues at the first record
//! kept. A subscription from the beginning (`s = 0`) starts at the first record kept,
//! without a gap.

use std::collections::VecDeque;

use futures::stream;
use tokio::sync::watch;

use super::port::MemStoragePort;
use super::topic::event_id;
use crate::error::{PhotonError, Result};
use crate::event::Record;
use crate::port::{RecordStream, StartAt, SubscribeRequest};

const PAGE: usize = 512;

struct Cursor {
    port: MemStoragePort,
    topic: String,
    /// The topic's number, which its event ids carry.
    number: usize,
    key: Option<String>,
    after: i64,
    buffer: VecDeque<Result<Record>>,
    /// A gap found by the last read, yielded before its records.
    gap: Option<PhotonError>,
    head: watch::Receiver<i64>,
}

impl MemStoragePort {
    pub(super) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        let (number, after, head) = {
            let mut state = self.shared.lock();
            let (number, log) = state.topic_mut(&request.topic);
            let after = match request.start {
                StartAt::Beginning => 0,
                StartAt::AfterSeq(seq) => seq,
                StartAt::Tail => log.last_seq(),
            };
            (number, after, log.head.subscribe())
        };
        let cursor = Cursor {
            port: self.clone(),
            topic: request.topic,
            number,
            key: request.key,
            after,
            buffer: VecDeque::new(),
            gap: None,
            head,
        };
        Box::pin(stream::unfold(cursor, |mut cursor| async move {
            let record = cursor.next().await?;
            Some((record, cursor))
        }))
    }
}

impl Cursor {
    async fn next(&mut self) -> Option<Result<Record>> {
        loop {
            if let Some(gap) = self.gap.take() {
                return Some(Err(gap));
            }
            if let Some(record) = self.buffer.pop_front() {
                return Some(record);
            }
            // Mark the head seen before reading so an append after the read wakes us.
            self.head.borrow_and_update();
            self.fill();
            if self.buffer.is_empty() && self.gap.is_none() && self.head.changed().await.is_err() {
                return None;
            }
        }
    }

    fn fill(&mut self) {
        let (records, undecodable) = {
            let state = self.port.shared.lock();
            let Some(log) = state.topic(&self.topic) else {
                return;
            };
            if self.after >= 1 && self.after + 1 < log.first_seq {
                self.gap = Some(PhotonError::Gap {
                    topic: self.topic.clone(),
                    from: self.after + 1,
                    to: log.first_seq,
                });
                self.after = log.first_seq - 1;
            }
            let (records, scanned) = log.read_after(self.after, self.key.as_deref(), PAGE);
            self.after = scanned;
            let undecodable: Vec<_> = records
                .iter()
                .filter_map(|r| {
                    log.undecodable
                        .get(&r.seq)
                        .map(|bytes| (r.seq, bytes.clone()))
                })
                .collect();
            (records, undecodable)
        };
        // Records are decoded outside the lock so that publishers are not held up.
        let number = self.number;
        self.buffer.extend(records.iter().map(|r| {
            match undecodable.iter().find(|(seq, _)| *seq == r.seq) {
                Some((_, stored)) => Err(PhotonError::undecodable(
                    &self.topic,
                    event_id(number, r.seq),
                    r.seq,
                    r.topic_key.as_deref().map(str::to_owned),
                    stored.clone(),
                    "not a Photon record",
                )),
                None => r.decode(number),
            }
        }));
    }
}
