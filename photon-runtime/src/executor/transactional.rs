//! Transactional handlers: the handler's writes and the checkpoint advance commit in one
//! transaction of the port's database ([`TransactionalPort`]), which makes the handler's
//! effects in that database exactly-once.
//!
//! The executor runs a transactional subscription's events one at a time, in the order it
//! reads them (seq order), whatever their keys: each transaction raises the checkpoint to
//! its event's seq, which is only right when every event before it has committed. A dead
//! letter of such a subscription is stored with the checkpoint advance in one transaction
//! too.

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::{
    Appended, CheckpointKey, Event, RecordDraft, Result, TransactionOutcome, TransactionalPort,
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
