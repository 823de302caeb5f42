//! The in-process port beside a raw `tokio::sync::mpsc` channel.
//!
//! The raw side does the same work without Photon: the same JSON payloads, the same number
//! of concurrent publishers, one consumer.

use std::sync::Arc;
use std::time::Instant;

use photon_core::mem::MemStoragePort;
use photon_core::{PhotonError, Result, TransportCrypto};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{measurements, photon_figures, sealed_photon_figures, unless_publish_only, Figures};
use crate::measure::{per_second, BenchOptions, Latencies};
use crate::report::Measurement;

/// Runs the mem scenario: rows `mem` in plaintext and `mem-sealed` with a transport key
/// (sealed at publish, opened at delivery), both beside the same raw channel figures.
///
/// # Errors
/// Never in practice: the mem port does not fail.
pub async fn run(options: &BenchOptions) -> Result<Vec<Measurement>> {
    let photon = photon_figures(Arc::new(MemStoragePort::new()), options, "bench").await?;
    let raw = raw_figures(options).await?;
    let crypto = TransportCrypto::plaintext().with_key("bench", [7u8; 32])?;
    let sealed =
        sealed_photon_figures(Arc::new(MemStoragePort::new()), options, "bench", crypto).await?;
    let mut rows = measurements("mem", &photon, &raw);
    rows.extend(measurements("mem-sealed", &sealed, &raw));
    Ok(rows)
}

async fn raw_figures(options: &BenchOptions) -> Result<Figures> {
    Ok(Figures {
        publish: raw_publish(options).await?,
        end_to_end: unless_publish_only(options, raw_end_to_end(options)).await?,
        latency: unless_publish_only(options, raw_latency(options)).await?,
    })
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
    if received != options.events {
        return Err(PhotonError::InvalidInput(format!(
            "raw channel delivered {received} of {}",
            options.events
        )));
    }
    Ok(per_second(options.events, started.elapsed()))
}

async fn raw_latency(options: &BenchOptions) -> Result<Latencies> {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Value>();
    let mut latencies = Latencies::default();
    for i in 0..options.latency_samples {
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
