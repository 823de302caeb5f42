//! The JSON report and its SVG chart.

use std::fmt::Write as _;

use serde::Serialize;

/// One figure of one adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// Adapter label: `mem`, `sqlite`, `nats`, `fluvio`.
    pub adapter: String,
    /// What was measured: `publish`, `end_to_end`, `latency_p50`, `latency_p99`.
    pub metric: String,
    /// Photon's figure.
    pub photon: f64,
    /// The raw client's figure in the same run.
    pub raw: f64,
    /// Unit: `events/s` or `us`.
    pub unit: String,
}

impl Measurement {
    /// A throughput figure (higher is better).
    pub fn throughput(adapter: &str, metric: &str, photon: f64, raw: f64) -> Self {
        Self {
            adapter: adapter.into(),
            metric: metric.into(),
            photon,
            raw,
            unit: "events/s".into(),
        }
    }

    /// A latency figure in microseconds (lower is better).
    pub fn latency(adapter: &str, metric: &str, photon: f64, raw: f64) -> Self {
        Self {
            adapter: adapter.into(),
            metric: metric.into(),
            photon,
            raw,
            unit: "us".into(),
        }
    }

    /// Photon relative to raw, as "fraction of the raw ceiling": photon/raw for throughput,
    /// raw/photon for latency.
    pub fn ratio(&self) -> f64 {
        if self.unit == "us" {
            self.raw / self.photon
        } else {
            self.photon / self.raw
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Every measurement.
    pub measurements: Vec<Measurement>,
}

impl Report {
    /// A table for the terminal.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<13} {:<12} {:>14} {:>14} {:>9} {:>7}\n",
            "adapter", "metric", "photon", "raw", "unit", "ratio"
        );
        for m in &self.measurements {
            let _ = writeln!(
                out,
                "{:<13} {:<12} {:>14.1} {:>14.1} {:>9} {:>7.2}",
                m.adapter,
                m.metric,
                m.photon,
                m.raw,
                m.unit,
                m.ratio()
            );
        }
        out
    }

    /// A bar chart of every ratio (1.0 = the raw client's figure).
    pub fn svg_chart(&self) -> String {
        let row = 26;
        let width = 640;
        let label = 220;
        let height = 40 + row * self.measurements.len();
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <text x=\"8\" y=\"18\" font-size=\"14\">Photon / raw client (1.0 = raw ceiling)</text>\n"
        );
        let scale = f64::from(width - label - 60);
        for (i, m) in self.measurements.iter().enumerate() {
            let y = 30 + row * i;
            let bar = (m.ratio().clamp(0.0, 1.5) / 1.5 * scale).max(1.0);
            let _ = writeln!(
                svg,
                "<text x=\"8\" y=\"{}\">{} {}</text><rect x=\"{label}\" y=\"{y}\" width=\"{bar:.0}\" height=\"18\" fill=\"#4a7bd0\"/><text x=\"{:.0}\" y=\"{}\">{:.2}</text>",
                y + 14,
                m.adapter,
                m.metric,
                f64::from(label as u32) + bar + 6.0,
                y + 14,
                m.ratio()
            );
        }
        let one = f64::from(label as u32) + scale / 1.5;
        let _ = writeln!(svg, "<line x1=\"{one:.0}\" y1=\"26\" x2=\"{one:.0}\" y2=\"{height}\" stroke=\"#c33\" stroke-dasharray=\"4\"/>");
        svg.push_str("</svg>\n");
        svg
    }
}
