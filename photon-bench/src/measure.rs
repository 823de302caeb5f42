//! Timing helpers shared by every scenario.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Sizes of a run, the same for Photon and the raw client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchOptions {
    /// Events per throughput measurement.
    pub events: usize,
    /// Concurrent publishing tasks.
    pub publishers: usize,
    /// Round trips sampled for latency per side, over all rounds together.
    pub latency_samples: usize,
    /// Payload size in bytes (a JSON string of this length).
    pub payload_bytes: usize,
    /// Rounds of every measurement, the sides taking turns at going first; a row keeps
    /// every round and reports their median.
    pub rounds: usize,
    /// Measure publish throughput only (no end-to-end, no latency).
    pub publish_only: bool,
    /// Events of the consumer group scenario's topic: enough that the members' joins and
    /// first rebalance (a few heartbeats) are a small part of each measurement.
    pub group_events: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            events: 200_000,
            publishers: 64,
            latency_samples: 10_000,
            payload_bytes: 128,
            rounds: 3,
            publish_only: false,
            group_events: 80_000,
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
        split(self.events, self.publishers, publisher)
    }

    /// How many round trips round `round` of `rounds` samples.
    pub fn latency_share(&self, round: usize) -> usize {
        split(self.latency_samples, self.rounds.max(1), round)
    }
}

/// Part `part` of `total` split into `parts` parts that differ by at most one.
fn split(total: usize, parts: usize, part: usize) -> usize {
    total / parts + usize::from(part < total % parts)
}

/// CPU time this process has used so far (user and system), from `/proc/self/stat`;
/// `None` where that is not readable. Linux reports it in ticks of 1/100 s (`USER_HZ`).
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Runs `measure` and returns its result with the CPU time this process spent meanwhile.
pub async fn with_cpu_time<T>(
    measure: impl std::future::Future<Output = T>,
) -> (T, Option<Duration>) {
    let before = process_cpu_time();
    let result = measure.await;
    let spent = before
        .zip(process_cpu_time())
        .map(|(a, b)| b.saturating_sub(a));
    (result, spent)
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
        assert_eq!(
            (options.share(0), options.share(42), options.share(43)),
            (16, 16, 15)
        );
    }

    #[test]
    fn latency_samples_split_over_rounds() {
        let options = BenchOptions {
            latency_samples: 10_000,
            rounds: 3,
            ..BenchOptions::default()
        };
        let shares: Vec<usize> = (0..3).map(|r| options.latency_share(r)).collect();
        assert_eq!(shares, [3_334, 3_333, 3_333]);
    }

    #[test]
    fn this_process_has_used_cpu_time() {
        let spent: u64 = (0..50_000_000u64).fold(0, |acc, i| acc ^ i.wrapping_mul(31));
        assert_ne!(spent, 1);
        let cpu = process_cpu_time().unwrap();
        assert!(cpu > Duration::ZERO, "{cpu:?}");
    }
}
