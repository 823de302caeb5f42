//! Typed configuration of the SQLite port: builder call > environment variable > default
//! (resolved in `env.rs`). Values use Photon's one dialect (`photon_core::config`):
//! durations such as `100ms`, sizes such as `1MiB`, flags such as `on`.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::de;
use photon_core::{Result, DEFAULT_MAX_PAYLOAD_BYTES};
use serde::Deserialize;

use crate::port::SqliteStoragePort;

/// Database file. Default `photon.db` in the working directory.
pub const PHOTON_SQLITE_PATH: &str = "PHOTON_SQLITE_PATH";
/// How often a live subscriber looks for appends of other processes, a duration. Appends
/// of the same port wake subscribers at once. Default `100ms`.
pub const PHOTON_SQLITE_POLL_INTERVAL: &str = "PHOTON_SQLITE_POLL_INTERVAL";
/// How long a connection waits for another process's lock before failing, a duration.
/// Default `5s`.
pub const PHOTON_SQLITE_BUSY_TIMEOUT: &str = "PHOTON_SQLITE_BUSY_TIMEOUT";
/// Most writes (appends, checkpoints) committed in one transaction, a count. Default 4096.
pub const PHOTON_SQLITE_MAX_BATCH: &str = "PHOTON_SQLITE_MAX_BATCH";
/// Longest time the writer waits for more appends to commit them together while
/// concurrent publishers are active (a lone publisher never waits), a duration. Default
/// `500us`.
pub const PHOTON_SQLITE_GROUP_COMMIT_WAIT: &str = "PHOTON_SQLITE_GROUP_COMMIT_WAIT";
/// Records read per replay page of a subscription, a count. Default 512.
pub const PHOTON_SQLITE_PAGE_SIZE: &str = "PHOTON_SQLITE_PAGE_SIZE";
/// `full` or `normal`: SQLite's `synchronous` setting in WAL mode. Default `full` (see
/// [`Synchronous`] for what `normal` risks).
pub const PHOTON_SQLITE_SYNCHRONOUS: &str = "PHOTON_SQLITE_SYNCHRONOUS";
/// Idle read connections kept open for queries and replay pages, a count. Default 4.
pub const PHOTON_SQLITE_READERS: &str = "PHOTON_SQLITE_READERS";
/// Largest accepted body (encoded actor and payload), a size. Default `1MiB`.
pub const PHOTON_SQLITE_MAX_PAYLOAD_BYTES: &str = "PHOTON_SQLITE_MAX_PAYLOAD_BYTES";
/// Events older than this duration are deleted by the retention sweep. Unset: kept.
pub const PHOTON_SQLITE_RETENTION_MAX_AGE: &str = "PHOTON_SQLITE_RETENTION_MAX_AGE";
/// At most this many newest events are kept per topic by the retention sweep. Unset: all.
pub const PHOTON_SQLITE_RETENTION_MAX_EVENTS: &str = "PHOTON_SQLITE_RETENTION_MAX_EVENTS";
/// A flag: `true` to apply the retention sweep to dead-letter topics (`*.dlq`) too.
/// Default `false`: dead letters are kept until deleted explicitly (`truncate_before`).
pub const PHOTON_SQLITE_RETENTION_DEAD_LETTERS: &str = "PHOTON_SQLITE_RETENTION_DEAD_LETTERS";
/// Time between retention sweeps, a duration. Default `60s`.
pub const PHOTON_SQLITE_RETENTION_INTERVAL: &str = "PHOTON_SQLITE_RETENTION_INTERVAL";

/// Deprecated name of [`PHOTON_SQLITE_POLL_INTERVAL`], still read: whole milliseconds.
#[deprecated(note = "use PHOTON_SQLITE_POLL_INTERVAL (a duration such as 100ms)")]
pub const PHOTON_SQLITE_POLL_INTERVAL_MS: &str = "PHOTON_SQLITE_POLL_INTERVAL_MS";
/// Deprecated name of [`PHOTON_SQLITE_BUSY_TIMEOUT`], still read: whole milliseconds.
#[deprecated(note = "use PHOTON_SQLITE_BUSY_TIMEOUT (a duration such as 5s)")]
pub const PHOTON_SQLITE_BUSY_TIMEOUT_MS: &str = "PHOTON_SQLITE_BUSY_TIMEOUT_MS";
/// Deprecated name of [`PHOTON_SQLITE_GROUP_COMMIT_WAIT`], still read: whole microseconds.
#[deprecated(note = "use PHOTON_SQLITE_GROUP_COMMIT_WAIT (a duration such as 500us)")]
pub const PHOTON_SQLITE_GROUP_COMMIT_WAIT_US: &str = "PHOTON_SQLITE_GROUP_COMMIT_WAIT_US";
/// Deprecated name of [`PHOTON_SQLITE_RETENTION_MAX_AGE`], still read: whole seconds.
#[deprecated(note = "use PHOTON_SQLITE_RETENTION_MAX_AGE (a duration such as 7d)")]
pub const PHOTON_SQLITE_RETENTION_MAX_AGE_SECS: &str = "PHOTON_SQLITE_RETENTION_MAX_AGE_SECS";
/// Deprecated name of [`PHOTON_SQLITE_RETENTION_INTERVAL`], still read: whole milliseconds.
#[deprecated(note = "use PHOTON_SQLITE_RETENTION_INTERVAL (a duration such as 60s)")]
pub const PHOTON_SQLITE_RETENTION_INTERVAL_MS: &str = "PHOTON_SQLITE_RETENTION_INTERVAL_MS";

/// SQLite's `synchronous` setting, always in WAL mode.
///
/// The default, [`Synchronous::Full`], is what makes "an acknowledged publish is never
/// lost" hold on this port. Choose [`Synchronous::Normal`] only where losing the last
/// acknowledged publishes and checkpoint commits on a power loss or OS crash is acceptable
/// (measured figures of both: `photon-bench --adapter sqlite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
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
/// [`SqliteConfig::from_env`], or deserialize it (missing fields take their defaults;
/// durations and sizes in the dialect of `photon_core::config`); opening the port checks
/// it.
///
/// ```
/// let config: photon_backend_sqlite::SqliteConfig = serde_json::from_str(
///     r#"{"path": "/var/lib/app/events.db", "poll_interval": "20ms", "retention_max_age": "7d"}"#,
/// ).unwrap();
/// assert_eq!(config.poll_interval, std::time::Duration::from_millis(20));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SqliteConfig {
    /// Database file.
    pub path: PathBuf,
    /// Poll interval for appends of other processes.
    #[serde(deserialize_with = "de::duration")]
    pub poll_interval: Duration,
    /// Wait for another process's lock.
    #[serde(deserialize_with = "de::duration")]
    pub busy_timeout: Duration,
    /// Most writes per transaction.
    pub max_batch: usize,
    /// Longest wait for more appends of a group commit.
    #[serde(deserialize_with = "de::duration")]
    pub group_commit_wait: Duration,
    /// Records per replay page.
    pub page_size: usize,
    /// Durability of commits.
    pub synchronous: Synchronous,
    /// Idle read connections kept.
    pub readers: usize,
    /// Largest accepted body in bytes.
    #[serde(deserialize_with = "de::size")]
    pub max_payload_bytes: usize,
    /// Age limit of the retention sweep.
    #[serde(deserialize_with = "de::optional_duration")]
    pub retention_max_age: Option<Duration>,
    /// Per-topic count limit of the retention sweep.
    pub retention_max_events: Option<u64>,
    /// Whether the sweep applies to dead-letter topics (`*.dlq`) too.
    #[serde(deserialize_with = "de::flag")]
    pub retention_dead_letters: bool,
    /// Time between retention sweeps.
    #[serde(deserialize_with = "de::duration")]
    pub retention_interval: Duration,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("photon.db"),
            poll_interval: Duration::from_millis(100),
            busy_timeout: Duration::from_secs(5),
            max_batch: 4096,
            group_commit_wait: Duration::from_micros(500),
            page_size: 512,
            synchronous: Synchronous::Full,
            readers: 4,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            retention_max_age: None,
            retention_max_events: None,
            retention_dead_letters: false,
            retention_interval: Duration::from_secs(60),
        }
    }
}

impl SqliteConfig {
    /// Configuration from the `PHOTON_SQLITE_*` environment variables and defaults.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the variable of a value that cannot be
    /// parsed.
    pub fn from_env() -> Result<Self> {
        SqliteStoragePortBuilder::new().config()
    }

    /// Whether a retention sweep is configured.
    pub fn has_retention(&self) -> bool {
        self.retention_max_age.is_some() || self.retention_max_events.is_some()
    }

    /// Refuses values that parse but cannot work (zero sizes and intervals).
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field.
    pub fn validate(&self) -> Result<()> {
        crate::env::validate(self)
    }
}

/// Builds a [`SqliteStoragePort`]; every unset field falls back to its environment
/// variable, then to its default.
///
/// | setting | variable | default |
/// |---|---|---|
/// | [`path`](Self::path) | `PHOTON_SQLITE_PATH` | `photon.db` |
/// | [`poll_interval`](Self::poll_interval) | `PHOTON_SQLITE_POLL_INTERVAL` | `100ms` |
/// | [`busy_timeout`](Self::busy_timeout) | `PHOTON_SQLITE_BUSY_TIMEOUT` | `5s` |
/// | [`max_batch`](Self::max_batch) | `PHOTON_SQLITE_MAX_BATCH` | 4096 |
/// | [`group_commit_wait`](Self::group_commit_wait) | `PHOTON_SQLITE_GROUP_COMMIT_WAIT` | `500us` |
/// | [`page_size`](Self::page_size) | `PHOTON_SQLITE_PAGE_SIZE` | 512 |
/// | [`synchronous`](Self::synchronous) | `PHOTON_SQLITE_SYNCHRONOUS` | `full` |
/// | [`readers`](Self::readers) | `PHOTON_SQLITE_READERS` | 4 |
/// | [`max_payload_bytes`](Self::max_payload_bytes) | `PHOTON_SQLITE_MAX_PAYLOAD_BYTES` | `1MiB` |
/// | [`retention_max_age`](Self::retention_max_age) | `PHOTON_SQLITE_RETENTION_MAX_AGE` | unset (kept) |
/// | [`retention_max_events`](Self::retention_max_events) | `PHOTON_SQLITE_RETENTION_MAX_EVENTS` | unset (all) |
/// | [`retention_dead_letters`](Self::retention_dead_letters) | `PHOTON_SQLITE_RETENTION_DEAD_LETTERS` | `false` |
/// | [`retention_interval`](Self::retention_interval) | `PHOTON_SQLITE_RETENTION_INTERVAL` | `60s` |
///
/// Deprecated names still read, with their old units: `PHOTON_SQLITE_POLL_INTERVAL_MS`,
/// `PHOTON_SQLITE_BUSY_TIMEOUT_MS`, `PHOTON_SQLITE_RETENTION_INTERVAL_MS` (milliseconds),
/// `PHOTON_SQLITE_GROUP_COMMIT_WAIT_US` (microseconds) and
/// `PHOTON_SQLITE_RETENTION_MAX_AGE_SECS` (seconds).
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct SqliteStoragePortBuilder {
    pub(crate) path: Option<PathBuf>,
    pub(crate) poll_interval: Option<Duration>,
    pub(crate) busy_timeout: Option<Duration>,
    pub(crate) max_batch: Option<usize>,
    pub(crate) group_commit_wait: Option<Duration>,
    pub(crate) page_size: Option<usize>,
    pub(crate) synchronous: Option<Synchronous>,
    pub(crate) readers: Option<usize>,
    pub(crate) max_payload_bytes: Option<usize>,
    pub(crate) retention_max_age: Option<Duration>,
    pub(crate) retention_max_events: Option<u64>,
    pub(crate) retention_dead_letters: Option<bool>,
    pub(crate) retention_interval: Option<Duration>,
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
    /// [`photon_core::PhotonError::Config`] naming the variable or field of a refused value.
    pub fn config(self) -> Result<SqliteConfig> {
        self.resolve(&photon_core::config::Env::process())
    }

    /// Opens the port (creating the file and schema when missing) on a blocking thread.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] for a refused value, [`photon_core::PhotonError::Storage`] or
    /// [`photon_core::PhotonError::Unavailable`] when the database cannot be opened.
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
}
