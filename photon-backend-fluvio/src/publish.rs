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
//! - When sends are in flight and no ack at all has come for [`ACK_TIMEOUT`], every append
//!   waiting for one fails: a produce request sent to an SPU that went away is otherwise
//!   only given up by the client after 60 s. The port then drops the producer and
//!   reconnects, so the caller's retry goes to the SPU as it is now. One watchdog per port
//!   checks this every second ([`watch_acks`]), instead of a timer per append, which cost
//!   every publish a shared timer-wheel lock.
//! - A failed or cancelled append may still have been stored (Fluvio has no idempotent
//!   producer): a retry with the same draft can then store the event twice, with two seqs.
//!   Subscriptions drop the second copy by its envelope id within
//!   [`DEDUP_WINDOW`](crate::DEDUP_WINDOW) records (see [`crate::dedup`]).
//! - A batch (`append_batch`) is appended one event after the other, each as `append`
//!   does; it stops at the first failure, reported as `PhotonError::BatchIncomplete` with
//!   the events stored before it (the failed one may be stored, as above; none after it
//!   was sent).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use fluvio::{
    Fluvio, ProduceOutput, RecordKey, RecordMetadata, TopicProducerConfigBuilder, TopicProducerPool,
};
use photon_core::{Appended, PhotonError, RecordDraft, Result};

use crate::codec::{encode_value, event_id};
use crate::config::FluvioConfig;
use crate::error::{unanswered, unavailable};
use crate::port::{FluvioStoragePort, Inner};
use crate::retention::topic_config;
use crate::stream_shard::{seq_of, shard_for_key};
use crate::topic::{fluvio_topic_name, retry_not_found, OpenProducer};

/// Largest produce request: the SPU takes batches up to 2 MiB, which holds a 1 MiB Photon
/// body once sealed (base64 grows it by a third) and wrapped in its record.
pub(crate) const MAX_REQUEST_BYTES: usize = 2_000_000;

/// How long sends may be in flight without any ack before the waiting appends fail.
pub(crate) const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the watchdog looks.
const ACK_CHECK_EVERY: Duration = Duration::from_secs(1);

/// When acks last came, and the signal that they stopped.
pub(crate) struct AckWatch {
    epoch: Instant,
    /// Milliseconds from `epoch` to the latest ack.
    last_ack_ms: AtomicU64,
    /// Bumped when acks stopped: waiting appends give up.
    stalled: tokio::sync::watch::Sender<u64>,
}

impl Default for AckWatch {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            last_ack_ms: AtomicU64::new(0),
            stalled: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl AckWatch {
    fn since_epoch_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn record_ack(&self) {
        let now = self.since_epoch_ms();
        // Written at most once a millisecond: the line is shared by every publisher.
        if self.last_ack_ms.load(Ordering::Relaxed) != now {
            self.last_ack_ms.store(now, Ordering::Relaxed);
        }
    }

    /// Waits for the ack of a sent record, unless acks stop coming meanwhile.
    async fn acked(&self, output: ProduceOutput, name: &str) -> Result<RecordMetadata> {
        let mut stalled = self.stalled.subscribe();
        let result = tokio::select! {
            biased;
            result = output.wait() => result,
            _ = stalled.changed() => {
                return Err(unanswered(format!("the sends to {name} (no ack came)"), ACK_TIMEOUT));
            }
        };
        self.record_ack();
        result.map_err(|err| unavailable(format!("no ack from {name}"), err))
    }
}

/// The port's watchdog: fails the waiting appends when sends have been in flight for
/// [`ACK_TIMEOUT`] without a single ack. Ends with the port.
pub(crate) async fn watch_acks(port: Weak<Inner>) {
    let mut busy_since: Option<u64> = None;
    loop {
        tokio::time::sleep(ACK_CHECK_EVERY).await;
        let Some(inner) = port.upgrade() else {
            return;
        };
        let watch = &inner.acks;
        let in_flight = inner.permits.available_permits() < inner.config.max_in_flight;
        if !in_flight {
            busy_since = None;
            continue;
        }
        let now = watch.since_epoch_ms();
        let since = *busy_since.get_or_insert(now);
        let quiet_since = since.max(watch.last_ack_ms.load(Ordering::Relaxed));
        if now.saturating_sub(quiet_since) >= u64::try_from(ACK_TIMEOUT.as_millis()).unwrap_or(0) {
            tracing::warn!(
                port = "fluvio",
                "no ack for {ACK_TIMEOUT:?}; failing the waiting appends"
            );
            watch.stalled.send_modify(|stalls| *stalls += 1);
            busy_since = None;
        }
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
    /// Appends a draft to its shard topic. A topic created moments ago may have no
    /// partition leader yet: such a refusal is tried again (with the same draft, which
    /// readers deduplicate by envelope id) until the topic settles. A request on the way
    /// (creating the topic, opening its producer, checking its layout) that got no answer
    /// is tried once more on a new connection.
    pub(crate) async fn append_draft(&self, draft: RecordDraft) -> Result<Appended> {
        let settled = tokio::time::Instant::now() + crate::topic::PROVISION_WAIT;
        let mut retried = false;
        loop {
            match self.append_once(&draft).await {
                Err(PhotonError::Unavailable { message, .. })
                    if crate::error::is_leaderless(&message)
                        && tokio::time::Instant::now() < settled =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                // The try that failed replaced its connection already (`open_topic`,
                // `drop_producer`).
                Err(err) if crate::error::is_unanswered(&err) && !retried => retried = true,
                result => return result,
            }
        }
    }

    async fn append_once(&self, draft: &RecordDraft) -> Result<Appended> {
        self.inner.failed_send.take()?;
        let inner = &self.inner;
        crate::tail::pass(|| {
            crate::tail::gate_name(
                &inner.config.endpoint,
                &inner.config.prefix,
                &draft.topic_name,
            )
        })
        .await;
        let shards = inner.config.shards;
        let shard = shard_for_key(draft.topic_key.as_deref(), shards);
        let name = fluvio_topic_name(&inner.config.prefix, &draft.topic_name, shard, shards);
        let open = match inner.topics.cached(&name) {
            Some(open) => open,
            None => self.open_topic(&draft.topic_name, &name).await?,
        };
        let value = encode_value(draft)?;
        let key = match &draft.topic_key {
            Some(key) => RecordKey::from(key.as_bytes().to_vec()),
            None => RecordKey::NULL,
        };
        if !inner.config.sync_ack {
            let permit = inner
                .permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| PhotonError::Closed("fluvio port".into()))?;
            let output = self.send(&open, &name, key, value).await?;
            let port = self.clone();
            tokio::spawn(async move {
                if let Err(err) = port.inner.acks.acked(output, &name).await {
                    port.drop_producer(&open, &name).await;
                    port.inner.failed_send.remember(err);
                }
                drop(permit);
            });
            return Ok(Appended {
                event_id: format!("pending:{}", draft.envelope_id),
                seq: 0,
            });
        }
        // A borrowed permit: an owned one would cost every append a shared refcount.
        let permit = inner
            .permits
            .acquire()
            .await
            .map_err(|_| PhotonError::Closed("fluvio port".into()))?;
        let output = self.send(&open, &name, key, value).await?;
        let acked = inner.acks.acked(output, &name).await;
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
                self.drop_producer(&open, &name).await;
                Err(err)
            }
        }
    }

    /// Checks the layout of `topic` and opens the producer of its Fluvio topic `name`
    /// (creating it when missing). A request that got no answer replaces the connection
    /// it went out on, so that the caller's retry goes out on a new one; only this path
    /// takes the client, the publish of an open topic does not.
    async fn open_topic(&self, topic: &str, name: &str) -> Result<Arc<OpenProducer>> {
        let inner = &self.inner;
        let client = inner.fluvio();
        let opened = async {
            self.check_layout(topic).await?;
            let config = topic_config(&inner.config, topic, false);
            inner
                .topics
                .producer(|| client.clone(), &config, name)
                .await
        }
        .await;
        if let Err(err) = &opened {
            if crate::error::is_unanswered(err) {
                inner.reconnect(&client).await;
            }
        }
        opened
    }

    /// Hands a record to the producer; a refused send drops the producer.
    async fn send(
        &self,
        open: &OpenProducer,
        name: &str,
        key: RecordKey,
        value: Vec<u8>,
    ) -> Result<ProduceOutput> {
        match open.producer.send(key, value).await {
            Ok(output) => Ok(output),
            Err(err) => {
                self.drop_producer(open, name).await;
                Err(unavailable(format!("cannot send to {name}"), err))
            }
        }
    }

    /// After a failed send or ack: clears the producer's error, forgets it and replaces
    /// its client, so that the caller's retry reaches the cluster as it is now.
    pub(crate) async fn drop_producer(&self, open: &OpenProducer, name: &str) {
        open.producer.clear_errors().await;
        self.inner.topics.forget(name);
        self.inner.reconnect(&open.client).await;
    }

    /// Waits until every queued send is acknowledged, then reports the first failure.
    pub(crate) async fn flush_sends(&self) -> Result<()> {
        let all = u32::try_from(self.inner.config.max_in_flight).unwrap_or(u32::MAX);
        let permits = self
            .inner
            .permits
            .acquire_many(all)
            .await
            .map_err(|_| PhotonError::Closed("fluvio port".into()))?;
        drop(permits);
        self.inner.failed_send.take()
    }
}

/// The first failure of a send nobody waited for, until an append or flush reports it.
#[derive(Default)]
pub(crate) struct FailedSend {
    /// Whether `error` holds one: read on every append, so the lock is taken only when
    /// there is something to take.
    failed: AtomicBool,
    error: Mutex<Option<PhotonError>>,
}

impl FailedSend {
    /// Takes the remembered failure.
    ///
    /// # Errors
    /// The failure, once.
    fn take(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        // Only a take happens under this lock.
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        self.failed.store(false, Ordering::Release);
        error.take().map_or(Ok(()), Err)
    }

    /// Keeps `err` unless an earlier failure is still unreported.
    fn remember(&self, err: PhotonError) {
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if error.is_none() {
            *error = Some(err);
        }
        self.failed.store(true, Ordering::Release);
    }
}

/// The shared semaphore type of in-flight publishes.
pub(crate) type Permits = Arc<tokio::sync::Semaphore>;
