//! Subscriptions: replay in bounded pages, then wait for the next commit.
//!
//! A cursor reads at most `page_size` records per query on the blocking pool and keeps
//! only that page in memory. When it has caught up it waits for this port's writer to
//! commit to its topic (woken at once) or for `poll_interval` to pass (appends of other
//! processes writing the same file), then reads again.
//!
//! `StartAt::Tail` starts after the topic's last seq as this port's writer thread sees it
//! when it handles the request, in order with this port's appends: an append of this port
//! that returned before `subscribe` is not delivered, one made after it is. Appends of
//! other processes are ordered with the subscription by that moment, which is at most the
//! writer's queue delay after `subscribe` and before the stream's first item.
//!
//! A cursor whose next seq was deleted (retention, `truncate_before`) yields one
//! [`photon_core::PhotonError::Gap`] naming the deleted range, then continues at the first
//! stored record (see `gap.rs`).
//!
//! Cancel safety: dropping a `next()` future loses nothing (the read in progress is kept
//! by the stream); dropping the stream releases its connection and watcher.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream;
use photon_core::{PhotonError, Record, RecordStream, Result, StartAt, SubscribeRequest};
use tokio::sync::{oneshot, watch};

use crate::error::writer_gone;
use crate::gap;
use crate::page::{self, Page};
use crate::port::{Inner, SqliteStoragePort};
use crate::reader::Readers;
use crate::writer::Command;

/// Where the cursor stands.
enum Position {
    /// Waiting for the writer to tell the topic's head (a tail subscription).
    Resolving(oneshot::Receiver<Result<i64>>),
    /// Every record with a seq up to this one was read.
    After(i64),
}

/// What one read found.
enum Read {
    /// Records `from..to` were deleted before the cursor read them.
    Gap { from: i64, to: i64 },
    /// The next page.
    Page(Page),
}

struct Cursor {
    /// Only to ask for a tail position again; the cursor does not keep the port alive.
    port: Weak<Inner>,
    readers: Arc<Readers>,
    poll_interval: Duration,
    page_size: usize,
    topic: String,
    key: Option<String>,
    position: Position,
    buffer: VecDeque<Result<Record>>,
    head: watch::Receiver<u64>,
    failed: bool,
}

impl SqliteStoragePort {
    pub(crate) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        // Watch before resolving the start, so that no commit after it goes unnoticed.
        let head = self.heads().watch(&request.topic);
        let position = match request.start {
            StartAt::Beginning => Position::After(0),
            StartAt::AfterSeq(seq) => Position::After(seq),
            StartAt::Tail => Position::Resolving(self.request_tail(&request.topic)),
        };
        let cursor = Cursor {
            port: self.downgrade(),
            readers: Arc::clone(self.readers()),
            poll_interval: self.config().poll_interval,
            page_size: self.config().page_size,
            topic: request.topic,
            key: request.key,
            position,
            buffer: VecDeque::new(),
            head,
            failed: false,
        };
        Box::pin(stream::unfold(cursor, |mut cursor| async move {
            let item = cursor.next().await;
            Some((item, cursor))
        }))
    }

    /// Asks the writer for the topic's head once every write sent before is committed.
    fn request_tail(&self, topic: &str) -> oneshot::Receiver<Result<i64>> {
        let (reply, answer) = oneshot::channel();
        if let Err(error) = self.send(Command::TailSeq {
            topic: topic.to_owned(),
            reply,
        }) {
            let (reply, answer) = oneshot::channel();
            let _ = reply.send(Err(error));
            return answer;
        }
        answer
    }
}

impl Cursor {
    async fn next(&mut self) -> Result<Record> {
        loop {
            if let Some(item) = self.buffer.pop_front() {
                return item;
            }
            if std::mem::take(&mut self.failed) {
                tokio::time::sleep(self.poll_interval).await;
            }
            let after = match &mut self.position {
                Position::After(seq) => *seq,
                Position::Resolving(answer) => match answer.await {
                    Ok(Ok(seq)) => {
                        self.position = Position::After(seq);
                        seq
                    }
                    Ok(Err(error)) => return self.retry_tail(error),
                    Err(_) => return self.retry_tail(writer_gone()),
                },
            };
            // Mark the head seen before reading, so a commit after the read wakes us.
            self.head.borrow_and_update();
            match self.read_page(after).await {
                Ok(Read::Gap { from, to }) => {
                    self.position = Position::After(to - 1);
                    return Err(PhotonError::Gap {
                        topic: self.topic.clone(),
                        from,
                        to,
                    });
                }
                Ok(Read::Page(page)) if page.records.is_empty() && page.position == after => {
                    self.wait_for_commit().await;
                }
                Ok(Read::Page(page)) => {
                    self.position = Position::After(page.position);
                    self.buffer.extend(page.records);
                }
                Err(error) => {
                    self.failed = true;
                    return Err(error);
                }
            }
        }
    }

    fn retry_tail(&mut self, error: photon_core::PhotonError) -> Result<Record> {
        let answer = match SqliteStoragePort::upgrade(&self.port) {
            Some(port) => port.request_tail(&self.topic),
            None => {
                let (reply, answer) = oneshot::channel();
                let _ = reply.send(Err(writer_gone()));
                answer
            }
        };
        self.position = Position::Resolving(answer);
        self.failed = true;
        Err(error)
    }

    async fn wait_for_commit(&mut self) {
        let poll_interval = self.poll_interval;
        tokio::select! {
            changed = self.head.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(poll_interval).await;
                }
            }
            () = tokio::time::sleep(poll_interval) => {}
        }
    }

    /// The next page after `after`, or the gap in front of it (one read connection, one
    /// trip to the blocking pool).
    async fn read_page(&self, after: i64) -> Result<Read> {
        let topic = self.topic.clone();
        let key = self.key.clone();
        let limit = self.page_size;
        self.readers
            .read(move |connection| {
                if let Some((from, to)) = gap::find_gap(connection, &topic, after)? {
                    return Ok(Read::Gap { from, to });
                }
                page::read_page(connection, &topic, key.as_deref(), after, limit).map(Read::Page)
            })
            .await
    }
}
