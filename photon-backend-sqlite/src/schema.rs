//! Connections and the schema: WAL mode, busy timeout, tables and indexes.
//!
//! - `topics` assigns each topic name a small id and holds its last seq (seq is per topic,
//!   starting at 1, assigned under the write lock in the appending transaction).
//! - `events` holds one row per record; `(topic_id, seq)` is its key and `event_id` is
//!   unique. There is no per-key index (see `page.rs` for why and how keyed reads work).
//! - `checkpoints` holds one seq per subscription, topic and key scope.

use rusqlite::{Connection, OpenFlags};

use std::time::{Duration, Instant};

use crate::config::SqliteConfig;
use crate::error::{is_busy, sqlite_error};
use photon_core::{PhotonError, Result};

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
CREATE TABLE IF NOT EXISTS dead_letter_topics (
    name TEXT PRIMARY KEY
) WITHOUT ROWID;
";

/// Opens the writer connection: WAL, the configured `synchronous`, and the schema.
///
/// Another process opening the same new file at the same moment can make SQLite return
/// `SQLITE_BUSY` from the switch to WAL (or the schema) without calling the busy handler;
/// the whole setup is then tried again, with a short growing pause, until `busy_timeout`
/// has passed since the first attempt.
pub(crate) fn open_writer(config: &SqliteConfig) -> Result<Connection> {
    let deadline = Instant::now() + config.busy_timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match try_open_writer(config) {
            Err(Setup::Busy(error)) if Instant::now() < deadline => {
                tracing::debug!(%error, "sqlite database busy while opening; retrying");
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(Setup::Busy(error) | Setup::Failed(error)) => return Err(error),
            Ok(connection) => return Ok(connection),
        }
    }
}

/// Why one attempt at opening the writer failed.
enum Setup {
    /// Another connection held a lock: trying again may succeed.
    Busy(PhotonError),
    /// Anything else.
    Failed(PhotonError),
}

fn step(what: &str) -> impl Fn(rusqlite::Error) -> Setup + '_ {
    move |error| {
        if is_busy(&error) {
            Setup::Busy(sqlite_error(what, error))
        } else {
            Setup::Failed(sqlite_error(what, error))
        }
    }
}

fn try_open_writer(config: &SqliteConfig) -> std::result::Result<Connection, Setup> {
    let what = "open the database for writing";
    let connection = Connection::open(&config.path).map_err(step(what))?;
    connection
        .busy_timeout(config.busy_timeout)
        .map_err(step(what))?;
    let mode: String = connection
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(step("switch to WAL mode"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Setup::Failed(PhotonError::Storage {
            backend: crate::error::LABEL,
            message: format!(
                "{} refused WAL mode (journal_mode is {mode})",
                config.path.display()
            ),
            source: None,
        }));
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
        .map_err(step("configure the writer connection"))?;
    connection
        .execute_batch(SCHEMA)
        .map_err(step("create the schema"))?;
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
