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
        raw_publish(options, raw_events).await
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_end_to_end(options, 1024, raw_events, |_| 1).await
    }

    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        raw_latency(options, round).await
    }

    fn batches(&self) -> bool {
        true
    }

    async fn publish_batch_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_publish(options, raw_batches).await
    }

    async fn end_to_end_batch_rate(&self, options: &BenchOptions, _round: usize) -> Result<f64> {
        raw_end_to_end(options, 1024 / BATCH_EVENTS, raw_batches, Vec::len).await
    }
}

fn task_error(err: tokio::task::JoinError) -> PhotonError {
    PhotonError::InvalidInput(format!("raw publisher task: {err}"))
}

/// Publishers send into an unbounded channel that keeps everything, as the mem port does:
/// each its `messages` (its events, one by one or in batches).
async fn raw_publish<M, I>(
    options: &BenchOptions,
    messages: fn(BenchOptions, usize) -> I,
) -> Result<f64>
where
    M: Send + 'static,
    I: Iterator<Item = M> + Send + 'static,
{
    let (sender, receiver) = mpsc::unbounded_channel::<M>();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for publisher in 0..options.publishers {
        let sender = sender.clone();
        let options = *options;
        tasks.push(tokio::spawn(async move {
            for message in messages(options, publisher) {
                let _ = sender.send(message);
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

/// Publishers send their `messages` into a channel of `capacity` messages that one
/// consumer drains, counting `events_in` each, until every event has arrived.
async fn raw_end_to_end<M, I>(
    options: &BenchOptions,
    capacity: usize,
    messages: fn(BenchOptions, usize) -> I,
    events_in: fn(&M) -> usize,
) -> Result<f64>
where
    M: Send + 'static,
    I: Iterator<Item = M> + Send + 'static,
{
    let (sender, mut receiver) = mpsc::channel::<M>(capacity);
    let started = Instant::now();
    for publisher in 0..options.publishers {
        let sender = sender.clone();
        let options = *options;
        tokio::spawn(async move {
            for message in messages(options, publisher) {
                if sender.send(message).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(sender);
    let mut received = 0;
    while let Some(message) = receiver.recv().await {
        received += events_in(&message);
    }
    delivered_all(options, received)?;
    Ok(per_second(options.events, started.elapsed()))
}

/// Publisher `publisher`'s events, one message each.
fn raw_events(options: BenchOptions, publisher: usize) -> impl Iterator<Item = (String, Value)> {
    raw_range(options, publisher, 0..options.share(publisher))
}

/// Publisher `publisher`'s events, one message per batch of [`BATCH_EVENTS`].
fn raw_batches(
    options: BenchOptions,
    publisher: usize,
) -> impl Iterator<Item = Vec<(String, Value)>> {
    let share = options.share(publisher);
    (0..share).step_by(BATCH_EVENTS).map(move |start| {
        let end = (start + BATCH_EVENTS).min(share);
        raw_range(options, publisher, start..end).collect()
    })
}

/// Publisher `publisher`'s events `range`, keyed as the Photon side keys them.
fn raw_range(
    options: BenchOptions,
    publisher: usize,
    range: std::ops::Range<usize>,
) -> impl Iterator<Item = (String, Value)> {
    range.map(move |i| (format!("k{}", (publisher + i) % 64), options.payload(i)))
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
