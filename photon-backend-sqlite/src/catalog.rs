//! The listing of the file's topics and durable checkpoints.

use async_trait::async_trait;
use photon_core::raw::sql::SqlCatalog;
use photon_core::{Result, StoredCheckpoint, TopicInfo};

use crate::error::sqlite_error;
use crate::port::SqliteStoragePort;

#[async_trait]
impl SqlCatalog for SqliteStoragePort {
    /// Every topic row with its head and stored event count, sorted by name.
    async fn topics(&self) -> Result<Vec<TopicInfo>> {
        self.readers()
            .read(|connection| {
                let mut statement = connection
                    .prepare(
                        "SELECT name, \
                         (SELECT max(seq) FROM events e WHERE e.topic_id = t.topic_id), \
                         (SELECT count(*) FROM events e WHERE e.topic_id = t.topic_id) \
                         FROM topics t ORDER BY name",
                    )
                    .map_err(|e| sqlite_error("list topics", e))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok(TopicInfo {
                            name: row.get(0)?,
                            head_seq: row.get(1)?,
                            events: Some(row.get::<_, i64>(2)?.unsigned_abs()),
                            bytes: None,
                            shards: 1,
                        })
                    })
                    .map_err(|e| sqlite_error("list topics", e))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(|e| sqlite_error("list topics", e))
            })
            .await
    }

    /// Every durable subscription's checkpoint, sorted by subscription, topic and key.
    async fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        self.readers()
            .read(|connection| {
                let mut statement = connection
                    .prepare(
                        "SELECT subscription, topic, keyed, topic_key, seq FROM checkpoints \
                         ORDER BY subscription, topic, keyed, topic_key",
                    )
                    .map_err(|e| sqlite_error("list checkpoints", e))?;
                let rows = statement
                    .query_map([], |row| {
                        let keyed: i64 = row.get(2)?;
                        let topic_key: String = row.get(3)?;
                        Ok(StoredCheckpoint {
                            subscription: row.get(0)?,
                            topic: row.get(1)?,
                            key: (keyed == 1).then_some(topic_key),
                            seq: row.get(4)?,
                        })
                    })
                    .map_err(|e| sqlite_error("list checkpoints", e))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(|e| sqlite_error("list checkpoints", e))
            })
            .await
    }
}
