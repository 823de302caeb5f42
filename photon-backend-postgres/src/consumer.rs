//! Subscriptions: replay in bounded pages, then wait for the next commit.
//!
//! The stream is `photon_core::raw::sql`'s, over the cursor of `photon_core::raw::cursor`;
//! this file reads its pages. It reads at most `page_size` records per query on a pooled
//! connection and keeps only that page in memory. When it has caught up it
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

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use photon_core::raw::cursor::PageRead;
use photon_core::raw::sql::SqlPages;
use photon_core::Result;

use crate::error::{pg_error, pool_error};
use crate::port::PostgresStoragePort;
use crate::{gap, page};

/// Pause of a subscription after a failed read before the next one.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(200);

#[async_trait]
impl SqlPages for PostgresStoragePort {
    type Reader = Pool;

    fn reader(&self) -> Pool {
        self.pool().clone()
    }

    /// One pooled connection. Seqs are dense, so a whole-topic page starting right after
    /// `after` has no gap in front of it; only other pages cost a second query to look for
    /// one.
    async fn read_page(
        pool: &Pool,
        topic: &str,
        key: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<PageRead> {
        let what = format!("read topic {topic:?}");
        let client = pool.get().await.map_err(|e| pool_error(&what, e))?;
        let (page, first) = page::read_page(&client, topic, key, after, limit)
            .await
            .map_err(|e| pg_error(&what, e))?;
        if key.is_none() && first == Some(after + 1) {
            return Ok(PageRead::Page(page));
        }
        match gap::find_gap(&client, topic, after)
            .await
            .map_err(|e| pg_error(&what, e))?
        {
            Some((from, to)) => Ok(PageRead::Gap { from, to }),
            None => Ok(PageRead::Page(page)),
        }
    }
}
