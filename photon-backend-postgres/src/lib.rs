//! Photon's PostgreSQL storage port: durable events in one schema of a PostgreSQL
//! database, shared by any number of processes.
//!
//! ```no_run
//! # async fn demo() -> photon_core::Result<()> {
//! use std::sync::Arc;
//! use photon_backend_postgres::PostgresStoragePort;
//! use photon_core::{EventStore, TransportCrypto};
//!
//! let port = PostgresStoragePort::builder()
//!     .url("postgres://app@127.0.0.1:5432/app")
//!     .build()
//!     .await?;
//! let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
//! store.publish("orders", Some("o-1"), serde_json::json!("alice"), serde_json::json!({"n": 1})).await?;
//! # Ok(()) }
//! ```
//!
//! - **Writes**: a writer task per topic group-commits whatever appends to it are waiting
//!   (up to `max_batch`) in one transaction, and one more task the checkpoint commits;
//!   each `append` returns after its commit. Seq is per topic, starting at 1, without
//!   gaps, assigned under the topic row's lock, so processes appending to one topic take
//!   turns. An open transaction holding a topic's row (after [`publish_in_tx`]) holds up
//!   the appends to that topic only. An event id already stored is not stored again.
//! - **Lock waits** are bounded: every session of the port runs with `lock_timeout`
//!   (default 5 s, [`PostgresStoragePortBuilder::lock_timeout`]); an operation that waits
//!   longer for a lock another transaction holds fails with a retryable
//!   [`PhotonError::Unavailable`](photon_core::PhotonError::Unavailable) naming the cause,
//!   instead of hanging. No transaction of the port locks a topic row before a checkpoint
//!   row: transactional handlers lock the checkpoint first, the writer never both.
//! - **Reads**: on pooled connections; replay streams in pages of `page_size` records.
//! - **Live tail**: every append transaction sends `NOTIFY` with its topics, delivered on
//!   commit; each port listens on a connection of its own and wakes its subscribers, in
//!   every process. Subscribers also read again every `recheck_interval` (default 5 s),
//!   which only matters when a notification was lost with the listening connection.
//! - **Durability**: an acknowledged append is committed. With PostgreSQL's default
//!   `synchronous_commit = on` the commit is flushed to the server's WAL before the
//!   acknowledgement, so it survives a crash of the server or a power loss; with
//!   `synchronous_commit = off` on the server (or the role, or the database) a crash of the
//!   server may lose the last acknowledged transactions.
//! - **Checkpoints** never regress (`greatest` on write). **Retention**: `truncate_before`,
//!   plus an optional sweep by age and by count per topic which never deletes above a
//!   topic's lowest checkpoint (see [`PostgresStoragePortBuilder`]).
//! - **Consumer groups** span every process using the schema: partition leases with epochs
//!   and fenced per-partition checkpoints in the `group_members` and `group_partitions`
//!   tables (the protocol of `photon_core::group`); expiries on the database server's
//!   clock.
//! - **Schema**: created on open when missing (`CREATE ... IF NOT EXISTS`, serialized
//!   between processes by an advisory lock).
//! - **Transactions**: a transactional handler writes through the port's transaction and
//!   the subscription's checkpoint advance commits in that same transaction (the only
//!   writer of that checkpoint), so its effects in this database are applied exactly
//!   once; the outbox, `publish_in_tx`, appends inside the caller's own transaction,
//!   visible (and notified) exactly when the caller commits. Anything a handler does
//!   outside the database stays at-least-once. A handler may publish through its
//!   transaction ([`PostgresTransaction::publish`]: exactly once with the checkpoint, gone
//!   with a rollback) or with `Photon::publish` (an independent append, committed when it
//!   returns, which survives a rollback of the handler: at-least-once); see
//!   [`PostgresTransaction`].
//!
//! Configuration: [`PostgresStoragePortBuilder`] (its docs list every setting, variable
//! and default), falling back to the `PHOTON_POSTGRES_*` variables in Photon's one
//! dialect (`photon_core::config`), then to defaults; or a deserialized
//! [`PostgresConfig`].
//!
//! - **Connections**: each port has a page-read pool (`pool_size`), a writer pool
//!   (`writer_connections`), two connections for consumer-group coordination and one
//!   listening connection (with TCP keepalive), so that no kind of work starves another.
//! - **TLS** (feature `tls`, on by default): rustls, configured by the connection string's
//!   `sslmode` (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`, as libpq),
//!   `sslrootcert` (a PEM file, or `system` for the platform's store, the default roots),
//!   `sslcert` and `sslkey` (a client certificate); every connection of the port uses it.
//!   See [`URL_ENV`].

mod catalog;
mod checkpoint;
mod config;
mod connection;
mod consumer;
mod env;
mod error;
mod gap;
mod group;
mod lanes;
mod listen;
mod page;
mod port;
mod publish;
mod query;
mod retention;
mod row;
mod schema;
mod ssl;
#[cfg(feature = "tls")]
mod tls;
mod topic;
mod transaction;
mod writer;

pub use config::{
    PostgresConfig, PostgresStoragePortBuilder, CONNECT_TIMEOUT_ENV, LOCK_TIMEOUT_ENV,
    MAX_BATCH_ENV, MAX_PAYLOAD_BYTES_ENV, PAGE_SIZE_ENV, POOL_SIZE_ENV, RECHECK_INTERVAL_ENV,
    RETENTION_DEAD_LETTERS_ENV, RETENTION_INTERVAL_ENV, RETENTION_MAX_AGE_ENV,
    RETENTION_MAX_EVENTS_ENV, SCHEMA_ENV, URL_ENV, WRITER_CONNECTIONS_ENV,
};
#[allow(deprecated)]
pub use config::{
    PHOTON_POSTGRES_CONNECT_TIMEOUT, PHOTON_POSTGRES_LOCK_TIMEOUT, PHOTON_POSTGRES_MAX_BATCH,
    PHOTON_POSTGRES_MAX_PAYLOAD_BYTES, PHOTON_POSTGRES_PAGE_SIZE, PHOTON_POSTGRES_POOL_SIZE,
    PHOTON_POSTGRES_RECHECK_INTERVAL, PHOTON_POSTGRES_RETENTION_DEAD_LETTERS,
    PHOTON_POSTGRES_RETENTION_INTERVAL, PHOTON_POSTGRES_RETENTION_MAX_AGE,
    PHOTON_POSTGRES_RETENTION_MAX_EVENTS, PHOTON_POSTGRES_SCHEMA, PHOTON_POSTGRES_URL,
    PHOTON_POSTGRES_WRITER_CONNECTIONS,
};
pub use env::{ConnectionString, LockTimeout, SchemaName};
pub use port::PostgresStoragePort;
/// The PostgreSQL driver whose transactions transactional handlers and [`publish_in_tx`]
/// take.
pub use tokio_postgres;
pub use transaction::{
    publish_in_tx, transactional_handler, DeclaredTransactionalFn, PostgresTransaction,
    TransactionalHandler,
};
