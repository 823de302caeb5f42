//! The NATS port beside raw `async-nats` JetStream.
//!
//! The raw side does the same work without Photon: the same JSON payloads on per-key
//! subjects, the same number of concurrent publishers each awaiting every ack, the same
//! `Nats-Msg-Id` deduplication, one ordered consumer. The server is `PHOTON_NATS_URL`
//! (default `nats://127.0.0.1:4222`); every stream the run creates is deleted afterwards.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream};
use futures::StreamExt;
use photon_backend_nats::{NatsStoragePortBuilder, DEFAULT_URL, URL_ENV};
use photon_core::{PhotonError, Result};

use super::{compare, raw_end_to_end_rate, PhotonSide, RawClient};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};
use crate::report::AdapterFigures;

/// Runs the NATS scenario.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the server cannot be reached; publish and read errors.
pub async fn run(options: &BenchOptions) -> Result<AdapterFigures> {
    let url = std::env::var(URL_ENV).unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let port = NatsStoragePortBuilder::new()
        .url(url)
        .prefix(format!("bench-{run}"))
        .build()
        .await?;
    let version = server_version(port.client());
    let photon = PhotonSide::new(Arc::new(port.clone()), "bench")?;
    let raw = RawSide {
        context: port.jetstream().clone(),
        run: run.clone(),
    };
    let figures = compare("nats", &photon, &raw, options).await;
    let cleaned = port.delete_all_streams().await;
    raw.delete_streams().await;
    let mut figures = figures?;
    cleaned?;
    figures.server_version = Some(version);
    Ok(figures)
}

/// The version the server announced in its `INFO`, or `unknown`.
pub(crate) fn server_version(client: &async_nats::Client) -> String {
    let version = client.server_info().version;
    if version.is_empty() {
        "unknown".to_owned()
    } else {
        version
    }
}

fn raw_error(what: &str, err: impl std::fmt::Display) -> PhotonError {
    PhotonError::InvalidInput(format!("raw async-nats {what}: {err}"))
}

struct RawSide {
    context: jetstream::Context,
    run: String,
}

impl RawClient for RawSide {
    async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let measurement = format!("publish{round}");
        self.stream(&measurement).await?;
        let started = Instant::now();
        self.publish_all(options, &measurement).await?;
        Ok(per_second(options.events, started.elapsed()))
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let measurement = format!("e2e{round}");
        let mut messages = self
            .ordered_reader(&measurement, DeliverPolicy::All)
            .await?;
        let started = Instant::now();
        let publishing = {
            let raw = RawSide {
                context: self.context.clone(),
                run: self.run.clone(),
            };
            let options = *options;
            tokio::spawn(async move { raw.publish_all(&options, &measurement).await })
        };
        for _ in 0..options.events {
            let message = messages
                .next()
                .await
                .ok_or_else(|| PhotonError::Closed("raw consumer".into()))?;
            let message = message.map_err(|e| raw_error("read", e))?;
            let _: serde_json::Value =
                serde_json::from_slice(&message.payload).map_err(|e| raw_error("decode", e))?;
        }
        raw_end_to_end_rate(publishing, options.events, started.elapsed()).await
    }

    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        let measurement = format!("latency{round}");
        let mut messages = self
            .ordered_reader(&measurement, DeliverPolicy::New)
            .await?;
        let subject = self.subject(&measurement, "n");
        let mut latencies = Latencies::default();
        for i in 0..options.latency_share(round) {
            let started = Instant::now();
            let payload =
                serde_json::to_vec(&options.payload(i)).map_err(|e| raw_error("encode", e))?;
            let message = PublishMessage::build()
                .payload(payload.into())
                .message_id(uuid::Uuid::now_v7().to_string());
            let ack = self
                .context
                .send_publish(subject.clone(), message)
                .await
                .map_err(|e| raw_error("publish", e))?;
            ack.await.map_err(|e| raw_error("ack", e))?;
            messages
                .next()
                .await
                .ok_or_else(|| PhotonError::Closed("raw consumer".into()))?
                .map_err(|e| raw_error("read", e))?;
            latencies.record_since(started);
        }
        Ok(latencies)
    }
}

impl RawSide {
    fn stream_name(&self, measurement: &str) -> String {
        format!("benchraw-{}-{measurement}", self.run)
    }

    fn subject(&self, measurement: &str, key: &str) -> String {
        format!("benchraw.{}.{measurement}.{key}", self.run)
    }

    /// A stream with the settings Photon's topic streams have.
    async fn stream(&self, measurement: &str) -> Result<stream::Stream> {
        let config = stream::Config {
            name: self.stream_name(measurement),
            subjects: vec![format!("benchraw.{}.{measurement}.*", self.run)],
            storage: stream::StorageType::File,
            allow_direct: true,
            duplicate_window: Duration::from_secs(120),
            ..stream::Config::default()
        };
        self.context
            .get_or_create_stream(config)
            .await
            .map_err(|e| raw_error("stream", e))
    }

    /// Deletes every stream of this run's raw side.
    async fn delete_streams(&self) {
        let prefix = self.stream_name("");
        let names: Vec<String> = self
            .context
            .stream_names()
            .filter_map(|name| async move { name.ok() })
            .filter(|name| std::future::ready(name.starts_with(&prefix)))
            .collect()
            .await;
        for name in names {
            let _ = self.context.delete_stream(name).await;
        }
    }

    /// Publishers each await every ack, as Photon's appends do.
    async fn publish_all(&self, options: &BenchOptions, measurement: &str) -> Result<()> {
        let mut tasks = Vec::with_capacity(options.publishers);
        for publisher in 0..options.publishers {
            let context = self.context.clone();
            let options = *options;
            let subjects: Vec<String> = (0..64)
                .map(|k| self.subject(measurement, &format!("k{k}")))
                .collect();
            tasks.push(tokio::spawn(async move {
                for i in 0..options.share(publisher) {
                    let payload = serde_json::to_vec(&options.payload(i))
                        .map_err(|e| raw_error("encode", e))?;
                    let message = PublishMessage::build()
                        .payload(payload.into())
                        .message_id(uuid::Uuid::now_v7().to_string());
                    let subject = subjects[(publisher + i) % 64].clone();
                    let ack = context
                        .send_publish(subject, message)
                        .await
                        .map_err(|e| raw_error("publish", e))?;
                    ack.await.map_err(|e| raw_error("ack", e))?;
                }
                Ok::<_, PhotonError>(())
            }));
        }
        for task in tasks {
            task.await.map_err(|e| raw_error("publisher task", e))??;
        }
        Ok(())
    }

    async fn ordered_reader(
        &self,
        measurement: &str,
        deliver_policy: DeliverPolicy,
    ) -> Result<pull::Ordered> {
        let stream = self.stream(measurement).await?;
        let consumer = stream
            .create_consumer(pull::OrderedConfig {
                deliver_policy,
                ..pull::OrderedConfig::default()
            })
            .await
            .map_err(|e| raw_error("consumer", e))?;
        consumer
            .messages()
            .await
            .map_err(|e| raw_error("messages", e))
    }
}
