//! Topics: names are stored verbatim (so `a.b`, `a-b` and `a_b` are three rows of the
//! `topics` table), each with an id and its last assigned seq; and the in-process watchers
//! that wake live subscribers when a topic is committed to (by this port's writer, or by
//! any process through the listener).

use std::collections::{BTreeSet, HashMap};

use deadpool_postgres::Transaction;

/// A topic's row as the writer sees it inside a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicRow {
    pub(crate) topic_id: i64,
    pub(crate) last_seq: i64,
}

/// The rows of `names`, created when missing and locked until the transaction ends.
///
/// Rows are locked in name order, the same in every process, so that two transactions
/// appending to the same topics wait for each other instead of deadlocking.
pub(crate) async fn lock_topics(
    transaction: &Transaction<'_>,
    names: &BTreeSet<&str>,
) -> Result<HashMap<String, TopicRow>, tokio_postgres::Error> {
    let names: Vec<&str> = names.iter().copied().collect();
    let insert = transaction
        .prepare_cached(
            "INSERT INTO topics (name) SELECT name FROM unnest($1::text[]) AS name \
             ORDER BY name ON CONFLICT (name) DO NOTHING",
        )
        .await?;
    transaction.execute(&insert, &[&names]).await?;
    let select = transaction
        .prepare_cached(
            "SELECT name, topic_id, last_seq FROM topics WHERE name = ANY($1) \
             ORDER BY name FOR UPDATE",
        )
        .await?;
    let rows = transaction.query(&select, &[&names]).await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get::<_, String>(0)?,
                TopicRow {
                    topic_id: row.try_get(1)?,
                    last_seq: row.try_get(2)?,
                },
            ))
        })
        .collect()
}

/// The last assigned seq of `name` as the transaction sees it (0 for a new topic).
pub(crate) async fn last_seq(
    transaction: &Transaction<'_>,
    name: &str,
) -> Result<i64, tokio_postgres::Error> {
    let select = transaction
        .prepare_cached("SELECT last_seq FROM topics WHERE name = $1")
        .await?;
    Ok(match transaction.query_opt(&select, &[&name]).await? {
        Some(row) => row.try_get(0)?,
        None => 0,
    })
}

/// Stores the last assigned seqs of the topics an append transaction wrote to.
pub(crate) async fn store_last_seqs(
    transaction: &Transaction<'_>,
    rows: &[TopicRow],
) -> Result<(), tokio_postgres::Error> {
    let ids: Vec<i64> = rows.iter().map(|row| row.topic_id).collect();
    let seqs: Vec<i64> = rows.iter().map(|row| row.last_seq).collect();
    let update = transaction
        .prepare_cached(
            "UPDATE topics SET last_seq = data.last_seq \
             FROM unnest($1::bigint[], $2::bigint[]) AS data(topic_id, last_seq) \
             WHERE topics.topic_id = data.topic_id",
        )
        .await?;
    transaction.execute(&update, &[&ids, &seqs]).await?;
    Ok(())
}
