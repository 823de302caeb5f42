//! The in-process port beside a raw `tokio::sync::mpsc` channel.
//!
//! The raw side does the same work without Photon: the same JSON payloads, the same number
//! of concurrent publishers, one consumer; for `publish_batch`, one channel message per
//! batch of 64 events.

use std::sync::Arc;
use std::time::Instant;

use photon_core::mem::MemStoragePort;
use photon_core::{PhotonError, Result};
use serde_json::Value;
use tokio::sync::mpsc;

use super::photon_side::BATCH_EVENTS;
use super::{compare, PhotonSide, RawClient};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};
use crate::report::AdapterFigures;

/// Runs the mem scenario. Each measurement's events are dropped once measured, so that the
/// run holds one measurement's events at a time.
///
/// # Errors
/// [`PhotonError::Config`] for a bad `PHOTON_EXECUTOR_*` variable; a publisher task that
/// panicked.
pub async fn run(options: &BenchOptions) -> Result<AdapterFigures> {
    let photon = PhotonSide::new(Arc::new(MemStoragePort::new()), "bench")?.discarding_topics();
    compare("mem", &photon, &RawChannel, options).await
}

/// `tokio::sync::mpsc` doing the work of the mem port.
struct RawChannel;

impl RawClient for RawChannel {
    async fn publish_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_publish(options).await
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_end_to_end(options).await
    }

    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        raw_latency(options, round).await
    }

    fn batches(&self) -> bool {
        true
    }

    async fn publish_batch_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_publish_batches(options).await
    }

    async fn end_to_end_batch_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_end_to_end_batches(options).await
    }
}

fn task_error(err: tokio::task::JoinError) -> PhotonError {
    PhotonError::InvalidInput(format!("raw publisher task: {err}"))
}

/// Publishers send into an unbounded channel that keeps everything, as the mem port does.
async fn raw_publish(options: &BenchOptions) -> Result<f64> {
    let (sender, receiver) = mpsc::unbounded_channel::<(String, Value)>();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for publisher in 0..options.publishers {
        let sender = sender.clone();
        let options = *options;
        tasks.push(tokio::spawn(async move {
            for i in 0..options.share(publisher) {
                let _ = sender.send((format!("k{}", (publisher + i) % 64), options.payload(i)));
                tokio::task::consume_budget().await;
            }
        }));
    }
    for task in tasks {
        task.await.map_err(task_error)?;
    }
    let elapsed = started.elapsed();
    drop(receiver);
    Ok(per_second(options.events, elapsed))
}

/// Publishers send batches of [`BATCH_EVENTS`] events, one channel message per batch.
async fn raw_publish_batches(options: &BenchOptions) -> Result<f64> {
    let (sender, receiver) = mpsc::unbounded_channel::<Vec<(String, Value)>>();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for publisher in 0..options.publishers {
        let sender = sender.clone();
        let options = *options;
        tasks.push(tokio::spawn(async move {
            let share = options.share(publisher);
            for start in (0..share).step_by(BATCH_EVENTS) {
                let batch = raw_batch(&options, publisher, start);
                let _ = sender.send(batch);
                tokio::task::consume_budget().await;
            }
        }));
    }
    for task in tasks {
        task.await.map_err(task_error)?;
    }
    let elapsed = started.elapsed();
    drop(receiver);
    Ok(per_second(options.events, elapsed))
}

async fn raw_end_to_end(options: &BenchOptions) -> Result<f64> {
    let (sender, mut receiver) = mpsc::channel::<(String, Value)>(1024);
    let started = Instant::now();
    for publisher in 0..options.publishers {
        let sender = sender.clone();
        let options = *options;
        tokio::spawn(async move {
            for i in 0..options.share(publisher) {
                let key = format!("k{}", (publisher + i) % 64);
                if sender.send((key, options.payload(i))).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(sender);
    let mut received = 0;
    while receiver.recv().await.is_some() {
        received += 1;
    }
    delivered_all(options, received)?;
    Ok(per_second(options.events, started.elapsed()))
}

/// As [`raw_end_to_end`], one channel message per batch of [`BATCH_EVENTS`] events.
async fn raw_end_to_end_batches(options: &BenchOptions) -> Result<f64> {
    let (sender, mut receiver) = mpsc::channel::<Vec<(String, Value)>>(1024 / BATCH_EVENTS);
    let started = Instant::now();
    for publisher in 0..options.publishers {
        let sender = sender.clone();
        let options = *options;
        tokio::spawn(async move {
            let share = options.share(publisher);
            for start in (0..share).step_by(BATCH_EVENTS) {
                let batch = raw_batch(&options, publisher, start);
                if sender.send(batch).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(sender);
    let mut received = 0;
    while let Some(batch) = receiver.recv().await {
        received += batch.len();
    }
    delivered_all(options, received)?;
    Ok(per_second(options.events, started.elapsed()))
}

/// Publisher `publisher`'s batch of up to [`BATCH_EVENTS`] events from its `start`th.
fn raw_batch(options: &BenchOptions, publisher: usize, start: usize) -> Vec<(String, Value)> {
    let end = (start + BATCH_EVENTS).min(options.share(publisher));
    (start..end)
        .map(|i| (format!("k{}", (publisher + i) % 64), options.payload(i)))
        .collect()
}

/// Whether the raw channel delivered every event of the measurement.
fn delivered_all(options: &BenchOptions, received: usize) -> Result<()> {
    if received != options.events {
        return Err(PhotonError::InvalidInput(format!(
            "raw channel delivered {received} of {}",
            options.events
        )));
    }
    Ok(())
}

async fn raw_latency(options: &BenchOptions, round: usize) -> Result<Latencies> {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Value>();
    let mut latencies = Latencies::default();
    for i in 0..options.latency_share(round) {
        let started = Instant::now();
        let _ = sender.send(options.payload(i));
        receiver
            .recv()
            .await
            .ok_or_else(|| PhotonError::Closed("raw channel".into()))?;
        latencies.record_since(started);
    }
    Ok(latencies)
}
