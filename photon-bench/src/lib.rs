//! Photon's benchmark harness.
//!
//! Each adapter scenario measures Photon and the raw client library doing the same work in
//! the same run, so that every figure is also a ratio to its raw ceiling. See
//! `PERFORMANCE_STUDY.md` for the method and the latest figures.

pub mod measure;
pub mod report;
pub mod scenarios;

pub use measure::{BenchOptions, Latencies};
pub use report::{Measurement, Report};
