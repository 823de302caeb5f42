//! The in-process storage port: zero setup, nothing survives the process.
//!
//! Seq is per topic (so strictly increasing per key too), starting at 1. Appends are
//! delivered to live subscribers at once.

mod catalog;
mod checkpoint;
mod config;
mod consumer;
mod group;
mod port;
mod publish;
mod retention;
mod topic;

#[allow(deprecated)]
pub use config::PHOTON_MEM_MAX_PAYLOAD_BYTES;
pub use config::{MemConfig, MemStoragePortBuilder, MAX_PAYLOAD_BYTES_ENV};
pub use port::MemStoragePort;
