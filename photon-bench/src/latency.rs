//! Publish-to-subscriber round trips, recorded in an HDR histogram.
//!
//! Samples are kept in nanoseconds with 3 significant digits, so a percentile is within
//! 0.1% of the sample it stands for. A percentile is reported only when at least
//! [`MIN_TAIL_SAMPLES`] samples lie at or above it: with fewer, the figure would be one or
//! two samples' accident, so p99.9 needs 10,000 samples and p99 needs 1,000.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Samples a reported percentile needs at or above it.
pub const MIN_TAIL_SAMPLES: u64 = 10;

/// Longest round trip told apart from longer ones (60 s); longer ones count as 60 s.
const HIGHEST_NANOS: u64 = 60_000_000_000;

/// Points per halving of the distance to 100% in the percentile curve.
const CURVE_TICKS_PER_HALF: u32 = 4;

/// The percentiles of the report: name and quantile as `numerator / denominator`, so that
/// the sample count each needs is exact.
const PERCENTILES: [(&str, u64, u64); 4] = [
    ("p50", 50, 100),
    ("p90", 90, 100),
    ("p99", 99, 100),
    ("p99.9", 999, 1000),
];

/// Round trips of one side, in one round or merged over several.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self {
            // Bounds are constants that `new_with_bounds` accepts (low >= 1, high >= 2 * low,
            // sigfig <= 5), so this cannot fail.
            histogram: Histogram::new_with_bounds(1, HIGHEST_NANOS, 3)
                .expect("constant histogram bounds are valid"),
        }
    }
}

impl Latencies {
    /// Records one sample (at least 1 ns; at most 60 s).
    pub fn record(&mut self, sample: Duration) {
        let nanos = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
        self.histogram.saturating_record(nanos.max(1));
    }

    /// Records the time since `start`.
    pub fn record_since(&mut self, start: Instant) {
        self.record(start.elapsed());
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latencies) {
        // Both histograms have the same bounds, which is all `add` requires.
        self.histogram
            .add(&other.histogram)
            .expect("histograms with equal bounds add up");
    }

    /// How many samples were recorded.
    pub fn samples(&self) -> u64 {
        self.histogram.len()
    }

    /// The `numerator / denominator` quantile in microseconds, or `None` when fewer than
    /// [`MIN_TAIL_SAMPLES`] samples lie at or above it.
    pub fn quantile_us(&self, numerator: u64, denominator: u64) -> Option<f64> {
        let tail = denominator.saturating_sub(numerator);
        let enough = self.samples().saturating_mul(tail) >= MIN_TAIL_SAMPLES * denominator;
        enough.then(|| {
            let quantile = numerator as f64 / denominator as f64;
            micros(self.histogram.value_at_quantile(quantile))
        })
    }

    /// This round's line of a figure.
    pub fn round(&self) -> LatencyRound {
        LatencyRound {
            samples: self.samples(),
            p50_us: self.quantile_us(50, 100),
            p99_us: self.quantile_us(99, 100),
        }
    }

    /// The figure of these samples, with `rounds` as the per-round lines.
    pub fn figure(&self, rounds: Vec<LatencyRound>) -> LatencyFigure {
        let [p50_us, p90_us, p99_us, p99_9_us] =
            PERCENTILES.map(|(_, numerator, denominator)| self.quantile_us(numerator, denominator));
        let empty = self.samples() == 0;
        LatencyFigure {
            samples: self.samples(),
            min_us: (!empty).then(|| micros(self.histogram.min())),
            mean_us: (!empty).then(|| self.histogram.mean() / 1_000.0),
            p50_us,
            p90_us,
            p99_us,
            p99_9_us,
            max_us: (!empty).then(|| micros(self.histogram.max())),
            rounds,
            curve: self.curve(),
        }
    }

    /// The percentile curve: points from 0% towards 100%, denser near the tail.
    fn curve(&self) -> Vec<CurvePoint> {
        if self.samples() == 0 {
            return Vec::new();
        }
        self.histogram
            .iter_quantiles(CURVE_TICKS_PER_HALF)
            .map(|step| CurvePoint {
                quantile: step.quantile_iterated_to(),
                us: micros(step.value_iterated_to()),
            })
            .collect()
    }
}

fn micros(nanos: u64) -> f64 {
    nanos as f64 / 1_000.0
}

/// The report's names of the percentiles [`LatencyFigure`] carries, in its order.
pub fn percentile_names() -> [&'static str; 4] {
    PERCENTILES.map(|(name, _, _)| name)
}

/// One round's round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRound {
    /// Samples of the round.
    pub samples: u64,
    /// Median in microseconds (`None` with fewer than 20 samples).
    pub p50_us: Option<f64>,
    /// 99th percentile in microseconds (`None` with fewer than 1,000 samples).
    pub p99_us: Option<f64>,
}

/// One point of a percentile curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Fraction of samples at or below `us` (0 to 1).
    pub quantile: f64,
    /// Round trip in microseconds.
    pub us: f64,
}

/// The round trips of one side over every round. Each percentile is `None` when too few
/// samples lie at or above it (see [`MIN_TAIL_SAMPLES`]); minimum, mean and maximum are
/// `None` without samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigure {
    /// Samples over every round.
    pub samples: u64,
    /// Shortest round trip, microseconds.
    pub min_us: Option<f64>,
    /// Mean round trip, microseconds.
    pub mean_us: Option<f64>,
    /// Median, microseconds.
    pub p50_us: Option<f64>,
    /// 90th percentile, microseconds.
    pub p90_us: Option<f64>,
    /// 99th percentile, microseconds.
    pub p99_us: Option<f64>,
    /// 99.9th percentile, microseconds.
    pub p99_9_us: Option<f64>,
    /// Longest round trip, microseconds.
    pub max_us: Option<f64>,
    /// Each round on its own.
    pub rounds: Vec<LatencyRound>,
    /// The percentile curve over every round, for the latency chart.
    pub curve: Vec<CurvePoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10,000 samples: 1 to 1,000 ns, each ten times. HDR keeps values below 2,048 exactly
    /// at 3 significant digits, so every percentile is a sample.
    fn known() -> Latencies {
        let mut latencies = Latencies::default();
        for _ in 0..10 {
            for nanos in 1..=1_000 {
                latencies.record(Duration::from_nanos(nanos));
            }
        }
        latencies
    }

    #[test]
    fn percentiles_of_a_known_sample_set() {
        let figure = known().figure(Vec::new());
        assert_eq!(figure.samples, 10_000);
        assert_eq!(figure.min_us, Some(0.001));
        assert_eq!(figure.p50_us, Some(0.5));
        assert_eq!(figure.p90_us, Some(0.9));
        assert_eq!(figure.p99_us, Some(0.99));
        assert_eq!(figure.p99_9_us, Some(0.999));
        assert_eq!(figure.max_us, Some(1.0));
        assert_eq!(figure.mean_us, Some(0.5005));
    }

    #[test]
    fn a_percentile_needs_ten_samples_at_or_above_it() {
        // The known set less its last sample: 1 to 999 ns ten times, 1,000 ns nine times.
        let mut latencies = Latencies::default();
        for round in 0..10 {
            let last = if round == 9 { 999 } else { 1_000 };
            for nanos in 1..=last {
                latencies.record(Duration::from_nanos(nanos));
            }
        }
        let figure = latencies.figure(Vec::new());
        assert_eq!(figure.samples, 9_999);
        assert_eq!(figure.p99_us, Some(0.99));
        assert_eq!(figure.p99_9_us, None);

        let mut few = Latencies::default();
        for nanos in 1..=19 {
            few.record(Duration::from_nanos(nanos));
        }
        assert_eq!(
            few.round(),
            LatencyRound {
                samples: 19,
                p50_us: None,
                p99_us: None
            }
        );
        few.record(Duration::from_nanos(20));
        assert_eq!(few.round().p50_us, Some(0.01));
    }

    #[test]
    fn rounds_merge_into_one_histogram() {
        let mut first = Latencies::default();
        let mut second = Latencies::default();
        for nanos in 1..=500 {
            first.record(Duration::from_nanos(nanos));
            second.record(Duration::from_nanos(nanos + 500));
        }
        let mut merged = Latencies::default();
        merged.merge(&first);
        merged.merge(&second);
        assert_eq!(merged.samples(), 1_000);
        assert_eq!(merged.quantile_us(50, 100), Some(0.5));
        assert_eq!(merged.quantile_us(99, 100), Some(0.99));
        assert_eq!(merged.quantile_us(999, 1000), None);
    }

    #[test]
    fn the_curve_runs_from_the_minimum_to_the_maximum() {
        let curve = known().figure(Vec::new()).curve;
        let first = curve.first().unwrap();
        let last = curve.last().unwrap();
        assert_eq!((first.us, last.us, last.quantile), (0.001, 1.0, 1.0));
        assert!(curve
            .windows(2)
            .all(|w| w[0].quantile < w[1].quantile && w[0].us <= w[1].us));
    }

    #[test]
    fn no_samples_no_figures() {
        let figure = Latencies::default().figure(Vec::new());
        assert_eq!(figure.samples, 0);
        assert_eq!(
            (figure.min_us, figure.p50_us, figure.max_us),
            (None, None, None)
        );
        assert!(figure.curve.is_empty());
    }

    #[test]
    fn samples_beyond_a_minute_count_as_a_minute() {
        let mut latencies = Latencies::default();
        latencies.record(Duration::from_secs(3_600));
        latencies.record(Duration::ZERO);
        let figure = latencies.figure(Vec::new());
        assert_eq!(figure.min_us, Some(0.001));
        assert_eq!(figure.max_us.map(|us| (us / 1e6).round()), Some(60.0));
    }
}
