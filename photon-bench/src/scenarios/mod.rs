//! One scenario per adapter. Each measures Photon over the adapter's port with
//! [`photon_figures`] and the raw client doing the same work, in the same run.

pub mod fluvio;
pub mod mem;
pub mod nats;
mod photon_side;
pub mod sqlite;

pub use photon_side::{photon_figures, Figures, PhotonSide};

use std::future::Future;

use photon_core::Result;

use crate::measure::{median, BenchOptions, Latencies};
use crate::report::Measurement;

/// The adapters this harness knows, in report order.
pub const ADAPTERS: &[&str] = &["mem", "sqlite", "nats", "fluvio"];

/// Runs one adapter's scenario.
///
/// # Errors
/// [`photon_core::PhotonError::InvalidInput`] for an unknown adapter; the adapter's errors
/// (for example an unreachable server).
pub async fn run(adapter: &str, options: &BenchOptions) -> Result<Vec<Measurement>> {
    match adapter {
        "mem" => mem::run(options).await,
        "sqlite" => sqlite::run(options).await,
        "nats" => nats::run(options).await,
        "fluvio" => fluvio::run(options).await,
        other => Err(photon_core::PhotonError::InvalidInput(format!(
            "unknown adapter {other:?}; known: {}",
            ADAPTERS.join(", ")
        ))),
    }
}

/// Pairs Photon's figures with the raw client's into report rows.
pub fn measurements(adapter: &str, photon: &Figures, raw: &Figures) -> Vec<Measurement> {
    vec![
        Measurement::throughput(adapter, "publish", photon.publish, raw.publish),
        Measurement::throughput(adapter, "end_to_end", photon.end_to_end, raw.end_to_end),
        Measurement::latency(
            adapter,
            "latency_p50",
            photon.latency.quantile_us(0.5),
            raw.latency.quantile_us(0.5),
        ),
        Measurement::latency(
            adapter,
            "latency_p99",
            photon.latency.quantile_us(0.99),
            raw.latency.quantile_us(0.99),
        ),
    ]
}

/// Publish throughput of both sides over `rounds` rounds, taking turns at going first so
/// that neither side always meets the server fresh (or loaded); returns each side's median
/// `(photon, raw)`.
///
/// # Errors
/// The first error of either side.
pub async fn alternating_publish<P, PF, R, RF>(
    rounds: usize,
    mut photon: P,
    mut raw: R,
) -> Result<(f64, f64)>
where
    P: FnMut(usize) -> PF,
    PF: Future<Output = Result<f64>>,
    R: FnMut(usize) -> RF,
    RF: Future<Output = Result<f64>>,
{
    let (mut photon_rates, mut raw_rates) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            photon_rates.push(photon(round).await?);
            raw_rates.push(raw(round).await?);
        } else {
            raw_rates.push(raw(round).await?);
            photon_rates.push(photon(round).await?);
        }
    }
    Ok((median(photon_rates), median(raw_rates)))
}

/// A raw client doing the same work as Photon's side.
pub(crate) trait RawClient {
    /// Acknowledged publishes per second; each `round` on its own topic.
    async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64>;
    /// Events per second from publish to consumption.
    async fn end_to_end_rate(&self, options: &BenchOptions) -> Result<f64>;
    /// One-at-a-time publish → receive round trips.
    async fn latency(&self, options: &BenchOptions) -> Result<Latencies>;
}

/// Both sides' figures: publish over alternating rounds, then end-to-end and latency.
///
/// # Errors
/// The first error of either side.
pub(crate) async fn compare(
    photon: &PhotonSide,
    raw: &impl RawClient,
    options: &BenchOptions,
) -> Result<(Figures, Figures)> {
    let (photon_publish, raw_publish) = alternating_publish(
        options.rounds,
        |round| photon.publish_rate(options, round),
        |round| raw.publish_rate(options, round),
    )
    .await?;
    let photon = Figures {
        publish: photon_publish,
        end_to_end: photon.end_to_end_rate(options).await?,
        latency: photon.latency(options).await?,
    };
    let raw = Figures {
        publish: raw_publish,
        end_to_end: raw.end_to_end_rate(options).await?,
        latency: raw.latency(options).await?,
    };
    Ok((photon, raw))
}
