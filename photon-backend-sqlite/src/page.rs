//! Paged reads of a topic, for subscriptions: bounded in records and in rows scanned.
//!
//! Unkeyed pages walk the `(topic_id, seq)` key. Keyed pages walk the same key in windows
//! of [`SCAN_WINDOW`] seqs, keeping the rows of their key: there is no per-key index,
//! because keeping one costs every append a write to a scattered index page (it halved
//! append throughput with 64 concurrent keys). A keyed subscription therefore reads past
//! the topic's other records once, in bounded steps, and remembers how far it scanned, so
//! a rare key costs one pass over new records, never a rescan.

use photon_core::cursor::Page;
use photon_core::Result;
use rusqlite::{params, Connection};

use crate::error::sqlite_error;
use crate::row::{select_rows, StoredRow, RECORD_COLUMNS};

/// Seqs examined per keyed query.
const SCAN_WINDOW: i64 = 4096;
/// Windows examined per page read before handing back what was found.
const MAX_WINDOWS: usize = 16;

/// Reads up to `limit` records of `topic` (and `key`) with `seq > after`.
pub(crate) fn read_page(
    connection: &Connection,
    topic: &str,
    key: Option<&str>,
    after: i64,
    limit: usize,
) -> Result<Page> {
    let failed = |e| sqlite_error(&format!("read topic {topic:?}"), e);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let (rows, position) = match key {
        None => {
            let sql = format!(
                "SELECT {RECORD_COLUMNS} FROM events \
                 WHERE topic_id = (SELECT topic_id FROM topics WHERE name = ?1) AND seq > ?2 \
                 ORDER BY seq LIMIT ?3"
            );
            let rows =
                select_rows(connection, &sql, params![topic, after, limit]).map_err(failed)?;
            let position = rows.last().map_or(after, |row: &StoredRow| row.seq);
            (rows, position)
        }
        Some(key) => scan_key(connection, topic, key, after, limit).map_err(failed)?,
    };
    let records = rows.into_iter().map(|row| row.decode(topic)).collect();
    Ok(Page { records, position })
}

fn scan_key(
    connection: &Connection,
    topic: &str,
    key: &str,
    after: i64,
    limit: i64,
) -> rusqlite::Result<(Vec<StoredRow>, i64)> {
    let head: Option<i64> = connection
        .prepare_cached(
            "SELECT max(seq) FROM events WHERE topic_id = (SELECT topic_id FROM topics WHERE name = ?1)",
        )?
        .query_row([topic], |row| row.get(0))?;
    let Some(head) = head else {
        return Ok((Vec::new(), after));
    };
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM events \
         WHERE topic_id = (SELECT topic_id FROM topics WHERE name = ?1) \
         AND seq > ?2 AND seq <= ?3 AND topic_key = ?4 ORDER BY seq LIMIT ?5"
    );
    let mut rows = Vec::new();
    let mut position = after;
    for _ in 0..MAX_WINDOWS {
        if position >= head {
            break;
        }
        let remaining = limit - rows.len() as i64;
        let upto = position.saturating_add(SCAN_WINDOW).min(head);
        let found = select_rows(
            connection,
            &sql,
            params![topic, position, upto, key, remaining],
        )?;
        if found.len() as i64 == remaining {
            position = found.last().map_or(upto, |row: &StoredRow| row.seq);
            rows.extend(found);
            break;
        }
        rows.extend(found);
        position = upto;
    }
    Ok((rows, position))
}
