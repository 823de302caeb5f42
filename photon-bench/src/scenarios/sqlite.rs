//! The SQLite port beside raw rusqlite batched inserts, on fresh files in the temp dir.
//!
//! The raw side does the same work without Photon: the same JSON payloads into one table
//! keyed by `(topic, seq)` in WAL mode with the same `synchronous` setting as the port, in
//! transactions of 4,096 rows from one thread (its ceiling: no per-publish
//! acknowledgement), read back by a second connection in pages of 512.
//!
//! For the `publish_batch` row the raw side commits a transaction per 64 rows (the size of
//! Photon's batches there), from one thread.
//!
//! Both settings are measured: `sqlite` rows use `synchronous=FULL` (the port's default:
//! no acknowledged publish lost on power loss), `sqlite-normal` rows use `NORMAL`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use photon_backend_sqlite::{SqliteStoragePort, Synchronous};
use photon_core::{PhotonError, Result};
use rusqlite::{params, Connection};

use super::photon_side::BATCH_EVENTS;
use super::{compare, PhotonSide, RawClient};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};
use crate::report::AdapterFigures;

const RAW_BATCH: usize = 4096;
const RAW_PAGE: i64 = 512;

/// Runs the sqlite scenario: rows `sqlite`, then `sqlite-normal`.
///
/// # Errors
/// The port's or rusqlite's errors (for example an unwritable temp dir).
pub async fn run(options: &BenchOptions) -> Result<AdapterFigures> {
    let mut figures = run_with(options, Synchronous::Full, "sqlite").await?;
    let normal = run_with(options, Synchronous::Normal, "sqlite-normal").await?;
    figures.throughput.extend(normal.throughput);
    figures.latency.extend(normal.latency);
    Ok(figures)
}

/// Both sides with one `synchronous` setting, each on a fresh file.
async fn run_with(
    options: &BenchOptions,
    synchronous: Synchronous,
    label: &str,
) -> Result<AdapterFigures> {
    let directory = ScratchDir::new()?;
    let port = SqliteStoragePort::builder()
        .path(directory.file("photon.db"))
        .synchronous(synchronous)
        .build()
        .await?;
    let photon = PhotonSide::new(Arc::new(port), "bench")?;
    let raw = RawSqlite {
        path: directory.file("raw.db"),
        synchronous: match synchronous {
            Synchronous::Normal => "NORMAL",
            _ => "FULL",
        },
    };
    compare(label, &photon, &raw, options).await
}

/// rusqlite on its own file, with the port's `synchronous` setting.
struct RawSqlite {
    path: PathBuf,
    synchronous: &'static str,
}

impl RawSqlite {
    /// Runs `work` on a blocking thread with the file's path and setting.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Path, &str) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (path, synchronous) = (self.path.clone(), self.synchronous);
        tokio::task::spawn_blocking(move || work(&path, synchronous))
            .await
            .map_err(|e| PhotonError::InvalidInput(format!("raw sqlite task: {e}")))?
    }
}

impl RawClient for RawSqlite {
    async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let options = *options;
        self.blocking(move |path, synchronous| {
            insert_all(
                &mut open(path, synchronous)?,
                &options,
                &format!("publish{round}"),
            )
        })
        .await
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let options = *options;
        self.blocking(move |path, synchronous| {
            raw_end_to_end(path, &options, synchronous, round, RAW_BATCH)
        })
        .await
    }

    async fn end_to_end_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let options = *options;
        self.blocking(move |path, synchronous| {
            raw_end_to_end(path, &options, synchronous, round, BATCH_EVENTS)
        })
        .await
    }

    fn batches(&self) -> bool {
        true
    }

    async fn publish_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let options = *options;
        self.blocking(move |path, synchronous| {
            insert_in_transactions_of(
                &mut open(path, synchronous)?,
                &options,
                &format!("batch{round}"),
                BATCH_EVENTS,
            )
        })
        .await
    }

    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        let options = *options;
        self.blocking(move |path, synchronous| raw_latency(path, &options, synchronous, round))
            .await
    }
}

/// A directory removed when dropped.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(crate) fn new() -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "photon-bench-sqlite-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).map_err(|e| {
            PhotonError::InvalidInput(format!("cannot create {}: {e}", path.display()))
        })?;
        Ok(Self(path))
    }

    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sqlite(err: rusqlite::Error) -> PhotonError {
    PhotonError::InvalidInput(format!("raw rusqlite: {err}"))
}

fn open(path: &Path, synchronous: &str) -> Result<Connection> {
    let connection = Connection::open(path).map_err(sqlite)?;
    connection
        .execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
             CREATE TABLE IF NOT EXISTS events (topic TEXT NOT NULL, seq INTEGER NOT NULL, \
               topic_key TEXT, body TEXT NOT NULL, PRIMARY KEY (topic, seq));"
        ))
        .map_err(sqlite)?;
    connection
        .busy_timeout(Duration::from_secs(5))
        .map_err(sqlite)?;
    Ok(connection)
}

/// Inserts every event (encoding its payload as it goes, as Photon does) in transactions
/// of [`RAW_BATCH`] rows; returns events per second.
fn insert_all(connection: &mut Connection, options: &BenchOptions, topic: &str) -> Result<f64> {
    insert_in_transactions_of(connection, options, topic, RAW_BATCH)
}

/// Inserts every event in transactions of `rows` rows; returns events per second.
fn insert_in_transactions_of(
    connection: &mut Connection,
    options: &BenchOptions,
    topic: &str,
    rows: usize,
) -> Result<f64> {
    let started = Instant::now();
    let mut next = 0;
    while next < options.events {
        let end = (next + rows).min(options.events);
        let transaction = connection.transaction().map_err(sqlite)?;
        {
            let mut insert = transaction
                .prepare_cached(
                    "INSERT INTO events (topic, seq, topic_key, body) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sqlite)?;
            for i in next..end {
                let body = options.payload(i).to_string();
                insert
                    .execute(params![topic, i as i64 + 1, format!("k{}", i % 64), body])
                    .map_err(sqlite)?;
            }
        }
        transaction.commit().map_err(sqlite)?;
        next = end;
    }
    Ok(per_second(options.events, started.elapsed()))
}

/// One thread inserts in transactions of `rows` rows while another reads pages until it
/// has every event.
fn raw_end_to_end(
    path: &Path,
    options: &BenchOptions,
    synchronous: &str,
    round: usize,
    rows: usize,
) -> Result<f64> {
    let mut writer = open(path, synchronous)?;
    let reader = open(path, synchronous)?;
    let topic = format!("e2e{rows}-{round}");
    let started = Instant::now();
    let options_copy = *options;
    let inserting = {
        let topic = topic.clone();
        std::thread::spawn(move || {
            insert_in_transactions_of(&mut writer, &options_copy, &topic, rows)
        })
    };
    let mut after = 0_i64;
    let mut received = 0;
    let mut page = reader
        .prepare("SELECT seq, body FROM events WHERE topic = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")
        .map_err(sqlite)?;
    while received < options.events {
        let rows: Vec<(i64, String)> = page
            .query_map(params![topic, after, RAW_PAGE], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .map_err(sqlite)?
            .collect::<rusqlite::Result<_>>()
            .map_err(sqlite)?;
        match rows.last() {
            Some((seq, _)) => {
                after = *seq;
                received += rows.len();
            }
            None => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    let elapsed = started.elapsed();
    inserting
        .join()
        .map_err(|_| PhotonError::InvalidInput("raw insert thread panicked".into()))??;
    Ok(per_second(options.events, elapsed))
}

/// One insert transaction, then a read of that row by a second connection.
fn raw_latency(
    path: &Path,
    options: &BenchOptions,
    synchronous: &str,
    round: usize,
) -> Result<Latencies> {
    let writer = open(path, synchronous)?;
    let reader = open(path, synchronous)?;
    let topic = format!("latency{round}");
    let mut latencies = Latencies::default();
    for i in 0..options.latency_share(round) {
        let started = Instant::now();
        let seq = i as i64 + 1;
        writer
            .prepare_cached(
                "INSERT INTO events (topic, seq, topic_key, body) VALUES (?1, ?2, NULL, ?3)",
            )
            .and_then(|mut s| s.execute(params![topic, seq, options.payload(i).to_string()]))
            .map_err(sqlite)?;
        let _: String = reader
            .prepare_cached("SELECT body FROM events WHERE topic = ?1 AND seq = ?2")
            .and_then(|mut s| s.query_row(params![topic, seq], |row| row.get(0)))
            .map_err(sqlite)?;
        latencies.record_since(started);
    }
    Ok(latencies)
}
