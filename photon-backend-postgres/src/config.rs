//! Typed configuration of the PostgreSQL port, from one settings table
//! (`photon_core::settings!`): builder call > environment variable > default. Values use
//! Photon's one dialect (`photon_core::config`): durations such as `100ms`, sizes such as
//! `1MiB`, flags such as `on`.

use std::time::Duration;

use photon_core::config::{Checked, Count, Flag, Optional, PositiveDuration, Size};
use photon_core::{Result, DEFAULT_MAX_PAYLOAD_BYTES};

use crate::env::{ConnectionString, LockTimeout, SchemaName};
use crate::port::PostgresStoragePort;

/// The default connection string.
pub(crate) const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

photon_core::settings! {
    /// Configuration of a [`PostgresStoragePort`]. Build it with
    /// [`PostgresStoragePortBuilder`] or [`PostgresConfig::from_env`], or deserialize it
    /// (missing fields take their defaults; every value in the dialect of
    /// `photon_core::config`, checked, a refused one named); opening the port checks it
    /// again. `Debug` hides the password of the connection string.
    ///
    /// ```
    /// let config: photon_backend_postgres::PostgresConfig = serde_json::from_str(
    ///     r#"{"url": "postgres://app@db/events", "schema": "orders", "recheck_interval": "2s"}"#,
    /// ).unwrap();
    /// assert_eq!(config.recheck_interval, std::time::Duration::from_secs(2));
    /// ```
    #[derive(Eq)]
    pub struct PostgresConfig;

    /// Builds a [`PostgresStoragePort`]; every unset setting falls back to its environment
    /// variable, then to its default. `Debug` hides the password of the connection string.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
    ///     .url("postgres://app@127.0.0.1:5432/events")
    ///     .schema("billing")
    ///     .lock_timeout(Duration::from_secs(2));
    /// ```
    pub struct PostgresStoragePortBuilder;

    /// Connection string: a URL (`postgres://user:password@host:port/database`) or `key=value` pairs.
    ///
    /// Its TLS parameters (with the `tls` feature, on by default):
    ///
    /// - `sslmode`: `disable`; `prefer` (the default: TLS without certificate verification when
    ///   the server offers it, else clear text with a warning); `require` (TLS without
    ///   certificate verification, or as `verify-ca` when `sslrootcert` is given); `verify-ca`
    ///   (the server's chain checked against the roots, its name not); `verify-full` (chain and
    ///   host name checked).
    /// - `sslrootcert`: a PEM file of trusted CA certificates, or `system` for the platform's
    ///   store (also used when `sslrootcert` is absent).
    /// - `sslcert` and `sslkey`: a client certificate (PEM chain) and its private key (PEM),
    ///   both or neither.
    ///
    /// Without the `tls` feature only `sslmode=disable` and `prefer` (then clear text) are
    /// accepted. A refused value is a `PhotonError::Config` naming the parameter; a certificate
    /// file that cannot be used names the parameter and the path (when the port opens).
    url: Checked<ConnectionString> [into] = DEFAULT_URL.to_owned(),
        env URL_ENV = "PHOTON_POSTGRES_URL", shown "`postgres://postgres@127.0.0.1:5432/postgres`";
    /// Most connections of the page-read pool.
    ///
    /// Replay pages, queries, checkpoint loads, transactional handlers and retention
    /// sweeps use it. The writer has [`WRITER_CONNECTIONS_ENV`] of its own,
    /// consumer-group coordination two, the live tail's listener one.
    pool_size: Count<usize, 1> = 8, env POOL_SIZE_ENV = "PHOTON_POSTGRES_POOL_SIZE", shown "8";
    /// Most connections of the writer lanes.
    ///
    /// Each writer lane (one per topic being written, one for checkpoint commits) runs one
    /// transaction at a time on one of them: appends, checkpoint commits, truncations. As
    /// many lanes can wait for a lock at once.
    writer_connections: Count<usize, 1> = 4,
        env WRITER_CONNECTIONS_ENV = "PHOTON_POSTGRES_WRITER_CONNECTIONS", shown "4";
    /// Schema of Photon's tables, created when missing.
    ///
    /// Lowercase letters, digits and `_`, at most 56 characters, not starting with a
    /// digit (the notification channel `photon_<schema>` must fit PostgreSQL's 63-byte
    /// identifiers).
    schema: Checked<SchemaName> [into] = "photon".to_owned(),
        env SCHEMA_ENV = "PHOTON_POSTGRES_SCHEMA", shown "`photon`";
    /// Longest wait for a new connection or a free pooled one.
    connect_timeout: PositiveDuration = Duration::from_secs(10),
        env CONNECT_TIMEOUT_ENV = "PHOTON_POSTGRES_CONNECT_TIMEOUT", shown "`10s`";
    /// Longest wait of any statement of the port's sessions for a lock (`lock_timeout`).
    ///
    /// At most `i32::MAX` milliseconds. A wait that outlasts it fails with a retryable
    /// [`photon_core::PhotonError::Unavailable`] naming the cause instead of hanging (an
    /// append to a topic whose row an open transaction holds, a transactional handler
    /// whose checkpoint row another consumer's transaction holds); the port's writer does
    /// not retry it by itself.
    lock_timeout: LockTimeout = Duration::from_secs(5),
        env LOCK_TIMEOUT_ENV = "PHOTON_POSTGRES_LOCK_TIMEOUT", shown "`5s`";
    /// Most writes (appends, checkpoints) committed in one transaction.
    max_batch: Count<usize, 1> = 4096,
        env MAX_BATCH_ENV = "PHOTON_POSTGRES_MAX_BATCH", shown "4096";
    /// Records read per replay page of a subscription.
    page_size: Count<usize, 1> = 512, env PAGE_SIZE_ENV = "PHOTON_POSTGRES_PAGE_SIZE", shown "512";
    /// Largest accepted body (encoded actor, payload and headers) in bytes.
    max_payload_bytes: Size<usize, 1> = DEFAULT_MAX_PAYLOAD_BYTES,
        env MAX_PAYLOAD_BYTES_ENV = "PHOTON_POSTGRES_MAX_PAYLOAD_BYTES", shown "`1MiB`";
    /// How often a live subscriber reads again without a notification.
    ///
    /// The backstop for a notification lost with the listening connection.
    recheck_interval: PositiveDuration = Duration::from_secs(5),
        env RECHECK_INTERVAL_ENV = "PHOTON_POSTGRES_RECHECK_INTERVAL", shown "`5s`";
    /// Events older than this are deleted by the retention sweep.
    retention_max_age: Optional<PositiveDuration> = None,
        env RETENTION_MAX_AGE_ENV = "PHOTON_POSTGRES_RETENTION_MAX_AGE", shown "unset (kept)";
    /// At most this many newest events are kept per topic by the retention sweep.
    retention_max_events: Optional<Count<u64, 1>> = None,
        env RETENTION_MAX_EVENTS_ENV = "PHOTON_POSTGRES_RETENTION_MAX_EVENTS", shown "unset (all)";
    /// Whether the retention sweep applies to dead-letter topics (`*.dlq`) too.
    ///
    /// By default it does not: dead letters are kept until deleted explicitly.
    retention_dead_letters: Flag = false,
        env RETENTION_DEAD_LETTERS_ENV = "PHOTON_POSTGRES_RETENTION_DEAD_LETTERS", shown "`false`";
    /// Time between retention sweeps.
    retention_interval: PositiveDuration = Duration::from_secs(60),
        env RETENTION_INTERVAL_ENV = "PHOTON_POSTGRES_RETENTION_INTERVAL", shown "`60s`";
}

impl PostgresConfig {
    /// Configuration from the `PHOTON_POSTGRES_*` environment variables and defaults.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the variable of a refused value.
    pub fn from_env() -> Result<Self> {
        PostgresStoragePortBuilder::new().config()
    }

    /// Whether a retention sweep is configured.
    pub fn has_retention(&self) -> bool {
        self.retention_max_age.is_some() || self.retention_max_events.is_some()
    }

    /// Refuses values that parse but cannot work (zero sizes and intervals, a schema name
    /// outside the accepted form, a connection string PostgreSQL cannot read).
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field.
    pub fn validate(&self) -> Result<()> {
        self.check_settings()
    }
}

impl PostgresStoragePortBuilder {
    /// The resolved configuration: builder values, then environment, then defaults.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the variable or field of a refused value.
    pub fn config(self) -> Result<PostgresConfig> {
        self.resolve_with(&photon_core::config::Env::process())
    }

    /// Connects, creates the schema and tables when missing, and opens the port.
    ///
    /// # Errors
    /// As [`PostgresStoragePort::open`]: [`photon_core::PhotonError::Config`] for a refused
    /// value or an unusable certificate file, [`photon_core::PhotonError::Unavailable`] when
    /// the server cannot be reached, [`photon_core::PhotonError::Storage`] when it refuses
    /// the schema or a TLS certificate is refused.
    pub async fn build(self) -> Result<PostgresStoragePort> {
        PostgresStoragePort::open(self.config()?).await
    }
}

/// Former name of [`URL_ENV`].
#[deprecated(note = "use URL_ENV (same variable)")]
pub const PHOTON_POSTGRES_URL: &str = URL_ENV;
/// Former name of [`POOL_SIZE_ENV`].
#[deprecated(note = "use POOL_SIZE_ENV (same variable)")]
pub const PHOTON_POSTGRES_POOL_SIZE: &str = POOL_SIZE_ENV;
/// Former name of [`WRITER_CONNECTIONS_ENV`].
#[deprecated(note = "use WRITER_CONNECTIONS_ENV (same variable)")]
pub const PHOTON_POSTGRES_WRITER_CONNECTIONS: &str = WRITER_CONNECTIONS_ENV;
/// Former name of [`SCHEMA_ENV`].
#[deprecated(note = "use SCHEMA_ENV (same variable)")]
pub const PHOTON_POSTGRES_SCHEMA: &str = SCHEMA_ENV;
/// Former name of [`CONNECT_TIMEOUT_ENV`].
#[deprecated(note = "use CONNECT_TIMEOUT_ENV (same variable)")]
pub const PHOTON_POSTGRES_CONNECT_TIMEOUT: &str = CONNECT_TIMEOUT_ENV;
/// Former name of [`LOCK_TIMEOUT_ENV`].
#[deprecated(note = "use LOCK_TIMEOUT_ENV (same variable)")]
pub const PHOTON_POSTGRES_LOCK_TIMEOUT: &str = LOCK_TIMEOUT_ENV;
/// Former name of [`MAX_BATCH_ENV`].
#[deprecated(note = "use MAX_BATCH_ENV (same variable)")]
pub const PHOTON_POSTGRES_MAX_BATCH: &str = MAX_BATCH_ENV;
/// Former name of [`PAGE_SIZE_ENV`].
#[deprecated(note = "use PAGE_SIZE_ENV (same variable)")]
pub const PHOTON_POSTGRES_PAGE_SIZE: &str = PAGE_SIZE_ENV;
/// Former name of [`MAX_PAYLOAD_BYTES_ENV`].
#[deprecated(note = "use MAX_PAYLOAD_BYTES_ENV (same variable)")]
pub const PHOTON_POSTGRES_MAX_PAYLOAD_BYTES: &str = MAX_PAYLOAD_BYTES_ENV;
/// Former name of [`RECHECK_INTERVAL_ENV`].
#[deprecated(note = "use RECHECK_INTERVAL_ENV (same variable)")]
pub const PHOTON_POSTGRES_RECHECK_INTERVAL: &str = RECHECK_INTERVAL_ENV;
/// Former name of [`RETENTION_MAX_AGE_ENV`].
#[deprecated(note = "use RETENTION_MAX_AGE_ENV (same variable)")]
pub const PHOTON_POSTGRES_RETENTION_MAX_AGE: &str = RETENTION_MAX_AGE_ENV;
/// Former name of [`RETENTION_MAX_EVENTS_ENV`].
#[deprecated(note = "use RETENTION_MAX_EVENTS_ENV (same variable)")]
pub const PHOTON_POSTGRES_RETENTION_MAX_EVENTS: &str = RETENTION_MAX_EVENTS_ENV;
/// Former name of [`RETENTION_DEAD_LETTERS_ENV`].
#[deprecated(note = "use RETENTION_DEAD_LETTERS_ENV (same variable)")]
pub const PHOTON_POSTGRES_RETENTION_DEAD_LETTERS: &str = RETENTION_DEAD_LETTERS_ENV;
/// Former name of [`RETENTION_INTERVAL_ENV`].
#[deprecated(note = "use RETENTION_INTERVAL_ENV (same variable)")]
pub const PHOTON_POSTGRES_RETENTION_INTERVAL: &str = RETENTION_INTERVAL_ENV;
