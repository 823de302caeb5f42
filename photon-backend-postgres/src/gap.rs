//! Gaps: seqs a subscription still needed that retention or `truncate_before` deleted.
//!
//! Seqs of a topic are assigned densely from 1 and deletion only ever removes a topic's
//! oldest records, so a cursor positioned after seq `s ≥ 1` has lost events exactly when
//! `s + 1` was assigned (the topic's last seq is at least `s + 1`) and the first record
//! still stored is above `s + 1` (or none is). The gap runs from `s + 1` to that first
//! stored seq (or to the last seq + 1). A cursor at 0 (from the beginning) has no gap: it
//! starts at the first record kept. The range is the topic's: a keyed subscription is told
//! of it too, although the removed records may have held none of its key's events.

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
