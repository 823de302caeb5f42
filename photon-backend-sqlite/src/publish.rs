//! Appends: the draft is encoded on the caller's task, inserted by the writer thread in a
//! group-committed transaction, and acknowledged after the commit.

use photon_core::{Appended, RecordDraft, Result};
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use crate::error::writer_gone;
use crate::port::SqliteStoragePort;
use crate::row::PendingRow;
use crate::topic::TopicRow;
use crate::writer::Command;

impl SqliteStoragePort {
    /// Appends a draft and waits for its commit.
    pub(crate) async fn append_row(&self, draft: RecordDraft) -> Result<Appended> {
        let row = PendingRow::encode(draft, crate::error::LABEL)?;
        let (reply, answer) = oneshot::channel();
        self.send(Command::Append { row, reply })?;
        answer.await.map_err(|_| writer_gone())?
    }

    /// Appends drafts in one transaction (all or none) and waits for its commit.
    pub(crate) async fn append_rows(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let rows = drafts
            .into_iter()
            .map(|draft| PendingRow::encode(draft, crate::error::LABEL))
            .collect::<Result<Vec<_>>>()?;
        let (reply, answer) = oneshot::channel();
        self.send(Command::AppendBatch { rows, reply })?;
        answer.await.map_err(|_| writer_gone())?
    }
}

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
