//! Point queries on read connections: get by id, listing, head seq.

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::raw::sql::SqlQueries;
use photon_core::{Record, Result};
use rusqlite::{params, OptionalExtension};

use crate::error::sqlite_error;
use crate::port::SqliteStoragePort;
use crate::reader::Readers;
use crate::row::{read_row, select_rows, RECORD_COLUMNS};

#[async_trait]
impl SqlQueries for SqliteStoragePort {
    /// The record with this event id, if stored.
    async fn find(&self, event_id: &str) -> Result<Option<Record>> {
        let event_id = event_id.to_owned();
        self.readers()
            .read(move |connection| {
                let sql = format!(
                    "SELECT {RECORD_COLUMNS}, (SELECT name FROM topics WHERE topics.topic_id = events.topic_id) \
                     FROM events WHERE event_id = ?1"
                );
                let found = connection
                    .prepare_cached(&sql)
                    .and_then(|mut statement| {
                        statement
                            .query_row([&event_id], |row| Ok((read_row(row)?, row.get::<_, String>(7)?)))
                            .optional()
                    })
                    .map_err(|e| sqlite_error(&format!("find event {event_id:?}"), e))?;
                found.map(|(row, topic)| row.decode(&topic)).transpose()
            })
            .await
    }

    /// Up to `limit` records with `seq > after_seq`, oldest first.
    async fn list_after(&self, topic: &str, after_seq: i64, limit: usize) -> Result<Vec<Record>> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM events \
             WHERE topic_id = (SELECT topic_id FROM topics WHERE name = ?1) AND seq > ?2 \
             ORDER BY seq LIMIT ?3"
        );
        list(self.readers(), topic, sql, after_seq, limit).await
    }

    /// The `limit` newest records, newest first.
    async fn newest(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        // `?2` is left unbound on purpose: both listings share one parameter list.
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM events \
             WHERE topic_id = (SELECT topic_id FROM topics WHERE name = ?1) \
             ORDER BY seq DESC LIMIT ?3"
        );
        list(self.readers(), topic, sql, 0, limit).await
    }

    /// Highest stored seq of the topic, or of one key.
    async fn head(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        let topic = topic.to_owned();
        let key = key.map(str::to_owned);
        self.readers()
            .read(move |connection| {
                let topic_id = "(SELECT topic_id FROM topics WHERE name = ?1)";
                let result = match &key {
                    None => connection
                        .prepare_cached(&format!(
                            "SELECT max(seq) FROM events WHERE topic_id = {topic_id}"
                        ))
                        .and_then(|mut s| s.query_row([&topic], |row| row.get(0))),
                    Some(key) => connection
                        // Walks back from the newest record: quick for an active key.
                        .prepare_cached(&format!(
                            "SELECT seq FROM events WHERE topic_id = {topic_id} AND topic_key = ?2 \
                             ORDER BY seq DESC LIMIT 1"
                        ))
                        .and_then(|mut s| s.query_row([&topic, key], |row| row.get(0)).optional()),
                };
                result.map_err(|e| sqlite_error(&format!("read the head of topic {topic:?}"), e))
            })
            .await
    }
}

/// The records `sql` selects from `topic` (its parameters: topic, after seq, limit).
async fn list(
    readers: &Arc<Readers>,
    topic: &str,
    sql: String,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<Record>> {
    let topic = topic.to_owned();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    readers
        .read(move |connection| {
            let rows = select_rows(connection, &sql, params![topic, after_seq, limit])
                .map_err(|e| sqlite_error(&format!("list topic {topic:?}"), e))?;
            rows.into_iter().map(|row| row.decode(&topic)).collect()
        })
        .await
}
