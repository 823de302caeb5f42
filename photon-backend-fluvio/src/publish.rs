//! Appends: one producer per Fluvio topic, a bounded number of publishes in flight.
//!
//! - With sync ack (default), `append` sends the record (batched with whatever else is in
//!   flight; linger 0 by default) and waits for the broker's ack: the returned seq is real.
//! - Without sync ack, `append` returns once the record is queued in the producer, with
//!   `seq = 0` and the event id `pending:<envelope id>` (the position is not known yet).
//!   A send that fails afterwards is reported by the next `append` or by `flush()`; it is
//!   never dropped silently. `flush()` waits for every queued record's ack.
//! - A producer that failed keeps the error on its partition until `clear_errors()`; the
//!   port clears it after reporting the failure, so the next append (the caller's retry)
//!   can go through.
//! - An ack that does not come within [`ACK_TIMEOUT`] fails the append: a produce request
//!   sent to an SPU that went away is otherwise only given up by the client after 60 s.
//!   The port then drops the producer and reconnects, so the caller's retry goes to the
//!   SPU as it is now.
//! - A failed or cancelled append may still have been stored (Fluvio has no idempotent
//!   producer): a retry can then store the event twice, with two seqs.

use std::sync::Arc;
use std::time::Duration;

use fluvio::{
    Fluvio, ProduceOutput, RecordKey, RecordMetadata, TopicProducerConfigBuilder, TopicProducerPool,
};
use photon_core::{Appended, PhotonError, RecordDraft, Result};

use crate::codec::{encode_value, event_id};
use crate::config::FluvioConfig;
use crate::port::FluvioStoragePort;
use crate::stream_shard::{seq_of, shard_for_key};
use crate::topic::{fluvio_topic_name, retry_not_found, unavailable};

/// Largest produce request: the SPU takes batches up to 2 MiB, which holds a 1 MiB Photon
/// body once sealed (base64 grows it by a third) and wrapped in its record.
pub(crate) const MAX_REQUEST_BYTES: usize = 2_000_000;

/// Longest wait for the broker's ack of one append.
pub(crate) const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits for the ack of a sent record, within [`ACK_TIMEOUT`].
async fn acked(output: ProduceOutput, name: &str) -> Result<RecordMetadata> {
    match tokio::time::timeout(ACK_TIMEOUT, output.wait()).await {
        Ok(Ok(metadata)) => Ok(metadata),
        Ok(Err(err)) => Err(unavailable(format!("no ack from {name}"), err)),
        Err(_) => Err(PhotonError::Unavailable {
            backend: "fluvio",
            message: format!("no ack from {name} within {ACK_TIMEOUT:?}"),
            source: None,
        }),
    }
}

/// Opens a producer on an existing topic (retrying while it is being provisioned).
///
/// # Errors
/// [`PhotonError::Unavailable`] when the topic does not show up or the cluster fails.
pub(crate) async fn open_producer(
    fluvio: &Fluvio,
    config: &FluvioConfig,
    name: &str,
) -> Result<TopicProducerPool> {
    let producer_config = TopicProducerConfigBuilder::default()
        .batch_size(config.batch_size)
        .linger(config.linger)
        .max_request_size(MAX_REQUEST_BYTES)
        .build()
        .map_err(|e| PhotonError::config("producer", e.to_string(), "a valid producer config"))?;
    retry_not_found(name, || {
        fluvio.topic_producer_with_config(name, producer_config.clone())
    })
    .await
}

impl FluvioStoragePort {
    /// Appends a draft to its shard topic.
    pub(crate) async fn append_draft(&self, draft: RecordDraft) -> Result<Appended> {
        self.take_failed_send()?;
        let inner = &self.inner;
        let shards = inner.config.topic_shards;
        let shard = shard_for_key(draft.topic_key.as_deref(), shards);
        let name = fluvio_topic_name(&inner.config.prefix, &draft.topic_name, shard, shards);
        let client = inner.fluvio();
        let producer = inner.topics.producer(&client, &inner.config, &name).await?;
        let value = encode_value(&draft)?;
        let key = match &draft.topic_key {
            Some(key) => RecordKey::from(key.as_bytes().to_vec()),
            None => RecordKey::NULL,
        };
        let permit = inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PhotonError::Closed("fluvio port".into()))?;
        let output = match producer.send(key, value).await {
            Ok(output) => output,
            Err(err) => {
                producer.clear_errors().await;
                inner.topics.forget(&name);
                inner.reconnect(&client).await;
                return Err(unavailable(format!("cannot send to {name}"), err));
            }
        };
        if !inner.config.sync_ack {
            let port = self.clone();
            tokio::spawn(async move {
                if let Err(err) = acked(output, &name).await {
                    producer.clear_errors().await;
                    port.inner.topics.forget(&name);
                    port.inner.reconnect(&client).await;
                    port.remember_failed_send(err);
                }
                drop(permit);
            });
            return Ok(Appended {
                event_id: format!("pending:{}", draft.envelope_id),
                seq: 0,
            });
        }
        let acked = acked(output, &name).await;
        drop(permit);
        match acked {
            Ok(metadata) => {
                let offset = metadata.offset();
                Ok(Appended {
                    event_id: event_id(&name, metadata.partition_id(), offset),
                    seq: seq_of(offset, shard, shards),
                })
            }
            Err(err) => {
                producer.clear_errors().await;
                inner.topics.forget(&name);
                inner.reconnect(&client).await;
                Err(err)
            }
        }
    }

    /// Waits until every queued send is acknowledged, then reports the first failure.
    pub(crate) async fn flush_sends(&self) -> Result<()> {
        let all = u32::try_from(self.inner.config.max_inflight).unwrap_or(u32::MAX);
        let permits = self
            .inner
            .permits
            .acquire_many(all)
            .await
            .map_err(|_| PhotonError::Closed("fluvio port".into()))?;
        drop(permits);
        self.take_failed_send()
    }

    fn take_failed_send(&self) -> Result<()> {
        // Only a take/replace happens under this lock.
        let failed = self
            .inner
            .failed_send
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        failed.map_or(Ok(()), Err)
    }

    fn remember_failed_send(&self, err: PhotonError) {
        let mut failed = self
            .inner
            .failed_send
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if failed.is_none() {
            *failed = Some(err);
        }
    }
}

/// The shared semaphore type of in-flight publishes.
pub(crate) type Permits = Arc<tokio::sync::Semaphore>;
