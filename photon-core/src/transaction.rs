//! For port authors: [`TransactionalPort`], a port that commits a handler's writes and the
//! checkpoint advance in one transaction of its database, which makes a handler's effects
//! in that database exactly-once.
//!
//! # What exactly-once means here
//! A transactional handler writes through the transaction the port hands it. The port
//! raises the subscription's checkpoint to the event's seq in that same transaction, and
//! commits both or neither:
//! - a handler error, a panic or a failed commit rolls everything back (the writes and the
//!   checkpoint move), and the event is delivered again (retried, then dead-lettered);
//! - a crash before the commit leaves neither; after it, both: the event is never handled
//!   twice and never skipped, for the writes made through the transaction;
//! - a dead letter is stored in the same way: the letter and the checkpoint advance past
//!   its event commit together.
//!
//! Anything the handler does outside the transaction (an HTTP call, a write to another
//! database, a message to a broker) is still at-least-once: a crash after it and before the
//! commit runs it again.
//!
//! The port's transaction is the only writer of a transactional subscription's checkpoint
//! (the executor does not also commit it), and a port must not make the transaction wait
//! on the port's own work: an append the handler makes outside the transaction (with
//! `Photon::publish`) is an independent append, committed when it returns and kept after a
//! rollback of the handler (at-least-once), and must be able to commit while the
//! handler's transaction holds the checkpoint. An append through the transaction is
//! exactly-once with the checkpoint advance. A port whose lock waits can still meet (one
//! topic appended to both ways in one handler) bounds them, failing the wait with a
//! retryable [`crate::PhotonError::Unavailable`].

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;
use crate::event::{Appended, Event, RecordDraft};
use crate::port::{CheckpointKey, StoragePort};

/// How a transactional handling ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionOutcome {
    /// The handler ran and its writes committed with the checkpoint advance.
    Committed,
    /// The stored checkpoint already covered the event (an earlier run committed it): the
    /// handler was not called and nothing was written.
    AlreadyHandled,
}

/// A port that runs a handler and the checkpoint advance in one transaction.
///
/// The handler's form depends on the database: it receives the port's own transaction
/// type (SQLite: a transaction on the port's write connection, run on its writer thread;
/// PostgreSQL: an async handler over a transaction on one of the port's pooled connections).
/// The runtime's executor calls these methods one event at a time, in seq order, for a
/// subscription whose handler is transactional.
#[async_trait]
pub trait TransactionalPort: StoragePort {
    /// The handler this port runs inside its transaction.
    type Handler: ?Sized + Send + Sync + 'static;

    /// The plain function a `#[subscribe(transactional)]` declaration becomes (SQLite:
    /// `fn(&SqliteTransaction<'_>, Event) -> Result<()>`).
    type DeclaredFn: Copy + Send + Sync + 'static;

    /// The handler that calls a declared function.
    fn declared_handler(function: Self::DeclaredFn) -> Arc<Self::Handler>;

    /// Runs `handler` on `event` in one transaction that also raises `checkpoint` to
    /// `event.seq`.
    ///
    /// Behaviour:
    /// - When the stored checkpoint is at `event.seq` or beyond (read inside the
    ///   transaction, under the database's write lock), the handler is not called and
    ///   [`TransactionOutcome::AlreadyHandled`] is returned.
    /// - Otherwise the handler runs; when it returns `Ok`, its writes and the checkpoint
    ///   advance commit together ([`TransactionOutcome::Committed`]).
    /// - A handler error or panic, or a failed commit, rolls both back and is returned
    ///   (a panic as a non-retryable handler error).
    /// - The port's live subscribers are woken after the commit for every topic the
    ///   handler published to through the transaction.
    ///
    /// # Errors
    /// The handler's error; the port's storage errors (retryable when the database was
    /// busy).
    async fn handle_in_transaction(
        &self,
        handler: Arc<Self::Handler>,
        event: Event,
        checkpoint: CheckpointKey,
    ) -> Result<TransactionOutcome>;

    /// Appends `draft` (a dead letter) and raises `checkpoint` to `seq` in one transaction.
    ///
    /// Behaviour:
    /// - When the stored checkpoint is at `seq` or beyond, nothing is written and `None`
    ///   is returned (an earlier run stored the letter, or handled the event).
    /// - Otherwise the record and the checkpoint advance commit together.
    ///
    /// # Errors
    /// As [`StoragePort::append`].
    async fn append_with_checkpoint(
        &self,
        draft: RecordDraft,
        checkpoint: CheckpointKey,
        seq: i64,
    ) -> Result<Option<Appended>>;
}

/// The transaction type a transactional handler takes, tied to the port that hands it
/// out: `#[subscribe(transactional)]` finds the port from the handler's first argument.
pub trait TransactionHandle {
    /// The port whose transactions these are.
    type Port: TransactionalPort + Clone;
}
