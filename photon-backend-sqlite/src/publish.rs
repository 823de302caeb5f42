//! Appends: the draft is encoded on the caller's task, inserted by the writer thread in a
//! group-committed transaction, and acknowledged after the commit.

use photon_core::Appended;
use rusqlite::{params, Connection, OptionalExtension};

use crate::row::PendingRow;
use crate::topic::TopicRow;

/// Inserts one row with the topic's next seq, inside the writer's transaction.
///
/// A row whose event id is already stored is not inserted again: the stored event's seq
/// is returned and no seq is used (a retried append is idempotent). Returns whether the
/// row was inserted.
pub(crate) fn insert(
    connection: &Connection,
    topic: &mut TopicRow,
    row: &PendingRow,
) -> rusqlite::Result<(Appended, bool)> {
    let seq = topic.last_seq + 1;
    let inserted = connection
        .prepare_cached(
            "INSERT INTO events (topic_id, seq, event_id, envelope_id, topic_key, created_at, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (event_id) DO NOTHING",
        )?
        .execute(params![
            topic.topic_id,
            seq,
            row.event_id,
            // Stored only when it differs from the event id (never, for this port's drafts).
            (row.envelope_id != row.event_id).then_some(&row.envelope_id),
            row.topic_key,
            row.created_at,
            row.body
        ])?;
    if inserted == 1 {
        topic.last_seq = seq;
        return Ok((
            Appended {
                event_id: row.event_id.clone(),
                seq,
            },
            true,
        ));
    }
    let stored: Option<i64> = connection
        .prepare_cached("SELECT seq FROM events WHERE event_id = ?1")?
        .query_row([&row.event_id], |found| found.get(0))
        .optional()?;
    let seq = stored.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    Ok((
        Appended {
            event_id: row.event_id.clone(),
            seq,
        },
        false,
    ))
}
