//! Subscriptions: replay in bounded pages, then wait for the next commit.
//!
//! The cursor is `photon_core::raw::cursor`'s: it reads at most `page_size` records per query
//! on a pooled connection and keeps only that page in memory. When it has caught up it
//! waits for a commit to its topic: this port's writer wakes it at once, other processes'
//! commits through the listener's `NOTIFY` (see `listen.rs`); without either it reads
//! again every `recheck_interval`.
//!
//! `StartAt::Tail` starts after the topic's last seq as the topic's writer task (see
//! `lanes.rs`) sees it when it handles the request, in order with this port's appends to
//! the topic (a batch across topics included): an append of this port that returned
//! before `subscribe` is not delivered, one made after it is. Appends of other processes
//! are ordered with the subscription by that moment, which is at most the writer's queue
//! delay after `subscribe` and before the stream's first item.
//!
//! A cursor whose next seq was deleted (retention, `truncate_before`) yields one
//! [`photon_core::PhotonError::Gap`] naming the deleted range, then continues at the first
//! stored record (see `gap.rs`).

use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use photon_core::raw::cursor::{
    answered, paged_subscription, CursorStart, CursorTiming, PageRead, PageSource,
};
use photon_core::{PhotonError, RecordStream, Result, StartAt, SubscribeRequest};
use tokio::sync::oneshot;

use crate::error::{pg_error, pool_error, writer_gone};
use crate::gap;
use crate::page;
use crate::port::{Inner, PostgresStoragePort};
use crate::writer::Command;

/// Pause after a failed read before the next one.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// One subscription's reads.
struct Source {
    /// Only to ask for a tail position again; the cursor does not keep the port alive.
    port: Weak<Inner>,
    pool: Pool,
    page_size: usize,
    topic: String,
    key: Option<String>,
}

impl PostgresStoragePort {
    pub(crate) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        // Watch before resolving the start, so that no commit after it goes unnoticed.
        let commits = self.heads().watch(&request.topic);
        let start = match request.start {
            StartAt::Beginning => CursorStart::After(0),
            StartAt::AfterSeq(seq) => CursorStart::After(seq),
            StartAt::Tail => CursorStart::Resolving(self.request_tail(&request.topic)),
        };
        let source = Source {
            port: self.downgrade(),
            pool: self.pool().clone(),
            page_size: self.config().page_size,
            topic: request.topic.clone(),
            key: request.key,
        };
        let timing = CursorTiming {
            recheck: self.config().recheck_interval,
            retry_pause: RETRY_PAUSE,
        };
        paged_subscription(source, request.topic, start, commits, timing)
    }

    /// Asks the writer for the topic's head once every write sent before is committed.
    fn request_tail(&self, topic: &str) -> oneshot::Receiver<Result<i64>> {
        let (reply, answer) = oneshot::channel();
        if let Err(error) = self.send(Command::TailSeq {
            topic: topic.to_owned(),
            reply,
        }) {
            return answered(Err(error));
        }
        answer
    }
}

#[async_trait]
impl PageSource for Source {
    /// The next page after `after`, or the gap in front of it (one pooled connection).
    ///
    /// Seqs are dense, so a whole-topic page starting right after `after` has no gap in
    /// front of it; only other pages cost a second query to look for one.
    async fn read(&self, after: i64) -> Result<PageRead> {
        let what = format!("read topic {:?}", self.topic);
        let client = self.pool.get().await.map_err(|e| pool_error(&what, e))?;
        let key = self.key.as_deref();
        let (page, first) = page::read_page(&client, &self.topic, key, after, self.page_size)
            .await
            .map_err(|e| pg_error(&what, e))?;
        if key.is_none() && first == Some(after + 1) {
            return Ok(PageRead::Page(page));
        }
        match gap::find_gap(&client, &self.topic, after)
            .await
            .map_err(|e| pg_error(&what, e))?
        {
            Some((from, to)) => Ok(PageRead::Gap { from, to }),
            None => Ok(PageRead::Page(page)),
        }
    }

    fn request_tail(&self) -> oneshot::Receiver<Result<i64>> {
        match PostgresStoragePort::upgrade(&self.port) {
            Some(port) => port.request_tail(&self.topic),
            None => answered(Err(writer_gone())),
        }
    }

    fn writer_gone(&self) -> PhotonError {
        writer_gone()
    }
}
