//! The listing of the schema's topics and durable checkpoints.

use async_trait::async_trait;
use photon_core::raw::sql::SqlCatalog;
use photon_core::{Result, StoredCheckpoint, TopicInfo};

use crate::error::pg_error;
use crate::port::PostgresStoragePort;

#[async_trait]
impl SqlCatalog for PostgresStoragePort {
    /// Every topic row with its head and stored event count, sorted by name (byte order,
    /// whatever the database's collation).
    async fn topics(&self) -> Result<Vec<TopicInfo>> {
        let what = "list topics";
        let rows = self
            .select(
                what,
                "SELECT name, \
                 (SELECT max(seq) FROM events e WHERE e.topic_id = t.topic_id), \
                 (SELECT count(*) FROM events e WHERE e.topic_id = t.topic_id) \
                 FROM topics t ORDER BY name COLLATE \"C\"",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(TopicInfo {
                    name: row.try_get(0)?,
                    head_seq: row.try_get(1)?,
                    events: Some(row.try_get::<_, i64>(2)?.unsigned_abs()),
                    bytes: None,
                    shards: 1,
                })
            })
            .collect::<std::result::Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(what, e))
    }

    /// Every durable subscription's checkpoint, sorted by subscription, topic and key.
    async fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        let what = "list checkpoints";
        let rows = self
            .select(
                what,
                "SELECT subscription, topic, keyed, topic_key, seq FROM checkpoints \
                 ORDER BY subscription COLLATE \"C\", topic COLLATE \"C\", keyed, topic_key COLLATE \"C\"",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let keyed: bool = row.try_get(2)?;
                let topic_key: String = row.try_get(3)?;
                Ok(StoredCheckpoint {
                    subscription: row.try_get(0)?,
                    topic: row.try_get(1)?,
                    key: keyed.then_some(topic_key),
                    seq: row.try_get(4)?,
                })
            })
            .collect::<std::result::Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(what, e))
    }
}
