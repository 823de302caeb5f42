//! Paged reads of a topic, for subscriptions: bounded in records and in rows scanned.
//!
//! Unkeyed pages walk the `(topic_id, seq)` key. Keyed pages walk the same key in windows
//! of [`SCAN_WINDOW`] seqs, keeping the rows of their key: there is no per-key index,
//! because keeping one costs every append a write to a scattered index page (it halved
//! append throughput with 64 concurrent keys). A keyed subscription therefore reads past
//! the topic's other records once, in bounded steps, and remembers how far it scanned, so
//! a rare key costs one pass over new records, never a rescan.

use photon_core::raw::cursor::{Page, PageRead};
use photon_core::Result;
use rusqlite::{params, Connection};

use crate::error::sqlite_error;
use crate::gap::find_gap;
use crate::row::{select_rows, StoredRow, RECORD_COLUMNS};

/// Seqs examined per keyed query.
const SCAN_WINDOW: i64 = 4096;
/// Windows examined per page read before handing back what was found.
const MAX_WINDOWS: usize = 16;

/// The gap in front of a cursor positioned after `after`, or else its next page, both read
/// in one snapshot: a retention sweep committed between the gap check and the page would
/// otherwise delete the page's first records after the check found nothing missing, and
/// the page would skip them without a gap.
///
/// # Errors
/// [`photon_core::PhotonError::Storage`] when the database cannot be read.
pub(crate) fn read_after(
    connection: &Connection,
    topic: &str,
    key: Option<&str>,
    after: i64,
    limit: usize,
) -> Result<PageRead> {
    read_after_then(connection, topic, key, after, limit, || {})
}

/// [`read_after`], running `between` after the gap check and before the page.
fn read_after_then(
    connection: &Connection,
    topic: &str,
    key: Option<&str>,
    after: i64,
    limit: usize,
    between: impl FnOnce(),
) -> Result<PageRead> {
    // A deferred transaction: its snapshot is taken by the first read and held to the end.
    // Dropped without a commit: it only read.
    let snapshot = connection
        .unchecked_transaction()
        .map_err(|e| sqlite_error(&format!("begin a read of topic {topic:?}"), e))?;
    if let Some((from, to)) = find_gap(&snapshot, topic, after)? {
        return Ok(PageRead::Gap { from, to });
    }
    between();
    read_page(&snapshot, topic, key, after, limit).map(PageRead::Page)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SqliteConfig;
    use crate::port::SqliteStoragePort;
    use photon_core::{Body, RecordDraft, StoragePort};

    fn draft(i: i64) -> RecordDraft {
        RecordDraft {
            envelope_id: format!("envelope-{i}"),
            topic_name: "t".to_owned(),
            topic_key: None,
            created_at: chrono::Utc::now(),
            body: Body::Plain {
                actor: serde_json::Value::Null,
                payload: serde_json::json!({ "i": i }),
                headers: photon_core::Headers::new(),
            },
        }
    }

    /// A sweep committed between the gap check and the page read: the reader either sees
    /// the gap or the records, never a page that starts past deleted records.
    #[tokio::test]
    async fn a_sweep_between_gap_check_and_page_removes_nothing_unreported() {
        let directory = tempfile::tempdir().unwrap();
        let config = SqliteConfig {
            path: directory.path().join("gap.db"),
            ..SqliteConfig::default()
        };
        let port = SqliteStoragePort::open(config.clone()).await.unwrap();
        for i in 1..=10 {
            port.append(draft(i)).await.unwrap();
        }
        let reader = crate::schema::open_reader(&config).unwrap();
        let sweeper = rusqlite::Connection::open(&config.path).unwrap();
        sweeper
            .busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let read = read_after_then(&reader, "t", None, 2, 100, || {
            let deleted = sweeper
                .execute("DELETE FROM events WHERE seq <= 6", [])
                .unwrap();
            assert_eq!(deleted, 6);
        })
        .unwrap();
        let PageRead::Page(page) = read else {
            panic!("the gap check ran before the sweep: expected a page");
        };
        let seqs: Vec<i64> = page
            .records
            .iter()
            .map(|record| record.as_ref().unwrap().seq)
            .collect();
        assert_eq!(
            seqs,
            (3..=10).collect::<Vec<_>>(),
            "the page of the snapshot"
        );
        // The next read, in a new snapshot, reports what the sweep removed.
        let PageRead::Gap { from, to } = read_after(&reader, "t", None, 2, 100).unwrap() else {
            panic!("expected the gap of the sweep");
        };
        assert_eq!((from, to), (3, 7));
    }
}
