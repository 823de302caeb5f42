//! Typed configuration of the SQLite port, from one settings table (`photon_core::settings!`):
//! builder call > environment variable > default. Values use Photon's one dialect
//! (`photon_core::config`): durations such as `100ms`, sizes such as `1MiB`, flags such as
//! `on`.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{
    Alias, AnyDuration, Choice, Choices, Count, FilePath, Flag, Optional, PositiveDuration, Size,
};
use photon_core::{Result, DEFAULT_MAX_PAYLOAD_BYTES};
use serde::Deserialize;

use crate::port::SqliteStoragePort;

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

impl Choices for Synchronous {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("full", Self::Full), ("normal", Self::Normal)];
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

photon_core::settings! {
    /// Configuration of a [`SqliteStoragePort`]. Build it with [`SqliteStoragePortBuilder`]
    /// or [`SqliteConfig::from_env`], or deserialize it (missing fields take their
    /// defaults; every value in the dialect of `photon_core::config`, checked, a refused one
    /// named); opening the port checks it again.
    ///
    /// ```
    /// let config: photon_backend_sqlite::SqliteConfig = serde_json::from_str(
    ///     r#"{"path": "/var/lib/app/events.db", "poll_interval": "20ms", "retention_max_age": "7d"}"#,
    /// ).unwrap();
    /// assert_eq!(config.poll_interval, std::time::Duration::from_millis(20));
    /// ```
    #[derive(Eq)]
    pub struct SqliteConfig;

    /// Builds a [`SqliteStoragePort`]; every unset setting falls back to its environment
    /// variable, then to its default.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_sqlite::SqliteStoragePort::builder()
    ///     .path("/tmp/app.db")
    ///     .poll_interval(Duration::from_millis(20))
    ///     .retention_max_events(1_000_000);
    /// ```
    ///
    /// Deprecated names still read, with their old units: `PHOTON_SQLITE_POLL_INTERVAL_MS`,
    /// `PHOTON_SQLITE_BUSY_TIMEOUT_MS`, `PHOTON_SQLITE_RETENTION_INTERVAL_MS` (milliseconds),
    /// `PHOTON_SQLITE_GROUP_COMMIT_WAIT_US` (microseconds) and
    /// `PHOTON_SQLITE_RETENTION_MAX_AGE_SECS` (seconds).
    pub struct SqliteStoragePortBuilder;

    /// Database file, created when missing.
    path: FilePath [into] = PathBuf::from("photon.db"),
        env PATH_ENV = "PHOTON_SQLITE_PATH", shown "`photon.db`";
    /// How often a live subscriber looks for appends of other processes.
    ///
    /// Appends of the same port wake subscribers at once.
    poll_interval: PositiveDuration = Duration::from_millis(100),
        env POLL_INTERVAL_ENV = "PHOTON_SQLITE_POLL_INTERVAL",
        aliases [Alias::deprecated_millis("PHOTON_SQLITE_POLL_INTERVAL_MS")],
        shown "`100ms`";
    /// How long a connection waits for another process's lock before failing.
    busy_timeout: AnyDuration = Duration::from_secs(5),
        env BUSY_TIMEOUT_ENV = "PHOTON_SQLITE_BUSY_TIMEOUT",
        aliases [Alias::deprecated_millis("PHOTON_SQLITE_BUSY_TIMEOUT_MS")],
        shown "`5s`";
    /// Most writes (appends, checkpoints) committed in one transaction.
    max_batch: Count<usize, 1> = 4096, env MAX_BATCH_ENV = "PHOTON_SQLITE_MAX_BATCH", shown "4096";
    /// Longest wait for more appends to commit together while publishers are concurrent.
    ///
    /// A lone publisher never waits; zero commits whatever is waiting at once.
    group_commit_wait: AnyDuration = Duration::from_micros(500),
        env GROUP_COMMIT_WAIT_ENV = "PHOTON_SQLITE_GROUP_COMMIT_WAIT",
        aliases [Alias::deprecated_micros("PHOTON_SQLITE_GROUP_COMMIT_WAIT_US")],
        shown "`500us`";
    /// Records read per replay page of a subscription.
    page_size: Count<usize, 1> = 512, env PAGE_SIZE_ENV = "PHOTON_SQLITE_PAGE_SIZE", shown "512";
    /// SQLite's `synchronous` setting in WAL mode: the durability of commits.
    ///
    /// See [`Synchronous`] for what `normal` risks.
    synchronous: Choice<Synchronous> = Synchronous::Full,
        env SYNCHRONOUS_ENV = "PHOTON_SQLITE_SYNCHRONOUS", shown "`full`";
    /// Idle read connections kept open for queries and replay pages.
    readers: Count<usize> = 4, env READERS_ENV = "PHOTON_SQLITE_READERS", shown "4";
    /// Largest accepted body (encoded actor and payload) in bytes.
    max_payload_bytes: Size<usize, 1> = DEFAULT_MAX_PAYLOAD_BYTES,
        env MAX_PAYLOAD_BYTES_ENV = "PHOTON_SQLITE_MAX_PAYLOAD_BYTES", shown "`1MiB`";
    /// Events older than this are deleted by the retention sweep.
    retention_max_age: Optional<PositiveDuration> = None,
        env RETENTION_MAX_AGE_ENV = "PHOTON_SQLITE_RETENTION_MAX_AGE",
        aliases [Alias::deprecated_secs("PHOTON_SQLITE_RETENTION_MAX_AGE_SECS")],
        shown "unset (kept)";
    /// At most this many newest events are kept per topic by the retention sweep.
    retention_max_events: Optional<Count<u64, 1>> = None,
        env RETENTION_MAX_EVENTS_ENV = "PHOTON_SQLITE_RETENTION_MAX_EVENTS", shown "unset (all)";
    /// Whether the retention sweep applies to dead-letter topics (`*.dlq`) too.
    ///
    /// By default it does not: dead letters are kept until deleted explicitly
    /// (`truncate_before`).
    retention_dead_letters: Flag = false,
        env RETENTION_DEAD_LETTERS_ENV = "PHOTON_SQLITE_RETENTION_DEAD_LETTERS", shown "`false`";
    /// Time between retention sweeps.
    retention_interval: PositiveDuration = Duration::from_secs(60),
        env RETENTION_INTERVAL_ENV = "PHOTON_SQLITE_RETENTION_INTERVAL",
        aliases [Alias::deprecated_millis("PHOTON_SQLITE_RETENTION_INTERVAL_MS")],
        shown "`60s`";
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
        self.check_settings()
    }
}

impl SqliteStoragePortBuilder {
    /// The resolved configuration: builder values, then environment, then defaults.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the variable or field of a refused value.
    pub fn config(self) -> Result<SqliteConfig> {
        self.resolve_with(&photon_core::config::Env::process())
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

/// Former name of [`PATH_ENV`].
#[deprecated(note = "use PATH_ENV (same variable)")]
pub const PHOTON_SQLITE_PATH: &str = PATH_ENV;
/// Former name of [`POLL_INTERVAL_ENV`].
#[deprecated(note = "use POLL_INTERVAL_ENV (same variable)")]
pub const PHOTON_SQLITE_POLL_INTERVAL: &str = POLL_INTERVAL_ENV;
/// Former name of [`BUSY_TIMEOUT_ENV`].
#[deprecated(note = "use BUSY_TIMEOUT_ENV (same variable)")]
pub const PHOTON_SQLITE_BUSY_TIMEOUT: &str = BUSY_TIMEOUT_ENV;
/// Former name of [`MAX_BATCH_ENV`].
#[deprecated(note = "use MAX_BATCH_ENV (same variable)")]
pub const PHOTON_SQLITE_MAX_BATCH: &str = MAX_BATCH_ENV;
/// Former name of [`GROUP_COMMIT_WAIT_ENV`].
#[deprecated(note = "use GROUP_COMMIT_WAIT_ENV (same variable)")]
pub const PHOTON_SQLITE_GROUP_COMMIT_WAIT: &str = GROUP_COMMIT_WAIT_ENV;
/// Former name of [`PAGE_SIZE_ENV`].
#[deprecated(note = "use PAGE_SIZE_ENV (same variable)")]
pub const PHOTON_SQLITE_PAGE_SIZE: &str = PAGE_SIZE_ENV;
/// Former name of [`SYNCHRONOUS_ENV`].
#[deprecated(note = "use SYNCHRONOUS_ENV (same variable)")]
pub const PHOTON_SQLITE_SYNCHRONOUS: &str = SYNCHRONOUS_ENV;
/// Former name of [`READERS_ENV`].
#[deprecated(note = "use READERS_ENV (same variable)")]
pub const PHOTON_SQLITE_READERS: &str = READERS_ENV;
/// Former name of [`MAX_PAYLOAD_BYTES_ENV`].
#[deprecated(note = "use MAX_PAYLOAD_BYTES_ENV (same variable)")]
pub const PHOTON_SQLITE_MAX_PAYLOAD_BYTES: &str = MAX_PAYLOAD_BYTES_ENV;
/// Former name of [`RETENTION_MAX_AGE_ENV`].
#[deprecated(note = "use RETENTION_MAX_AGE_ENV (same variable)")]
pub const PHOTON_SQLITE_RETENTION_MAX_AGE: &str = RETENTION_MAX_AGE_ENV;
/// Former name of [`RETENTION_MAX_EVENTS_ENV`].
#[deprecated(note = "use RETENTION_MAX_EVENTS_ENV (same variable)")]
pub const PHOTON_SQLITE_RETENTION_MAX_EVENTS: &str = RETENTION_MAX_EVENTS_ENV;
/// Former name of [`RETENTION_DEAD_LETTERS_ENV`].
#[deprecated(note = "use RETENTION_DEAD_LETTERS_ENV (same variable)")]
pub const PHOTON_SQLITE_RETENTION_DEAD_LETTERS: &str = RETENTION_DEAD_LETTERS_ENV;
/// Former name of [`RETENTION_INTERVAL_ENV`].
#[deprecated(note = "use RETENTION_INTERVAL_ENV (same variable)")]
pub const PHOTON_SQLITE_RETENTION_INTERVAL: &str = RETENTION_INTERVAL_ENV;

/// Older variable of [`POLL_INTERVAL_ENV`], still read: whole milliseconds.
#[deprecated(note = "set PHOTON_SQLITE_POLL_INTERVAL (a duration such as 100ms)")]
pub const PHOTON_SQLITE_POLL_INTERVAL_MS: &str = "PHOTON_SQLITE_POLL_INTERVAL_MS";
/// Older variable of [`BUSY_TIMEOUT_ENV`], still read: whole milliseconds.
#[deprecated(note = "set PHOTON_SQLITE_BUSY_TIMEOUT (a duration such as 5s)")]
pub const PHOTON_SQLITE_BUSY_TIMEOUT_MS: &str = "PHOTON_SQLITE_BUSY_TIMEOUT_MS";
/// Older variable of [`GROUP_COMMIT_WAIT_ENV`], still read: whole microseconds.
#[deprecated(note = "set PHOTON_SQLITE_GROUP_COMMIT_WAIT (a duration such as 500us)")]
pub const PHOTON_SQLITE_GROUP_COMMIT_WAIT_US: &str = "PHOTON_SQLITE_GROUP_COMMIT_WAIT_US";
/// Older variable of [`RETENTION_MAX_AGE_ENV`], still read: whole seconds.
#[deprecated(note = "set PHOTON_SQLITE_RETENTION_MAX_AGE (a duration such as 7d)")]
pub const PHOTON_SQLITE_RETENTION_MAX_AGE_SECS: &str = "PHOTON_SQLITE_RETENTION_MAX_AGE_SECS";
/// Older variable of [`RETENTION_INTERVAL_ENV`], still read: whole milliseconds.
#[deprecated(note = "set PHOTON_SQLITE_RETENTION_INTERVAL (a duration such as 60s)")]
pub const PHOTON_SQLITE_RETENTION_INTERVAL_MS: &str = "PHOTON_SQLITE_RETENTION_INTERVAL_MS";
