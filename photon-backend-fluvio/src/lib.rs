//! Fluvio StoragePort for distributed Photon delivery.
//!
//! Puts Photon topics and checkpoints on a Fluvio cluster behind the shared storage
//! contract: keyed partitions keep their order, durable subscriptions resume from
//! checkpoints stored in Fluvio, and a topic can be spread over several Fluvio topics
//! (shards). Consumer groups span processes and hosts: `subscribe_group` and
//! `group_coordination` run Photon's group protocol over a command log on the cluster
//! (see [Consumer groups](#consumer-groups-fluvio)). Turn it on with the `fluvio` feature of
//! the `photon` facade.
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
//!   `photon-s-{shard}-t` with [`SHARDS_ENV`] (or [`TOPIC_SHARDS_ENV`]) above 1 (only
//!   hyphens; names that Fluvio cannot hold as-is get a readable stem and a stable hash,
//!   see [`stream_shard`] and the rules below). The prefix comes from [`PREFIX_ENV`].
//! - Checkpoints live in `photon-checkpoints` (keyed commits, highest seq wins), with
//!   snapshots in parts in `photon-checkpoints-snapshot`, so that loading reads about
//!   twice the live checkpoints at most, however many commits were made.
//! - Replay: with [`ReplayCursor::StreamSeq`] a seq is the produce offset + 1 (with `n`
//!   shards, `(offset + 1) × n + shard`), so any seq maps back to an offset;
//!   [`ReplayCursor::TailOnly`] starts every subscription at `Offset::end()`.
//! - Layout: the first port to use a topic records its prefix and shard count in
//!   [`LAYOUTS_TOPIC`]; a port with another shard count (or a prefix whose names reach
//!   that layout's Fluvio topics) gets `PhotonError::Config` naming both values, since a
//!   stored seq only means an offset under its own layout.
//! - `load_checkpoint` returns the lowest shard position of a checkpoint (0 when a shard
//!   has none): resuming every shard after it repeats events, never skips one. Durable
//!   subscriptions resume each shard from its own position.
//! - A checkpoint cannot be moved back or removed (`reset_checkpoint`, capability
//!   `checkpoint_reset`): a commit log whose reading keeps the highest seq per entry has no
//!   record that lowers one. `photon checkpoints --set`/`--reset` below the stored seq is
//!   refused with `PhotonError::Unsupported`.
//! - Topics and checkpoints are listed (capability `catalog`) from the layouts topic
//!   (every Photon topic this prefix recorded) and the checkpoint log.
//!
//! # Consumer groups (Fluvio)
//!
//! - Leases, heartbeats and partition checkpoints are decided by commands appended to the
//!   one-partition topic `{prefix}-checkpoints-groups`; every port instance replays it from
//!   its newest snapshot with one reader task and applies it with the same deterministic state
//!   machine, so all instances agree on each lease's owner and epoch. A call returns once
//!   its own command is applied; a commit under a lease that expired or moved at the
//!   command's position is refused with `PhotonError::Fenced`. A call not applied within
//!   10 s fails with `PhotonError::Unavailable` naming the topic.
//! - Expiries use the log clock (the largest writer wall-clock time seen in the log): hosts'
//!   clocks must agree well within a fifth of the lease (the members' safety margin).
//! - Partitions are key-hash buckets (`GroupOptions::partitions`), also on sharded topics.
//! - Fluvio cannot compact: the state machine is snapshotted to
//!   `{prefix}-checkpoints-groups-snapshot` every 10,000 commands (or 10 minutes of log
//!   time), the log topic is created with a retention of one day, and a new instance reads
//!   the newest snapshot and at most about 11,250 records after it, whatever the log's age.
//!   When retention removed records no snapshot covers, calls fail with
//!   `PhotonError::Unavailable` naming the topic and the offsets (never an empty state).
//!
//! # TLS
//!
//! With the `tls` feature (default) the port reaches the SC and the SPUs over TLS (rustls,
//! on the sockets of [`prompt_connector`]) when [`TLS_CA_ENV`] names a PEM file of CA
//! certificates, or [`TLS_ENV`] is on (then the system's root certificates are trusted);
//! [`TLS_CERT_ENV`] and [`TLS_KEY_ENV`] add a client certificate for clusters that require
//! one. The SC's certificate is checked against [`TLS_DOMAIN_ENV`] (default: the endpoint's
//! host, which must then be a DNS name) and each SPU's against `<spu name>.<domain>`, as
//! Fluvio's own client does: a certificate holding `<domain>` and `*.<domain>` serves a
//! cluster. The builder has the same settings ([`FluvioStoragePortBuilder::tls_ca`],
//! `tls_client_cert`, `tls_domain`, `tls`), and [`FluvioConfig::tls`] holds them resolved.
//!
//! - A TLS file that cannot be read or holds no usable PEM, a key without its certificate
//!   (or the reverse), a key of another certificate, a domain that is not a DNS name, or a
//!   TLS setting while TLS is off: `PhotonError::Config` naming the variable (or builder
//!   setting) and the file, when the port is built. Without the `tls` feature any TLS
//!   setting is refused the same way, never ignored.
//! - A failed handshake fails the connect at once with `PhotonError::Unavailable` naming
//!   the address, the name checked and the cause (`unknown issuer`, `name mismatch` with
//!   the names the certificate holds, ...); an endpoint that does not answer the handshake
//!   within 10 s (one that does not serve TLS) fails too.
//! - `prompt_tls_connector` and [`FluvioConfig::connector`] give raw `fluvio` clients the
//!   port's connector.
//! - `fluvio-run --tls` serves TLS through a proxy whose hop to the SPU delays
//!   acknowledgements: a publish-to-subscriber round trip took about 44 ms over it against
//!   2.3 ms in plain TCP (see `socket.rs`), so group leases of a
//!   second or less can miss their renewals (the default is 5 s).
//!
//! # Connections and failures
//!
//! - Each port holds two connections: one for producers, admin and checkpoints, one for
//!   the streaming consumers of subscriptions (a streaming consumer on a producer's
//!   connection slows that producer's acks down by 30x or more). Each is replaced on its
//!   own when it breaks, so a process that only consumes recovers from an SPU restart.
//! - A subscription reader failing for 10 s logs a warning; after 60 s its subscriber gets
//!   one `PhotonError::Unavailable` item per outage while the reader keeps trying.
//! - `StartAt::Tail` includes every event appended after `subscribe` returns from any
//!   port of the process: appends to the topic wait until the tail position is read.
//! - A retried append stored twice is delivered once when the copies are at most
//!   [`DEDUP_WINDOW`] records apart in their shard topic (the reader drops the second
//!   copy by its envelope id).
//!
//! Name rules: Fluvio allows `[a-z0-9-]`, 63 characters, no `-` at either end. A Photon
//! topic is used as-is when it fits those rules, has no `--`, and does not start with `s-`
//! or `checkpoints`; otherwise it becomes `{stem}--{fnv1a hex}`. `a.b`, `a-b` and `a_b`
//! are three Fluvio topics, and each record carries its exact Photon topic, checked on read.
//!
//! # Entry points
//!
//! - [`FluvioStoragePortBuilder`] → [`FluvioStoragePort`] (a `photon_core::StoragePort`).
//! - [`durable_consumer_name`] and [`consumer_group_for`]: Fluvio-safe ids of durable
//!   subscriptions and of a group on a topic.
//! - [`fluvio_endpoint_from_env`]: the endpoint tests and tools connect to.
//! - [`prompt_connector`]: the socket setup of the port's connections, for raw clients;
//!   `prompt_tls_connector` (feature `tls`) the same with TLS, and
//!   [`FluvioConfig::connector`] whichever of the two a config asks for.

mod catalog;
mod checkpoint;
mod codec;
mod config;
mod connection;
mod consumer;
mod dedup;
mod env;
mod error;
mod group;
mod group_machine;
mod group_snapshot;
mod layout;
mod port;
mod publish;
mod query;
mod retention;
mod snapshot;
mod socket;
pub mod stream_shard;
mod tail;
#[doc(hidden)]
pub mod testing;
mod tls;
mod topic;

pub use config::{
    fluvio_endpoint_from_env, FluvioConfig, FluvioStoragePortBuilder, ReplayCursor, ENDPOINT_ENV,
    MAX_INFLIGHT_ENV, PREFIX_ENV, REPLAY_CURSOR_ENV, REPLICAS_ENV, RETENTION_ENV, SYNC_ACK_ENV,
};
pub use config::{TlsConfig, TLS_CA_ENV, TLS_CERT_ENV, TLS_DOMAIN_ENV, TLS_ENV, TLS_KEY_ENV};
// The kinds of the settings table and the TLS group's builder, as every port exports them.
pub use config::{BatchSize, RetentionAge, TlsBuilder, TopicPrefix};
pub use config::{
    BATCH_SIZE_ENV, LINGER_ENV, MAX_IN_FLIGHT_ENV, RETENTION_DEAD_LETTERS_ENV,
    RETENTION_MAX_AGE_ENV, SHARDS_ENV,
};
pub use dedup::DEDUP_WINDOW;
pub use layout::LAYOUTS_TOPIC;
pub use port::FluvioStoragePort;
pub use retention::DEAD_LETTER_RETENTION;
pub use socket::prompt_connector;
#[cfg(feature = "tls")]
pub use socket::prompt_tls_connector;
pub use stream_shard::TOPIC_SHARDS_ENV;
pub use topic::{consumer_group_for, durable_consumer_name};
