//! Topics: names are stored verbatim (so `a.b`, `a-b` and `a_b` are three rows of the
//! `topics` table, never one), each with a small id and its last assigned seq; and the
//! in-process watchers that wake live subscribers when this port commits to a topic.

use rusqlite::{Connection, OptionalExtension};

/// A topic's row as the writer sees it inside a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicRow {
    pub(crate) topic_id: i64,
    pub(crate) last_seq: i64,
}

/// The row of `name`, if the topic was ever written.
pub(crate) fn find_topic(
    connection: &Connection,
    name: &str,
) -> rusqlite::Result<Option<TopicRow>> {
    connection
        .prepare_cached("SELECT topic_id, last_seq FROM topics WHERE name = ?1")?
        .query_row([name], |row| {
            Ok(TopicRow {
                topic_id: row.get(0)?,
                last_seq: row.get(1)?,
            })
        })
        .optional()
}

/// The row of `name`, created (with last seq 0) when missing.
pub(crate) fn provision_topic(connection: &Connection, name: &str) -> rusqlite::Result<TopicRow> {
    if let Some(row) = find_topic(connection, name)? {
        return Ok(row);
    }
    connection
        .prepare_cached("INSERT INTO topics (name, last_seq) VALUES (?1, 0)")?
        .execute([name])?;
    Ok(TopicRow {
        topic_id: connection.last_insert_rowid(),
        last_seq: 0,
    })
}

/// Stores a topic's last assigned seq.
pub(crate) fn store_last_seq(connection: &Connection, row: TopicRow) -> rusqlite::Result<()> {
    connection
        .prepare_cached("UPDATE topics SET last_seq = ?2 WHERE topic_id = ?1")?
        .execute([row.topic_id, row.last_seq])?;
    Ok(())
}

/// Every topic name with its id.
pub(crate) fn all_topics(connection: &Connection) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut statement =
        connection.prepare_cached("SELECT topic_id, name FROM topics ORDER BY name")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}
