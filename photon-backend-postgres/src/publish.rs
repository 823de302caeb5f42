//! Appends: the draft is encoded on the caller's task, inserted by its topic's writer task
//! (see `lanes.rs`) in a group-committed transaction, and acknowledged after the commit.
//!
//! An event id already stored is not stored again: the stored event's seq is returned and
//! no seq is used, so a retried append is idempotent and seqs have no gaps.

use std::collections::HashMap;

use deadpool_postgres::Transaction;
use photon_core::Appended;

use crate::error::BatchError;
use crate::row::PendingRow;
use crate::topic::TopicRow;

/// Inserts `rows` in order inside `transaction`, each with its topic's next seq; the
/// topics' rows must be locked by the transaction ([`crate::topic::lock_topics`]) and
/// their `last_seq` is advanced in `topics`. Returns each row's append and whether it was
/// inserted (`false`: its event id was stored before, and the stored seq is returned).
///
/// # Errors
/// [`BatchError::Raced`] when another transaction stored one of the event ids meanwhile
/// (the caller rolls back and tries again); the server's errors.
pub(crate) async fn insert_rows(
    transaction: &Transaction<'_>,
    topics: &mut HashMap<String, TopicRow>,
    rows: &[&PendingRow],
) -> std::result::Result<Vec<(Appended, bool)>, BatchError> {
    let ids: Vec<&str> = rows.iter().map(|row| row.event_id.as_str()).collect();
    let find = transaction
        .prepare_cached("SELECT event_id, seq FROM events WHERE event_id = ANY($1)")
        .await?;
    let mut known: HashMap<String, i64> = HashMap::new();
    for row in transaction.query(&find, &[&ids]).await? {
        known.insert(row.try_get(0)?, row.try_get(1)?);
    }
    let mut fresh = Fresh::default();
    let mut appended = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(&seq) = known.get(&row.event_id) {
            appended.push((
                Appended {
                    event_id: row.event_id.clone(),
                    seq,
                },
                false,
            ));
            continue;
        }
        let topic = topics.get_mut(&row.topic).ok_or(BatchError::Raced)?;
        topic.last_seq += 1;
        known.insert(row.event_id.clone(), topic.last_seq);
        fresh.push(topic, row);
        appended.push((
            Appended {
                event_id: row.event_id.clone(),
                seq: topic.last_seq,
            },
            true,
        ));
    }
    if fresh.seqs.is_empty() {
        return Ok(appended);
    }
    let insert = transaction
        .prepare_cached(
            "INSERT INTO events (topic_id, seq, event_id, envelope_id, topic_key, created_at, body) \
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], \
             $6::bigint[], $7::bytea[]) ON CONFLICT (event_id) DO NOTHING",
        )
        .await?;
    let inserted = transaction
        .execute(
            &insert,
            &[
                &fresh.topic_ids,
                &fresh.seqs,
                &fresh.event_ids,
                &fresh.envelope_ids,
                &fresh.keys,
                &fresh.created_at,
                &fresh.bodies,
            ],
        )
        .await?;
    if inserted != fresh.seqs.len() as u64 {
        return Err(BatchError::Raced);
    }
    Ok(appended)
}

/// The columns of the rows to insert, one array per column.
#[derive(Default)]
struct Fresh<'a> {
    topic_ids: Vec<i64>,
    seqs: Vec<i64>,
    event_ids: Vec<&'a str>,
    envelope_ids: Vec<Option<&'a str>>,
    keys: Vec<Option<&'a str>>,
    created_at: Vec<i64>,
    bodies: Vec<&'a [u8]>,
}

impl<'a> Fresh<'a> {
    fn push(&mut self, topic: &TopicRow, row: &'a PendingRow) {
        self.topic_ids.push(topic.topic_id);
        self.seqs.push(topic.last_seq);
        self.event_ids.push(&row.event_id);
        // Stored only when it differs from the event id (never, for this port's drafts).
        self.envelope_ids
            .push((row.envelope_id != row.event_id).then_some(row.envelope_id.as_str()));
        self.keys.push(row.topic_key.as_deref());
        self.created_at.push(row.created_at);
        self.bodies.push(row.body.as_bytes());
    }
}
