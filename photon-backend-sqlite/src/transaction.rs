//! Transactions on the port's write connection: the transactional outbox
//! ([`SqliteStoragePort::transaction`], [`SqliteTransaction::publish`], [`publish_in_tx`])
//! and transactional handlers ([`TransactionalPort`]: a handler's writes and the checkpoint
//! advance in one transaction).
//!
//! A transaction runs on the writer thread, alone (never batched with other commands), as
//! `BEGIN IMMEDIATE`: it holds SQLite's write lock from its start, so the seqs it assigns
//! follow the last committed ones with no gap, and a rollback uses none. After the commit
//! the writer wakes this port's live subscribers of every topic published to in it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ops::Deref;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use photon_core::{
    Appended, CheckpointKey, Event, PhotonError, RecordDraft, Result, TransactionHandle,
    TransactionOutcome, TransactionalPort,
};
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use crate::checkpoint;
use crate::error::{sqlite_error, LABEL};
use crate::port::SqliteStoragePort;
use crate::publish;
use crate::row::PendingRow;
use crate::topic::{provision_topic, store_last_seq};
use crate::writer::Command;
use photon_core::raw::sql::error::{panic_text, writer_gone};
use photon_core::raw::sql::{SqlPort, Write};
use photon_core::raw::wake::CommitWakers;

/// A transaction on the port's write connection, handed to the closure of
/// [`SqliteStoragePort::transaction`] and to transactional handlers.
///
/// It dereferences to [`rusqlite::Transaction`]: write your own tables through it. Events
/// published with [`SqliteTransaction::publish`] become visible exactly when it commits,
/// and not at all when it rolls back.
pub struct SqliteTransaction<'c> {
    transaction: rusqlite::Transaction<'c>,
    /// The topics published to in this transaction: whom to wake after commit.
    published: RefCell<HashSet<String>>,
}

impl std::fmt::Debug for SqliteTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteTransaction")
            .field("published", &self.published.borrow())
            .finish_non_exhaustive()
    }
}

impl<'c> Deref for SqliteTransaction<'c> {
    type Target = rusqlite::Transaction<'c>;

    fn deref(&self) -> &Self::Target {
        &self.transaction
    }
}

impl SqliteTransaction<'_> {
    /// Appends an event in this transaction: seq follows the topic's last one, and the
    /// event is stored (and delivered) only if the transaction commits. Build the draft
    /// with `EventStore::draft_with_headers` (`photon.store().draft_with_headers(..)`) so
    /// that it is validated, limited and sealed exactly as a publish would be. Unlike a
    /// publish, it opens no `photon.publish` span, adds no injected header (`otel`) and is
    /// not counted in `photon_published_total`.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] for a timestamp SQLite cannot store,
    /// [`PhotonError::Storage`] when SQLite refuses the insert.
    pub fn publish(&self, draft: RecordDraft) -> Result<Appended> {
        let row = PendingRow::encode(draft, crate::error::LABEL)?;
        let appended = append(&self.transaction, &row)?;
        self.published.borrow_mut().insert(row.topic);
        Ok(appended)
    }
}

/// Appends an event inside a transaction the caller opened on a connection of their own to
/// the port's file; the event becomes visible when the caller commits, and a rollback
/// stores nothing and uses no seq.
///
/// Subscribers of a port see it at their next poll (within `poll_interval`), as for any
/// other process's append: this port cannot observe another connection's commit. Run the
/// transaction through [`SqliteStoragePort::transaction`] instead to wake them at once.
/// Open the transaction with `BEGIN IMMEDIATE` (`TransactionBehavior::Immediate`): a
/// deferred transaction that read before this call fails with a busy error when another
/// connection wrote in between.
///
/// # Errors
/// [`PhotonError::InvalidInput`] when `connection` is not inside a transaction (the insert
/// and the topic's seq would then commit separately); otherwise as
/// [`SqliteTransaction::publish`].
pub fn publish_in_tx(connection: &Connection, draft: RecordDraft) -> Result<Appended> {
    if connection.is_autocommit() {
        return Err(PhotonError::InvalidInput(format!(
            "publish_in_tx on topic {:?} needs an open transaction on the connection",
            draft.topic_name
        )));
    }
    let row = PendingRow::encode(draft, crate::error::LABEL)?;
    append(connection, &row)
}

/// Inserts a row with its topic's next seq and stores that seq.
fn append(connection: &Connection, row: &PendingRow) -> Result<Appended> {
    let what = || format!("append to topic {:?} in a transaction", row.topic);
    let mut topic =
        provision_topic(connection, &row.topic).map_err(|e| sqlite_error(&what(), e))?;
    let (appended, inserted) =
        publish::insert(connection, &mut topic, row).map_err(|e| sqlite_error(&what(), e))?;
    if inserted {
        store_last_seq(connection, topic).map_err(|e| sqlite_error(&what(), e))?;
    }
    Ok(appended)
}

/// Work the writer thread runs alone, in its own transaction; it answers its caller itself.
pub struct TransactionWork(Box<WriterWork>);

/// What the writer calls: its connection, and the watchers to wake after a commit.
type WriterWork = dyn FnOnce(&mut Connection, &CommitWakers) + Send;

impl TransactionWork {
    pub(crate) fn run(self, connection: &mut Connection, heads: &CommitWakers) {
        (self.0)(connection, heads);
    }
}

impl std::fmt::Debug for TransactionWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TransactionWork")
    }
}

impl SqliteStoragePort {
    /// Runs `work` in one write transaction on this port's write connection, on its writer
    /// thread, and commits when it returns `Ok`; an error or a panic rolls everything back.
    ///
    /// Use it for the transactional outbox: write your own tables and publish with
    /// [`SqliteTransaction::publish`]; subscribers see the events exactly when the
    /// transaction commits (this port's at once, other processes' within their
    /// `poll_interval`), and never if it rolls back.
    ///
    /// `work` holds the file's write lock while it runs, and every other write of this
    /// port waits behind it: keep it short, and never wait in it for this port (a publish
    /// through the port from inside it would wait forever).
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use photon_backend_sqlite::SqliteStoragePort;
    /// use photon_core::{EventStore, TransportCrypto};
    ///
    /// let directory = tempfile::tempdir().unwrap();
    /// let port = SqliteStoragePort::builder().path(directory.path().join("shop.db")).build().await?;
    /// let store = EventStore::new(Arc::new(port.clone()), TransportCrypto::plaintext());
    /// let draft = store.draft("orders", Some("o-1"), serde_json::json!(null), serde_json::json!({"total": 12}))?;
    /// let appended = port
    ///     .transaction(move |tx| {
    ///         tx.execute_batch("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)")
    ///             .and_then(|()| tx.execute("INSERT INTO orders (id) VALUES ('o-1')", []))
    ///             .map_err(|e| photon_backend_sqlite::sqlite_error("insert the order", e))?;
    ///         tx.publish(draft)
    ///     })
    ///     .await?;
    /// assert_eq!(appended.seq, 1);
    /// # Ok::<_, photon_core::PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// `work`'s error; a panic in it as a non-retryable [`PhotonError::Handler`];
    /// [`PhotonError::Unavailable`] when another process held the write lock past the busy
    /// timeout; [`PhotonError::Storage`] when the commit fails; [`PhotonError::Closed`]
    /// when the port is closing.
    ///
    /// # Cancel safety
    /// Dropping the future does not cancel the transaction: once handed to the writer it
    /// runs and commits or rolls back as `work` decides.
    pub async fn transaction<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteTransaction<'_>) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let work = TransactionWork(Box::new(move |connection, heads| {
            // A caller that stopped waiting no longer needs the answer.
            let _ = reply.send(run(connection, heads, work));
        }));
        self.send(Command::Own(work))?;
        answer.await.map_err(|_| writer_gone(LABEL))?
    }
}

/// Runs `work` in a `BEGIN IMMEDIATE` transaction; commits on `Ok`, wakes subscribers.
fn run<T>(
    connection: &mut Connection,
    heads: &CommitWakers,
    work: impl FnOnce(&SqliteTransaction<'_>) -> Result<T>,
) -> Result<T> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sqlite_error("begin a transaction", e))?;
    let scoped = SqliteTransaction {
        transaction,
        published: RefCell::default(),
    };
    // Dropping `scoped` on an error or a panic rolls the transaction back.
    let value = std::panic::catch_unwind(AssertUnwindSafe(|| work(&scoped)))
        .unwrap_or_else(|panic| Err(panicked(&*panic)))?;
    let SqliteTransaction {
        transaction,
        published,
    } = scoped;
    transaction
        .commit()
        .map_err(|e| sqlite_error("commit the transaction", e))?;
    for topic in published.into_inner() {
        heads.committed(&topic);
    }
    Ok(value)
}

fn panicked(panic: &(dyn std::any::Any + Send)) -> PhotonError {
    let text = panic_text(panic);
    PhotonError::handler_permanent(format!("transaction panicked (rolled back): {text}"))
}

/// A transactional handler on SQLite: called with the transaction (on the port's writer
/// thread) and the event; its writes through the transaction commit with the checkpoint
/// advance. Build one with [`transactional_handler`].
pub type TransactionalHandler =
    dyn Fn(&SqliteTransaction<'_>, &Event) -> Result<()> + Send + Sync + 'static;

/// A [`TransactionalHandler`] from a closure (the coercion, written once).
pub fn transactional_handler<F>(handler: F) -> Arc<TransactionalHandler>
where
    F: Fn(&SqliteTransaction<'_>, &Event) -> Result<()> + Send + Sync + 'static,
{
    Arc::new(handler)
}

/// Whether the stored checkpoint already covers `seq` (read under the write lock).
fn covered(transaction: &SqliteTransaction<'_>, key: &CheckpointKey, seq: i64) -> Result<bool> {
    let stored = checkpoint::stored(transaction, key)
        .map_err(|e| sqlite_error(&format!("load checkpoint {:?}", key.subscription), e))?;
    Ok(stored.is_some_and(|stored| stored >= seq))
}

fn raise(transaction: &SqliteTransaction<'_>, key: &CheckpointKey, seq: i64) -> Result<()> {
    checkpoint::apply(transaction, key, Write::Raise(seq))
        .map_err(|e| sqlite_error(&format!("commit checkpoint {:?}", key.subscription), e))
}

/// Transactional handlers on SQLite run on the writer thread, in a `BEGIN IMMEDIATE`
/// transaction that first reads the checkpoint: a second consumer of the same
/// subscription (in this or another process) finds the event covered and skips it.
/// The plain function `#[subscribe(transactional)]` makes of a declared SQLite handler.
pub type DeclaredTransactionalFn = fn(&SqliteTransaction<'_>, Event) -> Result<()>;

impl TransactionHandle for SqliteTransaction<'_> {
    type Port = SqliteStoragePort;
}

#[async_trait]
impl TransactionalPort for SqliteStoragePort {
    type Handler = TransactionalHandler;
    type DeclaredFn = DeclaredTransactionalFn;

    fn declared_handler(function: DeclaredTransactionalFn) -> Arc<TransactionalHandler> {
        transactional_handler(move |transaction, event| function(transaction, event.clone()))
    }

    async fn handle_in_transaction(
        &self,
        handler: Arc<TransactionalHandler>,
        event: Event,
        checkpoint: CheckpointKey,
    ) -> Result<TransactionOutcome> {
        self.transaction(move |transaction| {
            if covered(transaction, &checkpoint, event.seq)? {
                return Ok(TransactionOutcome::AlreadyHandled);
            }
            handler(transaction, &event)?;
            raise(transaction, &checkpoint, event.seq)?;
            Ok(TransactionOutcome::Committed)
        })
        .await
    }

    async fn append_with_checkpoint(
        &self,
        draft: RecordDraft,
        checkpoint: CheckpointKey,
        seq: i64,
    ) -> Result<Option<Appended>> {
        self.transaction(move |transaction| {
            if covered(transaction, &checkpoint, seq)? {
                return Ok(None);
            }
            let appended = transaction.publish(draft)?;
            raise(transaction, &checkpoint, seq)?;
            Ok(Some(appended))
        })
        .await
    }
}
