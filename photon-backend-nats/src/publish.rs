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

use std::sync::{Arc, Mutex};

use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;
use photon_core::{Appended, PhotonError, RecordDraft, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::codec::{self, photon_seq};
use crate::error::{storage, unavailable};
use crate::port::NatsStoragePort;

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
        let shard = names.shard_of(draft.topic_key.as_deref());
        let subject = names.event_subject(&draft.topic_name, draft.topic_key.as_deref());
        let payload = codec::encode(&draft)?;
        let headers = codec::mirrored_headers(&draft);
        let permit = publisher.permit().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.inner
                .streams
                .topic_stream(names, &draft.topic_name, shard)
                .await?;
            let mut message = PublishMessage::build().payload(payload.clone());
            if let Some(headers) = &headers {
                message = message.headers(headers.clone());
            }
            let message = message.message_id(&draft.envelope_id);
            let pending = self
                .inner
                .streams
                .context()
                .send_publish(subject.clone(), message)
                .await
                .map_err(|err| publish_error(&draft, err.kind(), err))?;
            if !self.inner.config.sync_ack {
                let stream = names.stream_name(&draft.topic_name, shard);
                self.ack_in_background(pending, permit, draft.envelope_id.clone(), stream);
                return Ok(Appended {
                    event_id: draft.envelope_id,
                    seq: 0,
                });
            }
            match pending.await {
                Ok(ack) => return Ok(self.appended(&ack, shard)),
                // The stream was deleted behind our back (or JetStream is restarting):
                // open it again once, then report.
                Err(err) if err.kind() == PublishErrorKind::StreamNotFound && attempt == 1 => {
                    self.inner
                        .streams
                        .forget(&names.stream_name(&draft.topic_name, shard));
                }
                Err(err) => return Err(publish_error(&draft, err.kind(), err)),
            }
        }
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
