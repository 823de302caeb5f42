//! Retention: `truncate_before`, and the optional sweep by age and by count that a task of
//! each port runs every `retention_interval`.
//!
//! Deleting never changes seqs: a topic's next seq continues from its last assigned one.
//! The sweep respects checkpoints: it never deletes a record above the lowest checkpoint
//! stored for the topic (durable subscriptions, on the whole topic or one key, and
//! consumer group partitions, where a partition without a commit counts as 0), so a
//! consumer that resumes from its checkpoint finds every record it has not handled. A
//! subscription that is given up must have its checkpoint removed
//! (`reset_checkpoint(key, None)`), or it holds back its topic's sweep. `truncate_before`
//! is an operator's explicit cut and ignores checkpoints; a subscriber whose next seq it
//! deleted gets one [`photon_core::PhotonError::Gap`] (see `gap.rs`). Dead-letter topics
//! (`*.dlq`, and those marked by `declare_dead_letter_topic`, stored in
//! `dead_letter_topics`) are swept only when `retention_dead_letters` is set.

use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use photon_core::Result;
use tokio::sync::watch;

use crate::config::PostgresConfig;
use crate::error::{describe, pg_error};

/// Marks a topic (`$1`) as a dead-letter topic, which retention keeps.
pub(crate) const MARK_DEAD_LETTERS: &str =
    "INSERT INTO dead_letter_topics (name) VALUES ($1) ON CONFLICT DO NOTHING";

/// Marks `topic` as a dead-letter topic (idempotent), on a pooled connection.
pub(crate) async fn declare_dead_letters(pool: &Pool, topic: &str) -> Result<()> {
    let failed = |e| pg_error(&format!("mark topic {topic:?} as a dead-letter topic"), e);
    let client = pool.get().await.map_err(|e| {
        photon_core::PhotonError::unavailable(
            crate::error::LABEL,
            format!("no connection to mark topic {topic:?} as a dead-letter topic"),
            e,
        )
    })?;
    client
        .execute(MARK_DEAD_LETTERS, &[&topic])
        .await
        .map_err(failed)?;
    Ok(())
}

/// Deletes the records of `topic` below `before_seq`, inside `transaction`.
pub(crate) async fn delete_before(
    transaction: &Transaction<'_>,
    topic: &str,
    before_seq: i64,
) -> std::result::Result<u64, tokio_postgres::Error> {
    let delete = transaction
        .prepare_cached(
            "DELETE FROM events WHERE topic_id = (SELECT topic_id FROM topics WHERE name = $1) \
             AND seq < $2",
        )
        .await?;
    transaction.execute(&delete, &[&topic, &before_seq]).await
}

/// Sweeps every `retention_interval` until `stop`'s sender is dropped.
pub(crate) async fn sweep_every(pool: Pool, config: PostgresConfig, mut stop: watch::Receiver<()>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(config.retention_interval) => {}
        }
        match sweep(&pool, &config).await {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "postgres retention sweep"),
            Err(error) => {
                tracing::warn!(error = %describe_sweep(&error), "postgres retention sweep failed; will retry")
            }
        }
    }
}

fn describe_sweep(error: &SweepError) -> String {
    match error {
        SweepError::Pool(error) => error.to_string(),
        SweepError::Db(error) => describe(error),
    }
}

/// Why a sweep failed.
#[derive(Debug)]
pub(crate) enum SweepError {
    Pool(deadpool_postgres::PoolError),
    Db(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for SweepError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Db(error)
    }
}

/// Applies the configured age and count limits to every topic, below each topic's lowest
/// checkpoint; returns how many records were deleted.
pub(crate) async fn sweep(
    pool: &Pool,
    config: &PostgresConfig,
) -> std::result::Result<u64, SweepError> {
    let client = pool.get().await.map_err(SweepError::Pool)?;
    let cutoff = config.retention_max_age.map(age_cutoff);
    let keep = config
        .retention_max_events
        .map(|count| i64::try_from(count).unwrap_or(i64::MAX));
    let bounds = client
        .prepare_cached(
            "SELECT t.name, t.topic_id, \
               (SELECT max(seq) FROM events e WHERE e.topic_id = t.topic_id), \
               coalesce((SELECT seq FROM events e WHERE e.topic_id = t.topic_id AND e.created_at >= $1 \
                         ORDER BY seq LIMIT 1), t.last_seq + 1), \
               least((SELECT min(seq) FROM checkpoints c WHERE c.topic = t.name), \
                     (SELECT min(coalesce(seq, 0)) FROM group_partitions g WHERE g.topic = t.name)) + 1 \
             , EXISTS (SELECT 1 FROM dead_letter_topics d WHERE d.name = t.name) \
             FROM topics t ORDER BY t.name",
        )
        .await?;
    let rows = client
        .query(&bounds, &[&cutoff.unwrap_or(i64::MIN)])
        .await?;
    let delete = client
        .prepare_cached("DELETE FROM events WHERE topic_id = $1 AND seq < $2")
        .await?;
    let mut deleted = 0;
    for row in rows {
        let name: String = row.try_get(0)?;
        let marked: bool = row.try_get(5)?;
        if !config.retention_dead_letters && (marked || photon_core::is_dead_letter_topic(&name)) {
            continue;
        }
        let head: Option<i64> = row.try_get(2)?;
        let by_count = keep
            .zip(head)
            .map(|(keep, head)| head.saturating_sub(keep) + 1);
        let by_age: Option<i64> = cutoff.and(Some(row.try_get(3)?));
        let held: Option<i64> = row.try_get(4)?;
        let Some(bound) = retained_from(by_count, by_age, held) else {
            continue;
        };
        let topic_id: i64 = row.try_get(1)?;
        deleted += client.execute(&delete, &[&topic_id, &bound]).await?;
    }
    Ok(deleted)
}

/// The lowest seq to keep: the higher of the limits' bounds, never above the checkpoints'.
fn retained_from(by_count: Option<i64>, by_age: Option<i64>, held: Option<i64>) -> Option<i64> {
    let limit = match (by_count, by_age) {
        (Some(a), Some(b)) => a.max(b),
        (a, b) => a.or(b)?,
    };
    Some(held.map_or(limit, |held| limit.min(held)))
}

/// Nanoseconds since the epoch of the oldest `created_at` kept; an age beyond the
/// representable range keeps everything.
fn age_cutoff(age: Duration) -> i64 {
    chrono::Duration::from_std(age)
        .ok()
        .and_then(|age| chrono::Utc::now().checked_sub_signed(age))
        .and_then(|cutoff| cutoff.timestamp_nanos_opt())
        .unwrap_or(i64::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_hold_the_bound_back() {
        assert_eq!(retained_from(None, None, Some(3)), None);
        assert_eq!(retained_from(Some(50), None, None), Some(50));
        assert_eq!(retained_from(Some(50), Some(70), None), Some(70));
        assert_eq!(retained_from(Some(50), Some(70), Some(31)), Some(31));
        assert_eq!(retained_from(None, Some(20), Some(31)), Some(20));
    }
}
