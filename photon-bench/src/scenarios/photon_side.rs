//! The Photon half of every scenario, identical for every port.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, EventStore, FlushPolicy, PhotonError, Result, StartAt,
    StartPolicy, StoragePort, TransportCrypto,
};
use serde_json::json;

use crate::measure::{per_second, BenchOptions, Latencies};

/// The three figures of one side of a scenario.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Acknowledged publishes per second with `publishers` concurrent tasks.
    pub publish: f64,
    /// Events per second from publish to a durable consumer's acknowledgement (`None` when
    /// not measured).
    pub end_to_end: Option<f64>,
    /// One-at-a-time publish → receive round trips (`None` when not measured).
    pub latency: Option<Latencies>,
}

/// Runs `measure` unless the run measures publish throughput only.
///
/// # Errors
/// The measurement's error.
pub(crate) async fn unless_publish_only<T>(
    options: &BenchOptions,
    measure: impl std::future::Future<Output = Result<T>>,
) -> Result<Option<T>> {
    if options.publish_only {
        return Ok(None);
    }
    measure.await.map(Some)
}

/// Measures Photon over `port`: publish throughput, end-to-end throughput through a durable
/// subscription with coalesced checkpoints, and round-trip latency. Each measurement uses
/// its own topic, prefixed with `run_id`.
///
/// # Errors
/// The port's errors.
pub async fn photon_figures(
    port: Arc<dyn StoragePort>,
    options: &BenchOptions,
    run_id: &str,
) -> Result<Figures> {
    side_figures(&PhotonSide::new(port, run_id), options).await
}

/// [`photon_figures`] with every event sealed with `crypto`'s newest key and opened again
/// on delivery, as `Photon::publish` does with a transport key.
///
/// # Errors
/// The port's errors.
pub async fn sealed_photon_figures(
    port: Arc<dyn StoragePort>,
    options: &BenchOptions,
    run_id: &str,
    crypto: TransportCrypto,
) -> Result<Figures> {
    side_figures(&PhotonSide::with_crypto(port, run_id, crypto), options).await
}

async fn side_figures(side: &PhotonSide, options: &BenchOptions) -> Result<Figures> {
    Ok(Figures {
        publish: side.publish_rate(options, 0).await?,
        end_to_end: unless_publish_only(options, side.end_to_end_rate(options)).await?,
        latency: unless_publish_only(options, side.latency(options)).await?,
    })
}

/// Photon over one port, measurement by measurement.
pub struct PhotonSide {
    store: EventStore,
    run_id: String,
}

impl PhotonSide {
    /// Photon in plaintext over `port`; topics are prefixed with `run_id`.
    pub fn new(port: Arc<dyn StoragePort>, run_id: &str) -> Self {
        Self::with_crypto(port, run_id, TransportCrypto::plaintext())
    }

    /// Photon over `port` with the key ring `crypto` (sealed when it holds a key).
    pub fn with_crypto(port: Arc<dyn StoragePort>, run_id: &str, crypto: TransportCrypto) -> Self {
        Self {
            store: EventStore::new(port, crypto),
            run_id: run_id.to_owned(),
        }
    }

    /// Acknowledged publishes per second; each `round` has its own topic.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let topic = format!("{}.publish{round}", self.run_id);
        publish_rate(&self.store, options, &topic).await
    }

    /// Events per second from publish to a durable consumer's acknowledgement.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn end_to_end_rate(&self, options: &BenchOptions) -> Result<f64> {
        end_to_end_rate(&self.store, options, &format!("{}.e2e", self.run_id)).await
    }

    /// One-at-a-time publish → receive round trips.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn latency(&self, options: &BenchOptions) -> Result<Latencies> {
        round_trips(&self.store, options, &format!("{}.latency", self.run_id)).await
    }

    /// Acknowledged publishes per second while a live subscriber in the same process (on
    /// the same port) reads the topic: the shape of a service that publishes and consumes.
    /// The window ends when the publishers are done; the subscriber must then receive every
    /// event within 60 s, or the measurement fails.
    ///
    /// # Errors
    /// The port's errors, or a subscriber that missed events.
    pub async fn publish_with_subscriber_rate(
        &self,
        options: &BenchOptions,
        round: usize,
    ) -> Result<f64> {
        let topic = format!("{}.live{round}", self.run_id);
        warm_up(&self.store, options, &topic).await?;
        let mut stream = self.store.subscribe(&topic, None, StartAt::Tail);
        let events = options.events;
        let draining = tokio::spawn(async move {
            for _ in 0..events {
                stream
                    .next()
                    .await
                    .ok_or_else(|| PhotonError::Closed("bench subscription".into()))??;
            }
            Ok::<_, PhotonError>(())
        });
        let started = Instant::now();
        publish_all(&self.store, options, &topic).await?;
        let rate = per_second(options.events, started.elapsed());
        tokio::time::timeout(std::time::Duration::from_secs(60), draining)
            .await
            .map_err(|_| PhotonError::InvalidInput("live subscriber fell behind by 60 s".into()))?
            .map_err(|e| PhotonError::InvalidInput(format!("subscriber task: {e}")))??;
        Ok(rate)
    }
}

async fn publish_all(store: &EventStore, options: &BenchOptions, topic: &str) -> Result<()> {
    let mut tasks = Vec::with_capacity(options.publishers);
    for publisher in 0..options.publishers {
        let store = store.clone();
        let topic = topic.to_owned();
        let options = *options;
        tasks.push(tokio::spawn(async move {
            for i in 0..options.share(publisher) {
                let key = format!("k{}", (publisher + i) % 64);
                store
                    .publish(&topic, Some(&key), json!(null), options.payload(i))
                    .await?;
            }
            Ok::<_, PhotonError>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| PhotonError::InvalidInput(format!("publisher task: {e}")))??;
    }
    store.port().flush().await
}

/// Publishes one event to `topic` before a timed window, so that the window starts with the
/// topic in place (brokers create it on first use), as the raw side's window does.
async fn warm_up(store: &EventStore, options: &BenchOptions, topic: &str) -> Result<()> {
    store
        .publish(topic, Some("warm-up"), json!(null), options.payload(0))
        .await?;
    Ok(())
}

async fn publish_rate(store: &EventStore, options: &BenchOptions, topic: &str) -> Result<f64> {
    warm_up(store, options, topic).await?;
    let started = Instant::now();
    publish_all(store, options, topic).await?;
    Ok(per_second(options.events, started.elapsed()))
}

async fn end_to_end_rate(store: &EventStore, options: &BenchOptions, topic: &str) -> Result<f64> {
    let checkpoint = CheckpointKey::new("bench", topic, None);
    let committer = CheckpointCommitter::new(
        store.port().clone(),
        checkpoint.clone(),
        FlushPolicy::default(),
    );
    warm_up(store, options, topic).await?;
    let mut stream = store.subscribe_after_checkpoint(checkpoint, StartPolicy::Beginning);
    // The warm-up event comes first, before the timed window.
    let first = stream
        .next()
        .await
        .ok_or_else(|| PhotonError::Closed("bench subscription".into()))??;
    committer.ack(first.seq).await?;
    let started = Instant::now();
    let publishing = {
        let store = store.clone();
        let options = *options;
        let topic = topic.to_owned();
        tokio::spawn(async move { publish_all(&store, &options, &topic).await })
    };
    for _ in 0..options.events {
        let event = stream
            .next()
            .await
            .ok_or_else(|| PhotonError::Closed("bench subscription".into()))??;
        committer.ack(event.seq).await?;
    }
    committer.flush().await?;
    let elapsed = started.elapsed();
    publishing
        .await
        .map_err(|e| PhotonError::InvalidInput(format!("publisher task: {e}")))??;
    Ok(per_second(options.events, elapsed))
}

async fn round_trips(store: &EventStore, options: &BenchOptions, topic: &str) -> Result<Latencies> {
    let mut stream = store.subscribe(topic, None, StartAt::Tail);
    // A first round trip establishes the subscription (brokers set it up lazily).
    store
        .publish(topic, None, json!(null), options.payload(0))
        .await?;
    stream
        .next()
        .await
        .ok_or_else(|| PhotonError::Closed("bench subscription".into()))??;
    let mut latencies = Latencies::default();
    for i in 0..options.latency_samples {
        let started = Instant::now();
        store
            .publish(topic, None, json!(null), options.payload(i))
            .await?;
        stream
            .next()
            .await
            .ok_or_else(|| PhotonError::Closed("bench subscription".into()))??;
        latencies.record_since(started);
    }
    Ok(latencies)
}
