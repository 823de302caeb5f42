//! Photon's SQLite storage port: durable events in one file, shareable by processes.
//!
//! ```no_run
//! # async fn demo() -> photon_core::Result<()> {
//! use std::sync::Arc;
//! use photon_backend_sqlite::SqliteStoragePort;
//! use photon_core::{EventStore, TransportCrypto};
//!
//! let port = SqliteStoragePort::builder().path("events.db").build().await?;
//! let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
//! store.publish("orders", Some("o-1"), serde_json::json!("alice"), serde_json::json!({"n": 1})).await?;
//! # Ok(()) }
//! ```
//!
//! - **Writes**: a dedicated writer thread owns the only write connection and
//!   group-commits whatever appends and checkpoint commits are waiting (up to `max_batch`)
//!   in one transaction; each `append` returns after its commit. Seq is per topic, starting
//!   at 1, assigned inside that transaction.
//! - **Reads**: on tokio's blocking pool over pooled read connections (WAL lets them run
//!   beside the writer). Replay streams in pages of `page_size` records.
//! - **Live tail**: this port's commits wake its subscribers at once; appends of another
//!   process reach them within `poll_interval`.
//! - **Durability** ([`Synchronous`]): the default `full` syncs the WAL at every commit
//!   before `append` returns, so nothing acknowledged is lost, even on power loss or an OS
//!   crash. `normal` (opt-in: `PHOTON_SQLITE_SYNCHRONOUS=normal`) syncs only at WAL
//!   checkpoints: a killed process still loses nothing acknowledged, but a power loss or OS
//!   crash may lose the transactions committed since the last checkpoint.
//! - **Checkpoints** never regress (`max` on write). **Retention**: `truncate_before`, plus an
//!   optional sweep by age and by count per topic; dead-letter topics (`*.dlq`) are swept
//!   only with [`RETENTION_DEAD_LETTERS_ENV`]. Retention does not wait for
//!   checkpoints: a subscription whose next seq was deleted gets one `PhotonError::Gap`
//!   naming the deleted seqs, then continues at the first kept one.
//! - **Opening** a new file from several processes at once waits (within `busy_timeout`)
//!   for the others' switch to WAL and schema creation instead of failing.
//! - **Transactions** ([`SqliteStoragePort::transaction`]): a closure run in one
//!   `BEGIN IMMEDIATE` transaction on the writer's connection, on the writer thread.
//!   [`SqliteTransaction::publish`] appends an event in it (the transactional outbox:
//!   visible exactly when it commits, this port's subscribers woken by the commit; a
//!   rollback stores nothing and uses no seq); [`publish_in_tx`] does the same in a
//!   transaction on a connection of the caller's (subscribers see it at their next poll).
//! - **Transactional handlers** (`photon_core::TransactionalPort`, handler type
//!   [`TransactionalHandler`]): the handler's writes through the transaction and the
//!   checkpoint advance (or a dead letter and the advance) commit together, so the
//!   handler's effects in this file are exactly-once: never applied twice, never skipped,
//!   across crashes, retries and a second consumer of the subscription (each transaction
//!   reads the checkpoint under the write lock first). Effects outside the file stay
//!   at-least-once.
//! - **Consumer groups** span every process that opens the file: partition leases with
//!   epochs and fenced per-partition checkpoints in the `group_members` and
//!   `group_partitions` tables (the protocol of `photon_core::group`); expiries on the
//!   host's clock.
//!
//! Configuration: [`SqliteStoragePortBuilder`] (its docs list every setting, variable and
//! default), falling back to the `PHOTON_SQLITE_*` variables in Photon's one dialect
//! (`photon_core::config`), then to defaults; or a deserialized [`SqliteConfig`].

mod catalog;
mod checkpoint;
mod config;
mod consumer;
mod env;
mod error;
mod gap;
mod group;
mod page;
mod port;
mod publish;
mod query;
mod reader;
mod retention;
mod row;
mod schema;
mod topic;
mod transaction;
mod writer;

pub use config::{
    SqliteConfig, SqliteStoragePortBuilder, Synchronous, BUSY_TIMEOUT_ENV, GROUP_COMMIT_WAIT_ENV,
    MAX_BATCH_ENV, MAX_PAYLOAD_BYTES_ENV, PAGE_SIZE_ENV, PATH_ENV, POLL_INTERVAL_ENV, READERS_ENV,
    RETENTION_DEAD_LETTERS_ENV, RETENTION_INTERVAL_ENV, RETENTION_MAX_AGE_ENV,
    RETENTION_MAX_EVENTS_ENV, SYNCHRONOUS_ENV,
};
#[allow(deprecated)]
pub use config::{
    PHOTON_SQLITE_BUSY_TIMEOUT, PHOTON_SQLITE_BUSY_TIMEOUT_MS, PHOTON_SQLITE_GROUP_COMMIT_WAIT,
    PHOTON_SQLITE_GROUP_COMMIT_WAIT_US, PHOTON_SQLITE_MAX_BATCH, PHOTON_SQLITE_MAX_PAYLOAD_BYTES,
    PHOTON_SQLITE_PAGE_SIZE, PHOTON_SQLITE_PATH, PHOTON_SQLITE_POLL_INTERVAL,
    PHOTON_SQLITE_POLL_INTERVAL_MS, PHOTON_SQLITE_READERS, PHOTON_SQLITE_RETENTION_DEAD_LETTERS,
    PHOTON_SQLITE_RETENTION_INTERVAL, PHOTON_SQLITE_RETENTION_INTERVAL_MS,
    PHOTON_SQLITE_RETENTION_MAX_AGE, PHOTON_SQLITE_RETENTION_MAX_AGE_SECS,
    PHOTON_SQLITE_RETENTION_MAX_EVENTS, PHOTON_SQLITE_SYNCHRONOUS,
};
pub use error::sqlite_error;
pub use port::SqliteStoragePort;
pub use transaction::{
    publish_in_tx, transactional_handler, DeclaredTransactionalFn, SqliteTransaction,
    TransactionalHandler,
};

/// The `rusqlite` this port is built on, so that transactional handlers and callers of
/// [`publish_in_tx`] name the same version.
pub use rusqlite;
