//! Connections and the schema: WAL mode, busy timeout, tables and indexes.
//!
//! - `topics` assigns each topic name a small id and holds its last seq (seq is per topic,
//!   starting at 1, assigned under the write lock in the appending transaction).
//! - `events` holds one row per record; `(topic_id, seq)` is its key and `event_id` is
//!   unique. There is no per-key index (see `page.rs` for why and how keyed reads work).
//! - `checkpoints` holds one seq per subscription, topic and key scope.

use rusqlite::{Connection, OpenFlags};

use crate::config::SqliteConfig;
use crate::error::sqlite_error;
use photon_core::Result;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS topics (
    topic_id INTEGER PRIMARY KEY,
    name     TEXT NOT NULL UNIQUE,
    last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    topic_id    INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    event_id    TEXT NOT NULL,
    envelope_id TEXT,
    topic_key   TEXT,
    created_at  INTEGER NOT NULL,
    body        TEXT NOT NULL,
    extra       TEXT,
    PRIMARY KEY (topic_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_id ON events (event_id);
CREATE TABLE IF NOT EXISTS checkpoints (
    subscription TEXT NOT NULL,
    topic        TEXT NOT NULL,
    keyed        INTEGER NOT NULL,
    topic_key    TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    PRIMARY KEY (subscription, topic, keyed, topic_key)
) WITHOUT ROWID;
";

/// Opens the writer connection: WAL, the configured `synchronous`, and the schema.
pub(crate) fn open_writer(config: &SqliteConfig) -> Result<Connection> {
    let what = "open the database for writing";
    let connection = Connection::open(&config.path).map_err(|e| sqlite_error(what, e))?;
    connection
        .busy_timeout(config.busy_timeout)
        .map_err(|e| sqlite_error(what, e))?;
    let mode: String = connection
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(|e| sqlite_error("switch to WAL mode", e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(photon_core::PhotonError::Storage {
            backend: crate::port::LABEL,
            message: format!(
                "{} refused WAL mode (journal_mode is {mode})",
                config.path.display()
            ),
            source: None,
        });
    }
    // A checkpoint every 8192 pages (32 MiB of WAL) rather than SQLite's 1000: pages
    // rewritten by consecutive commits (the tail of each b-tree) are copied back once.
    let pragmas = format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY; \
         PRAGMA wal_autocheckpoint = 8192;",
        config.synchronous.pragma()
    );
    connection
        .execute_batch(&pragmas)
        .map_err(|e| sqlite_error("configure the writer connection", e))?;
    connection
        .execute_batch(SCHEMA)
        .map_err(|e| sqlite_error("create the schema", e))?;
    connection.set_prepared_statement_cache_capacity(64);
    Ok(connection)
}

/// Opens a read connection (the writer created the file and schema before).
pub(crate) fn open_reader(config: &SqliteConfig) -> Result<Connection> {
    let what = "open a read connection";
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let connection =
        Connection::open_with_flags(&config.path, flags).map_err(|e| sqlite_error(what, e))?;
    connection
        .busy_timeout(config.busy_timeout)
        .map_err(|e| sqlite_error(what, e))?;
    connection
        .execute_batch("PRAGMA query_only = ON;")
        .map_err(|e| sqlite_error(what, e))?;
    connection.set_prepared_statement_cache_capacity(32);
    Ok(connection)
}
