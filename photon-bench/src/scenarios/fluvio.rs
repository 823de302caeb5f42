//! The Fluvio port beside the raw `fluvio` client.
//!
//! The raw side does the same work without Photon: the same JSON payloads, keyed records on
//! a one-partition topic, a producer with the settings the port uses (linger 0, 64 KiB
//! batches, 2 MB requests), the same number of concurrent publishers each awaiting every
//! ack (`send(..).await` then `wait()`), and one consumer. Its consumers run on a second
//! `Fluvio` connection, as the port's do: a streaming consumer on the producer's connection
//! slows that producer's acks down by 30x or more, so that is not the client's ceiling.
//! Both connections use the port's socket setup
//! ([`prompt_connector`](photon_backend_fluvio::prompt_connector)): with the client's
//! default sockets a round trip takes about 44 ms on either side.
//! The cluster is `PHOTON_FLUVIO_ENDPOINT` (default `127.0.0.1:9003`); every topic has a
//! fresh run prefix, and both sides' topics are deleted afterwards.
//!
//! Besides the shared figures, `publish_with_subscriber` measures publishing while a live
//! subscriber in the same process reads the topic (Photon: on the same port; raw: a
//! consumer on the second connection), in rounds taking turns like `publish`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fluvio::consumer::ConsumerConfigExtBuilder;
use fluvio::metadata::topic::TopicSpec;
use fluvio::{
    Fluvio, FluvioClusterConfig, Offset, RecordKey, TopicProducerConfigBuilder, TopicProducerPool,
};
use futures::{FutureExt, StreamExt};
use photon_backend_fluvio::{fluvio_endpoint_from_env, prompt_connector, FluvioStoragePortBuilder};
use photon_core::{PhotonError, Result};

use super::turns::{in_turns, side};
use super::{compare, raw_end_to_end_rate, PhotonSide, RawClient};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};
use crate::report::{AdapterFigures, BaselineKind, ThroughputRow};

/// Runs the Fluvio scenario.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the cluster cannot be reached; publish and read errors.
pub async fn run(options: &BenchOptions) -> Result<AdapterFigures> {
    let endpoint = endpoint();
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let port = FluvioStoragePortBuilder::new()
        .endpoint(endpoint.clone())
        .prefix(format!("bench{run}"))
        .build()
        .await?;
    let photon = PhotonSide::new(Arc::new(port), "bench")?;
    let fluvio = connect(&endpoint).await?;
    let streaming = connect(&endpoint).await?;
    let raw = RawSide {
        fluvio,
        streaming,
        run,
    };
    let figures = async {
        let mut figures = measure(&photon, &raw, options).await?;
        if !options.publish_only {
            let sharded = keyed_replay_sharded(&endpoint, &raw.run, options).await?;
            figures.throughput.push(sharded);
        }
        Ok(figures)
    }
    .await;
    raw.delete_topics().await;
    let mut figures = figures?;
    figures.server_version = Some(raw.fluvio.platform_version().to_string());
    Ok(figures)
}

/// Shards of the port that [`keyed_replay_sharded`] measures: four of the 64 keys per shard.
const KEYED_REPLAY_SHARDS: u32 = 16;

/// The keyed replay row again on a port whose topics have [`KEYED_REPLAY_SHARDS`] shards:
/// a keyed subscription reads only its key's shard, so it skips the records of 3 keys
/// instead of 63.
async fn keyed_replay_sharded(
    endpoint: &str,
    run: &str,
    options: &BenchOptions,
) -> Result<ThroughputRow> {
    let port = FluvioStoragePortBuilder::new()
        .endpoint(endpoint.to_owned())
        .prefix(format!("bench{run}s"))
        .shards(KEYED_REPLAY_SHARDS)
        .build()
        .await?;
    let photon = PhotonSide::new(Arc::new(port), "bench")?;
    super::keyed_replay_row("fluvio", "keyed_replay_16_shards", &photon, options).await
}

/// `PHOTON_FLUVIO_ENDPOINT`, or the local cluster's default.
pub(crate) fn endpoint() -> String {
    fluvio_endpoint_from_env().unwrap_or_else(|| "127.0.0.1:9003".to_owned())
}

/// A raw connection with the port's socket setup.
async fn connect(endpoint: &str) -> Result<Fluvio> {
    Fluvio::connect_with_connector(prompt_connector(), &FluvioClusterConfig::new(endpoint))
        .await
        .map_err(|e| raw_error("connect", e))
}

/// The cluster's platform version, read over a connection of its own.
///
/// # Errors
/// [`PhotonError::InvalidInput`] naming the connection error.
pub(crate) async fn platform_version(endpoint: &str) -> Result<String> {
    Ok(connect(endpoint).await?.platform_version().to_string())
}

/// The shared rows, then publishing with a live subscriber in turns.
async fn measure(
    photon: &PhotonSide,
    raw: &RawSide,
    options: &BenchOptions,
) -> Result<AdapterFigures> {
    let mut figures = compare("fluvio", photon, raw, options).await?;
    if options.publish_only {
        return Ok(figures);
    }
    let [photon_live, raw_live] = in_turns(
        "publish with a live subscriber",
        options.rounds,
        options.events,
        [
            side("photon", |r| {
                photon
                    .publish_with_subscriber_rate(options, r)
                    .boxed_local()
            }),
            side("raw", |r| {
                raw.publish_with_subscriber_rate(options, r).boxed_local()
            }),
        ],
    )
    .await?;
    let live = ThroughputRow::new(
        "fluvio",
        "publish_with_subscriber",
        photon_live,
        BaselineKind::Raw,
        raw_live,
    );
    if let Some(alone) = figures
        .throughput
        .iter()
        .find(|row| row.metric == "publish")
    {
        eprintln!(
            "  publishing with a live subscriber: photon {:.0}/s = {:.2}x its rate without one ({:.0}/s); raw {:.0}/s = {:.2}x",
            live.photon.median,
            live.photon.median / alone.photon.median,
            alone.photon.median,
            live.baseline.median,
            live.baseline.median / alone.baseline.median,
        );
    }
    figures.throughput.push(live);
    Ok(figures)
}

/// Reads and decodes the next record of a raw consumer.
async fn next_value(
    stream: &mut (impl futures::Stream<
        Item = std::result::Result<fluvio::consumer::Record, fluvio::dataplane::link::ErrorCode>,
    > + Unpin),
) -> Result<serde_json::Value> {
    let record = stream
        .next()
        .await
        .ok_or_else(|| PhotonError::Closed("raw consumer".into()))?
        .map_err(|e| raw_error("consume", e))?;
    serde_json::from_slice(record.value()).map_err(|e| raw_error("decode", e))
}

fn raw_error(what: &str, err: impl std::fmt::Display) -> PhotonError {
    PhotonError::InvalidInput(format!("raw fluvio {what}: {err}"))
}

struct RawSide {
    /// Producers and admin.
    fluvio: Fluvio,
    /// Consumers.
    streaming: Fluvio,
    run: String,
}

impl RawClient for RawSide {
    async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let producer = self.producer(&format!("publish{round}")).await?;
        // One record before the timed window, as the Photon side's warm-up publish.
        Self::warm_up(&producer, options).await?;
        let started = Instant::now();
        Self::publish_all(&producer, options).await?;
        Ok(per_second(options.events, started.elapsed()))
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let measurement = format!("e2e{round}");
        let producer = self.producer(&measurement).await?;
        let mut stream = self.consumer(&measurement, Offset::beginning()).await?;
        let started = Instant::now();
        let publishing = {
            let options = *options;
            tokio::spawn(async move { Self::publish_all(&producer, &options).await })
        };
        for _ in 0..options.events {
            next_value(&mut stream).await?;
        }
        raw_end_to_end_rate(publishing, options.events, started.elapsed()).await
    }

    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        let measurement = format!("latency{round}");
        let producer = self.producer(&measurement).await?;
        let mut stream = self.consumer(&measurement, Offset::end()).await?;
        let mut latencies = Latencies::default();
        for i in 0..=options.latency_share(round) {
            let started = Instant::now();
            let value =
                serde_json::to_vec(&options.payload(i)).map_err(|e| raw_error("encode", e))?;
            let output = producer
                .send(RecordKey::NULL, value)
                .await
                .map_err(|e| raw_error("send", e))?;
            output.wait().await.map_err(|e| raw_error("ack", e))?;
            next_value(&mut stream).await?;
            // The first round trip establishes the consumer, as on the Photon side.
            if i > 0 {
                latencies.record_since(started);
            }
        }
        Ok(latencies)
    }
}

impl RawSide {
    /// Acknowledged records per second while a consumer on the second connection reads
    /// the topic; the consumer must then have every record within 60 s.
    async fn publish_with_subscriber_rate(
        &self,
        options: &BenchOptions,
        round: usize,
    ) -> Result<f64> {
        let measurement = format!("live{round}");
        let producer = self.producer(&measurement).await?;
        Self::warm_up(&producer, options).await?;
        // From the warm-up record on, so that the consumer is reading before the window.
        let mut stream = self.consumer(&measurement, Offset::beginning()).await?;
        next_value(&mut stream).await?;
        let events = options.events;
        let draining = tokio::spawn(async move {
            for _ in 0..events {
                next_value(&mut stream).await?;
            }
            Ok::<_, PhotonError>(())
        });
        let started = Instant::now();
        Self::publish_all(&producer, options).await?;
        let rate = per_second(options.events, started.elapsed());
        tokio::time::timeout(Duration::from_secs(60), draining)
            .await
            .map_err(|_| raw_error("consume", "the consumer fell behind by 60 s"))?
            .map_err(|e| raw_error("consumer task", e))??;
        Ok(rate)
    }

    fn topic(&self, measurement: &str) -> String {
        format!("benchraw-{}-{measurement}", self.run)
    }

    /// A one-partition topic and a producer with the port's settings.
    async fn producer(&self, measurement: &str) -> Result<TopicProducerPool> {
        let topic = self.topic(measurement);
        let admin = self.fluvio.admin().await;
        admin
            .create(topic.clone(), false, TopicSpec::new_computed(1, 1, None))
            .await
            .map_err(|e| raw_error("create topic", e))?;
        let config = TopicProducerConfigBuilder::default()
            .batch_size(64 * 1024)
            .linger(Duration::ZERO)
            .max_request_size(2_000_000)
            .build()
            .map_err(|e| raw_error("producer config", e))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self
                .fluvio
                .topic_producer_with_config(topic.clone(), config.clone())
                .await
            {
                Ok(producer) => return Ok(producer),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(err) => return Err(raw_error("producer", err)),
            }
        }
    }

    /// Sends one acknowledged record, keyed `warm-up`, before a timed window.
    async fn warm_up(producer: &TopicProducerPool, options: &BenchOptions) -> Result<()> {
        let value = serde_json::to_vec(&options.payload(0)).map_err(|e| raw_error("encode", e))?;
        producer
            .send(RecordKey::from("warm-up"), value)
            .await
            .map_err(|e| raw_error("send", e))?
            .wait()
            .await
            .map_err(|e| raw_error("ack", e))?;
        Ok(())
    }

    async fn publish_all(producer: &TopicProducerPool, options: &BenchOptions) -> Result<()> {
        let mut tasks = Vec::with_capacity(options.publishers);
        for publisher in 0..options.publishers {
            let producer = producer.clone();
            let options = *options;
            tasks.push(tokio::spawn(async move {
                for i in 0..options.share(publisher) {
                    let key = format!("k{}", (publisher + i) % 64);
                    let value = serde_json::to_vec(&options.payload(i))
                        .map_err(|e| raw_error("encode", e))?;
                    let output = producer
                        .send(RecordKey::from(key), value)
                        .await
                        .map_err(|e| raw_error("send", e))?;
                    output.wait().await.map_err(|e| raw_error("ack", e))?;
                }
                Ok::<_, PhotonError>(())
            }));
        }
        for task in tasks {
            task.await.map_err(|e| raw_error("publisher task", e))??;
        }
        Ok(())
    }

    async fn consumer(
        &self,
        measurement: &str,
        start: Offset,
    ) -> Result<
        impl futures::Stream<
            Item = std::result::Result<
                fluvio::consumer::Record,
                fluvio::dataplane::link::ErrorCode,
            >,
        >,
    > {
        let config = ConsumerConfigExtBuilder::default()
            .topic(self.topic(measurement))
            .partition(0)
            .offset_start(start)
            .max_bytes(2_560 * 1024) // as the port
            .build()
            .map_err(|e| raw_error("consumer config", e))?;
        self.streaming
            .consumer_with_config(config)
            .await
            .map_err(|e| raw_error("consumer", e))
    }

    /// Deletes both sides' topics of this run, so that runs do not pile up partitions on
    /// the cluster (each one costs the SPU work in later runs).
    async fn delete_topics(&self) {
        let admin = self.fluvio.admin().await;
        let Ok(topics) = admin.all::<TopicSpec>().await else {
            return;
        };
        let ours = [
            format!("benchraw-{}-", self.run),
            format!("bench{}-", self.run),
            // The sharded port of `keyed_replay_sharded`.
            format!("bench{}s-", self.run),
        ];
        for topic in topics {
            if ours
                .iter()
                .any(|prefix| topic.name.starts_with(prefix.as_str()))
            {
                let _ = admin.delete::<TopicSpec>(topic.name).await;
            }
        }
    }
}
