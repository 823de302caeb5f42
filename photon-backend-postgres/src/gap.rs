//! Gaps: the bounds `photon_core::raw::sql::gap` decides from (a topic's last seq and its
//! first stored one), read from PostgreSQL.

use deadpool_postgres::Client;
use photon_core::raw::sql::gap::gap_after;

/// The gap `(from, to)` a cursor positioned after `after` has run into, if any.
pub(crate) async fn find_gap(
    client: &Client,
    topic: &str,
    after: i64,
) -> Result<Option<(i64, i64)>, tokio_postgres::Error> {
    if after < 1 {
        return Ok(None);
    }
    let select = client
        .prepare_cached(
            "SELECT t.last_seq, (SELECT min(e.seq) FROM events e WHERE e.topic_id = t.topic_id) \
             FROM topics t WHERE t.name = $1",
        )
        .await?;
    let Some(row) = client.query_opt(&select, &[&topic]).await? else {
        return Ok(None);
    };
    let last_seq: i64 = row.try_get(0)?;
    let first_stored: Option<i64> = row.try_get(1)?;
    Ok(gap_after(after, last_seq, first_stored))
}
