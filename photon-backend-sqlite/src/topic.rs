//! Topics: names are stored verbatim (so `a.b`, `a-b` and `a_b` are three rows of the
//! `topics` table, never one), each with a small id and its last assigned seq; and the
//! in-process watchers that wake live subscribers when this port commits to a topic.

use std::collections::HashMap;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension};
use tokio::sync::watch;

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

/// Watchers of the last seq this port committed per topic; live subscribers wait on them.
#[derive(Debug, Default)]
pub(crate) struct TopicHeads {
    watchers: Mutex<HashMap<String, watch::Sender<i64>>>,
}

impl TopicHeads {
    /// A receiver that changes whenever this port commits to `topic`.
    pub(crate) fn watch(&self, topic: &str) -> watch::Receiver<i64> {
        let mut watchers = self.lock();
        match watchers.get(topic) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = watch::channel(0);
                watchers.insert(topic.to_owned(), sender);
                receiver
            }
        }
    }

    /// Wakes the subscribers of `topic`; forgets topics nobody watches any more.
    pub(crate) fn committed(&self, topic: &str, last_seq: i64) {
        let mut watchers = self.lock();
        if let Some(sender) = watchers.get(topic) {
            if sender.receiver_count() == 0 {
                watchers.remove(topic);
            } else {
                sender.send_replace(last_seq);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<i64>>> {
        // Only map inserts and removals happen under this lock: a panic cannot leave it torn.
        self.watchers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
