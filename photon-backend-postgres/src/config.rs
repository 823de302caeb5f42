//! Typed configuration of the PostgreSQL port: builder call > environment variable >
//! default (resolved in `env.rs`). Values use Photon's one dialect (`photon_core::config`):
//! durations such as `100ms`, sizes such as `1MiB`, flags such as `on`.

use std::time::Duration;

use photon_core::config::de;
use photon_core::{Result, DEFAULT_MAX_PAYLOAD_BYTES};
use serde::Deserialize;

use crate::port::PostgresStoragePort;

/// Connection string, as a URL (`postgres://user:password@host:port/database`) or as
/// `key=value` pairs. Default `postgres://postgres@127.0.0.1:5432/postgres`. Its TLS
/// parameters (with the `tls` feature, on by default):
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
pub const PHOTON_POSTGRES_URL: &str = "PHOTON_POSTGRES_URL";
/// Most connections of the page-read pool (replay pages, queries, checkpoint loads,
/// transactional handlers, retention sweeps), a count. Default 8. The writer has
/// [`PHOTON_POSTGRES_WRITER_CONNECTIONS`] of its own, consumer-group coordination two, the
/// live tail's listener one.
pub const PHOTON_POSTGRES_POOL_SIZE: &str = "PHOTON_POSTGRES_POOL_SIZE";
/// Most connections of the writer (each writer lane runs one transaction at a time on one
/// of them: appends, checkpoint commits, truncations), a count. Default 4. As many lanes
/// can wait for a lock at once.
pub const PHOTON_POSTGRES_WRITER_CONNECTIONS: &str = "PHOTON_POSTGRES_WRITER_CONNECTIONS";
/// Schema holding Photon's tables, created when missing: lowercase letters, digits and
/// `_`, at most 56 characters, not starting with a digit. Default `photon`.
pub const PHOTON_POSTGRES_SCHEMA: &str = "PHOTON_POSTGRES_SCHEMA";
/// Longest wait for a new connection or a free pooled one, a duration. Default `10s`.
pub const PHOTON_POSTGRES_CONNECT_TIMEOUT: &str = "PHOTON_POSTGRES_CONNECT_TIMEOUT";
/// Longest wait of any statement of the port's sessions for a lock (PostgreSQL's
/// `lock_timeout`), a duration. Default `5s`. A wait that outlasts it fails with a
/// retryable error (`PhotonError::Unavailable`) instead of hanging: an append to a topic
/// whose row an open transaction holds, a transactional handler whose checkpoint row
/// another consumer's transaction holds.
pub const PHOTON_POSTGRES_LOCK_TIMEOUT: &str = "PHOTON_POSTGRES_LOCK_TIMEOUT";
/// Most writes (appends, checkpoints) committed in one transaction, a count. Default 4096.
pub const PHOTON_POSTGRES_MAX_BATCH: &str = "PHOTON_POSTGRES_MAX_BATCH";
/// Records read per replay page of a subscription, a count. Default 512.
pub const PHOTON_POSTGRES_PAGE_SIZE: &str = "PHOTON_POSTGRES_PAGE_SIZE";
/// Largest accepted body (encoded actor, payload and headers), a size. Default `1MiB`.
pub const PHOTON_POSTGRES_MAX_PAYLOAD_BYTES: &str = "PHOTON_POSTGRES_MAX_PAYLOAD_BYTES";
/// How often a live subscriber reads again without a notification, a duration: the
/// backstop for a notification lost with the listening connection. Default `5s`.
pub const PHOTON_POSTGRES_RECHECK_INTERVAL: &str = "PHOTON_POSTGRES_RECHECK_INTERVAL";
/// Events older than this duration are deleted by the retention sweep. Unset: kept.
pub const PHOTON_POSTGRES_RETENTION_MAX_AGE: &str = "PHOTON_POSTGRES_RETENTION_MAX_AGE";
/// At most this many newest events are kept per topic by the retention sweep. Unset: all.
pub const PHOTON_POSTGRES_RETENTION_MAX_EVENTS: &str = "PHOTON_POSTGRES_RETENTION_MAX_EVENTS";
/// A flag: `true` to apply the retention sweep to dead-letter topics (`*.dlq`) too.
/// Default `false`.
pub const PHOTON_POSTGRES_RETENTION_DEAD_LETTERS: &str = "PHOTON_POSTGRES_RETENTION_DEAD_LETTERS";
/// Time between retention sweeps, a duration. Default `60s`.
pub const PHOTON_POSTGRES_RETENTION_INTERVAL: &str = "PHOTON_POSTGRES_RETENTION_INTERVAL";

/// Configuration of a [`PostgresStoragePort`]. Build it with
/// [`PostgresStoragePortBuilder`] or [`PostgresConfig::from_env`], or deserialize it
/// (missing fields take their defaults); opening the port checks it. `Debug` hides the
/// password of the connection string.
///
/// ```
/// let config: photon_backend_postgres::PostgresConfig = serde_json::from_str(
///     r#"{"url": "postgres://app@db/events", "schema": "orders", "recheck_interval": "2s"}"#,
/// ).unwrap();
/// assert_eq!(config.recheck_interval, std::time::Duration::from_secs(2));
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct PostgresConfig {
    /// Connection string.
    pub url: String,
    /// Most connections of the page-read pool.
    pub pool_size: usize,
    /// Most connections of the writer lanes.
    pub writer_connections: usize,
    /// Schema of Photon's tables.
    pub schema: String,
    /// Longest wait for a connection.
    #[serde(deserialize_with = "de::duration")]
    pub connect_timeout: Duration,
    /// Longest lock wait of a statement (`lock_timeout` of every session).
    #[serde(deserialize_with = "de::duration")]
    pub lock_timeout: Duration,
    /// Most writes per transaction.
    pub max_batch: usize,
    /// Records per replay page.
    pub page_size: usize,
    /// Largest accepted body in bytes.
    #[serde(deserialize_with = "de::size")]
    pub max_payload_bytes: usize,
    /// Re-read interval of live subscribers without a notification.
    #[serde(deserialize_with = "de::duration")]
    pub recheck_interval: Duration,
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

/// The default connection string.
pub(crate) const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            url: DEFAULT_URL.to_owned(),
            pool_size: 8,
            writer_connections: 4,
            schema: "photon".to_owned(),
            connect_timeout: Duration::from_secs(10),
            lock_timeout: Duration::from_secs(5),
            max_batch: 4096,
            page_size: 512,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            recheck_interval: Duration::from_secs(5),
            retention_max_age: None,
            retention_max_events: None,
            retention_dead_letters: false,
            retention_interval: Duration::from_secs(60),
        }
    }
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &crate::env::redact(&self.url))
            .field("pool_size", &self.pool_size)
            .field("writer_connections", &self.writer_connections)
            .field("schema", &self.schema)
            .field("connect_timeout", &self.connect_timeout)
            .field("lock_timeout", &self.lock_timeout)
            .field("max_batch", &self.max_batch)
            .field("page_size", &self.page_size)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .field("recheck_interval", &self.recheck_interval)
            .field("retention_max_age", &self.retention_max_age)
            .field("retention_max_events", &self.retention_max_events)
            .field("retention_dead_letters", &self.retention_dead_letters)
            .field("retention_interval", &self.retention_interval)
            .finish()
    }
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
        crate::env::validate(self)
    }
}

/// Builds a [`PostgresStoragePort`]; every unset field falls back to its environment
/// variable, then to its default.
///
/// | setting | variable | default |
/// |---|---|---|
/// | [`url`](Self::url) | `PHOTON_POSTGRES_URL` | `postgres://postgres@127.0.0.1:5432/postgres` |
/// | [`pool_size`](Self::pool_size) (page reads, queries, transactional handlers; consumer-group leases have two connections of their own, the listener one) | `PHOTON_POSTGRES_POOL_SIZE` | 8 |
/// | [`writer_connections`](Self::writer_connections) (appends, checkpoint commits) | `PHOTON_POSTGRES_WRITER_CONNECTIONS` | 4 |
/// | [`schema`](Self::schema) | `PHOTON_POSTGRES_SCHEMA` | `photon` |
/// | [`connect_timeout`](Self::connect_timeout) | `PHOTON_POSTGRES_CONNECT_TIMEOUT` | `10s` |
/// | [`lock_timeout`](Self::lock_timeout) | `PHOTON_POSTGRES_LOCK_TIMEOUT` | `5s` |
/// | [`max_batch`](Self::max_batch) | `PHOTON_POSTGRES_MAX_BATCH` | 4096 |
/// | [`page_size`](Self::page_size) | `PHOTON_POSTGRES_PAGE_SIZE` | 512 |
/// | [`max_payload_bytes`](Self::max_payload_bytes) | `PHOTON_POSTGRES_MAX_PAYLOAD_BYTES` | `1MiB` |
/// | [`recheck_interval`](Self::recheck_interval) | `PHOTON_POSTGRES_RECHECK_INTERVAL` | `5s` |
/// | [`retention_max_age`](Self::retention_max_age) | `PHOTON_POSTGRES_RETENTION_MAX_AGE` | unset (kept) |
/// | [`retention_max_events`](Self::retention_max_events) | `PHOTON_POSTGRES_RETENTION_MAX_EVENTS` | unset (all) |
/// | [`retention_dead_letters`](Self::retention_dead_letters) | `PHOTON_POSTGRES_RETENTION_DEAD_LETTERS` | `false` |
/// | [`retention_interval`](Self::retention_interval) | `PHOTON_POSTGRES_RETENTION_INTERVAL` | `60s` |
#[derive(Clone, Default)]
#[must_use]
pub struct PostgresStoragePortBuilder {
    pub(crate) url: Option<String>,
    pub(crate) pool_size: Option<usize>,
    pub(crate) writer_connections: Option<usize>,
    pub(crate) schema: Option<String>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) lock_timeout: Option<Duration>,
    pub(crate) max_batch: Option<usize>,
    pub(crate) page_size: Option<usize>,
    pub(crate) max_payload_bytes: Option<usize>,
    pub(crate) recheck_interval: Option<Duration>,
    pub(crate) retention_max_age: Option<Duration>,
    pub(crate) retention_max_events: Option<u64>,
    pub(crate) retention_dead_letters: Option<bool>,
    pub(crate) retention_interval: Option<Duration>,
}

impl std::fmt::Debug for PostgresStoragePortBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStoragePortBuilder")
            .field("url", &self.url.as_deref().map(crate::env::redact))
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl PostgresStoragePortBuilder {
    /// A builder with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Connection string.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
    ///     .url("postgres://app@127.0.0.1:5432/events");
    /// ```
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Most connections of the page-read pool (replay pages, queries, checkpoint loads,
    /// transactional handlers, retention sweeps).
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().pool_size(16);
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// Most connections of the writer: each writer lane (one per topic being written, one
    /// for checkpoint commits) runs one transaction at a time on one of them.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().writer_connections(2);
    /// ```
    pub fn writer_connections(mut self, count: usize) -> Self {
        self.writer_connections = Some(count);
        self
    }

    /// Schema of Photon's tables (created when missing).
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().schema("billing");
    /// ```
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Longest wait for a new connection or a free pooled one.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
    ///     .connect_timeout(Duration::from_secs(3));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Longest wait of any statement of the port's sessions for a lock (PostgreSQL's
    /// `lock_timeout`, at most `i32::MAX` milliseconds). A wait that outlasts it fails
    /// with a retryable [`photon_core::PhotonError::Unavailable`] naming the cause, instead
    /// of hanging; the port's writer does not retry it by itself.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
    ///     .lock_timeout(Duration::from_secs(2));
    /// ```
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = Some(timeout);
        self
    }

    /// Most writes committed in one transaction.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().max_batch(1024);
    /// ```
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = Some(max_batch);
        self
    }

    /// Records read per replay page.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().page_size(256);
    /// ```
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = Some(page_size);
        self
    }

    /// Largest accepted body in bytes.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().max_payload_bytes(4 << 20);
    /// ```
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = Some(bytes);
        self
    }

    /// How often live subscribers read again without a notification.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
    ///     .recheck_interval(Duration::from_secs(1));
    /// ```
    pub fn recheck_interval(mut self, interval: Duration) -> Self {
        self.recheck_interval = Some(interval);
        self
    }

    /// Deletes events older than `age` in each retention sweep.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
    ///     .retention_max_age(Duration::from_secs(7 * 24 * 3600));
    /// ```
    pub fn retention_max_age(mut self, age: Duration) -> Self {
        self.retention_max_age = Some(age);
        self
    }

    /// Keeps at most `count` newest events per topic in each retention sweep.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().retention_max_events(1_000_000);
    /// ```
    pub fn retention_max_events(mut self, count: u64) -> Self {
        self.retention_max_events = Some(count);
        self
    }

    /// Whether the retention sweep applies to dead-letter topics (`*.dlq`) too.
    ///
    /// ```
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder().retention_dead_letters(true);
    /// ```
    pub fn retention_dead_letters(mut self, apply: bool) -> Self {
        self.retention_dead_letters = Some(apply);
        self
    }

    /// Time between retention sweeps.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = photon_backend_postgres::PostgresStoragePort::builder()
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
    pub fn config(self) -> Result<PostgresConfig> {
        self.resolve(&photon_core::config::Env::process())
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
