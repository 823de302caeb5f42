//! Transactional handlers: the handler's writes and the checkpoint advance commit in one
//! transaction of the port's database ([`TransactionalPort`]), which makes the handler's
//! effects in that database exactly-once.
//!
//! The executor runs a transactional subscription's events one at a time, in the order it
//! reads them (seq order), whatever their keys: each transaction raises the checkpoint to
//! its event's seq, which is only right when every event before it has committed. A dead
//! letter of such a subscription is stored with the checkpoint advance in one transaction
//! too.
//!
//! These transactions are the only writers of the subscription's checkpoint: the
//! executor's ordinary [`photon_core::CheckpointCommitter`] is never given its
//! acknowledgements (`dispatch.rs`), so no commit of this process waits for the lock a
//! running handler's transaction holds on the checkpoint. (An event finished without a
//! transaction, a dead letter the port refused for good, is covered by the next event's
//! commit; if it is the last one, it is delivered again after a restart.)
//!
//! # Publishing from a transactional handler
//! - Through the handler's transaction (PostgreSQL: `PostgresTransaction::publish`;
//!   SQLite: `SqliteTransaction::publish`): exactly once with the checkpoint advance; a
//!   failed attempt, a panic or a crash before the commit stores nothing.
//! - With `Photon::publish`: an independent append, committed when it returns and kept
//!   when the handler's transaction then rolls back, so an event handled again publishes
//!   again (at-least-once). On PostgreSQL it never waits for the handler's own transaction
//!   unless that transaction already published to the same topic (whose row it then
//!   holds): that wait ends with the port's lock timeout, as a retryable error. On SQLite
//!   the handler runs on the writer thread and must not wait for the port at all.

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::{
    Appended, CheckpointKey, Event, PhotonError, RecordDraft, Result, StoragePort,
    TransactionOutcome, TransactionalPort,
};

use super::handler::{HandlerFn, HandlerOptions};

/// Stores a dead letter and the checkpoint advance past its event in one transaction.
#[async_trait]
pub(crate) trait LetterCommit: Send + Sync {
    /// `None` when the checkpoint already covered `seq` (nothing stored).
    async fn store(
        &self,
        draft: RecordDraft,
        checkpoint: CheckpointKey,
        seq: i64,
    ) -> Result<Option<Appended>>;
}

/// A [`TransactionalPort`] as the executor holds it.
struct Port<P: ?Sized>(Arc<P>);

#[async_trait]
impl<P: TransactionalPort + ?Sized> LetterCommit for Port<P> {
    async fn store(
        &self,
        draft: RecordDraft,
        checkpoint: CheckpointKey,
        seq: i64,
    ) -> Result<Option<Appended>> {
        self.0.append_with_checkpoint(draft, checkpoint, seq).await
    }
}

/// The executor's handler function and letter store for a transactional handler.
pub(crate) fn wrap<P: TransactionalPort>(
    options: &HandlerOptions,
    port: Arc<P>,
    handler: Arc<P::Handler>,
) -> (HandlerFn, Arc<dyn LetterCommit>) {
    let checkpoint = CheckpointKey::new(options.durable(), options.topic(), options.topic_key());
    let letters: Arc<dyn LetterCommit> = Arc::new(Port(Arc::clone(&port)));
    let function: HandlerFn = Arc::new(move |event: Event| {
        let port = Arc::clone(&port);
        let handler = Arc::clone(&handler);
        let checkpoint = checkpoint.clone();
        Box::pin(async move {
            let outcome = port
                .handle_in_transaction(handler, event, checkpoint)
                .await?;
            if outcome == TransactionOutcome::AlreadyHandled {
                tracing::debug!("event already covered by the checkpoint; handler not called");
            }
            Ok(())
        })
    });
    (function, letters)
}

/// A handler declared with `#[subscribe(transactional)]`, bound to the port it runs on.
/// Made by the macro's expansion through [`TransactionalBinding::declared`].
pub struct TransactionalBinding {
    pub(crate) handler: HandlerFn,
    pub(crate) letters: Arc<dyn LetterCommit>,
}

impl std::fmt::Debug for TransactionalBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionalBinding")
            .finish_non_exhaustive()
    }
}

/// How a declared transactional handler is bound when the executor starts.
pub type BindTransactional =
    fn(&Arc<dyn StoragePort>, &HandlerOptions) -> Result<TransactionalBinding>;

impl TransactionalBinding {
    /// Binds a declared function to `port`, which must be a `P` (the port whose
    /// transactions the function takes).
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] naming the handler and both ports when `port` is
    /// another kind of port.
    pub fn declared<P: TransactionalPort + Clone>(
        port: &Arc<dyn StoragePort>,
        options: &HandlerOptions,
        function: P::DeclaredFn,
    ) -> Result<Self> {
        let concrete = port
            .transactional_port()
            .and_then(|any| any.downcast_ref::<P>())
            .ok_or_else(|| {
                PhotonError::InvalidInput(format!(
                    "handler {} is transactional on {}, but this Photon stores events in the {} port",
                    options.handler_name(),
                    std::any::type_name::<P>(),
                    port.label()
                ))
            })?;
        let (handler, letters) = wrap(
            options,
            Arc::new(concrete.clone()),
            P::declared_handler(function),
        );
        Ok(Self { handler, letters })
    }
}
