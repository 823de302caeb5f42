//! Paged reads of a topic, for subscriptions: at most `page_size` records per query,
//! walking the `(topic_id, seq)` key, or the `(topic_id, topic_key, seq)` index for a
//! keyed subscription.

use std::time::Duration;

use deadpool_postgres::{Client, Pool};
use photon_core::raw::cursor::{Page, PageRead};
use photon_core::Result;

use crate::error::{pg_error, pool_error};
use crate::gap;
use crate::row::{decode_rows, RECORD_COLUMNS};

/// Pause of a subscription after a failed read before the next one.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The next page of `topic` (and `key`) after `after`, or the gap in front of it (one
/// pooled connection).
///
/// Seqs are dense, so a whole-topic page starting right after `after` has no gap in
/// front of it; only other pages cost a second query to look for one.
pub(crate) async fn read(
    pool: &Pool,
    topic: &str,
    key: Option<&str>,
    after: i64,
    limit: usize,
) -> Result<PageRead> {
    let what = format!("read topic {topic:?}");
    let client = pool.get().await.map_err(|e| pool_error(&what, e))?;
    let (page, first) = read_page(&client, topic, key, after, limit)
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

/// Reads up to `limit` records of `topic` (and `key`) with `seq > after`; with the seq of
/// the first record read, if any.
async fn read_page(
    client: &Client,
    topic: &str,
    key: Option<&str>,
    after: i64,
    limit: usize,
) -> std::result::Result<(Page, Option<i64>), tokio_postgres::Error> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let topic_id = "(SELECT topic_id FROM topics WHERE name = $1)";
    let rows = match key {
        None => {
            let select = client
                .prepare_cached(&format!(
                    "SELECT {RECORD_COLUMNS} FROM events WHERE topic_id = {topic_id} \
                     AND seq > $2 ORDER BY seq LIMIT $3"
                ))
                .await?;
            client.query(&select, &[&topic, &after, &limit]).await?
        }
        Some(key) => {
            let select = client
                .prepare_cached(&format!(
                    "SELECT {RECORD_COLUMNS} FROM events WHERE topic_id = {topic_id} \
                     AND topic_key = $4 AND seq > $2 ORDER BY seq LIMIT $3"
                ))
                .await?;
            client
                .query(&select, &[&topic, &after, &limit, &key])
                .await?
        }
    };
    let position = match rows.last() {
        Some(row) => row.try_get(0)?,
        None => after,
    };
    let first = rows.first().map(|row| row.try_get(0)).transpose()?;
    let page = Page {
        records: decode_rows(&rows, topic)?,
        position,
    };
    Ok((page, first))
}
