//! Subscriptions of the mem port: replay from the log, then wait for the head to move.
//!
//! A cursor positioned after seq `s ≥ 1` whose next seq `s + 1` was truncated away yields
//! one [`PhotonError::Gap`] naming the removed range, then continues at the first record
//! kept. A subscription from the beginning (`s = 0`) starts at the first record kept,
//! without a gap.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::stream;

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
    /// Dropped with the cursor, which tells the topic log to forget its waker.
    alive: Arc<()>,
}

impl MemStoragePort {
    pub(super) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        let (number, after) = {
            let mut state = self.shared.lock();
            let (number, log) = state.topic_mut(&request.topic);
            let after = match request.start {
                StartAt::Beginning => 0,
                StartAt::AfterSeq(seq) => seq,
                StartAt::Tail => log.last_seq(),
            };
            (number, after)
        };
        let cursor = Cursor {
            port: self.clone(),
            topic: request.topic,
            number,
            key: request.key,
            after,
            buffer: VecDeque::new(),
            gap: None,
            alive: Arc::new(()),
        };
        Box::pin(stream::unfold(cursor, |mut cursor| async move {
            let record = cursor.next().await?;
            Some((record, cursor))
        }))
    }
}

impl Cursor {
    async fn next(&mut self) -> Option<Result<Record>> {
        std::future::poll_fn(|cx| self.poll_next_record(cx)).await
    }

    fn poll_next_record(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Record>>> {
        if self.gap.is_none() && self.buffer.is_empty() {
            self.fill(cx.waker());
        }
        if let Some(gap) = self.gap.take() {
            return Poll::Ready(Some(Err(gap)));
        }
        match self.buffer.pop_front() {
            Some(record) => Poll::Ready(Some(record)),
            None => Poll::Pending,
        }
    }

    /// Reads the next page; when there is nothing new, `waker` is woken by the next
    /// append (registered under the same lock as the read, so no append is missed).
    fn fill(&mut self, waker: &Waker) {
        let (records, undecodable) = {
            let mut state = self.port.shared.lock();
            let Some(log) = state.existing_topic_mut(&self.topic) else {
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
            if records.is_empty() && self.gap.is_none() {
                log.wake_at_next_append(&self.alive, waker);
            }
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
