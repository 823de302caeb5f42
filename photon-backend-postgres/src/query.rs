//! Point queries on pooled connections: get by id, listing, head seq.

use async_trait::async_trait;
use photon_core::raw::sql::SqlQueries;
use photon_core::{Record, Result};
use tokio_postgres::types::ToSql;

use crate::error::{pg_error, pool_error};
use crate::port::PostgresStoragePort;
use crate::row::{decode_rows, read_row, RECORD_COLUMNS};

const TOPIC_ID: &str = "(SELECT topic_id FROM topics WHERE name = $1)";

#[async_trait]
impl SqlQueries for PostgresStoragePort {
    /// The record with this event id, if stored.
    async fn find(&self, event_id: &str) -> Result<Option<Record>> {
        let what = format!("find event {event_id:?}");
        let sql = format!(
            "SELECT {RECORD_COLUMNS}, (SELECT name FROM topics WHERE topics.topic_id = events.topic_id) \
             FROM events WHERE event_id = $1"
        );
        let rows = self.select(&what, &sql, &[&event_id]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let topic: String = row.try_get(7).map_err(|e| pg_error(&what, e))?;
        let stored = read_row(row).map_err(|e| pg_error(&what, e))?;
        stored.decode(&topic).map(Some)
    }

    /// Up to `limit` records with `seq > after_seq`, oldest first.
    async fn list_after(&self, topic: &str, after_seq: i64, limit: usize) -> Result<Vec<Record>> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM events WHERE topic_id = {TOPIC_ID} AND seq > $2 \
             ORDER BY seq LIMIT $3"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.records(topic, &sql, &[&topic, &after_seq, &limit])
            .await
    }

    /// The `limit` newest records, newest first.
    async fn newest(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM events WHERE topic_id = {TOPIC_ID} \
             ORDER BY seq DESC LIMIT $2"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.records(topic, &sql, &[&topic, &limit]).await
    }

    /// Highest stored seq of the topic, or of one key.
    async fn head(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        let what = format!("read the head of topic {topic:?}");
        let rows = match key {
            None => {
                let sql = format!("SELECT max(seq) FROM events WHERE topic_id = {TOPIC_ID}");
                self.select(&what, &sql, &[&topic]).await?
            }
            Some(key) => {
                let sql = format!(
                    "SELECT max(seq) FROM events WHERE topic_id = {TOPIC_ID} AND topic_key = $2"
                );
                self.select(&what, &sql, &[&topic, &key]).await?
            }
        };
        match rows.first() {
            Some(row) => row.try_get(0).map_err(|e| pg_error(&what, e)),
            None => Ok(None),
        }
    }
}

impl PostgresStoragePort {
    /// The records of `topic` a [`RECORD_COLUMNS`] query selects, decoded.
    async fn records(
        &self,
        topic: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Record>> {
        let what = format!("list topic {topic:?}");
        let rows = self.select(&what, sql, params).await?;
        decode_rows(&rows, topic)
            .map_err(|e| pg_error(&what, e))?
            .into_iter()
            .collect()
    }

    /// Runs a cached query on a pooled connection.
    pub(crate) async fn select(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let client = self.pool().get().await.map_err(|e| pool_error(what, e))?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| pg_error(what, e))?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| pg_error(what, e))
    }
}
