//! Transactions on PostgreSQL: the transactional outbox ([`publish_in_tx`] on the caller's
//! own transaction, [`PostgresTransaction::publish`]) and transactional handlers
//! ([`TransactionalPort`]: a handler's writes and the checkpoint advance in one
//! transaction).
//!
//! An append inside a transaction takes the same topic row lock the port's writer takes,
//! so seqs follow the last committed ones with no gap and a rollback uses none; other
//! appends to that topic (of any process) wait for the transaction to end. Its `NOTIFY`
//! is delivered by PostgreSQL on commit only, which wakes the live subscribers of every
//! process then, and never after a rollback.
//!
//! A transactional handler's transaction first locks the subscription's checkpoint row
//! (creating it when missing, which a rollback undoes): a second consumer of the same
//! subscription waits for the first one's transaction (up to the port's `lock_timeout`,
//! then its attempt fails with a retryable error and is retried), then finds the event
//! covered and skips it. The row is written by these transactions only: the executor's
//! ordinary checkpoint commits skip transactional subscriptions.
//!
//! Lock order: a handler's transaction (and a dead letter's) locks the checkpoint row
//! first, then the rows of the topics it publishes to; the port's writer never holds a
//! checkpoint row and a topic row in one transaction (see `lanes.rs`). So the handler's
//! transaction never waits for its own process, except where the handler makes it: a
//! `Photon::publish` to a topic the transaction already published to waits for that
//! transaction's own lock, and fails after `lock_timeout`.

use std::collections::BTreeSet;
use std::ops::Deref;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::FutureExt;
use photon_core::{
    Appended, CheckpointKey, Event, PhotonError, RecordDraft, Result, TransactionHandle,
    TransactionOutcome, TransactionalPort,
};

use crate::checkpoint;
use crate::error::{pg_error, pool_error};
use crate::listen;
use crate::port::PostgresStoragePort;
use crate::row::PendingRow;
use photon_core::raw::sql::error::panic_text;
use photon_core::raw::sql::{SqlPort, Write};

/// A transaction on one of the port's pooled connections, handed to transactional
/// handlers.
///
/// It dereferences to [`tokio_postgres::Transaction`]: write your own tables through it.
///
/// A handler may publish two ways:
/// - [`PostgresTransaction::publish`]: the event becomes visible exactly when the
///   transaction commits, with the checkpoint advance, and not at all when it rolls back
///   (a handler error or panic, a failed commit, a crash): exactly once per handled event.
///   The topic's row stays locked until then, so every other append to that topic waits.
/// - `Photon::publish` (or the port's `append`): an independent append, committed by the
///   port's writer before it returns and kept when the handler's transaction then rolls
///   back, so an event handled again publishes again (at-least-once). It does not wait for
///   the handler's transaction, unless the transaction already published to the same
///   topic: then it waits for that lock until `lock_timeout` and fails. Publish to one
///   topic one way only.
pub struct PostgresTransaction<'c> {
    transaction: deadpool_postgres::Transaction<'c>,
    port: PostgresStoragePort,
    /// The topics published to in this transaction: whom to wake after the commit.
    published: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for PostgresTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresTransaction")
            .field("schema", &self.port.config().schema)
            .field("published", &self.published())
            .finish_non_exhaustive()
    }
}

impl<'c> Deref for PostgresTransaction<'c> {
    type Target = tokio_postgres::Transaction<'c>;

    fn deref(&self) -> &Self::Target {
        &self.transaction
    }
}

impl PostgresTransaction<'_> {
    /// Appends an event in this transaction: seq follows the topic's last one, and the
    /// event is stored (and delivered) only if the transaction commits. Build the draft
    /// with `EventStore::draft_with_headers` so that it is validated, limited and sealed
    /// exactly as a publish would be.
    ///
    /// # Errors
    /// As [`publish_in_tx`].
    pub async fn publish(&self, draft: RecordDraft) -> Result<Appended> {
        let topic = draft.topic_name.clone();
        let appended = publish_in_tx(&self.transaction, &self.port, draft).await?;
        self.published
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(topic);
        Ok(appended)
    }

    fn published(&self) -> BTreeSet<String> {
        self.published
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Appends an event inside a transaction the caller opened (on a connection of their own
/// or a pooled one) to the database of `port`: the event is stored and its subscribers, in
/// every process, are woken exactly when the caller commits; a rollback stores nothing and
/// uses no seq.
///
/// The topic's row stays locked until the transaction ends, and every other append to the
/// topic waits for it: keep the transaction short. A transaction that publishes to several
/// topics should do so in name order, as the port's writer locks them; otherwise it may
/// end in a deadlock error (retryable: run the transaction again). An event id already
/// stored is not stored again: its stored seq is returned.
///
/// While the transaction is open, appends to other topics (of this port's writer) go on;
/// those to this topic wait, up to the `lock_timeout` of their session.
///
/// # Errors
/// [`PhotonError::InvalidInput`] for a timestamp the port cannot store;
/// [`PhotonError::Unavailable`] when the connection failed, the transaction hit a
/// deadlock, or the wait for the topic's row outlasted the session's `lock_timeout` (the
/// port's own sessions: the configured one; a connection of the caller's: its own
/// setting); [`PhotonError::Storage`] when the server refuses the insert (after which the
/// caller's transaction is aborted, as after any failed statement).
pub async fn publish_in_tx(
    transaction: &tokio_postgres::Transaction<'_>,
    port: &PostgresStoragePort,
    draft: RecordDraft,
) -> Result<Appended> {
    let row = PendingRow::encode(draft, crate::error::LABEL)?;
    append(transaction, &port.config().schema, &row)
        .await
        .map_err(|e| {
            pg_error(
                &format!("append to topic {:?} in a transaction", row.topic),
                e,
            )
        })
}

/// Inserts `row` with its topic's next seq under the topic row's lock, stores that seq and
/// sends the schema's `NOTIFY` (delivered on commit).
async fn append(
    transaction: &tokio_postgres::Transaction<'_>,
    schema: &str,
    row: &PendingRow,
) -> std::result::Result<Appended, tokio_postgres::Error> {
    transaction
        .execute(
            &format!(
                "INSERT INTO {schema}.topics (name) VALUES ($1) ON CONFLICT (name) DO NOTHING"
            ),
            &[&row.topic],
        )
        .await?;
    let topic = transaction
        .query_one(
            &format!("SELECT topic_id, last_seq FROM {schema}.topics WHERE name = $1 FOR UPDATE"),
            &[&row.topic],
        )
        .await?;
    let (topic_id, last_seq): (i64, i64) = (topic.try_get(0)?, topic.try_get(1)?);
    let stored = transaction
        .query_opt(
            &format!("SELECT seq FROM {schema}.events WHERE event_id = $1"),
            &[&row.event_id],
        )
        .await?;
    if let Some(stored) = stored {
        return Ok(Appended {
            event_id: row.event_id.clone(),
            seq: stored.try_get(0)?,
        });
    }
    let seq = last_seq + 1;
    // Stored only when it differs from the event id, as the writer does.
    let envelope_id = (row.envelope_id != row.event_id).then_some(row.envelope_id.as_str());
    transaction
        .execute(
            &format!(
                "INSERT INTO {schema}.events \
                 (topic_id, seq, event_id, envelope_id, topic_key, created_at, body) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &topic_id,
                &seq,
                &row.event_id,
                &envelope_id,
                &row.topic_key,
                &row.created_at,
                &row.body.as_bytes(),
            ],
        )
        .await?;
    transaction
        .execute(
            &format!("UPDATE {schema}.topics SET last_seq = $2 WHERE topic_id = $1"),
            &[&topic_id, &seq],
        )
        .await?;
    transaction
        .execute(
            "SELECT pg_notify($1, $2)",
            &[&listen::channel(schema), &row.topic],
        )
        .await?;
    Ok(Appended {
        event_id: row.event_id.clone(),
        seq,
    })
}

/// A transactional handler on PostgreSQL: called with the transaction and the event; its
/// writes through the transaction commit with the checkpoint advance. Build one with
/// [`transactional_handler`].
pub type TransactionalHandler = dyn for<'t> Fn(&'t PostgresTransaction<'t>, &'t Event) -> BoxFuture<'t, Result<()>>
    + Send
    + Sync
    + 'static;

/// A [`TransactionalHandler`] from a closure returning a boxed future (the coercion,
/// written once):
///
/// ```no_run
/// use photon_backend_postgres::transactional_handler;
/// use photon_core::PhotonError;
///
/// let handler = transactional_handler(|tx, event| {
///     Box::pin(async move {
///         tx.execute("INSERT INTO seen (event_id) VALUES ($1)", &[&event.event_id])
///             .await
///             .map_err(|e| PhotonError::handler_permanent(e.to_string()))?;
///         Ok(())
///     })
/// });
/// ```
pub fn transactional_handler<F>(handler: F) -> Arc<TransactionalHandler>
where
    F: for<'t> Fn(&'t PostgresTransaction<'t>, &'t Event) -> BoxFuture<'t, Result<()>>
        + Send
        + Sync
        + 'static,
{
    Arc::new(handler)
}

/// The function form of a transactional handler on PostgreSQL (the port's
/// [`TransactionalPort::DeclaredFn`]): what `#[subscribe(transactional)]` makes of an
/// `async fn(&PostgresTransaction<'_>, Input)`.
pub type DeclaredTransactionalFn =
    for<'t> fn(&'t PostgresTransaction<'t>, Event) -> BoxFuture<'t, Result<()>>;

impl TransactionHandle for PostgresTransaction<'_> {
    type Port = PostgresStoragePort;
}

impl PostgresStoragePort {
    /// Locks the checkpoint row of `key` in `transaction` and returns whether its stored
    /// seq covers `seq`. A missing row is inserted at 0 first, so that there is a row to
    /// lock; only a commit, after raising it, keeps it.
    async fn covered(
        &self,
        transaction: &tokio_postgres::Transaction<'_>,
        key: &CheckpointKey,
        seq: i64,
    ) -> Result<bool> {
        let schema = &self.config().schema;
        let (keyed, topic_key) = checkpoint::scope(key);
        let row = transaction
            .query_one(
                &format!(
                    "INSERT INTO {schema}.checkpoints (subscription, topic, keyed, topic_key, seq) \
                     VALUES ($1, $2, $3, $4, 0) \
                     ON CONFLICT (subscription, topic, keyed, topic_key) \
                     DO UPDATE SET seq = checkpoints.seq RETURNING seq"
                ),
                &[&key.subscription, &key.topic, &keyed, &topic_key],
            )
            .await
            .map_err(|e| pg_error(&format!("lock checkpoint {:?}", key.subscription), e))?;
        let stored: i64 = row
            .try_get(0)
            .map_err(|e| pg_error(&format!("lock checkpoint {:?}", key.subscription), e))?;
        Ok(stored >= seq)
    }

    /// Wakes this process's subscribers of `topics` at once (the listener would too, a
    /// little later).
    fn wake(&self, topics: &BTreeSet<String>) {
        for topic in topics {
            self.heads().committed(topic);
        }
    }
}

/// Ends `transaction` without storing anything.
async fn roll_back(transaction: deadpool_postgres::Transaction<'_>, what: &str) -> Result<()> {
    transaction
        .rollback()
        .await
        .map_err(|e| pg_error(&format!("roll back {what}"), e))
}

fn panicked(panic: &(dyn std::any::Any + Send)) -> PhotonError {
    let text = panic_text(panic);
    PhotonError::handler_permanent(format!(
        "transactional handler panicked (rolled back): {text}"
    ))
}

#[async_trait]
impl TransactionalPort for PostgresStoragePort {
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
        let what = format!(
            "handle event {} of {:?}",
            event.seq, checkpoint.subscription
        );
        let mut client = self.pool().get().await.map_err(|e| pool_error(&what, e))?;
        let transaction = client.transaction().await.map_err(|e| pg_error(&what, e))?;
        if self.covered(&transaction, &checkpoint, event.seq).await? {
            roll_back(transaction, &what).await?;
            return Ok(TransactionOutcome::AlreadyHandled);
        }
        let scoped = PostgresTransaction {
            transaction,
            port: self.clone(),
            published: Mutex::default(),
        };
        let handled = AssertUnwindSafe(handler(&scoped, &event))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(panicked(&*panic)));
        let published = scoped.published();
        let transaction = scoped.transaction;
        if let Err(error) = handled {
            // The handler's error is what the executor needs; a failed rollback leaves
            // nothing committed either (the server ends the transaction with the session).
            if let Err(rollback) = roll_back(transaction, &what).await {
                tracing::warn!(%rollback, "postgres transactional handler: rollback failed");
            }
            return Err(error);
        }
        checkpoint::apply(&transaction, &checkpoint, Write::Raise(event.seq))
            .await
            .map_err(|e| {
                pg_error(
                    &format!("commit checkpoint {:?}", checkpoint.subscription),
                    e,
                )
            })?;
        transaction
            .commit()
            .await
            .map_err(|e| pg_error(&format!("commit the transaction to {what}"), e))?;
        self.wake(&published);
        Ok(TransactionOutcome::Committed)
    }

    async fn append_with_checkpoint(
        &self,
        draft: RecordDraft,
        checkpoint: CheckpointKey,
        seq: i64,
    ) -> Result<Option<Appended>> {
        let what = format!("store the dead letter of {:?}", checkpoint.subscription);
        let mut client = self.pool().get().await.map_err(|e| pool_error(&what, e))?;
        let transaction = client.transaction().await.map_err(|e| pg_error(&what, e))?;
        if self.covered(&transaction, &checkpoint, seq).await? {
            roll_back(transaction, &what).await?;
            return Ok(None);
        }
        let topic = draft.topic_name.clone();
        let appended = publish_in_tx(&transaction, self, draft).await?;
        checkpoint::apply(&transaction, &checkpoint, Write::Raise(seq))
            .await
            .map_err(|e| {
                pg_error(
                    &format!("commit checkpoint {:?}", checkpoint.subscription),
                    e,
                )
            })?;
        transaction.commit().await.map_err(|e| pg_error(&what, e))?;
        self.wake(&BTreeSet::from([topic]));
        Ok(Some(appended))
    }
}
