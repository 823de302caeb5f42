//! Subscriptions: replay in bounded pages, then wait for the next commit.
//!
//! The stream is `photon_core::raw::sql`'s, over the cursor of `photon_core::raw::cursor`;
//! this file reads its pages. It reads at most `page_size` records per query on the
//! blocking pool and keeps only that page in memory. When it has caught up it waits
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

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::raw::cursor::PageRead;
use photon_core::raw::sql::SqlPages;
use photon_core::Result;

use crate::page;
use crate::port::SqliteStoragePort;
use crate::reader::Readers;

#[async_trait]
impl SqlPages for SqliteStoragePort {
    type Reader = Arc<Readers>;

    fn reader(&self) -> Arc<Readers> {
        Arc::clone(self.readers())
    }

    /// One read connection, one trip to the blocking pool.
    async fn read_page(
        readers: &Arc<Readers>,
        topic: &str,
        key: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<PageRead> {
        let topic = topic.to_owned();
        let key = key.map(str::to_owned);
        readers
            .read(move |connection| {
                page::read_after(connection, &topic, key.as_deref(), after, limit)
            })
            .await
    }
}
