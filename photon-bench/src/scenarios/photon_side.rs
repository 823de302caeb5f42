//! The Photon half of every scenario, identical for every port: the public API
//! (`Photon::publish`, `Photon::durable`, `Photon::subscribe_at`), in plaintext and with a
//! transport key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use photon_core::{BatchEvent, PhotonError, Result, StartAt, StoragePort, TransportCrypto};
use photon_runtime::Photon;
use serde_json::json;

use super::delayed::publish_due_now;
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};

/// Keys the publish and end-to-end measurements spread their events over.
pub(crate) const PUBLISH_KEYS: usize = 64;
/// Events per `Photon::publish_batch` call (and per raw batch) of the `publish_batch` rows.
pub(crate) const BATCH_EVENTS: usize = 64;

/// How long a subscriber may take after the publishers are done.
const DRAIN_DEADLINE: Duration = Duration::from_secs(60);

/// How the publishers of a measurement hand their events to Photon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publishing {
    /// One `Photon::publish` call per event, each acknowledgement awaited.
    Each,
    /// `Photon::publish_batch` calls of [`BATCH_EVENTS`] events.
    Batched,
    /// One `Photon::publish_after` call per event with no delay: due at once, delivered
    /// through the schedule topic and the scheduler.
    DueNow,
}

/// Whether events are sealed with a transport key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sealing {
    /// No transport key: actor and payload are stored as they are.
    Plain,
    /// A transport key seals actor and payload at publish and opens them at delivery.
    Sealed,
}

impl Sealing {
    fn topic_part(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Sealed => "sealed",
        }
    }
}

/// Photon over one port, measurement by measurement; each measurement on its own topic.
pub struct PhotonSide {
    plain: Photon,
    sealed: Photon,
    run_id: String,
    discard_topics: bool,
}

impl PhotonSide {
    /// Photon over `port`, once in plaintext and once with a transport key; topics are
    /// prefixed with `run_id`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] for a bad `PHOTON_EXECUTOR_*` variable.
    pub fn new(port: Arc<dyn StoragePort>, run_id: &str) -> Result<Self> {
        let sealing = TransportCrypto::plaintext().with_key("bench", [7u8; 32])?;
        Ok(Self {
            plain: photon(port.clone(), TransportCrypto::plaintext())?,
            sealed: photon(port, sealing)?,
            run_id: run_id.to_owned(),
            discard_topics: false,
        })
    }

    /// Drops each measurement's events once it is measured. The in-process store keeps
    /// every event in memory; without this a run of several rounds holds millions.
    pub fn discarding_topics(mut self) -> Self {
        self.discard_topics = true;
        self
    }

    /// The instance of `sealing`.
    pub fn photon(&self, sealing: Sealing) -> &Photon {
        match sealing {
            Sealing::Plain => &self.plain,
            Sealing::Sealed => &self.sealed,
        }
    }

    /// The topic of measurement `name`.
    pub(crate) fn topic(&self, sealing: Sealing, name: &str, round: usize) -> String {
        format!("{}.{}.{name}{round}", self.run_id, sealing.topic_part())
    }

    /// Drops `topic`'s events if this side discards topics.
    pub(crate) async fn done_with(&self, topic: &str) -> Result<()> {
        if self.discard_topics {
            self.plain
                .store()
                .port()
                .truncate_before(topic, i64::MAX)
                .await?;
        }
        Ok(())
    }

    /// Acknowledged `Photon::publish` calls per second.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn publish_rate(
        &self,
        options: &BenchOptions,
        round: usize,
        sealing: Sealing,
    ) -> Result<f64> {
        let photon = self.photon(sealing);
        let topic = self.topic(sealing, "publish", round);
        warm_up(photon, options, &topic).await?;
        let started = Instant::now();
        publish_all(photon, options, &topic, PUBLISH_KEYS).await?;
        let rate = per_second(options.events, started.elapsed());
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// Acknowledged events per second of `Photon::publish_batch` calls of
    /// [`BATCH_EVENTS`] events, from `options.publishers` tasks (in plaintext).
    ///
    /// # Errors
    /// The port's errors.
    pub async fn publish_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let photon = self.photon(Sealing::Plain);
        let topic = self.topic(Sealing::Plain, "batch", round);
        warm_up(photon, options, &topic).await?;
        let started = Instant::now();
        publish_all_as(photon, options, &topic, PUBLISH_KEYS, Publishing::Batched).await?;
        let rate = per_second(options.events, started.elapsed());
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// Events per second from `Photon::publish` to a durable subscription's
    /// acknowledgement, with checkpoints coalesced as the subscription does.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn end_to_end_rate(
        &self,
        options: &BenchOptions,
        round: usize,
        sealing: Sealing,
    ) -> Result<f64> {
        let topic = self.topic(sealing, "e2e", round);
        let photon = self.photon(sealing);
        let rate = durable_rate(photon, options, &topic, PUBLISH_KEYS, Publishing::Each).await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// As [`PhotonSide::end_to_end_rate`] in plaintext, the publishers calling
    /// `Photon::publish_batch` with [`BATCH_EVENTS`] events at a time.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn end_to_end_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let topic = self.topic(Sealing::Plain, "e2e-batch", round);
        let photon = self.photon(Sealing::Plain);
        let rate = durable_rate(photon, options, &topic, PUBLISH_KEYS, Publishing::Batched).await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// One-at-a-time publish → receive round trips of a live subscriber.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn latency(
        &self,
        options: &BenchOptions,
        round: usize,
        sealing: Sealing,
    ) -> Result<Latencies> {
        let photon = self.photon(sealing);
        let topic = self.topic(sealing, "latency", round);
        let mut stream = photon.subscribe_at(&topic, None, StartAt::Tail);
        // A first round trip establishes the subscription (brokers set it up lazily).
        photon
            .publish(&topic, None, json!(null), options.payload(0))
            .await?;
        next(&mut stream).await?;
        let mut latencies = Latencies::default();
        for i in 0..options.latency_share(round) {
            let started = Instant::now();
            photon
                .publish(&topic, None, json!(null), options.payload(i))
                .await?;
            next(&mut stream).await?;
            latencies.record_since(started);
        }
        drop(stream);
        self.done_with(&topic).await?;
        Ok(latencies)
    }

    /// Acknowledged publishes per second (plaintext) while a live subscriber in the same
    /// process (on the same port) reads the topic: the shape of a service that publishes
    /// and consumes. The window ends when the publishers are done; the subscriber must then
    /// receive every event within 60 s, or the measurement fails.
    ///
    /// # Errors
    /// The port's errors, or a subscriber that missed events.
    pub async fn publish_with_subscriber_rate(
        &self,
        options: &BenchOptions,
        round: usize,
    ) -> Result<f64> {
        let photon = &self.plain;
        let topic = self.topic(Sealing::Plain, "live", round);
        warm_up(photon, options, &topic).await?;
        let mut stream = photon.subscribe_at(&topic, None, StartAt::Tail);
        let events = options.events;
        let draining = tokio::spawn(async move {
            for _ in 0..events {
                next(&mut stream).await?;
            }
            Ok::<_, PhotonError>(())
        });
        let started = Instant::now();
        publish_all(photon, options, &topic, PUBLISH_KEYS).await?;
        let rate = per_second(options.events, started.elapsed());
        tokio::time::timeout(DRAIN_DEADLINE, draining)
            .await
            .map_err(|_| PhotonError::Timeout {
                operation: "live bench subscriber".into(),
                waited: DRAIN_DEADLINE,
                missing: "events published before the window closed".into(),
            })?
            .map_err(|e| PhotonError::InvalidInput(format!("subscriber task: {e}")))??;
        self.done_with(&topic).await?;
        Ok(rate)
    }
    /// Events per second a subscription from the beginning delivers when it replays a
    /// topic of `options.events` events over [`PUBLISH_KEYS`] keys: one key's events
    /// (`key = Some`, the key `k0`), or every event (`key = None`). The events are published
    /// before the window; the window ends with the last event of the subscription.
    ///
    /// # Errors
    /// The port's errors, or a subscription that ends early.
    pub async fn replay_rate(
        &self,
        options: &BenchOptions,
        round: usize,
        key: Option<&str>,
    ) -> Result<f64> {
        let photon = &self.plain;
        let name = if key.is_some() { "keyed" } else { "whole" };
        let topic = self.topic(Sealing::Plain, name, round);
        publish_all(photon, options, &topic, PUBLISH_KEYS).await?;
        let expected = match key {
            Some(key) => events_of_key(options, PUBLISH_KEYS, key),
            None => options.events,
        };
        let started = Instant::now();
        let mut stream = photon.subscribe_at(&topic, key, StartAt::Beginning);
        for _ in 0..expected {
            next(&mut stream).await?;
        }
        let rate = per_second(expected, started.elapsed());
        drop(stream);
        self.done_with(&topic).await?;
        Ok(rate)
    }
}

/// How many of the events [`publish_all`] spreads over `keys` keys carry `key`.
fn events_of_key(options: &BenchOptions, keys: usize, key: &str) -> usize {
    (0..options.publishers)
        .map(|publisher| {
            (0..options.share(publisher))
                .filter(|i| format!("k{}", (publisher + i) % keys) == key)
                .count()
        })
        .sum()
}

/// A `Photon` over `port` with `crypto`, the environment's executor settings and no
/// declared topics.
fn photon(port: Arc<dyn StoragePort>, crypto: TransportCrypto) -> Result<Photon> {
    Photon::builder()
        .shared_storage_port(port)
        .transport_crypto(crypto)
        .build()
}

/// The next event of a bench stream.
pub(crate) async fn next<S, T>(stream: &mut S) -> Result<T>
where
    S: futures::Stream<Item = Result<T>> + Unpin,
{
    stream
        .next()
        .await
        .ok_or_else(|| PhotonError::Closed("bench subscription".into()))?
}

/// `options.publishers` tasks publish `options.events` events over `keys` keys, each
/// awaiting every acknowledgement; then the port is flushed.
pub(crate) async fn publish_all(
    photon: &Photon,
    options: &BenchOptions,
    topic: &str,
    keys: usize,
) -> Result<()> {
    publish_all_as(photon, options, topic, keys, Publishing::Each).await
}

/// As [`publish_all`], each task handing its share to Photon as `publishing` says.
pub(crate) async fn publish_all_as(
    photon: &Photon,
    options: &BenchOptions,
    topic: &str,
    keys: usize,
    publishing: Publishing,
) -> Result<()> {
    let mut tasks = Vec::with_capacity(options.publishers);
    for publisher in 0..options.publishers {
        let photon = photon.clone();
        let topic = topic.to_owned();
        let options = *options;
        tasks.push(tokio::spawn(async move {
            let share = options.share(publisher);
            let key = |i: usize| format!("k{}", (publisher + i) % keys);
            match publishing {
                Publishing::Each => {
                    for i in 0..share {
                        photon
                            .publish(&topic, Some(&key(i)), json!(null), options.payload(i))
                            .await?;
                    }
                }
                Publishing::Batched => {
                    for start in (0..share).step_by(BATCH_EVENTS) {
                        let batch = (start..(start + BATCH_EVENTS).min(share))
                            .map(|i| BatchEvent::new(options.payload(i)).key(key(i)));
                        photon.publish_batch(&topic, batch).await?;
                    }
                }
                Publishing::DueNow => {
                    for i in 0..share {
                        publish_due_now(&photon, &topic, Some(&key(i)), &options, i).await?;
                    }
                }
            }
            Ok::<_, PhotonError>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| PhotonError::InvalidInput(format!("publisher task: {e}")))??;
    }
    photon.store().port().flush().await
}

/// Publishes one event to `topic` before a timed window, so that the window starts with the
/// topic in place (brokers create it on first use), as the raw side's window does.
pub(crate) async fn warm_up(photon: &Photon, options: &BenchOptions, topic: &str) -> Result<()> {
    photon
        .publish(topic, Some("warm-up"), json!(null), options.payload(0))
        .await?;
    Ok(())
}

/// Events per second from publish (over `keys` keys) to a durable subscription's
/// acknowledgement; the window closes when the last acknowledgement is committed.
pub(crate) async fn durable_rate(
    photon: &Photon,
    options: &BenchOptions,
    topic: &str,
    keys: usize,
    publishing: Publishing,
) -> Result<f64> {
    match publishing {
        // Through the scheduler too, so that its joining its group is out of the window.
        Publishing::DueNow => publish_due_now(photon, topic, Some("warm-up"), options, 0).await?,
        Publishing::Each | Publishing::Batched => warm_up(photon, options, topic).await?,
    }
    let mut subscription = photon.durable("bench", topic, None);
    // The warm-up event comes first, before the timed window.
    let first = next(&mut subscription).await?;
    subscription.ack(&first).await?;
    let started = Instant::now();
    let publishers = {
        let (photon, options, topic) = (photon.clone(), *options, topic.to_owned());
        tokio::spawn(
            async move { publish_all_as(&photon, &options, &topic, keys, publishing).await },
        )
    };
    for _ in 0..options.events {
        let event = next(&mut subscription).await?;
        subscription.ack(&event).await?;
    }
    subscription.flush().await?;
    let elapsed = started.elapsed();
    publishers
        .await
        .map_err(|e| PhotonError::InvalidInput(format!("publisher task: {e}")))??;
    Ok(per_second(options.events, elapsed))
}
