//! Topics: names are stored verbatim (so `a.b`, `a-b` and `a_b` are three rows of the
//! `topics` table), each with an id and its last assigned seq; and the in-process watchers
//! that wake live subscribers when a topic is committed to (by this port's writer, or by
//! any process through the listener).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use deadpool_postgres::Transaction;
use tokio::sync::watch;

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

/// Watchers of commits per topic; live subscribers wait on them.
#[derive(Debug, Default)]
pub(crate) struct TopicHeads {
    watchers: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl TopicHeads {
    /// A receiver that changes whenever `topic` is committed to.
    pub(crate) fn watch(&self, topic: &str) -> watch::Receiver<u64> {
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
    pub(crate) fn committed(&self, topic: &str) {
        let mut watchers = self.lock();
        if let Some(sender) = watchers.get(topic) {
            if sender.receiver_count() == 0 {
                watchers.remove(topic);
            } else {
                sender.send_modify(|commits| *commits = commits.wrapping_add(1));
            }
        }
    }

    /// Wakes every subscriber: notifications may have been lost (the listener reconnected).
    pub(crate) fn wake_all(&self) {
        let mut watchers = self.lock();
        watchers.retain(|_, sender| sender.receiver_count() > 0);
        for sender in watchers.values() {
            sender.send_modify(|commits| *commits = commits.wrapping_add(1));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        // Only map inserts, removals and counter bumps happen under this lock: a panic
        // cannot leave it torn.
        self.watchers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
