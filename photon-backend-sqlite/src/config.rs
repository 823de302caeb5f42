//! Typed configuration of the SQLite port: builder call > environment variable > default.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::{Result, DEFAULT_MAX_PAYLOAD_BYTES};

use crate::env::{flag, millis, number, optional, parse, synchronous, validate};

use crate::port::SqliteStoragePort;

/// Database file. Default `photon.db` in the working directory.
pub const PHOTON_SQLITE_PATH: &str = "PHOTON_SQLITE_PATH";
/// How often a live subscriber looks for appends of other processes, in milliseconds.
/// Appends of the same port wake subscribers at once. Default 100.
pub const PHOTON_SQLITE_POLL_INTERVAL_MS: &str = "PHOTON_SQLITE_POLL_INTERVAL_MS";
/// How long a connection waits for another process's lock before failing, in
/// milliseconds. Default 5000.
pub const PHOTON_SQLITE_BUSY_TIMEOUT_MS: &str = "PHOTON_SQLITE_BUSY_TIMEOUT_MS";
/// Most writes (appends, checkpoints) committed in one transaction. Default 4096.
pub const PHOTON_SQLITE_MAX_BATCH: &str = "PHOTON_SQLITE_MAX_BATCH";
/// Longest time, in microseconds, the writer waits for more appends to commit them
/// together while concurrent publishers are active (a lone publisher never waits).
/// Default 500.
pub const PHOTON_SQLITE_GROUP_COMMIT_WAIT_US: &str = "PHOTON_SQLITE_GROUP_COMMIT_WAIT_US";
/// Records read per replay page of a subscription. Default 512.
pub const PHOTON_SQLITE_PAGE_SIZE: &str = "PHOTON_SQLITE_PAGE_SIZE";
/// `full` or `normal`: SQLite's `synchronous` setting in WAL mode. Default `full` (see
/// [`Synchronous`] for what `normal` risks).
pub const PHOTON_SQLITE_SYNCHRONOUS: &str = "PHOTON_SQLITE_SYNCHRONOUS";
/// Idle read connections kept open for queries and replay pages. Default 4.
pub const PHOTON_SQLITE_READERS: &str = "PHOTON_SQLITE_READERS";
/// Largest accepted body (encoded actor and payload), in bytes. Default 1 MiB.
pub const PHOTON_SQLITE_MAX_PAYLOAD_BYTES: &str = "PHOTON_SQLITE_MAX_PAYLOAD_BYTES";
/// Events older than this many seconds are deleted by the retention sweep. Unset: kept.
pub const PHOTON_SQLITE_RETENTION_MAX_AGE_SECS: &str = "PHOTON_SQLITE_RETENTION_MAX_AGE_SECS";
/// At most this many newest events are kept per topic by the retention sweep. Unset: all.
pub const PHOTON_SQLITE_RETENTION_MAX_EVENTS: &str = "PHOTON_SQLITE_RETENTION_MAX_EVENTS";
/// `true` to apply the retention sweep to dead-letter topics (`*.dlq`) too. Default
/// `false`: dead letters are kept until deleted explicitly (`truncate_before`).
pub const PHOTON_SQLITE_RETENTION_DEAD_LETTERS: &str = "PHOTON_SQLITE_RETENTION_DEAD_LETTERS";
/// Time between retention sweeps, in milliseconds. Default 60000.
pub const PHOTON_SQLITE_RETENTION_INTERVAL_MS: &str = "PHOTON_SQLITE_RETENTION_INTERVAL_MS";

/// SQLite's `synchronous` setting, always in WAL mode.
///
/// The default, [`Synchronous::Full`], is what makes "an acknowledged publish is never
/// lost" hold on this port. Choose [`Synchronous::Normal`] only where losing the last
/// acknowledged publishes and checkpoint commits on a power loss or OS crash is acceptable
/// (measured figures of both: `photon-bench --adapter sqlite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// The WAL is synced at every commit (one `fsync` per group-committed batch) before
    /// `append` returns: nothing acknowledged is lost, even on power loss or an OS crash.
    #[default]
    Full,
    /// The WAL is synced only when it is checkpointed into the database file. A killed
    /// process loses nothing acknowledged (the commit is in the OS page cache), but a
    /// power loss or OS crash may lose every transaction committed since the last WAL
    /// checkpoint: acknowledged publishes and checkpoint commits alike (consumers may
    /// then see those seqs again, assigned to other events). The file stays consistent.
    Normal,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

/// Configuration of a [`SqliteStoragePort`]. Build it with [`SqliteStoragePortBuilder`] or
/// [`SqliteConfig::from_env`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteConfig {
    /// Database file.
    pub path: PathBuf,
    /// Poll interval for appends of other processes.
    pub poll_interval: Duration,
    /// Wait for another process's lock.
    pub busy_timeout: Duration,
    /// Most writes per transaction.
    pub max_batch: usize,
    /// Longest wait for more appends of a group commit.
    pub group_commit_wait: Duration,
    /// Records per replay page.
    pub page_size: usize,
    /// Durability of commits.
    pub synchronous: Synchronous,
    /// Idle read connections kept.
    pub readers: usize,
    /// Largest accepted body in bytes.
    pub max_payload_bytes: usize,
    /// Age limit of the retention sweep.
    pub retention_max_age: Option<Duration>,
    /// Per-topic count limit of the retention sweep.
    pub retention_max_events: Option<u64>,
    /// Whether the sweep applies to dead-letter topics (`*.dlq`) too.
    pub retention_dead_letters: bool,
    /// Time between retention sweeps.
    pub retention_interval: Duration,
}

impl SqliteConfig {
    /// Configuration from the `PHOTON_SQLITE_*` environment variables and defaults.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable of a value that cannot be parsed.
    pub fn from_env() -> Result<Self> {
        SqliteStoragePortBuilder::new().config()
    }

    /// Whether a retention sweep is configured.
    pub fn has_retention(&self) -> bool {
        self.retention_max_age.is_some() || self.retention_max_events.is_some()
    }
}

/// Builds a [`SqliteStoragePort`]; every unset field falls back to its environment
/// variable, then to its default.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct SqliteStoragePortBuilder {
    path: Option<PathBuf>,
    poll_interval: Option<Duration>,
    busy_timeout: Option<Duration>,
    max_batch: Option<usize>,
    group_commit_wait: Option<Duration>,
    page_size: Option<usize>,
    synchronous: Option<Synchronous>,
    readers: Option<usize>,
    max_payload_bytes: Option<usize>,
    retention_max_age: Option<Duration>,
    retention_max_events: Option<u64>,
    retention_dead_letters: Option<bool>,
    retention_interval: Option<Duration>,
}

impl SqliteStoragePortBuilder {
    /// A builder with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Database file (created when missing).
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().path("/tmp/app.db");
    /// ```
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// How often live subscribers look for appends of other processes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder()
    ///     .poll_interval(Duration::from_millis(20));
    /// ```
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// How long to wait for another process's lock.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder()
    ///     .busy_timeout(Duration::from_secs(10));
    /// ```
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = Some(timeout);
        self
    }

    /// Most writes committed in one transaction.
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().max_batch(1024);
    /// ```
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = Some(max_batch);
        self
    }

    /// Longest wait for more appends of a group commit while publishers are concurrent;
    /// zero commits whatever is waiting at once.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder()
    ///     .group_commit_wait(Duration::from_micros(200));
    /// ```
    pub fn group_commit_wait(mut self, wait: Duration) -> Self {
        self.group_commit_wait = Some(wait);
        self
    }

    /// Records read per replay page.
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().page_size(256);
    /// ```
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = Some(page_size);
        self
    }

    /// Durability of commits.
    ///
    /// ```
    /// use photon_backend_sqlite::{SqliteStoragePort, Synchronous};
    /// let builder = SqliteStoragePort::builder().synchronous(Synchronous::Full);
    /// ```
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = Some(synchronous);
        self
    }

    /// Idle read connections kept open.
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().readers(8);
    /// ```
    pub fn readers(mut self, readers: usize) -> Self {
        self.readers = Some(readers);
        self
    }

    /// Largest accepted body in bytes.
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().max_payload_bytes(4 << 20);
    /// ```
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = Some(bytes);
        self
    }

    /// Deletes events older than `age` in each retention sweep.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder()
    ///     .retention_max_age(Duration::from_secs(7 * 24 * 3600));
    /// ```
    pub fn retention_max_age(mut self, age: Duration) -> Self {
        self.retention_max_age = Some(age);
        self
    }

    /// Keeps at most `count` newest events per topic in each retention sweep.
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().retention_max_events(1_000_000);
    /// ```
    pub fn retention_max_events(mut self, count: u64) -> Self {
        self.retention_max_events = Some(count);
        self
    }

    /// Whether the retention sweep applies to dead-letter topics (`*.dlq`) too; by default
    /// it does not, and dead letters are kept until deleted explicitly.
    ///
    /// ```
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder().retention_dead_letters(true);
    /// ```
    pub fn retention_dead_letters(mut self, apply: bool) -> Self {
        self.retention_dead_letters = Some(apply);
        self
    }

    /// Time between retention sweeps.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder()
    ///     .retention_interval(Duration::from_secs(10));
    /// ```
    pub fn retention_interval(mut self, interval: Duration) -> Self {
        self.retention_interval = Some(interval);
        self
    }

    /// The resolved configuration: builder values, then environment, then defaults.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable or field of a refused value.
    pub fn config(self) -> Result<SqliteConfig> {
        self.resolve(|name| std::env::var(name).ok())
    }

    /// Opens the port (creating the file and schema when missing) on a blocking thread.
    ///
    /// # Errors
    /// [`PhotonError::Config`] for a refused value, [`PhotonError::Storage`] or
    /// [`PhotonError::Unavailable`] when the database cannot be opened.
    pub async fn build(self) -> Result<SqliteStoragePort> {
        SqliteStoragePort::open(self.config()?).await
    }

    /// Opens the port from synchronous code (blocks the calling thread while opening).
    ///
    /// # Errors
    /// As [`SqliteStoragePortBuilder::build`].
    pub fn build_blocking(self) -> Result<SqliteStoragePort> {
        SqliteStoragePort::open_blocking(self.config()?)
    }

    pub(crate) fn resolve(self, env: impl Fn(&str) -> Option<String>) -> Result<SqliteConfig> {
        let config = SqliteConfig {
            path: self
                .path
                .or_else(|| env(PHOTON_SQLITE_PATH).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from("photon.db")),
            poll_interval: millis(
                self.poll_interval,
                &env,
                PHOTON_SQLITE_POLL_INTERVAL_MS,
                100,
            )?,
            busy_timeout: millis(self.busy_timeout, &env, PHOTON_SQLITE_BUSY_TIMEOUT_MS, 5000)?,
            max_batch: number(self.max_batch, &env, PHOTON_SQLITE_MAX_BATCH, 4096)?,
            group_commit_wait: match (
                self.group_commit_wait,
                env(PHOTON_SQLITE_GROUP_COMMIT_WAIT_US),
            ) {
                (Some(wait), _) => wait,
                (None, Some(text)) => Duration::from_micros(parse(
                    PHOTON_SQLITE_GROUP_COMMIT_WAIT_US,
                    &text,
                    "an integer of microseconds",
                )?),
                (None, None) => Duration::from_micros(500),
            },
            page_size: number(self.page_size, &env, PHOTON_SQLITE_PAGE_SIZE, 512)?,
            synchronous: match self.synchronous {
                Some(value) => value,
                None => synchronous(&env)?,
            },
            readers: number(self.readers, &env, PHOTON_SQLITE_READERS, 4)?,
            max_payload_bytes: number(
                self.max_payload_bytes,
                &env,
                PHOTON_SQLITE_MAX_PAYLOAD_BYTES,
                DEFAULT_MAX_PAYLOAD_BYTES,
            )?,
            retention_max_age: match self.retention_max_age {
                Some(age) => Some(age),
                None => {
                    optional(&env, PHOTON_SQLITE_RETENTION_MAX_AGE_SECS)?.map(Duration::from_secs)
                }
            },
            retention_max_events: match self.retention_max_events {
                Some(count) => Some(count),
                None => optional(&env, PHOTON_SQLITE_RETENTION_MAX_EVENTS)?,
            },
            retention_dead_letters: match self.retention_dead_letters {
                Some(apply) => apply,
                None => flag(&env, PHOTON_SQLITE_RETENTION_DEAD_LETTERS)?,
            },
            retention_interval: millis(
                self.retention_interval,
                &env,
                PHOTON_SQLITE_RETENTION_INTERVAL_MS,
                60_000,
            )?,
        };
        validate(&config)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with_env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn defaults_apply_without_env() {
        let config = SqliteStoragePortBuilder::new()
            .resolve(with_env(&[]))
            .unwrap();
        assert_eq!(config.path, PathBuf::from("photon.db"));
        assert_eq!(config.poll_interval, Duration::from_millis(100));
        assert_eq!(config.busy_timeout, Duration::from_millis(5000));
        assert_eq!(config.max_batch, 4096);
        assert_eq!(config.group_commit_wait, Duration::from_micros(500));
        assert_eq!(config.page_size, 512);
        assert_eq!(config.synchronous, Synchronous::Full);
        assert_eq!(config.readers, 4);
        assert_eq!(config.max_payload_bytes, DEFAULT_MAX_PAYLOAD_BYTES);
        assert_eq!(config.retention_max_age, None);
        assert_eq!(config.retention_max_events, None);
        assert!(!config.retention_dead_letters);
        assert!(!config.has_retention());
    }

    #[test]
    fn builder_beats_env_beats_default() {
        let env = with_env(&[
            (PHOTON_SQLITE_PATH, "/env.db"),
            (PHOTON_SQLITE_POLL_INTERVAL_MS, "25"),
            (PHOTON_SQLITE_SYNCHRONOUS, "Normal"),
            (PHOTON_SQLITE_RETENTION_MAX_EVENTS, "10"),
        ]);
        let config = SqliteStoragePortBuilder::new()
            .path("/builder.db")
            .resolve(env)
            .unwrap();
        assert_eq!(config.path, PathBuf::from("/builder.db"));
        assert_eq!(config.poll_interval, Duration::from_millis(25));
        assert_eq!(config.synchronous, Synchronous::Normal);
        assert_eq!(config.retention_max_events, Some(10));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = SqliteStoragePortBuilder::new()
            .resolve(with_env(&[(PHOTON_SQLITE_MAX_BATCH, "many")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration PHOTON_SQLITE_MAX_BATCH=\"many\": expected a positive integer"
        );
        let err = SqliteStoragePortBuilder::new()
            .resolve(with_env(&[(PHOTON_SQLITE_SYNCHRONOUS, "off")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration PHOTON_SQLITE_SYNCHRONOUS=\"off\": expected full or normal"
        );
        let err = SqliteStoragePortBuilder::new()
            .page_size(0)
            .resolve(with_env(&[]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration page_size=\"0\": expected a value greater than zero"
        );
    }
}
