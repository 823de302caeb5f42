//! Typed configuration of the NATS port: builder calls, then environment variables (read
//! in `env.rs`, in Photon's one dialect: `photon_core::config`), then defaults. A value
//! that cannot be parsed is an error naming its variable and what is accepted, never a
//! silent default.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::de;
use photon_core::Result;
use serde::Deserialize;

use crate::port::NatsStoragePort;

/// Server URL(s), comma separated. Default `nats://127.0.0.1:4222`.
pub const URL_ENV: &str = "PHOTON_NATS_URL";
/// Prefix of every stream and subject this port creates (`[A-Za-z0-9-]`, 1 to 32
/// characters). Default `photon`.
pub const PREFIX_ENV: &str = "PHOTON_NATS_PREFIX";
/// Stream replicas, 1 to 5. Default 1.
pub const REPLICAS_ENV: &str = "PHOTON_NATS_REPLICAS";
/// Retention by age, a duration (`7d`); `0` or unset keeps events regardless of age.
pub const RETENTION_MAX_AGE_ENV: &str = "PHOTON_NATS_RETENTION_MAX_AGE";
/// Retention by size per stream, a size (`10GiB`); `0` or unset is unlimited.
pub const RETENTION_MAX_BYTES_ENV: &str = "PHOTON_NATS_RETENTION_MAX_BYTES";
/// Streams (shards) per topic, 1 to 64; keys are spread over them by a stable hash.
/// Default 1.
pub const SHARDS_ENV: &str = "PHOTON_NATS_SHARDS";
/// A flag. `true` (default): `append` returns after the server's ack. `false`: once sent;
/// a failed ack is reported by `flush()` and the next `append`.
pub const SYNC_ACK_ENV: &str = "PHOTON_NATS_SYNC_ACK";
/// Publishes awaiting their ack at once, 1 to 65536. Default 256.
pub const MAX_IN_FLIGHT_ENV: &str = "PHOTON_NATS_MAX_IN_FLIGHT";
/// Replay cursor: `stream_seq` (default: replay from a stream sequence) or `tail_only`.
pub const REPLAY_CURSOR_ENV: &str = "PHOTON_NATS_REPLAY_CURSOR";
/// How long opening the port keeps trying to reach a server (retrying with a growing pause
/// while nothing answers) before it fails, a duration. Default `30s`.
pub const CONNECT_TIMEOUT_ENV: &str = "PHOTON_NATS_CONNECT_TIMEOUT";
/// A flag: `true` to apply the retention limits to dead-letter topics (`*.dlq`) too.
/// Default `false`: dead letters are kept until deleted explicitly.
pub const RETENTION_DEAD_LETTERS_ENV: &str = "PHOTON_NATS_RETENTION_DEAD_LETTERS";
/// Path of a NATS credentials (`.creds`) file.
pub const CREDENTIALS_FILE_ENV: &str = "PHOTON_NATS_CREDENTIALS_FILE";
/// A flag: `true` to require TLS. Default `false`.
pub const TLS_REQUIRED_ENV: &str = "PHOTON_NATS_TLS_REQUIRED";
/// Path of a PEM file of extra root certificates.
pub const TLS_CA_FILE_ENV: &str = "PHOTON_NATS_TLS_CA_FILE";
/// Path of the PEM client certificate (with [`TLS_KEY_FILE_ENV`]).
pub const TLS_CERT_FILE_ENV: &str = "PHOTON_NATS_TLS_CERT_FILE";
/// Path of the PEM client key (with [`TLS_CERT_FILE_ENV`]).
pub const TLS_KEY_FILE_ENV: &str = "PHOTON_NATS_TLS_KEY_FILE";

/// Deprecated name of [`PREFIX_ENV`], still read.
#[deprecated(note = "use PHOTON_NATS_PREFIX, the name every adapter uses")]
pub const PHOTON_NATS_STREAM_PREFIX: &str = "PHOTON_NATS_STREAM_PREFIX";
/// Deprecated name of [`SHARDS_ENV`], still read.
#[deprecated(note = "use PHOTON_NATS_SHARDS, the name every adapter uses")]
pub const PHOTON_NATS_STREAM_SHARDS: &str = "PHOTON_NATS_STREAM_SHARDS";
/// Deprecated name of [`RETENTION_MAX_AGE_ENV`], still read.
#[deprecated(note = "use PHOTON_NATS_RETENTION_MAX_AGE, the name every adapter uses")]
pub const PHOTON_NATS_MAX_AGE: &str = "PHOTON_NATS_MAX_AGE";
/// Deprecated name of [`RETENTION_MAX_BYTES_ENV`], still read, where a one-letter
/// suffix keeps its old binary meaning (`64k` = 64 KiB, `2g` = 2 GiB).
#[deprecated(note = "use PHOTON_NATS_RETENTION_MAX_BYTES (sizes such as 2GiB)")]
pub const PHOTON_NATS_MAX_BYTES: &str = "PHOTON_NATS_MAX_BYTES";

/// Former name of [`URL_ENV`].
#[deprecated(note = "use URL_ENV (same variable)")]
pub const PHOTON_NATS_URL: &str = URL_ENV;
/// Former name of [`PREFIX_ENV`].
#[deprecated(note = "use PREFIX_ENV (same variable)")]
pub const PHOTON_NATS_PREFIX: &str = PREFIX_ENV;
/// Former name of [`REPLICAS_ENV`].
#[deprecated(note = "use REPLICAS_ENV (same variable)")]
pub const PHOTON_NATS_REPLICAS: &str = REPLICAS_ENV;
/// Former name of [`RETENTION_MAX_AGE_ENV`].
#[deprecated(note = "use RETENTION_MAX_AGE_ENV (same variable)")]
pub const PHOTON_NATS_RETENTION_MAX_AGE: &str = RETENTION_MAX_AGE_ENV;
/// Former name of [`RETENTION_MAX_BYTES_ENV`].
#[deprecated(note = "use RETENTION_MAX_BYTES_ENV (same variable)")]
pub const PHOTON_NATS_RETENTION_MAX_BYTES: &str = RETENTION_MAX_BYTES_ENV;
/// Former name of [`SHARDS_ENV`].
#[deprecated(note = "use SHARDS_ENV (same variable)")]
pub const PHOTON_NATS_SHARDS: &str = SHARDS_ENV;
/// Former name of [`SYNC_ACK_ENV`].
#[deprecated(note = "use SYNC_ACK_ENV (same variable)")]
pub const PHOTON_NATS_SYNC_ACK: &str = SYNC_ACK_ENV;
/// Former name of [`MAX_IN_FLIGHT_ENV`].
#[deprecated(note = "use MAX_IN_FLIGHT_ENV (same variable)")]
pub const PHOTON_NATS_MAX_IN_FLIGHT: &str = MAX_IN_FLIGHT_ENV;
/// Former name of [`REPLAY_CURSOR_ENV`].
#[deprecated(note = "use REPLAY_CURSOR_ENV (same variable)")]
pub const PHOTON_NATS_REPLAY_CURSOR: &str = REPLAY_CURSOR_ENV;
/// Former name of [`CONNECT_TIMEOUT_ENV`].
#[deprecated(note = "use CONNECT_TIMEOUT_ENV (same variable)")]
pub const PHOTON_NATS_CONNECT_TIMEOUT: &str = CONNECT_TIMEOUT_ENV;
/// Former name of [`RETENTION_DEAD_LETTERS_ENV`].
#[deprecated(note = "use RETENTION_DEAD_LETTERS_ENV (same variable)")]
pub const PHOTON_NATS_RETENTION_DEAD_LETTERS: &str = RETENTION_DEAD_LETTERS_ENV;
/// Former name of [`CREDENTIALS_FILE_ENV`].
#[deprecated(note = "use CREDENTIALS_FILE_ENV (same variable)")]
pub const PHOTON_NATS_CREDENTIALS_FILE: &str = CREDENTIALS_FILE_ENV;
/// Former name of [`TLS_REQUIRED_ENV`].
#[deprecated(note = "use TLS_REQUIRED_ENV (same variable)")]
pub const PHOTON_NATS_TLS_REQUIRED: &str = TLS_REQUIRED_ENV;
/// Former name of [`TLS_CA_FILE_ENV`].
#[deprecated(note = "use TLS_CA_FILE_ENV (same variable)")]
pub const PHOTON_NATS_TLS_CA_FILE: &str = TLS_CA_FILE_ENV;
/// Former name of [`TLS_CERT_FILE_ENV`].
#[deprecated(note = "use TLS_CERT_FILE_ENV (same variable)")]
pub const PHOTON_NATS_TLS_CERT_FILE: &str = TLS_CERT_FILE_ENV;
/// Former name of [`TLS_KEY_FILE_ENV`].
#[deprecated(note = "use TLS_KEY_FILE_ENV (same variable)")]
pub const PHOTON_NATS_TLS_KEY_FILE: &str = TLS_KEY_FILE_ENV;

/// Default server URL.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// Default of [`CONNECT_TIMEOUT_ENV`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where subscriptions may start (`stream_seq` or `tail_only` in variables and files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReplayCursor {
    /// Replay from any retained stream sequence (`StartAt::Beginning` and `AfterSeq` work).
    #[default]
    StreamSeq,
    /// Only events appended after a subscription starts; replay requests start at the tail.
    TailOnly,
}

/// Client TLS settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct TlsConfig {
    /// Refuse to connect without TLS.
    #[serde(deserialize_with = "de::flag")]
    pub required: bool,
    /// Extra root certificates (PEM).
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// Resolved configuration of a [`NatsStoragePort`]. Deserializable (missing fields take
/// their defaults; durations and sizes in the dialect of `photon_core::config`); connecting
/// checks it ([`NatsConfig::validate`]).
///
/// ```
/// let config: photon_backend_nats::NatsConfig = serde_json::from_str(
///     r#"{"prefix": "shop", "shards": 4, "retention_max_age": "7d", "retention_max_bytes": "10GiB"}"#,
/// ).unwrap();
/// assert_eq!(config.shards, 4);
/// assert_eq!(config.retention_max_bytes, Some(10 << 30));
/// ```
///
/// `Debug` hides passwords and tokens in URLs and prints the credentials file's path, never
/// its content.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct NatsConfig {
    /// Server URL(s), comma separated.
    pub url: String,
    /// Prefix of streams and subjects.
    #[serde(alias = "stream_prefix")]
    pub prefix: String,
    /// Stream replicas.
    pub replicas: usize,
    /// Oldest event kept; `None` (or zero) keeps events regardless of age.
    #[serde(deserialize_with = "de::optional_duration")]
    pub retention_max_age: Option<Duration>,
    /// Largest stream size in bytes; `None` (or zero) is unlimited.
    #[serde(deserialize_with = "de::optional_size")]
    pub retention_max_bytes: Option<u64>,
    /// Whether the retention limits apply to dead-letter topics (`*.dlq`) too.
    #[serde(deserialize_with = "de::flag")]
    pub retention_dead_letters: bool,
    /// Streams (shards) per topic.
    #[serde(alias = "stream_shards")]
    pub shards: u32,
    /// Whether `append` waits for the server's ack.
    #[serde(deserialize_with = "de::flag")]
    pub sync_ack: bool,
    /// Publishes awaiting their ack at once.
    pub max_in_flight: usize,
    /// Replay reach of subscriptions.
    pub replay_cursor: ReplayCursor,
    /// How long opening keeps trying to reach a server.
    #[serde(deserialize_with = "de::duration")]
    pub connect_timeout: Duration,
    /// NATS credentials file.
    pub credentials_file: Option<PathBuf>,
    /// TLS settings.
    pub tls: TlsConfig,
}

impl std::fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("replicas", &self.replicas)
            .field("retention_max_age", &self.retention_max_age)
            .field("retention_max_bytes", &self.retention_max_bytes)
            .field("retention_dead_letters", &self.retention_dead_letters)
            .field("shards", &self.shards)
            .field("sync_ack", &self.sync_ack)
            .field("max_in_flight", &self.max_in_flight)
            .field("replay_cursor", &self.replay_cursor)
            .field("connect_timeout", &self.connect_timeout)
            .field("credentials_file", &self.credentials_file)
            .field("tls", &self.tls)
            .finish()
    }
}

/// The URL list with any `user:password@` or `token@` part replaced by `***@`.
pub(crate) fn redact_url(url: &str) -> String {
    url.split(',')
        .map(|part| match (part.find("://"), part.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***{}", &part[..scheme + 3], &part[at..])
            }
            (None, Some(at)) => format!("***{}", &part[at..]),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl Default for NatsConfig {
    fn default() -> Self {
        Self {
            url: DEFAULT_URL.to_owned(),
            prefix: "photon".to_owned(),
            replicas: 1,
            retention_max_age: None,
            retention_max_bytes: None,
            retention_dead_letters: false,
            shards: 1,
            sync_ack: true,
            max_in_flight: 256,
            replay_cursor: ReplayCursor::StreamSeq,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            credentials_file: None,
            tls: TlsConfig::default(),
        }
    }
}

impl NatsConfig {
    /// Defaults overridden by the `PHOTON_NATS_*` environment variables.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the first variable whose value is refused.
    pub fn from_env() -> Result<Self> {
        NatsStoragePortBuilder::new().config()
    }

    /// Checks values that parse but cannot work: empty URLs, a prefix outside
    /// `[A-Za-z0-9-]`, counts out of range, a zero connect timeout.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field and what is accepted.
    pub fn validate(&self) -> Result<()> {
        crate::env::validate(self)
    }
}

/// Builds a [`NatsStoragePort`]: builder calls win over environment variables, which win
/// over defaults.
///
/// | setting | variable | default |
/// |---|---|---|
/// | [`url`](Self::url) | `PHOTON_NATS_URL` | `nats://127.0.0.1:4222` |
/// | [`prefix`](Self::prefix) | `PHOTON_NATS_PREFIX` | `photon` |
/// | [`replicas`](Self::replicas) | `PHOTON_NATS_REPLICAS` | 1 |
/// | [`retention_max_age`](Self::retention_max_age) | `PHOTON_NATS_RETENTION_MAX_AGE` | unset (no limit) |
/// | [`retention_max_bytes`](Self::retention_max_bytes) | `PHOTON_NATS_RETENTION_MAX_BYTES` | unset (no limit) |
/// | [`retention_dead_letters`](Self::retention_dead_letters) | `PHOTON_NATS_RETENTION_DEAD_LETTERS` | `false` |
/// | [`shards`](Self::shards) | `PHOTON_NATS_SHARDS` | 1 |
/// | [`sync_ack`](Self::sync_ack) | `PHOTON_NATS_SYNC_ACK` | `true` |
/// | [`max_in_flight`](Self::max_in_flight) | `PHOTON_NATS_MAX_IN_FLIGHT` | 256 |
/// | [`replay_cursor`](Self::replay_cursor) | `PHOTON_NATS_REPLAY_CURSOR` | `stream_seq` |
/// | [`connect_timeout`](Self::connect_timeout) | `PHOTON_NATS_CONNECT_TIMEOUT` | `30s` |
/// | [`credentials_file`](Self::credentials_file) | `PHOTON_NATS_CREDENTIALS_FILE` | none |
/// | [`tls_required`](Self::tls_required) | `PHOTON_NATS_TLS_REQUIRED` | `false` |
/// | [`tls_ca_file`](Self::tls_ca_file) | `PHOTON_NATS_TLS_CA_FILE` | none |
/// | [`tls_client_cert`](Self::tls_client_cert) | `PHOTON_NATS_TLS_CERT_FILE` and `PHOTON_NATS_TLS_KEY_FILE` | none |
///
/// Deprecated names still read: `PHOTON_NATS_STREAM_PREFIX`, `PHOTON_NATS_STREAM_SHARDS`,
/// `PHOTON_NATS_MAX_AGE` and `PHOTON_NATS_MAX_BYTES` (whose `k`, `m`, `g` stay binary).
///
/// ```
/// use photon_backend_nats::NatsStoragePortBuilder;
/// let builder = NatsStoragePortBuilder::new().url("nats://127.0.0.1:4222").shards(4);
/// assert_eq!(builder.config().unwrap().shards, 4);
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct NatsStoragePortBuilder {
    pub(crate) url: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) replicas: Option<usize>,
    pub(crate) retention_max_age: Option<Duration>,
    pub(crate) retention_max_bytes: Option<u64>,
    pub(crate) shards: Option<u32>,
    pub(crate) sync_ack: Option<bool>,
    pub(crate) max_in_flight: Option<usize>,
    pub(crate) replay_cursor: Option<ReplayCursor>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) retention_dead_letters: Option<bool>,
    pub(crate) credentials_file: Option<PathBuf>,
    pub(crate) tls_required: Option<bool>,
    pub(crate) tls_ca_file: Option<PathBuf>,
    pub(crate) tls_client_cert: Option<(PathBuf, PathBuf)>,
}

impl NatsStoragePortBuilder {
    /// A builder with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Server URL(s), comma separated.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().url("nats://10.0.0.1:4222");
    /// ```
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Prefix of streams and subjects (`[A-Za-z0-9-]`, 1 to 32 characters).
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().prefix("shop");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Deprecated name of [`NatsStoragePortBuilder::prefix`].
    #[deprecated(note = "use prefix(), the name every adapter uses")]
    pub fn stream_prefix(self, prefix: impl Into<String>) -> Self {
        self.prefix(prefix)
    }

    /// Stream replicas, 1 to 5.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().replicas(3);
    /// ```
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = Some(replicas);
        self
    }

    /// Oldest event kept; `Duration::ZERO` keeps events regardless of age.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new()
    ///     .retention_max_age(Duration::from_secs(86_400));
    /// ```
    pub fn retention_max_age(mut self, max_age: Duration) -> Self {
        self.retention_max_age = Some(max_age);
        self
    }

    /// Deprecated name of [`NatsStoragePortBuilder::retention_max_age`].
    #[deprecated(note = "use retention_max_age(), the name every adapter uses")]
    pub fn max_age(self, max_age: Duration) -> Self {
        self.retention_max_age(max_age)
    }

    /// Largest stream size in bytes; 0 is unlimited.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().retention_max_bytes(1 << 30);
    /// ```
    pub fn retention_max_bytes(mut self, max_bytes: u64) -> Self {
        self.retention_max_bytes = Some(max_bytes);
        self
    }

    /// Deprecated name of [`NatsStoragePortBuilder::retention_max_bytes`].
    #[deprecated(note = "use retention_max_bytes(), the name every adapter uses")]
    pub fn max_bytes(self, max_bytes: u64) -> Self {
        self.retention_max_bytes(max_bytes)
    }

    /// Streams (shards) per topic, 1 to 64.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().shards(4);
    /// ```
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Deprecated name of [`NatsStoragePortBuilder::shards`].
    #[deprecated(note = "use shards(), the name every adapter uses")]
    pub fn stream_shards(self, shards: u32) -> Self {
        self.shards(shards)
    }

    /// Whether `append` waits for the server's ack.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().sync_ack(false);
    /// ```
    pub fn sync_ack(mut self, sync_ack: bool) -> Self {
        self.sync_ack = Some(sync_ack);
        self
    }

    /// Publishes awaiting their ack at once, 1 to 65536.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().max_in_flight(1024);
    /// ```
    pub fn max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = Some(max_in_flight);
        self
    }

    /// Replay reach of subscriptions.
    ///
    /// ```
    /// use photon_backend_nats::{NatsStoragePortBuilder, ReplayCursor};
    /// let b = NatsStoragePortBuilder::new().replay_cursor(ReplayCursor::TailOnly);
    /// ```
    pub fn replay_cursor(mut self, cursor: ReplayCursor) -> Self {
        self.replay_cursor = Some(cursor);
        self
    }

    /// How long opening keeps trying to reach a server before it fails with
    /// [`photon_core::PhotonError::Unavailable`]; attempts are retried with a growing
    /// pause (up to 1 s) while nothing answers.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().connect_timeout(Duration::from_secs(60));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Whether the age and size limits apply to dead-letter topics (`*.dlq`) too; by
    /// default they do not, and dead letters are kept until deleted explicitly.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().retention_dead_letters(true);
    /// ```
    pub fn retention_dead_letters(mut self, apply: bool) -> Self {
        self.retention_dead_letters = Some(apply);
        self
    }

    /// NATS credentials file.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().credentials_file("/etc/photon/app.creds");
    /// ```
    pub fn credentials_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.credentials_file = Some(path.into());
        self
    }

    /// Requires TLS.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().tls_required(true);
    /// ```
    pub fn tls_required(mut self, required: bool) -> Self {
        self.tls_required = Some(required);
        self
    }

    /// Extra root certificates (PEM file).
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().tls_ca_file("/etc/photon/ca.pem");
    /// ```
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Client certificate and key (PEM files).
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new()
    ///     .tls_client_cert("/etc/photon/cert.pem", "/etc/photon/key.pem");
    /// ```
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls_client_cert = Some((cert.into(), key.into()));
        self
    }

    /// The resolved configuration (builder, then environment, then defaults).
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the variable or field and the accepted values.
    pub fn config(&self) -> Result<NatsConfig> {
        self.resolve(&photon_core::config::Env::process())
    }

    /// Connects and returns the port.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] for a refused value, [`photon_core::PhotonError::Unavailable`] when the
    /// server cannot be reached.
    pub async fn build(self) -> Result<NatsStoragePort> {
        NatsStoragePort::connect(self.config()?).await
    }
}
