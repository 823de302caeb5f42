//! Subscriptions: replay in bounded pages, then wait for the next commit.
//!
//! The cursor is `photon_core::raw::cursor`'s: it reads at most `page_size` records per query
//! on the blocking pool and keeps only that page in memory. When it has caught up it waits
//! for this port's writer to commit to its topic (woken at once) or for `poll_interval` to
//! pass (appends of other processes writing the same file), then reads again.
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

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use photon_core::raw::cursor::{
    answered, paged_subscription, CursorStart, CursorTiming, PageRead, PageSource,
};
use photon_core::{PhotonError, RecordStream, Result, StartAt, SubscribeRequest};
use tokio::sync::oneshot;

use crate::error::writer_gone;
use crate::page;
use crate::port::{Inner, SqliteStoragePort};
use crate::reader::Readers;
use crate::writer::Command;

/// One subscription's reads.
struct Source {
    /// Only to ask for a tail position again; the cursor does not keep the port alive.
    port: Weak<Inner>,
    readers: Arc<Readers>,
    page_size: usize,
    topic: String,
    key: Option<String>,
}

impl SqliteStoragePort {
    pub(crate) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        // Watch before resolving the start, so that no commit after it goes unnoticed.
        let commits = self.heads().watch(&request.topic);
        let start = match request.start {
            StartAt::Beginning => CursorStart::After(0),
            StartAt::AfterSeq(seq) => CursorStart::After(seq),
            StartAt::Tail => CursorStart::Resolving(self.request_tail(&request.topic)),
        };
        let poll_interval = self.config().poll_interval;
        let source = Source {
            port: self.downgrade(),
            readers: Arc::clone(self.readers()),
            page_size: self.config().page_size,
            topic: request.topic.clone(),
            key: request.key,
        };
        let timing = CursorTiming {
            recheck: poll_interval,
            retry_pause: poll_interval,
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
    /// The next page after `after`, or the gap in front of it (one read connection, one
    /// trip to the blocking pool).
    async fn read(&self, after: i64) -> Result<PageRead> {
        let topic = self.topic.clone();
        let key = self.key.clone();
        let limit = self.page_size;
        self.readers
            .read(move |connection| {
                page::read_after(connection, &topic, key.as_deref(), after, limit)
            })
            .await
    }

    fn request_tail(&self) -> oneshot::Receiver<Result<i64>> {
        match SqliteStoragePort::upgrade(&self.port) {
            Some(port) => port.request_tail(&self.topic),
            None => answered(Err(writer_gone())),
        }
    }

    fn writer_gone(&self) -> PhotonError {
        writer_gone()
    }
}
