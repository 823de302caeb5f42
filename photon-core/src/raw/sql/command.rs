//! The writer's protocol: a write (or a read ordered with writes) that a port hands to its
//! writer, what the command produced in a committed transaction, and its answer.
//!
//! A writer group-commits several commands in one transaction and answers each caller
//! only after the commit ([`Command::answer`]); when the transaction fails, every caller
//! gets the failure ([`Command::fail`]). A caller that stopped waiting (a dropped future)
//! no longer needs its answer, so a closed reply is not an error.

use std::collections::BTreeSet;
use std::convert::Infallible;

use tokio::sync::oneshot;

use super::error::shared_failure;
use crate::error::Result;
use crate::event::Appended;
use crate::port::CheckpointKey;
use crate::raw::row::PendingRow;

/// Where a command's answer goes.
pub type Reply<T> = oneshot::Sender<Result<T>>;

/// What a checkpoint write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A consumer's commit: stores the seq unless a higher one is stored.
    Raise(i64),
    /// An operator's reset: stores the seq whatever is stored, or deletes the row.
    Replace(Option<i64>),
}

/// A write (or a read that must be ordered with writes) for a port's writer.
///
/// `A` is what a caller's batch carries for the port's writer (PostgreSQL: the barriers of
/// a batch across topics; `()` when nothing); `X` the port's own commands (SQLite: a
/// caller's transaction), which the port's writer runs itself.
#[derive(Debug)]
pub enum Command<A = (), X = Infallible> {
    /// Append one encoded draft.
    Append {
        /// The draft.
        row: PendingRow,
        /// Its seq (or the stored one, for an event id stored before).
        reply: Reply<Appended>,
    },
    /// Append a caller's batch of encoded drafts, all in the one transaction.
    AppendBatch {
        /// The drafts, in order.
        rows: Vec<PendingRow>,
        /// Their seqs, in order.
        reply: Reply<Vec<Appended>>,
        /// What the port's writer needs besides.
        across: A,
    },
    /// Raise or reset a checkpoint.
    Checkpoint {
        /// Which checkpoint.
        key: CheckpointKey,
        /// What to store.
        write: Write,
        /// Answered after the commit.
        reply: Reply<()>,
    },
    /// Delete a topic's records below a seq.
    Truncate {
        /// The topic.
        topic: String,
        /// The first seq kept.
        before_seq: i64,
        /// How many records were deleted.
        reply: Reply<u64>,
    },
    /// The topic's last seq once every command sent before this one is committed: where a
    /// tail subscription starts.
    TailSeq {
        /// The topic.
        topic: String,
        /// Its last seq (0 for a topic without records).
        reply: Reply<i64>,
    },
    /// Mark a topic as a dead-letter topic, which retention keeps.
    DeclareDeadLetters {
        /// The topic.
        topic: String,
        /// Answered after the commit.
        reply: Reply<()>,
    },
    /// A command of the port's own, which its writer runs and answers itself.
    Own(X),
}

/// What one command produced in a committed transaction.
#[derive(Debug)]
pub enum Outcome {
    /// An append's seq.
    Appended(Appended),
    /// A batch's seqs.
    AppendedBatch(Vec<Appended>),
    /// A checkpoint write or a dead-letter mark.
    Done,
    /// How many records a truncation deleted.
    Truncated(u64),
    /// A topic's last seq.
    Tail(i64),
}

impl<A, X> Command<A, X> {
    /// How many events the command appends (at least 1, for the group-commit cap).
    pub fn events(&self) -> usize {
        match self {
            Self::AppendBatch { rows, .. } => rows.len().max(1),
            _ => 1,
        }
    }

    /// The rows the command appends (none for other commands).
    pub fn rows(&self) -> &[PendingRow] {
        match self {
            Self::Append { row, .. } => std::slice::from_ref(row),
            Self::AppendBatch { rows, .. } => rows,
            _ => &[],
        }
    }

    /// The checkpoint a checkpoint write is for.
    pub fn checkpoint(&self) -> Option<&CheckpointKey> {
        match self {
            Self::Checkpoint { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Answers the caller with what the command produced in the committed transaction.
    /// An outcome of another command's kind (a writer's bug) fails the caller rather than
    /// answering it wrongly; a port's own command is dropped (its caller sees the writer
    /// gone).
    pub fn answer(self, label: &'static str, outcome: Outcome) {
        match (self, outcome) {
            (Self::Append { reply, .. }, Outcome::Appended(appended)) => {
                let _ = reply.send(Ok(appended));
            }
            (Self::AppendBatch { reply, .. }, Outcome::AppendedBatch(appended)) => {
                let _ = reply.send(Ok(appended));
            }
            (
                Self::Checkpoint { reply, .. } | Self::DeclareDeadLetters { reply, .. },
                Outcome::Done,
            ) => {
                let _ = reply.send(Ok(()));
            }
            (Self::Truncate { reply, .. }, Outcome::Truncated(count)) => {
                let _ = reply.send(Ok(count));
            }
            (Self::TailSeq { reply, .. }, Outcome::Tail(seq)) => {
                let _ = reply.send(Ok(seq));
            }
            (command, _) => command.fail(
                label,
                false,
                "internal error: outcome does not match its command",
            ),
        }
    }

    /// Fails the caller: its command was in a transaction that failed with `cause`;
    /// `transient` when running it again may succeed. A port's own command is dropped,
    /// which drops its reply: its caller sees the writer gone.
    pub fn fail(self, label: &'static str, transient: bool, cause: &str) {
        let error = |what: &str| shared_failure(label, what, transient, cause);
        match self {
            Self::Append { reply, row } => {
                let _ = reply.send(Err(error(&format!("append to topic {:?}", row.topic))));
            }
            Self::AppendBatch { reply, rows, .. } => {
                let topics: BTreeSet<&str> = rows.iter().map(|row| row.topic.as_str()).collect();
                let _ = reply.send(Err(error(&format!(
                    "append a batch of {} events to topics {topics:?} (none stored)",
                    rows.len()
                ))));
            }
            Self::Checkpoint { reply, key, .. } => {
                let _ = reply.send(Err(error(&format!(
                    "commit checkpoint {:?}",
                    key.subscription
                ))));
            }
            Self::Truncate { reply, topic, .. } => {
                let _ = reply.send(Err(error(&format!("truncate topic {topic:?}"))));
            }
            Self::TailSeq { reply, topic } => {
                let _ = reply.send(Err(error(&format!("read the head of topic {topic:?}"))));
            }
            Self::DeclareDeadLetters { reply, topic } => {
                let _ = reply.send(Err(error(&format!(
                    "mark topic {topic:?} as a dead-letter topic"
                ))));
            }
            Self::Own(_) => {}
        }
    }
}
