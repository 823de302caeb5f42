//! One scenario per adapter. Each measures Photon over the adapter's port with
//! [`photon_figures`] and the raw client doing the same work, in the same run.

pub mod fluvio;
pub mod mem;
pub mod nats;
mod photon_side;
pub mod sqlite;

pub use photon_side::{photon_figures, Figures};

use photon_core::Result;

use crate::measure::BenchOptions;
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
