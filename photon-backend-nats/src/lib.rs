//! Photon storage port on NATS JetStream (`async-nats`).
//!
//! ```no_run
//! # async fn demo() -> photon_core::Result<()> {
//! use photon_backend_nats::NatsStoragePortBuilder;
//! let port = NatsStoragePortBuilder::new()
//!     .url("nats://127.0.0.1:4222")
//!     .prefix("shop")
//!     .build()
//!     .await?;
//! assert_eq!(port.telemetry_label(), "nats");
//! # Ok(()) }
//! ```
//!
//! How Photon maps onto JetStream:
//! - **Connecting** keeps trying while no server answers, for `connect_timeout`
//!   ([`CONNECT_TIMEOUT_ENV`], default 30 s), then fails with `Unavailable`
//!   naming the address. Refused credentials or TLS fail at once.
//! - **Streams**: one per topic (and shard), created on first append or subscribe, named
//!   `<prefix>_<topic-token>_<shard>`; retention (max age, max bytes) and replicas come
//!   from [`NatsConfig`] (settings, variables and defaults: [`NatsStoragePortBuilder`]). Dead-letter topics (`*.dlq`) get no age or size limit unless
//!   [`RETENTION_DEAD_LETTERS_ENV`] is `true`. Each stream records the shard
//!   count it was made with; a port configured with another count gets
//!   `PhotonError::Config` naming both (for that topic) instead of misreading seqs. A
//!   changed prefix is not detected: it names other streams, so the port simply starts
//!   on new, empty streams.
//! - **Removed events**: a subscription whose next event was removed by the stream's
//!   limits or `truncate_before` gets one `PhotonError::Gap` naming the removed seqs, then
//!   continues at the first kept one.
//! - **Subjects** carry topic, shard and key (`photon.<prefix>.ev.<topic>.<shard>.<key>`), so
//!   a key subscription is a server-side `filter_subject`. The topic token keeps
//!   `[a-z0-9-]` and writes `.` as `_d` and `_` as `_u` (reversible: `a.b`, `a-b` and `a_b`
//!   stay three topics); the key token is `k` + base64url of the key, the unkeyed partition
//!   is `n`. A key's shard is a stable FNV-1a hash of the key modulo the shard count.
//! - **Appends** are pipelined JetStream publishes (up to `max_in_flight` awaiting their
//!   ack), deduplicated by `Nats-Msg-Id = envelope_id`.
//! - **Event headers** travel in the message payload with actor and payload (Photon's wire
//!   form), sealed with them when a transport key is set. A plaintext event's headers are
//!   also set as NATS message headers for NATS tools, except those named `Nats-*` (the
//!   server's own); Photon reads them back from the payload only. A sealed event sets no NATS header but `Nats-Msg-Id`.
//! - **seq** is the stream sequence; with `N > 1` shards it is `stream_seq × N + shard`,
//!   still strictly increasing per key. `StartAt::AfterSeq(s)` means "seq > s" under that
//!   encoding, decoded per shard. **event_id** is `<stream>:<stream_seq>`.
//! - **Checkpoints** are kept in a compare-and-set key-value stream, one subject per
//!   checkpoint and shard; `load_checkpoint` returns the lowest shard position (0 when a
//!   shard has none), so resuming after it skips nothing and may repeat events, and durable
//!   subscriptions resume each shard from its own position; a shard without one starts at
//!   its beginning.
//! - **Consumer groups** run the lease protocol of `photon_core::group`: member heartbeats
//!   and partition leases live in the stream `<prefix>_groups` (one subject per member
//!   incarnation and per partition, compare-and-set writes), each partition's checkpoint in
//!   its lease record, so a commit is fenced by the same compare-and-set. Expiries use the
//!   server's message timestamps, not the hosts' clocks. A partition is a shard with
//!   several shards, a key-hash bucket (`GroupOptions::partitions`) with one. Members read
//!   the topic at full speed with ordinary subscriptions and keep their partitions' events;
//!   a killed member's partitions are taken over once its lease expires (lease + one
//!   heartbeat), a member that leaves hands them over at once.
//!
//! Delivery is at least once; after a crash a durable subscription repeats at most the
//! events acknowledged within one checkpoint flush window.

mod catalog;
mod checkpoint;
mod codec;
mod config;
mod consumer;
mod env;
mod error;
mod group;
mod port;
mod publish;
mod query;
mod retention;
mod topic;

pub use config::{
    NatsConfig, NatsStoragePortBuilder, ReplayCursor, ServerUrls, StreamPrefix, TlsConfig,
    TlsConfigBuilder, CONNECT_TIMEOUT_ENV, CREDENTIALS_FILE_ENV, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_URL, MAX_IN_FLIGHT_ENV, PREFIX_ENV, REPLAY_CURSOR_ENV, REPLICAS_ENV,
    RETENTION_DEAD_LETTERS_ENV, RETENTION_MAX_AGE_ENV, RETENTION_MAX_BYTES_ENV, SHARDS_ENV,
    SYNC_ACK_ENV, TLS_CA_FILE_ENV, TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV, TLS_REQUIRED_ENV, URL_ENV,
};
#[allow(deprecated)]
pub use config::{
    PHOTON_NATS_CONNECT_TIMEOUT, PHOTON_NATS_CREDENTIALS_FILE, PHOTON_NATS_MAX_AGE,
    PHOTON_NATS_MAX_BYTES, PHOTON_NATS_MAX_IN_FLIGHT, PHOTON_NATS_PREFIX,
    PHOTON_NATS_REPLAY_CURSOR, PHOTON_NATS_REPLICAS, PHOTON_NATS_RETENTION_DEAD_LETTERS,
    PHOTON_NATS_RETENTION_MAX_AGE, PHOTON_NATS_RETENTION_MAX_BYTES, PHOTON_NATS_SHARDS,
    PHOTON_NATS_STREAM_PREFIX, PHOTON_NATS_STREAM_SHARDS, PHOTON_NATS_SYNC_ACK,
    PHOTON_NATS_TLS_CA_FILE, PHOTON_NATS_TLS_CERT_FILE, PHOTON_NATS_TLS_KEY_FILE,
    PHOTON_NATS_TLS_REQUIRED, PHOTON_NATS_URL,
};
pub use port::NatsStoragePort;
