//! Retention: `truncate_before`, and the optional sweep by age and by count that the
//! writer thread runs every `retention_interval`.
//!
//! Deleting never changes seqs: a topic's next seq continues from its last assigned one.
//! The sweep does not look at checkpoints: a subscriber whose next seq it deleted gets a
//! [`photon_core::PhotonError::Gap`] naming the deleted range (see `gap.rs`), never a
//! silent jump. Dead-letter topics (`*.dlq`, and those marked by
//! `declare_dead_letter_topic`, stored in `dead_letter_topics`) are swept only when
//! `retention_dead_letters` is set.
//! The age sweep deletes a topic's oldest records up to the first one younger than the
//! limit (walking the topic in seq order, so its cost is the number of records it deletes).

use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};

use crate::config::SqliteConfig;
use crate::topic::{all_topics, find_topic};

/// Records `topic` as a dead-letter topic, inside the writer's transaction.
pub(crate) fn declare_dead_letters(connection: &Connection, topic: &str) -> rusqlite::Result<()> {
    connection
        .prepare_cached("INSERT OR IGNORE INTO dead_letter_topics (name) VALUES (?1)")?
        .execute([topic])?;
    Ok(())
}

/// Whether retention keeps `name`: a dead-letter topic by its suffix or by its mark.
fn is_dead_letter_topic(connection: &Connection, name: &str) -> rusqlite::Result<bool> {
    if photon_core::is_dead_letter_topic(name) {
        return Ok(true);
    }
    connection
        .prepare_cached("SELECT 1 FROM dead_letter_topics WHERE name = ?1")?
        .exists([name])
}

/// Deletes the records of `topic` below `before_seq`, inside the writer's transaction.
pub(crate) fn delete_before(
    connection: &Connection,
    topic: &str,
    before_seq: i64,
) -> rusqlite::Result<u64> {
    let Some(row) = find_topic(connection, topic)? else {
        return Ok(0);
    };
    let deleted = connection
        .prepare_cached("DELETE FROM events WHERE topic_id = ?1 AND seq < ?2")?
        .execute(params![row.topic_id, before_seq])?;
    Ok(deleted as u64)
}

/// The lowest seq the configured limits keep in one topic, if any limit applies.
fn retained_from(
    connection: &Connection,
    topic_id: i64,
    max_age: Option<Duration>,
    max_events: Option<u64>,
) -> rusqlite::Result<Option<i64>> {
    let mut bound: Option<i64> = None;
    if let Some(count) = max_events {
        let last: Option<i64> = connection
            .prepare_cached("SELECT max(seq) FROM events WHERE topic_id = ?1")?
            .query_row([topic_id], |row| row.get(0))?;
        if let Some(last) = last {
            let keep_from = last.saturating_sub(i64::try_from(count).unwrap_or(i64::MAX)) + 1;
            bound = Some(bound.map_or(keep_from, |b| b.max(keep_from)));
        }
    }
    if let Some(age) = max_age {
        // An age beyond the representable range keeps everything.
        let cutoff = chrono::Duration::from_std(age)
            .ok()
            .and_then(|age| chrono::Utc::now().checked_sub_signed(age))
            .and_then(|cutoff| cutoff.timestamp_nanos_opt())
            .unwrap_or(i64::MIN);
        // The first record young enough to keep; every record before it goes. When none
        // is young enough, everything goes.
        let keep_from: Option<i64> = connection
            .prepare_cached(
                "SELECT coalesce(\
                   (SELECT seq FROM events WHERE topic_id = ?1 AND created_at >= ?2 ORDER BY seq LIMIT 1), \
                   (SELECT max(seq) + 1 FROM events WHERE topic_id = ?1))",
            )?
            .query_row(params![topic_id, cutoff], |row| row.get(0))?;
        if let Some(keep_from) = keep_from {
            bound = Some(bound.map_or(keep_from, |b| b.max(keep_from)));
        }
    }
    Ok(bound)
}

/// Applies the configured age and count limits to every topic in one transaction.
pub(crate) fn sweep(connection: &mut Connection, config: &SqliteConfig) {
    match sweep_all(
        connection,
        config.retention_max_age,
        config.retention_max_events,
        config.retention_dead_letters,
    ) {
        Ok(0) => {}
        Ok(deleted) => tracing::debug!(deleted, "sqlite retention sweep"),
        Err(error) => tracing::warn!(%error, "sqlite retention sweep failed; will retry"),
    }
}

pub(crate) fn sweep_all(
    connection: &mut Connection,
    max_age: Option<Duration>,
    max_events: Option<u64>,
    dead_letters: bool,
) -> rusqlite::Result<u64> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut deleted = 0;
    for (topic_id, name) in all_topics(&transaction)? {
        if !dead_letters && is_dead_letter_topic(&transaction, &name)? {
            continue;
        }
        if let Some(bound) = retained_from(&transaction, topic_id, max_age, max_events)? {
            deleted += transaction
                .prepare_cached("DELETE FROM events WHERE topic_id = ?1 AND seq < ?2")?
                .execute(params![topic_id, bound])? as u64;
        }
    }
    transaction.commit()?;
    Ok(deleted)
}
