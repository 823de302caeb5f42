//! The JSON report: provenance, and every row with each of its rounds.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::latency::LatencyFigure;
use crate::measure::median;
use crate::provenance::Provenance;

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Where and how the figures were taken.
    pub provenance: Provenance,
    /// Rates, Photon beside its baseline.
    pub throughput: Vec<ThroughputRow>,
    /// Publish-to-subscriber round trips, Photon beside the raw client.
    pub latency: Vec<LatencyRow>,
}

/// What one adapter's scenario measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdapterFigures {
    /// Rate rows.
    pub throughput: Vec<ThroughputRow>,
    /// Round-trip rows.
    pub latency: Vec<LatencyRow>,
    /// The server's version, where the adapter talks to one (`unknown` if it did not say).
    pub server_version: Option<String>,
}

impl Report {
    /// An empty report.
    pub fn new(provenance: Provenance) -> Self {
        Self {
            provenance,
            throughput: Vec::new(),
            latency: Vec::new(),
        }
    }

    /// Adds what `adapter`'s scenario measured.
    pub fn add(&mut self, adapter: &str, figures: AdapterFigures) {
        self.throughput.extend(figures.throughput);
        self.latency.extend(figures.latency);
        if let Some(version) = figures.server_version {
            self.provenance
                .server_versions
                .insert(adapter.to_owned(), version);
        }
    }

    /// Tables for the terminal: rates, then round trips.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:<24} {:>12} {:>12} {:<8} {:>6} {:>6}\n",
            "adapter", "metric", "photon", "baseline", "of", "ratio", "rounds"
        );
        for row in &self.throughput {
            let _ = writeln!(
                out,
                "{:<14} {:<24} {:>12.0} {:>12.0} {:<8} {:>6.2} {:>6}",
                row.adapter,
                row.metric,
                row.photon.median,
                row.baseline.median,
                row.baseline_kind.short(),
                row.ratio,
                row.photon.rounds.len(),
            );
        }
        if self.latency.is_empty() {
            return out;
        }
        let _ = writeln!(
            out,
            "\n{:<14} {:<16} {:<7} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "adapter",
            "metric",
            "side",
            "samples",
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9 us",
            "max us"
        );
        for row in &self.latency {
            for (side, figure) in [("photon", &row.photon), ("raw", &row.raw)] {
                let cell = |value: Option<f64>| {
                    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
                };
                let _ = writeln!(
                    out,
                    "{:<14} {:<16} {:<7} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
                    row.adapter,
                    row.metric,
                    side,
                    figure.samples,
                    cell(figure.p50_us),
                    cell(figure.p90_us),
                    cell(figure.p99_us),
                    cell(figure.p99_9_us),
                    cell(figure.max_us),
                );
            }
        }
        out
    }
}

/// What a throughput row's baseline column measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineKind {
    /// The raw client library doing the same work.
    Raw,
    /// A durable subscription on the same store doing the same work (executor and
    /// consumer group rows).
    Durable,
    /// A subscription to the whole topic on the same store, replaying the same topic
    /// (keyed subscription rows).
    WholeTopic,
    /// The executor's single-event handler on the same store, handling the same events
    /// (batch handler rows).
    SingleHandler,
    /// Photon doing the same work with its spans and metrics off (telemetry rows).
    TelemetryOff,
    /// Photon publishing the same events at once instead of through the scheduler
    /// (delayed rows).
    AtOnce,
}

impl BaselineKind {
    /// The name charts give the baseline's series.
    pub fn title(self) -> &'static str {
        match self {
            Self::Raw => "raw client",
            Self::Durable => "durable subscription",
            Self::WholeTopic => "whole-topic subscription",
            Self::SingleHandler => "single-event handler",
            Self::TelemetryOff => "telemetry off",
            Self::AtOnce => "published at once",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Durable => "durable",
            Self::WholeTopic => "whole topic",
            Self::SingleHandler => "single",
            Self::TelemetryOff => "no telemetry",
            Self::AtOnce => "at once",
        }
    }
}

/// Every round of one side and their median.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The median round (the upper one of an even count).
    pub median: f64,
    /// Each round's figure, in the order run.
    pub rounds: Vec<f64>,
}

impl Series {
    /// The series of `rounds`.
    pub fn new(rounds: Vec<f64>) -> Self {
        Self {
            median: median(rounds.clone()),
            rounds,
        }
    }

    /// The lowest and highest round (0 and 0 without rounds).
    pub fn spread(&self) -> (f64, f64) {
        let low = self.rounds.iter().copied().fold(f64::INFINITY, f64::min);
        let high = self
            .rounds
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        if self.rounds.is_empty() {
            (0.0, 0.0)
        } else {
            (low, high)
        }
    }
}

/// A rate of Photon beside the same work without Photon (or without the executor or group),
/// in the same run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputRow {
    /// Adapter label: `mem`, `sqlite`, `sqlite-normal`, `nats`, `fluvio`.
    pub adapter: String,
    /// What was measured: `publish`, `publish_sealed`, `publish_batch` (batches of 64),
    /// `end_to_end`, `end_to_end_sealed`, `end_to_end_batch` (published in batches of 64),
    /// `executor`, `keyed_replay`, `publish_with_subscriber`, `group_1`, `group_2`,
    /// `group_4`.
    pub metric: String,
    /// Always `events/s`.
    pub unit: String,
    /// Photon's rounds.
    pub photon: Series,
    /// What the baseline column measured.
    pub baseline_kind: BaselineKind,
    /// The baseline's rounds, taken in turns with Photon's.
    pub baseline: Series,
    /// Photon's median over the baseline's (1.0 = the baseline's rate).
    pub ratio: f64,
}

impl ThroughputRow {
    /// A row from each side's rounds (events per second).
    pub fn new(
        adapter: &str,
        metric: &str,
        photon: Vec<f64>,
        baseline_kind: BaselineKind,
        baseline: Vec<f64>,
    ) -> Self {
        let (photon, baseline) = (Series::new(photon), Series::new(baseline));
        Self {
            adapter: adapter.to_owned(),
            metric: metric.to_owned(),
            unit: "events/s".to_owned(),
            ratio: photon.median / baseline.median,
            photon,
            baseline_kind,
            baseline,
        }
    }

    /// Member count of a consumer group row (`group_4` -> 4).
    pub fn group_members(&self) -> Option<u32> {
        self.metric.strip_prefix("group_")?.parse().ok()
    }
}

/// Publish-to-subscriber round trips of Photon beside the raw client's, in the same run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRow {
    /// Adapter label.
    pub adapter: String,
    /// `latency` (plaintext), `latency_sealed` (with a transport key),
    /// `latency_executor` (publish -> handler start through the executor, plaintext) or
    /// `latency_delayed` (an event due at once, through the scheduler, plaintext).
    pub metric: String,
    /// Photon's round trips.
    pub photon: LatencyFigure,
    /// The raw client's round trips (the same for both metrics of an adapter).
    pub raw: LatencyFigure,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::latency::{CurvePoint, LatencyRound};
    use crate::measure::BenchOptions;
    use crate::provenance::{Host, LoadAverage, RunOptions};

    fn provenance() -> Provenance {
        Provenance {
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            date: "2026-12-01T10:00:00Z".into(),
            host: Host {
                cores: 2,
                cpu: Some("Example CPU".into()),
                memory_total_bytes: Some(8_589_934_592),
                memory_available_bytes: Some(4_294_967_296),
                load_start: Some(LoadAverage {
                    one: 1.5,
                    five: 1.25,
                    fifteen: 1.0,
                }),
                load_end: None,
            },
            server_versions: BTreeMap::new(),
            options: RunOptions {
                scenario: "compare".into(),
                adapters: vec!["mem".into(), "nats".into()],
                profile: "release".into(),
                executor_parallelism: 8,
                telemetry: "info".into(),
                sizes: BenchOptions::default(),
            },
        }
    }

    fn latency_figure(p50: f64) -> LatencyFigure {
        LatencyFigure {
            samples: 20,
            min_us: Some(1.0),
            mean_us: Some(p50),
            p50_us: Some(p50),
            p90_us: None,
            p99_us: None,
            p99_9_us: None,
            max_us: Some(9.0),
            rounds: vec![LatencyRound {
                samples: 20,
                p50_us: Some(p50),
                p99_us: None,
            }],
            curve: vec![CurvePoint {
                quantile: 1.0,
                us: 9.0,
            }],
        }
    }

    fn report() -> Report {
        let mut report = Report::new(provenance());
        report.add(
            "nats",
            AdapterFigures {
                throughput: vec![ThroughputRow::new(
                    "nats",
                    "publish",
                    vec![30.0, 10.0, 20.0],
                    BaselineKind::Raw,
                    vec![40.0, 50.0, 45.0],
                )],
                latency: vec![LatencyRow {
                    adapter: "nats".into(),
                    metric: "latency".into(),
                    photon: latency_figure(4.0),
                    raw: latency_figure(2.0),
                }],
                server_version: Some("2.10.22".into()),
            },
        );
        report.provenance.host.load_end = Some(LoadAverage {
            one: 2.0,
            five: 1.5,
            fifteen: 1.0,
        });
        report
    }

    #[test]
    fn provenance_serializes_with_exact_values() {
        let value = serde_json::to_value(report()).unwrap();
        assert_eq!(
            value["provenance"],
            json!({
                "commit": "0123456789abcdef0123456789abcdef01234567",
                "date": "2026-12-01T10:00:00Z",
                "host": {
                    "cores": 2,
                    "cpu": "Example CPU",
                    "memory_total_bytes": 8_589_934_592_u64,
                    "memory_available_bytes": 4_294_967_296_u64,
                    "load_start": { "one": 1.5, "five": 1.25, "fifteen": 1.0 },
                    "load_end": { "one": 2.0, "five": 1.5, "fifteen": 1.0 }
                },
                "server_versions": { "nats": "2.10.22" },
                "options": {
                    "scenario": "compare",
                    "telemetry": "info",
                    "adapters": ["mem", "nats"],
                    "profile": "release",
                    "executor_parallelism": 8,
                    "events": 200_000,
                    "publishers": 64,
                    "latency_samples": 10_000,
                    "payload_bytes": 128,
                    "rounds": 3,
                    "publish_only": false,
                    "group_events": 80_000
                }
            })
        );
    }

    #[test]
    fn rows_keep_every_round_and_their_median() {
        let value = serde_json::to_value(report()).unwrap();
        assert_eq!(
            value["throughput"],
            json!([{
                "adapter": "nats",
                "metric": "publish",
                "unit": "events/s",
                "photon": { "median": 20.0, "rounds": [30.0, 10.0, 20.0] },
                "baseline_kind": "raw",
                "baseline": { "median": 45.0, "rounds": [40.0, 50.0, 45.0] },
                "ratio": 20.0 / 45.0
            }])
        );
        assert_eq!(value["latency"][0]["photon"]["samples"], json!(20));
        assert_eq!(value["latency"][0]["raw"]["p50_us"], json!(2.0));
        assert_eq!(value["latency"][0]["photon"]["p99_us"], json!(null));
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let written = serde_json::to_string(&report()).unwrap();
        let read: Report = serde_json::from_str(&written).unwrap();
        assert_eq!(read, report());
    }

    #[test]
    fn the_table_names_each_row_and_its_sample_count() {
        let table = report().table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 6, "{table}");
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["nats", "publish", "20", "45", "raw", "0.44", "3"]
        );
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            ["nats", "latency", "photon", "20", "4.0", "-", "-", "-", "9.0"]
        );
    }

    #[test]
    fn group_rows_name_their_members() {
        let row = ThroughputRow::new(
            "mem",
            "group_4",
            vec![1.0],
            BaselineKind::Durable,
            vec![1.0],
        );
        assert_eq!(row.group_members(), Some(4));
        assert_eq!(report().throughput[0].group_members(), None);
    }
}
