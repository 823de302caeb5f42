//! Paged reads of a topic, for subscriptions: at most `page_size` records per query,
//! walking the `(topic_id, seq)` key, or the `(topic_id, topic_key, seq)` index for a
//! keyed subscription.

use deadpool_postgres::Client;
use photon_core::raw::cursor::Page;

use crate::row::{decode_rows, RECORD_COLUMNS};

/// Reads up to `limit` records of `topic` (and `key`) with `seq > after`; with the seq of
/// the first record read, if any.
pub(crate) async fn read_page(
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
