//! Gaps: the bounds `photon_core::raw::sql::gap` decides from (a topic's last seq and its
//! first stored one), read from SQLite.

use photon_core::raw::sql::gap::gap_after;
use photon_core::Result;
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::sqlite_error;

/// The gap `(from, to)` a cursor positioned after `after` has run into, if any.
pub(crate) fn find_gap(
    connection: &Connection,
    topic: &str,
    after: i64,
) -> Result<Option<(i64, i64)>> {
    if after < 1 {
        return Ok(None);
    }
    let failed = |e| sqlite_error(&format!("read the first stored seq of topic {topic:?}"), e);
    let bounds: Option<(i64, Option<i64>)> = connection
        .prepare_cached(
            "SELECT t.last_seq, (SELECT min(e.seq) FROM events e WHERE e.topic_id = t.topic_id) \
             FROM topics t WHERE t.name = ?1",
        )
        .map_err(failed)?
        .query_row(params![topic], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
        .map_err(failed)?;
    let Some((last_seq, first_stored)) = bounds else {
        return Ok(None);
    };
    Ok(gap_after(after, last_seq, first_stored))
}
