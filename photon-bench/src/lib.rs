//! Photon's benchmark harness.
//!
//! Each adapter scenario measures Photon's public API and the raw client library doing the
//! same work in the same run, in rounds in which the sides take turns at going first, so
//! that every figure is also a ratio to its raw ceiling. The report keeps every round and
//! where the figures were taken; charts are drawn from it. See `PERFORMANCE_STUDY.md` for
//! the method and the latest figures.

pub mod chart;
pub mod latency;
pub mod measure;
pub mod provenance;
pub mod report;
pub mod scenarios;
pub mod telemetry;

pub use latency::Latencies;
pub use measure::BenchOptions;
pub use provenance::{Provenance, RunOptions};
pub use report::{AdapterFigures, Report};
