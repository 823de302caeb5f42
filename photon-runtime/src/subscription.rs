//! [`DurableSubscription`]: a named subscription that resumes after its checkpoint and
//! commits what the caller acknowledges.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use photon_core::{CheckpointCommitter, CheckpointKey, Event, EventStream, Result};

/// A durable subscription: a stream of events after the stored checkpoint.
///
/// Acknowledge each handled event with [`DurableSubscription::ack`], in the order received.
/// Acknowledgements are coalesced (see `FlushPolicy`) and committed on the flush interval,
/// on [`DurableSubscription::flush`], when the subscription is dropped, and on
/// `Photon::shutdown`. Committed checkpoints never regress.
///
/// After a crash, the events acknowledged within the last flush window are delivered again:
/// delivery is at-least-once.
///
/// # Cancel safety
/// Dropping the subscription (or a pending `next()`) loses nothing: unacknowledged events
/// are delivered again to the next subscription with the same name.
pub struct DurableSubscription {
    stream: EventStream,
    committer: Arc<CheckpointCommitter>,
}

impl std::fmt::Debug for DurableSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableSubscription")
            .field("checkpoint", self.committer.key())
            .finish_non_exhaustive()
    }
}

impl DurableSubscription {
    pub(crate) fn new(stream: EventStream, committer: Arc<CheckpointCommitter>) -> Self {
        Self { stream, committer }
    }

    /// Marks an event handled.
    ///
    /// # Errors
    /// The port's commit error when this acknowledgement triggered a flush; it stays
    /// pending and is retried by the next flush.
    pub async fn ack(&self, event: &Event) -> Result<()> {
        self.committer.ack(event.seq).await
    }

    /// Commits every acknowledgement now.
    ///
    /// # Errors
    /// The port's commit error.
    pub async fn flush(&self) -> Result<()> {
        self.committer.flush().await
    }

    /// Name, topic and key of this subscription's checkpoint.
    pub fn checkpoint_key(&self) -> &CheckpointKey {
        self.committer.key()
    }
}

impl Stream for DurableSubscription {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.stream.as_mut().poll_next(cx)
    }
}
