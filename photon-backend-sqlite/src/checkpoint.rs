//! Checkpoints: one row per subscription, topic and key scope; raised, never lowered by a
//! commit.
//!
//! Commits go through the writer thread, so checkpoint writes are group-committed with
//! appends; the upsert keeps `max(stored, new)`, so racing writers (also in two
//! processes) can only raise the stored seq. Only an operator's reset replaces or deletes
//! the row.

use std::sync::Arc;

use photon_core::raw::sql::Write;
use photon_core::{CheckpointKey, Result};
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::sqlite_error;
use crate::reader::Readers;

/// The key scope columns: `(0, "")` for the whole topic, `(1, key)` for one key.
fn scope(key: &CheckpointKey) -> (i64, &str) {
    match &key.key {
        Some(topic_key) => (1, topic_key.as_str()),
        None => (0, ""),
    }
}

/// The stored seq of a checkpoint, on a read connection.
pub(crate) async fn load(readers: &Arc<Readers>, key: &CheckpointKey) -> Result<Option<i64>> {
    let key = key.clone();
    readers
        .read(move |connection| {
            stored(connection, &key)
                .map_err(|e| sqlite_error(&format!("load checkpoint {:?}", key.subscription), e))
        })
        .await
}

/// The stored seq of a checkpoint, read on `connection` (a transaction's, to read it under
/// the write lock).
pub(crate) fn stored(
    connection: &Connection,
    key: &CheckpointKey,
) -> rusqlite::Result<Option<i64>> {
    let (keyed, topic_key) = scope(key);
    connection
        .prepare_cached(
            "SELECT seq FROM checkpoints \
             WHERE subscription = ?1 AND topic = ?2 AND keyed = ?3 AND topic_key = ?4",
        )?
        .query_row(
            params![key.subscription, key.topic, keyed, topic_key],
            |row| row.get(0),
        )
        .optional()
}

/// Applies `write` inside the writer's transaction.
pub(crate) fn apply(
    connection: &Connection,
    key: &CheckpointKey,
    write: Write,
) -> rusqlite::Result<()> {
    match write {
        Write::Raise(seq) => raise(connection, key, seq),
        Write::Replace(seq) => replace(connection, key, seq),
    }
}

/// Stores `seq` whatever is stored, or deletes the row.
fn replace(connection: &Connection, key: &CheckpointKey, seq: Option<i64>) -> rusqlite::Result<()> {
    let (keyed, topic_key) = scope(key);
    match seq {
        Some(seq) => connection
            .prepare_cached(
                "INSERT INTO checkpoints (subscription, topic, keyed, topic_key, seq) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (subscription, topic, keyed, topic_key) DO UPDATE SET seq = excluded.seq",
            )?
            .execute(params![key.subscription, key.topic, keyed, topic_key, seq])?,
        None => connection
            .prepare_cached(
                "DELETE FROM checkpoints \
                 WHERE subscription = ?1 AND topic = ?2 AND keyed = ?3 AND topic_key = ?4",
            )?
            .execute(params![key.subscription, key.topic, keyed, topic_key])?,
    };
    Ok(())
}

/// Stores `seq` unless a higher seq is stored, inside the writer's transaction.
fn raise(connection: &Connection, key: &CheckpointKey, seq: i64) -> rusqlite::Result<()> {
    let (keyed, topic_key) = scope(key);
    connection
        .prepare_cached(
            "INSERT INTO checkpoints (subscription, topic, keyed, topic_key, seq) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (subscription, topic, keyed, topic_key) DO UPDATE SET seq = max(seq, excluded.seq)",
        )?
        .execute(params![key.subscription, key.topic, keyed, topic_key, seq])?;
    Ok(())
}
