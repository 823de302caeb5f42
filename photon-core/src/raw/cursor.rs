//! For port authors: a subscription over a store that is read in pages (the SQL ports).
//!
//! A [`PageSource`] reads the next page of one topic (or one key) after a seq, or finds
//! the gap in front of it; [`paged_subscription`] turns it into the subscription's
//! [`RecordStream`]. The stream keeps only one page in memory. When it has caught up it
//! waits for the port's commit signal for the topic (see [`crate::raw::wake::CommitWakers`]) or
//! for `recheck` to pass, then reads again.
//!
//! A cursor whose next seq was deleted (retention, `truncate_before`) yields one
//! [`PhotonError::Gap`] naming the deleted range, then continues at the first stored
//! record.
//!
//! Cancel safety: dropping a `next()` future loses nothing (a page being read is read
//! again by the next call); dropping the stream releases its watcher and its source.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream;
use tokio::sync::{oneshot, watch};

use crate::error::{PhotonError, Result};
use crate::event::Record;
use crate::port::RecordStream;

/// What one read of a topic found.
#[derive(Debug)]
pub struct Page {
    /// Decoded records, in seq order (a record that cannot be decoded is an error item).
    pub records: Vec<Result<Record>>,
    /// Every record of the subscription up to this seq has been read.
    pub position: i64,
}

/// What one read of a [`PageSource`] found.
#[derive(Debug)]
pub enum PageRead {
    /// Records `from..to` were deleted before the cursor read them.
    Gap {
        /// The first deleted seq.
        from: i64,
        /// The first seq still stored.
        to: i64,
    },
    /// The next page.
    Page(Page),
}

/// Reads one subscription's topic (or key) in pages.
#[async_trait]
pub trait PageSource: Send + Sync + 'static {
    /// The next page after `after`, or the gap in front of it.
    ///
    /// # Errors
    /// The store's read error; the cursor yields it and reads again after a pause.
    async fn read(&self, after: i64) -> Result<PageRead>;

    /// Asks again where the topic ends, after resolving a tail start failed.
    fn request_tail(&self) -> oneshot::Receiver<Result<i64>>;

    /// The error for a tail answer that never came (the port's writer went away).
    fn writer_gone(&self) -> PhotonError;
}

/// Where a paged subscription starts.
#[derive(Debug)]
pub enum CursorStart {
    /// After this seq.
    After(i64),
    /// After the seq this answer will give (a tail subscription whose port resolves the
    /// topic's end in order with its own appends).
    Resolving(oneshot::Receiver<Result<i64>>),
}

/// A tail answer given at once (for example the error of a port whose writer is gone).
pub fn answered(answer: Result<i64>) -> oneshot::Receiver<Result<i64>> {
    let (reply, receiver) = oneshot::channel();
    // The receiver is alive here: the send cannot fail.
    let _ = reply.send(answer);
    receiver
}

/// How a paged subscription waits.
#[derive(Debug, Clone, Copy)]
pub struct CursorTiming {
    /// Longest wait for a commit signal before reading again (appends the port is not told
    /// about, such as other processes' on a store without notifications).
    pub recheck: Duration,
    /// Pause after a failed read before the next one.
    pub retry_pause: Duration,
}

/// The subscription's stream over `source`: records of `topic` from `start`, waking on
/// `commits` (a receiver taken before the start was resolved, so that no commit after it
/// goes unnoticed).
pub fn paged_subscription<S: PageSource>(
    source: S,
    topic: String,
    start: CursorStart,
    commits: watch::Receiver<u64>,
    timing: CursorTiming,
) -> RecordStream {
    let cursor = Cursor {
        source,
        topic,
        position: start,
        buffer: VecDeque::new(),
        commits,
        timing,
        failed: false,
    };
    Box::pin(stream::unfold(cursor, |mut cursor| async move {
        let item = cursor.next().await;
        Some((item, cursor))
    }))
}

struct Cursor<S> {
    source: S,
    topic: String,
    position: CursorStart,
    buffer: VecDeque<Result<Record>>,
    commits: watch::Receiver<u64>,
    timing: CursorTiming,
    failed: bool,
}

impl<S: PageSource> Cursor<S> {
    async fn next(&mut self) -> Result<Record> {
        loop {
            if let Some(item) = self.buffer.pop_front() {
                return item;
            }
            if std::mem::take(&mut self.failed) {
                tokio::time::sleep(self.timing.retry_pause).await;
            }
            let after = match &mut self.position {
                CursorStart::After(seq) => *seq,
                CursorStart::Resolving(answer) => match answer.await {
                    Ok(Ok(seq)) => {
                        self.position = CursorStart::After(seq);
                        seq
                    }
                    Ok(Err(error)) => return self.retry_tail(error),
                    Err(_) => return self.retry_tail(self.source.writer_gone()),
                },
            };
            // Mark the signal seen before reading, so a commit after the read wakes us.
            self.commits.borrow_and_update();
            match self.source.read(after).await {
                Ok(PageRead::Gap { from, to }) => {
                    self.position = CursorStart::After(to - 1);
                    return Err(PhotonError::Gap {
                        topic: self.topic.clone(),
                        from,
                        to,
                    });
                }
                Ok(PageRead::Page(page)) if page.records.is_empty() && page.position == after => {
                    self.wait_for_commit().await;
                }
                Ok(PageRead::Page(page)) => {
                    self.position = CursorStart::After(page.position);
                    self.buffer.extend(page.records);
                }
                Err(error) => {
                    self.failed = true;
                    return Err(error);
                }
            }
        }
    }

    fn retry_tail(&mut self, error: PhotonError) -> Result<Record> {
        self.position = CursorStart::Resolving(self.source.request_tail());
        self.failed = true;
        Err(error)
    }

    async fn wait_for_commit(&mut self) {
        let recheck = self.timing.recheck;
        tokio::select! {
            changed = self.commits.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(recheck).await;
                }
            }
            () = tokio::time::sleep(recheck) => {}
        }
    }
}
