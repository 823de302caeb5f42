//! Fluvio StoragePort for distributed Photon delivery.
//!
//! Puts Photon topics and checkpoints on a Fluvio cluster behind the shared storage
//! contract: keyed partitions keep their order, durable subscriptions resume from
//! checkpoints stored in Fluvio, and a topic can be spread over several Fluvio topics
//! (shards). Consumer groups do not span processes on this port yet:
//! `capabilities().consumer_groups` is `false`, and `subscribe_group` shares events only
//! among members joined through one port instance. Turn it on with the `fluvio` feature of the `photon` facade.
//!
//! Settings: [`FluvioConfig`] holds them resolved; [`FluvioStoragePortBuilder`] sets them,
//! and its docs list each environment fallback and default.
//!
//! Build the port with [`FluvioStoragePortBuilder::build`], then hand it to
//! `PhotonBuilder::storage_port`:
//!
//! ```no_run
//! # async fn run() -> photon_core::Result<()> {
//! // `photon::PhotonBuilder` (the facade's re-export) is this same builder.
//! use photon_backend_fluvio::FluvioStoragePortBuilder;
//! use photon_runtime::PhotonBuilder;
//!
//! let photon = PhotonBuilder::new()
//!     .storage_port(FluvioStoragePortBuilder::new().build().await?)
//!     .build()?;
//! # let _ = photon; Ok(()) }
//! ```
//!
//! How the numbers in Photon's benchmarks are produced (and compared with the raw `fluvio`
//! client): `photon-bench/PERFORMANCE_STUDY.md`.
//!
//! # Topic mapping (Fluvio)
//!
//! - A Photon topic `t` is the Fluvio topic `photon-t` with one shard, and
//!   `photon-s-{shard}-t` with [`TOPIC_SHARDS_ENV`] above 1 (only hyphens; names that
//!   Fluvio cannot hold as-is get a readable stem and a stable hash, see
//!   [`stream_shard`] and the rules below). The prefix comes from [`PREFIX_ENV`].
//! - Checkpoints live in `photon-checkpoints` (keyed commits, highest seq wins), with
//!   snapshots in `photon-checkpoints-snapshot` so loading stays short without compaction.
//! - Replay: with [`ReplayCursor::StreamSeq`] a seq is the produce offset + 1 (with `n`
//!   shards, `(offset + 1) × n + shard`), so any seq maps back to an offset;
//!   [`ReplayCursor::TailOnly`] starts every subscription at `Offset::end()`.
//!
//! Name rules: Fluvio allows `[a-z0-9-]`, 63 characters, no `-` at either end. A Photon
//! topic is used as-is when it fits those rules, has no `--`, and does not start with `s-`
//! or `checkpoints`; otherwise it becomes `{stem}--{fnv1a hex}`. `a.b`, `a-b` and `a_b`
//! are three Fluvio topics, and each record carries its exact Photon topic, checked on read.
//!
//! # Entry points
//!
//! - [`FluvioStoragePortBuilder`] → [`FluvioStoragePort`] (a `photon_core::StoragePort`).
//! - [`durable_consumer_name`] and [`consumer_group_for`]: the Fluvio ids of durable
//!   subscriptions and groups.
//! - [`fluvio_endpoint_from_env`]: the endpoint tests and tools connect to.

mod checkpoint;
mod codec;
mod config;
mod consumer;
mod fetch;
mod port;
mod publish;
mod retention;
pub mod stream_shard;
mod topic;

pub use config::{
    fluvio_endpoint_from_env, FluvioConfig, FluvioStoragePortBuilder, ReplayCursor, ENDPOINT_ENV,
    MAX_INFLIGHT_ENV, PREFIX_ENV, REPLAY_CURSOR_ENV, REPLICAS_ENV, RETENTION_ENV, SYNC_ACK_ENV,
};
pub use port::FluvioStoragePort;
pub use stream_shard::TOPIC_SHARDS_ENV;
pub use topic::{consumer_group_for, durable_consumer_name};
