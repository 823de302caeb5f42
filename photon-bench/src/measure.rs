//! Timing helpers shared by every scenario.

use std::time::{Duration, Instant};

/// Sizes of a run, the same for Photon and the raw client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchOptions {
    /// Events per throughput measurement.
    pub events: usize,
    /// Concurrent publishing tasks.
    pub publishers: usize,
    /// Round trips sampled for latency.
    pub latency_samples: usize,
    /// Payload size in bytes (a JSON string of this length).
    pub payload_bytes: usize,
    /// Publish rounds on broker adapters, Photon and the raw client taking turns first;
    /// each side's figure is its median round.
    pub rounds: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            events: 200_000,
            publishers: 64,
            latency_samples: 2_000,
            payload_bytes: 128,
            rounds: 3,
        }
    }
}

impl BenchOptions {
    /// The payload every scenario publishes: `{"i": n, "data": "xxx…"}`.
    pub fn payload(&self, i: usize) -> serde_json::Value {
        serde_json::json!({ "i": i, "data": "x".repeat(self.payload_bytes) })
    }

    /// How many events publisher `p` of `publishers` sends.
    pub fn share(&self, publisher: usize) -> usize {
        self.events / self.publishers + usize::from(publisher < self.events % self.publishers)
    }
}

/// The median of `values` (the upper one of an even count); 0 for none.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Events per second.
pub fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(f64::EPSILON)
}

/// Collected round-trip times.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    samples: Vec<Duration>,
}

impl Latencies {
    /// Records one sample.
    pub fn record(&mut self, sample: Duration) {
        self.samples.push(sample);
    }

    /// Records the time since `start`.
    pub fn record_since(&mut self, start: Instant) {
        self.record(start.elapsed());
    }

    /// The `q` quantile (0..=1) in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.samples.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let index = ((sorted.len() - 1) as f64 * q).round() as usize;
        sorted[index].as_secs_f64() * 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        let options = BenchOptions {
            events: 1003,
            publishers: 64,
            ..BenchOptions::default()
        };
        assert_eq!((0..64).map(|p| options.share(p)).sum::<usize>(), 1003);
    }

    #[test]
    fn quantiles() {
        let mut latencies = Latencies::default();
        for us in 1..=100 {
            latencies.record(Duration::from_micros(us));
        }
        assert_eq!(latencies.quantile_us(0.5).round(), 51.0);
        assert_eq!(latencies.quantile_us(0.99).round(), 99.0);
    }
}
