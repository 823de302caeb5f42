//! Appends: pipelined JetStream publishes, bounded by `max_in_flight`.
//!
//! Every append takes a permit of one semaphore, sends its message and then waits for the
//! server's ack (sync ack, the default) or hands the ack to a background task (sync ack off).
//! Many appends are thus in flight at once; none waits for another's round trip.
//!
//! - The draft's `envelope_id` is the message's `Nats-Msg-Id`: a retried append is dropped
//!   by the server within the duplicate window and acknowledged with the first seq.
//! - With sync ack off, `append` returns once the message is sent, with `seq = 0` and the
//!   envelope id as event id (the stream position is not known yet). A failed ack is kept
//!   and returned by the next `append` (which then sends nothing) and by `flush()`: no
//!   failure goes unreported.
//! - A batch is pipelined too (sync ack): sent whole, acks awaited in order. It is not
//!   atomic: a failure part-way leaves the leading events stored and is reported as
//!   `PhotonError::BatchIncomplete` holding them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;
use async_nats::HeaderMap;
use bytes::Bytes;
use photon_core::port::append_each;
use photon_core::{Appended, PhotonError, RecordDraft, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::codec::{self, photon_seq};
use crate::error::{storage, unavailable};
use crate::port::NatsStoragePort;

/// Attempts of a publish whose stream the server does not serve (yet): pauses of 20, 40,
/// 80 and 160 ms between them.
const STREAM_NOT_FOUND_ATTEMPTS: u32 = 5;

/// Publish bookkeeping of one port.
#[derive(Debug)]
pub(crate) struct Publisher {
    permits: Arc<Semaphore>,
    max_in_flight: u32,
    failure: Arc<Mutex<Option<PhotonError>>>,
}

impl Publisher {
    pub(crate) fn new(max_in_flight: usize) -> Self {
        let max_in_flight = u32::try_from(max_in_flight).unwrap_or(u32::MAX).max(1);
        Self {
            permits: Arc::new(Semaphore::new(max_in_flight as usize)),
            max_in_flight,
            failure: Arc::new(Mutex::new(None)),
        }
    }

    fn take_failure(&self) -> Option<PhotonError> {
        self.failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    async fn permit(&self) -> Result<OwnedSemaphorePermit> {
        // The semaphore is never closed while the port lives.
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PhotonError::Closed("nats publisher".into()))
    }
}

impl NatsStoragePort {
    pub(crate) async fn publish(&self, draft: RecordDraft) -> Result<Appended> {
        let publisher = &self.inner.publisher;
        if !self.inner.config.sync_ack {
            if let Some(failure) = publisher.take_failure() {
                return Err(failure);
            }
        }
        let names = &self.inner.names;
        let outgoing = Outgoing::of(self, &draft)?;
        let permit = publisher.permit().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let pending = self.send(&draft, &outgoing).await?;
            if !self.inner.config.sync_ack {
                let stream = names.stream_name(&draft.topic_name, outgoing.shard);
                self.ack_in_background(pending, permit, draft.envelope_id.clone(), stream);
                return Ok(Appended {
                    event_id: draft.envelope_id,
                    seq: 0,
                });
            }
            match pending.await {
                Ok(ack) => return Ok(self.appended(&ack, outgoing.shard)),
                // The stream was deleted behind our back, JetStream is restarting, or
                // another client is still creating it (its name is known before its
                // subjects are served): open it again after a short pause, a few times
                // (the draft's id makes a repeat a no-op), then report.
                Err(err)
                    if err.kind() == PublishErrorKind::StreamNotFound
                        && attempt < STREAM_NOT_FOUND_ATTEMPTS =>
                {
                    self.inner
                        .streams
                        .forget(&names.stream_name(&draft.topic_name, outgoing.shard));
                    tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
                }
                Err(err) => return Err(publish_error(&draft, err.kind(), err)),
            }
        }
    }

    /// Appends a batch with sync ack: up to `max_in_flight` messages are sent without
    /// waiting, then their acks are awaited in order, so that a batch pays about one round
    /// trip per window instead of one per event. When a message of a window fails, the
    /// window's other acks are awaited too, and the failed messages go again one by one as
    /// [`NatsStoragePort::publish`] sends them (the server drops, by `Nats-Msg-Id`, a
    /// message it stored already), in batch order, then the rest of the batch; a failed
    /// message is not sent again when a later message of its key in the window is stored
    /// (it would be stored after it): the batch stops there. With sync ack off every
    /// append returns once sent, and the batch is appended in turn.
    ///
    /// # Errors
    /// As [`photon_core::port::append_each`].
    pub(crate) async fn publish_batch(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        if !self.inner.config.sync_ack {
            return append_each(self, drafts).await;
        }
        let events = drafts.len();
        let window = self.inner.publisher.max_in_flight as usize;
        let mut stored = Vec::with_capacity(events);
        let mut rest = drafts.into_iter();
        loop {
            let chunk: Vec<RecordDraft> = rest.by_ref().take(window).collect();
            if chunk.is_empty() {
                return Ok(stored);
            }
            let sent = self.pipeline(&chunk).await?;
            if sent.iter().all(|sent| matches!(sent, Sent::Acked(_))) {
                stored.extend(sent.into_iter().filter_map(Sent::acked));
                continue;
            }
            let keys: Vec<(&str, Option<&str>)> = chunk
                .iter()
                .map(|draft| (draft.topic_name.as_str(), draft.topic_key.as_deref()))
                .collect();
            let acked: Vec<bool> = sent
                .iter()
                .map(|sent| matches!(sent, Sent::Acked(_)))
                .collect();
            let resendable = resendable_until(&keys, &acked);
            for (index, (draft, sent)) in chunk.into_iter().zip(sent).enumerate() {
                let result = match sent {
                    Sent::Acked(appended) => Ok(appended),
                    Sent::Failed(error) if index >= resendable => Err(unavailable(
                        format!(
                            "publish to topic {:?} (envelope {}) failed and a later event of \
                             its key in the batch is stored: sending it again would store \
                             it after that one",
                            draft.topic_name, draft.envelope_id
                        ),
                        error,
                    )),
                    Sent::Failed(_) | Sent::Unsent => self.publish(draft).await,
                };
                match result {
                    Ok(appended) => stored.push(appended),
                    Err(error) => return Err(PhotonError::batch_incomplete(stored, events, error)),
                }
            }
            for draft in rest {
                match self.publish(draft).await {
                    Ok(appended) => stored.push(appended),
                    Err(error) => return Err(PhotonError::batch_incomplete(stored, events, error)),
                }
            }
            return Ok(stored);
        }
    }

    /// Sends every draft of `chunk` (at most `max_in_flight`) under one grant of permits,
    /// up to the first send that fails, then awaits every sent message's ack in send
    /// order; returns what became of each draft.
    async fn pipeline(&self, chunk: &[RecordDraft]) -> Result<Vec<Sent>> {
        let publisher = &self.inner.publisher;
        // One grant for the whole window: two batches taking permits one at a time could
        // each hold part of them and wait for the other forever.
        let permits = publisher
            .permits
            .acquire_many(u32::try_from(chunk.len()).unwrap_or(publisher.max_in_flight))
            .await
            .map_err(|_| PhotonError::Closed("nats publisher".into()))?;
        let mut pending = Vec::with_capacity(chunk.len());
        for draft in chunk {
            let sent = match Outgoing::of(self, draft) {
                Ok(outgoing) => self
                    .send(draft, &outgoing)
                    .await
                    .map(|ack| (ack, outgoing.shard)),
                Err(error) => Err(error),
            };
            match sent {
                Ok(sent) => pending.push(sent),
                Err(error) => {
                    tracing::debug!(port = "nats", %error, "batch send failed; going on one by one");
                    break;
                }
            }
        }
        let mut outcomes = Vec::with_capacity(chunk.len());
        for (ack, shard) in pending {
            outcomes.push(match ack.await {
                Ok(ack) => Sent::Acked(self.appended(&ack, shard)),
                Err(error) => {
                    tracing::debug!(port = "nats", %error, "batch ack failed; going on one by one");
                    Sent::Failed(error.into())
                }
            });
        }
        outcomes.resize_with(chunk.len(), || Sent::Unsent);
        drop(permits);
        Ok(outcomes)
    }

    /// Sends one message (opening its stream when needed) without waiting for its ack.
    async fn send(&self, draft: &RecordDraft, outgoing: &Outgoing) -> Result<PublishAckFuture> {
        let names = &self.inner.names;
        self.inner
            .streams
            .topic_stream(names, &draft.topic_name, outgoing.shard)
            .await?;
        let mut message = PublishMessage::build().payload(outgoing.payload.clone());
        if let Some(headers) = &outgoing.headers {
            message = message.headers(headers.clone());
        }
        let message = message.message_id(&draft.envelope_id);
        self.inner
            .streams
            .context()
            .send_publish(outgoing.subject.clone(), message)
            .await
            .map_err(|err| publish_error(draft, err.kind(), err))
    }

    fn appended(&self, ack: &PublishAck, shard: u32) -> Appended {
        Appended {
            event_id: codec::event_id(&ack.stream, ack.sequence),
            seq: photon_seq(ack.sequence, shard, self.inner.names.shards()),
        }
    }

    fn ack_in_background(
        &self,
        pending: PublishAckFuture,
        permit: OwnedSemaphorePermit,
        envelope_id: String,
        stream: String,
    ) {
        let port = self.clone();
        tokio::spawn(async move {
            if let Err(err) = pending.await {
                tracing::warn!(port = "nats", %envelope_id, %err, "publish not acknowledged");
                if err.kind() == PublishErrorKind::StreamNotFound {
                    // Open the stream again on the next append.
                    port.inner.streams.forget(&stream);
                }
                let failure = &port.inner.publisher.failure;
                let mut slot = failure
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if slot.is_none() {
                    *slot = Some(unavailable(
                        format!("publish of envelope {envelope_id} was not acknowledged; retry it"),
                        err,
                    ));
                }
            }
            drop(permit);
        });
    }

    /// Waits for every publish in flight, then reports the first failure since the last call.
    pub(crate) async fn wait_for_acks(&self) -> Result<()> {
        let publisher = &self.inner.publisher;
        let all = publisher
            .permits
            .acquire_many(publisher.max_in_flight)
            .await
            .map_err(|_| PhotonError::Closed("nats publisher".into()))?;
        drop(all);
        publisher.take_failure().map_or(Ok(()), Err)
    }
}

/// What became of one message of a pipelined window.
enum Sent {
    /// Stored, at this position.
    Acked(Appended),
    /// Sent, but its ack failed: it may or may not be stored.
    Failed(photon_core::BoxError),
    /// Not sent: an earlier send of the window failed.
    Unsent,
}

impl Sent {
    fn acked(self) -> Option<Appended> {
        match self {
            Self::Acked(appended) => Some(appended),
            Self::Failed(_) | Self::Unsent => None,
        }
    }
}

/// The index of the first message of a window that must not be sent again: one that was
/// not acknowledged while a later message of its `(topic, key)` was (sending it again
/// would store it after that one). The window's length when there is none.
fn resendable_until(keys: &[(&str, Option<&str>)], acked: &[bool]) -> usize {
    (0..keys.len())
        .find(|&index| {
            !acked[index]
                && (index + 1..keys.len()).any(|later| acked[later] && keys[later] == keys[index])
        })
        .unwrap_or(keys.len())
}

/// A draft as a message: subject, shard, encoded body and mirrored headers.
struct Outgoing {
    subject: String,
    shard: u32,
    payload: Bytes,
    headers: Option<HeaderMap>,
}

impl Outgoing {
    fn of(port: &NatsStoragePort, draft: &RecordDraft) -> Result<Self> {
        let names = &port.inner.names;
        Ok(Self {
            subject: names.event_subject(&draft.topic_name, draft.topic_key.as_deref()),
            shard: names.shard_of(draft.topic_key.as_deref()),
            payload: codec::encode(draft)?,
            headers: codec::mirrored_headers(draft),
        })
    }
}

fn publish_error(
    draft: &RecordDraft,
    kind: PublishErrorKind,
    source: impl Into<photon_core::BoxError>,
) -> PhotonError {
    let what = format!(
        "publish to topic {:?} (envelope {})",
        draft.topic_name, draft.envelope_id
    );
    match kind {
        PublishErrorKind::MaxPayloadExceeded => {
            storage(format!("{what}: message too large"), source)
        }
        _ => unavailable(
            format!("{what} failed; retrying the same draft is deduplicated"),
            source,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::resendable_until;

    #[test]
    fn a_failed_message_is_not_sent_again_after_a_stored_one_of_its_key() {
        let keys = [("t", Some("a")), ("t", Some("a")), ("t", Some("b"))];
        // The first failed, the second (same key) is stored: sending the first again
        // would put it after the second.
        assert_eq!(resendable_until(&keys, &[false, true, true]), 0);
        // Another key's stored message does not stop it.
        let keys = [("t", Some("a")), ("t", Some("b")), ("t", Some("a"))];
        assert_eq!(resendable_until(&keys, &[false, true, false]), 3);
        // Unkeyed events of one topic are one key; another topic's are not.
        let keys = [("t", None), ("u", None), ("t", None)];
        assert_eq!(resendable_until(&keys, &[true, false, true]), 3);
        assert_eq!(resendable_until(&keys, &[false, true, true]), 0);
        assert_eq!(resendable_until(&keys, &[true, true, true]), 3);
    }
}
