//! Checkpoints: one row per subscription, topic and key scope; raised, never lowered by a
//! commit.
//!
//! Commits go through the writer's checkpoint lane (see `lanes.rs`), so checkpoint writes
//! are group-committed with each other, apart from appends: a commit waiting for a row
//! lock (a transactional handler's transaction holds its checkpoint row) holds up no
//! append. The upsert keeps `greatest(stored, new)` under the row's lock, so racing
//! writers (also in several processes) can only raise the stored seq. Only an operator's
//! reset replaces or deletes the row.

use deadpool_postgres::{Pool, Transaction};
use photon_core::raw::sql::Write;
use photon_core::{CheckpointKey, Result};

use crate::error::{pg_error, pool_error};

/// The key scope columns: `(false, "")` for the whole topic, `(true, key)` for one key.
pub(crate) fn scope(key: &CheckpointKey) -> (bool, &str) {
    match &key.key {
        Some(topic_key) => (true, topic_key.as_str()),
        None => (false, ""),
    }
}

/// The stored seq of a checkpoint, on a pooled connection.
pub(crate) async fn load(pool: &Pool, key: &CheckpointKey) -> Result<Option<i64>> {
    let what = format!("load checkpoint {:?}", key.subscription);
    let client = pool.get().await.map_err(|e| pool_error(&what, e))?;
    let (keyed, topic_key) = scope(key);
    let select = client
        .prepare_cached(
            "SELECT seq FROM checkpoints \
             WHERE subscription = $1 AND topic = $2 AND keyed = $3 AND topic_key = $4",
        )
        .await
        .map_err(|e| pg_error(&what, e))?;
    let row = client
        .query_opt(
            &select,
            &[&key.subscription, &key.topic, &keyed, &topic_key],
        )
        .await
        .map_err(|e| pg_error(&what, e))?;
    row.map(|row| row.try_get(0))
        .transpose()
        .map_err(|e| pg_error(&what, e))
}

/// Applies `write` inside `transaction` (the writer's, or later a caller's own).
pub(crate) async fn apply(
    transaction: &Transaction<'_>,
    key: &CheckpointKey,
    write: Write,
) -> std::result::Result<(), tokio_postgres::Error> {
    let (keyed, topic_key) = scope(key);
    let sql = match write {
        Write::Raise(_) => {
            "INSERT INTO checkpoints (subscription, topic, keyed, topic_key, seq) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (subscription, topic, keyed, topic_key) \
             DO UPDATE SET seq = greatest(checkpoints.seq, excluded.seq)"
        }
        Write::Replace(Some(_)) => {
            "INSERT INTO checkpoints (subscription, topic, keyed, topic_key, seq) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (subscription, topic, keyed, topic_key) \
             DO UPDATE SET seq = excluded.seq"
        }
        Write::Replace(None) => {
            "DELETE FROM checkpoints \
             WHERE subscription = $1 AND topic = $2 AND keyed = $3 AND topic_key = $4"
        }
    };
    let statement = transaction.prepare_cached(sql).await?;
    match write {
        Write::Raise(seq) | Write::Replace(Some(seq)) => {
            transaction
                .execute(
                    &statement,
                    &[&key.subscription, &key.topic, &keyed, &topic_key, &seq],
                )
                .await?
        }
        Write::Replace(None) => {
            transaction
                .execute(
                    &statement,
                    &[&key.subscription, &key.topic, &keyed, &topic_key],
                )
                .await?
        }
    };
    Ok(())
}
