//! Photon's spans and metrics, switched on for one side of a telemetry row and off for
//! every other measurement.
//!
//! "On" is what a service that watches Photon runs ([`Telemetry`] says which parts): a
//! `tracing` subscriber with a formatting layer recording Photon's spans (`photon*`
//! targets: at `INFO` the handler's `photon.handle`, at `DEBUG` also the per-event
//! `photon.publish` and `photon.deliver`), and a Prometheus recorder taking every metric.
//! "Off" is a subscriber that enables nothing and a recorder that hands out no-op handles:
//! what the library costs with no telemetry installed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use photon_core::{PhotonError, Result};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, Registry};

/// How often the Prometheus histograms fold their samples, as an exporter's scrape would.
const UPKEEP: Duration = Duration::from_secs(1);

static SWITCH: OnceLock<Switch> = OnceLock::new();

/// What "on" turns on, chosen once per run ([`choose`]).
static CHOSEN: OnceLock<Telemetry> = OnceLock::new();

/// The parts of Photon's telemetry that the telemetry rows turn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Telemetry {
    /// Spans at `INFO` and every metric: a service running with `RUST_LOG=info`.
    #[default]
    Info,
    /// Spans at `DEBUG` (one per publish and per delivery too) and every metric.
    Debug,
    /// Spans at `INFO` only.
    Spans,
    /// Metrics only.
    Metrics,
}

impl Telemetry {
    fn span_level(self) -> Option<Level> {
        match self {
            Self::Info | Self::Spans => Some(Level::INFO),
            Self::Debug => Some(Level::DEBUG),
            Self::Metrics => None,
        }
    }

    /// The name `--telemetry` takes (clap's, so that the two cannot differ).
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default()
    }

    fn metrics(self) -> bool {
        self != Self::Spans
    }
}

/// Chooses what the telemetry rows turn on (before the first [`set`]; [`Telemetry::Info`]
/// when never chosen).
///
/// # Errors
/// `InvalidInput` when a choice was made already.
pub fn choose(parts: Telemetry) -> Result<()> {
    CHOSEN.set(parts).map_err(|_| {
        PhotonError::InvalidInput("the bench's telemetry parts are chosen already".into())
    })
}

/// Whether metrics are recorded.
static METRICS_ON: AtomicBool = AtomicBool::new(false);

struct Switch {
    spans: reload::Handle<Targets, Registry>,
    #[cfg(test)]
    metrics: metrics_exporter_prometheus::PrometheusHandle,
}

/// Turns Photon's spans and metrics on or off for what runs next in this process. The
/// first call installs the process's subscriber and recorder (off).
///
/// # Errors
/// `InvalidInput` when another subscriber or recorder is installed already, or the filter
/// cannot be swapped.
pub fn set(on: bool) -> Result<()> {
    let switch = match SWITCH.get() {
        Some(switch) => switch,
        None => {
            let installed = install()?;
            SWITCH.get_or_init(|| installed)
        }
    };
    let parts = *CHOSEN.get_or_init(Telemetry::default);
    let targets = match parts.span_level() {
        Some(level) if on => Targets::new().with_target("photon", level),
        _ => Targets::new(),
    };
    switch
        .spans
        .reload(targets)
        .map_err(|e| PhotonError::InvalidInput(format!("cannot switch the span filter: {e}")))?;
    METRICS_ON.store(on && parts.metrics(), Ordering::SeqCst);
    Ok(())
}

fn install() -> Result<Switch> {
    let (filter, spans) = reload::Layer::new(Targets::new());
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
        .try_init()
        .map_err(|e| {
            PhotonError::InvalidInput(format!("cannot install the bench's subscriber: {e}"))
        })?;
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(Switched(recorder)).map_err(|e| {
        PhotonError::InvalidInput(format!("cannot install the bench's recorder: {e}"))
    })?;
    photon_core::metrics::describe();
    #[cfg(test)]
    let metrics = handle.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(UPKEEP);
        handle.run_upkeep();
    });
    Ok(Switch {
        spans,
        #[cfg(test)]
        metrics,
    })
}

/// The Prometheus recorder while metrics are on, no-op handles while they are off.
struct Switched(PrometheusRecorder);

impl Recorder for Switched {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if METRICS_ON.load(Ordering::Relaxed) {
            self.0.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if METRICS_ON.load(Ordering::Relaxed) {
            self.0.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if METRICS_ON.load(Ordering::Relaxed) {
            self.0.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use photon_core::mem::MemStoragePort;
    use photon_runtime::Photon;

    #[test]
    fn names_are_the_flag_values() {
        let names: Vec<String> = [
            Telemetry::Info,
            Telemetry::Debug,
            Telemetry::Spans,
            Telemetry::Metrics,
        ]
        .into_iter()
        .map(Telemetry::name)
        .collect();
        assert_eq!(names, ["info", "debug", "spans", "metrics"]);
    }

    fn published(rendered: &str, topic: &str) -> Option<f64> {
        rendered
            .lines()
            .find(|line| {
                line.starts_with("photon_published_total{")
                    && line.contains(&format!("topic=\"{topic}\""))
            })
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
    }

    #[tokio::test]
    async fn metrics_are_recorded_only_while_on() {
        let photon = Photon::builder()
            .storage_port(MemStoragePort::new())
            .build()
            .unwrap();
        let payload = serde_json::json!({});
        set(true).unwrap();
        for _ in 0..3 {
            photon
                .publish("on", None, payload.clone(), payload.clone())
                .await
                .unwrap();
        }
        set(false).unwrap();
        for _ in 0..2 {
            photon
                .publish("on", None, payload.clone(), payload.clone())
                .await
                .unwrap();
            photon
                .publish("off", None, payload.clone(), payload.clone())
                .await
                .unwrap();
        }
        let rendered = SWITCH.get().unwrap().metrics.render();
        assert_eq!(published(&rendered, "on"), Some(3.0));
        assert_eq!(published(&rendered, "off"), None);
    }
}
