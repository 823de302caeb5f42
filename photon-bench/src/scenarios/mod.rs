//! One scenario per adapter. Each measures Photon over the adapter's port with
//! [`photon_figures`] and the raw client doing the same work, in the same run.

pub mod fluvio;
pub mod groups;
pub mod mem;
pub mod nats;
mod photon_side;
pub mod sqlite;

pub use photon_side::{photon_figures, sealed_photon_figures, Figures, PhotonSide};

use photon_side::unless_publish_only;

use std::future::Future;

use photon_core::Result;

use crate::measure::{median, with_cpu_time, BenchOptions, Latencies};
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

/// Pairs Photon's figures with the raw client's into report rows; a metric gets a row when
/// both sides measured it.
pub fn measurements(adapter: &str, photon: &Figures, raw: &Figures) -> Vec<Measurement> {
    let mut rows = vec![Measurement::throughput(
        adapter,
        "publish",
        photon.publish,
        raw.publish,
    )];
    if let (Some(photon), Some(raw)) = (photon.end_to_end, raw.end_to_end) {
        rows.push(Measurement::throughput(adapter, "end_to_end", photon, raw));
    }
    if let (Some(photon), Some(raw)) = (&photon.latency, &raw.latency) {
        for (metric, q) in [("latency_p50", 0.5), ("latency_p99", 0.99)] {
            rows.push(Measurement::latency(
                adapter,
                metric,
                photon.quantile_us(q),
                raw.quantile_us(q),
            ));
        }
    }
    rows
}

/// Publish throughput of both sides over `rounds` rounds, taking turns at going first so
/// that neither side always meets the server fresh (or loaded); returns each side's median
/// `(photon, raw)`. Each round's rates, and this process's CPU time per event of `events`,
/// go to stderr.
///
/// # Errors
/// The first error of either side.
pub async fn alternating_publish<P, PF, R, RF>(
    rounds: usize,
    events: usize,
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
        let ((photon_rate, photon_cpu), (raw_rate, raw_cpu)) = if round % 2 == 0 {
            let photon = with_cpu_time(photon(round)).await;
            (photon, with_cpu_time(raw(round)).await)
        } else {
            let raw = with_cpu_time(raw(round)).await;
            (with_cpu_time(photon(round)).await, raw)
        };
        let (photon_rate, raw_rate) = (photon_rate?, raw_rate?);
        // This process's CPU time per event tells the client's cost apart from the server's,
        // which shares the machine.
        let per_event = |cpu: Option<std::time::Duration>| {
            cpu.map_or_else(
                || "?".to_owned(),
                |cpu| format!("{:.1}", cpu.as_secs_f64() * 1e6 / events as f64),
            )
        };
        eprintln!(
            "  publish round {}: photon {photon_rate:.0}/s ({} µs CPU/event), raw {raw_rate:.0}/s ({} µs CPU/event)",
            round + 1,
            per_event(photon_cpu),
            per_event(raw_cpu),
        );
        photon_rates.push(photon_rate);
        raw_rates.push(raw_rate);
    }
    Ok((median(photon_rates), median(raw_rates)))
}

/// Ends a raw end-to-end window: waits for its publishing task, then gives the rate of
/// `events` read in `elapsed`.
///
/// # Errors
/// The publishing task's error, or its panic.
pub(crate) async fn raw_end_to_end_rate(
    publishing: tokio::task::JoinHandle<Result<()>>,
    events: usize,
    elapsed: std::time::Duration,
) -> Result<f64> {
    publishing.await.map_err(|e| {
        photon_core::PhotonError::InvalidInput(format!("raw publisher task: {e}"))
    })??;
    Ok(crate::measure::per_second(events, elapsed))
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
        options.events,
        |round| photon.publish_rate(options, round),
        |round| raw.publish_rate(options, round),
    )
    .await?;
    let photon = Figures {
        publish: photon_publish,
        end_to_end: unless_publish_only(options, photon.end_to_end_rate(options)).await?,
        latency: unless_publish_only(options, photon.latency(options)).await?,
    };
    let raw = Figures {
        publish: raw_publish,
        end_to_end: unless_publish_only(options, raw.end_to_end_rate(options)).await?,
        latency: unless_publish_only(options, raw.latency(options)).await?,
    };
    Ok((photon, raw))
}
