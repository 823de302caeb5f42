//! Subscriptions of a SQL port: replay in bounded pages, then wait for the next commit.
//!
//! The cursor is [`crate::raw::cursor`]'s: it reads at most `page_size` records per
//! read and keeps only that page in memory. When it has caught up it waits for a commit
//! to its topic (the port's commit signal) or for `recheck` to pass, then reads again.
//!
//! `StartAt::Tail` starts after the topic's last seq as the port's writer sees it when it
//! handles the request, in order with the port's appends: an append of this port that
//! returned before `subscribe` is not delivered, one made after it is.

use async_trait::async_trait;
use tokio::sync::oneshot;

use super::command::Command;
use super::error::writer_gone;
use super::port::SqlPort;
use crate::error::{PhotonError, Result};
use crate::port::{RecordStream, StartAt, SubscribeRequest};
use crate::raw::cursor::{
    answered, paged_subscription, CursorStart, CursorTiming, PageRead, PageSource,
};

/// One subscription's reads.
struct Source<P: SqlPort> {
    /// Only to ask for a tail position again; the cursor does not keep the port alive.
    port: P::Weak,
    reader: P::Reader,
    page_size: usize,
    topic: String,
    key: Option<String>,
}

/// The stream of `request` over `port`.
pub(super) fn open<P: SqlPort>(port: &P, request: SubscribeRequest) -> RecordStream {
    // Watch before resolving the start, so that no commit after it goes unnoticed.
    let commits = port.heads().watch(&request.topic);
    let start = match request.start {
        StartAt::Beginning => CursorStart::After(0),
        StartAt::AfterSeq(seq) => CursorStart::After(seq),
        StartAt::Tail => CursorStart::Resolving(request_tail(port, &request.topic)),
    };
    let settings = port.settings();
    let source = Source::<P> {
        port: port.downgrade(),
        reader: port.reader(),
        page_size: settings.page_size,
        topic: request.topic.clone(),
        key: request.key,
    };
    let timing = CursorTiming {
        recheck: settings.recheck,
        retry_pause: settings.retry_pause,
    };
    paged_subscription(source, request.topic, start, commits, timing)
}

/// Asks the writer for the topic's head once every write sent before is committed.
fn request_tail<P: SqlPort>(port: &P, topic: &str) -> oneshot::Receiver<Result<i64>> {
    let (reply, answer) = oneshot::channel();
    if let Err(error) = port.send(Command::TailSeq {
        topic: topic.to_owned(),
        reply,
    }) {
        return answered(Err(error));
    }
    answer
}

#[async_trait]
impl<P: SqlPort> PageSource for Source<P> {
    async fn read(&self, after: i64) -> Result<PageRead> {
        P::read_page(
            &self.reader,
            &self.topic,
            self.key.as_deref(),
            after,
            self.page_size,
        )
        .await
    }

    fn request_tail(&self) -> oneshot::Receiver<Result<i64>> {
        match P::upgrade(&self.port) {
            Some(port) => request_tail(&port, &self.topic),
            None => answered(Err(writer_gone(P::LABEL))),
        }
    }

    fn writer_gone(&self) -> PhotonError {
        writer_gone(P::LABEL)
    }
}
