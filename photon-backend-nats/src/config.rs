//! Typed configuration of the NATS port: builder calls, then environment variables, then
//! defaults. A value that cannot be parsed is an error naming its variable and what is
//! accepted, never a silent default.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::Result;

use crate::port::NatsStoragePort;

/// Server URL(s), comma separated. Default `nats://127.0.0.1:4222`.
pub const PHOTON_NATS_URL: &str = "PHOTON_NATS_URL";
/// Prefix of every stream and subject this port creates (`[A-Za-z0-9-]`, 1 to 32
/// characters). Default `photon`.
pub const PHOTON_NATS_STREAM_PREFIX: &str = "PHOTON_NATS_STREAM_PREFIX";
/// Stream replicas, 1 to 5. Default 1.
pub const PHOTON_NATS_REPLICAS: &str = "PHOTON_NATS_REPLICAS";
/// Retention by age: `0` (unlimited, the default) or a number with `ms`, `s`, `m`, `h` or `d`.
pub const PHOTON_NATS_MAX_AGE: &str = "PHOTON_NATS_MAX_AGE";
/// Retention by size, per stream: bytes, optionally with `k`, `m` or `g` (binary); `0` is
/// unlimited (the default).
pub const PHOTON_NATS_MAX_BYTES: &str = "PHOTON_NATS_MAX_BYTES";
/// Streams per topic, 1 to 64; keys are spread over them by a stable hash. Default 1.
pub const PHOTON_NATS_STREAM_SHARDS: &str = "PHOTON_NATS_STREAM_SHARDS";
/// `true` (default): `append` returns after the server's ack. `false`: once sent; a failed
/// ack is reported by `flush()` and the next `append`.
pub const PHOTON_NATS_SYNC_ACK: &str = "PHOTON_NATS_SYNC_ACK";
/// Publishes awaiting their ack at once, 1 to 65536. Default 256.
pub const PHOTON_NATS_MAX_IN_FLIGHT: &str = "PHOTON_NATS_MAX_IN_FLIGHT";
/// Replay cursor: `stream_seq` (default: replay from a stream sequence) or `tail_only`.
pub const PHOTON_NATS_REPLAY_CURSOR: &str = "PHOTON_NATS_REPLAY_CURSOR";
/// How long opening the port keeps trying to reach a server (retrying with a growing pause
/// while nothing answers) before it fails: a number with `ms`, `s`, `m`, `h` or `d`.
/// Default `30s`.
pub const PHOTON_NATS_CONNECT_TIMEOUT: &str = "PHOTON_NATS_CONNECT_TIMEOUT";
/// `true` to apply [`PHOTON_NATS_MAX_AGE`] and [`PHOTON_NATS_MAX_BYTES`] to dead-letter
/// topics (`*.dlq`) too. Default `false`: dead letters are kept until deleted explicitly.
pub const PHOTON_NATS_RETENTION_DEAD_LETTERS: &str = "PHOTON_NATS_RETENTION_DEAD_LETTERS";
/// Path of a NATS credentials (`.creds`) file.
pub const PHOTON_NATS_CREDENTIALS_FILE: &str = "PHOTON_NATS_CREDENTIALS_FILE";
/// `true` to require TLS. Default `false`.
pub const PHOTON_NATS_TLS_REQUIRED: &str = "PHOTON_NATS_TLS_REQUIRED";
/// Path of a PEM file of extra root certificates.
pub const PHOTON_NATS_TLS_CA_FILE: &str = "PHOTON_NATS_TLS_CA_FILE";
/// Path of the PEM client certificate (with [`PHOTON_NATS_TLS_KEY_FILE`]).
pub const PHOTON_NATS_TLS_CERT_FILE: &str = "PHOTON_NATS_TLS_CERT_FILE";
/// Path of the PEM client key (with [`PHOTON_NATS_TLS_CERT_FILE`]).
pub const PHOTON_NATS_TLS_KEY_FILE: &str = "PHOTON_NATS_TLS_KEY_FILE";

/// Default server URL.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// Default of [`PHOTON_NATS_CONNECT_TIMEOUT`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where subscriptions may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplayCursor {
    /// Replay from any retained stream sequence (`StartAt::Beginning` and `AfterSeq` work).
    #[default]
    StreamSeq,
    /// Only events appended after a subscription starts; replay requests start at the tail.
    TailOnly,
}

/// Retention limits applied to every event stream (dead-letter topics only when
/// `dead_letters` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Retention {
    /// Oldest event kept; `None` keeps events regardless of age.
    pub max_age: Option<Duration>,
    /// Largest stream size in bytes; `None` is unlimited.
    pub max_bytes: Option<u64>,
    /// Whether the limits apply to dead-letter topics (`*.dlq`) too.
    pub dead_letters: bool,
}

/// Client TLS settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TlsConfig {
    /// Refuse to connect without TLS.
    pub required: bool,
    /// Extra root certificates (PEM).
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// Resolved configuration of a [`NatsStoragePort`].
///
/// `Debug` hides passwords and tokens in URLs and prints the credentials file's path, never
/// its content.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NatsConfig {
    /// Server URL(s), comma separated.
    pub url: String,
    /// Prefix of streams and subjects.
    pub stream_prefix: String,
    /// Stream replicas.
    pub replicas: usize,
    /// Retention limits.
    pub retention: Retention,
    /// Streams per topic.
    pub stream_shards: u32,
    /// Whether `append` waits for the server's ack.
    pub sync_ack: bool,
    /// Publishes awaiting their ack at once.
    pub max_in_flight: usize,
    /// Replay reach of subscriptions.
    pub replay_cursor: ReplayCursor,
    /// How long opening keeps trying to reach a server.
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
            .field("stream_prefix", &self.stream_prefix)
            .field("replicas", &self.replicas)
            .field("retention", &self.retention)
            .field("stream_shards", &self.stream_shards)
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
            stream_prefix: "photon".to_owned(),
            replicas: 1,
            retention: Retention::default(),
            stream_shards: 1,
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
}

/// Builds a [`NatsStoragePort`]: builder calls win over environment variables, which win
/// over defaults.
///
/// ```
/// use photon_backend_nats::NatsStoragePortBuilder;
/// let builder = NatsStoragePortBuilder::new().url("nats://127.0.0.1:4222").stream_shards(4);
/// assert_eq!(builder.config().unwrap().stream_shards, 4);
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct NatsStoragePortBuilder {
    pub(crate) url: Option<String>,
    pub(crate) stream_prefix: Option<String>,
    pub(crate) replicas: Option<usize>,
    pub(crate) max_age: Option<Duration>,
    pub(crate) max_bytes: Option<u64>,
    pub(crate) stream_shards: Option<u32>,
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
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().stream_prefix("shop");
    /// ```
    pub fn stream_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.stream_prefix = Some(prefix.into());
        self
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
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().max_age(Duration::from_secs(86_400));
    /// ```
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// Largest stream size in bytes; 0 is unlimited.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().max_bytes(1 << 30);
    /// ```
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// Streams per topic, 1 to 64.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().stream_shards(4);
    /// ```
    pub fn stream_shards(mut self, shards: u32) -> Self {
        self.stream_shards = Some(shards);
        self
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
        self.resolve(|name| std::env::var(name).ok())
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
