//! Typed configuration of the NATS port, from one settings table (`photon_core::settings!`):
//! builder call > environment variable > default. Values are in Photon's one dialect
//! (`photon_core::config`); a value that cannot be parsed or is out of bounds is an error
//! naming its variable or field and what is accepted, never a silent default.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{
    Alias, AnyDuration, Checked, Choice, Choices, Count, Env, FilePath, Flag, Limit, Optional,
    PositiveDuration, Size,
};
use photon_core::Result;

pub use crate::env::{ServerUrls, StreamPrefix};
use crate::port::NatsStoragePort;

/// Default server URL.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// Default of [`CONNECT_TIMEOUT_ENV`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where subscriptions may start (`stream_seq` or `tail_only` in variables and files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplayCursor {
    /// Replay from any retained stream sequence (`StartAt::Beginning` and `AfterSeq` work).
    #[default]
    StreamSeq,
    /// Only events appended after a subscription starts; replay requests start at the tail.
    TailOnly,
}

impl Choices for ReplayCursor {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("stream_seq", Self::StreamSeq),
        ("tail_only", Self::TailOnly),
    ];
}

photon_core::settings! {
    /// Client TLS settings (`tls` in a config file:
    /// `{"tls": {"required": true, "ca_file": "/etc/photon/ca.pem"}}`). A client
    /// certificate takes both [`cert_file`](Self::cert_file) and
    /// [`key_file`](Self::key_file); opening the port refuses one without the other.
    #[derive(Eq)]
    pub struct TlsConfig;

    /// Resolves the [`TlsConfig`] of a [`NatsStoragePortBuilder`] (which holds one; its
    /// `tls_*` setters reach into it).
    pub struct TlsConfigBuilder;

    /// Refuse to connect without TLS.
    required: Flag = false, env TLS_REQUIRED_ENV = "PHOTON_NATS_TLS_REQUIRED", shown "`false`";
    /// PEM file of extra root certificates.
    ca_file: Optional<FilePath> [into] = None,
        env TLS_CA_FILE_ENV = "PHOTON_NATS_TLS_CA_FILE", shown "none";
    /// PEM file of the client certificate (with `key_file`).
    cert_file: Optional<FilePath> [into] = None,
        env TLS_CERT_FILE_ENV = "PHOTON_NATS_TLS_CERT_FILE", shown "none";
    /// PEM file of the client certificate's private key (with `cert_file`).
    key_file: Optional<FilePath> [into] = None,
        env TLS_KEY_FILE_ENV = "PHOTON_NATS_TLS_KEY_FILE", shown "none";
}

photon_core::settings! {
    /// Resolved configuration of a [`NatsStoragePort`]. Deserializable (missing fields take
    /// their defaults; every value in the dialect of `photon_core::config`, checked, a
    /// refused one named); connecting checks it again ([`NatsConfig::validate`]).
    ///
    /// ```
    /// let config: photon_backend_nats::NatsConfig = serde_json::from_str(
    ///     r#"{"prefix": "shop", "shards": 4, "retention_max_age": "7d", "retention_max_bytes": "10GiB"}"#,
    /// ).unwrap();
    /// assert_eq!(config.shards, 4);
    /// assert_eq!(config.retention_max_bytes, Some(10 << 30));
    /// ```
    ///
    /// `Debug` hides passwords and tokens in URLs and prints the credentials file's path,
    /// never its content.
    #[derive(Eq)]
    pub struct NatsConfig;

    /// Builds a [`NatsStoragePort`]: builder calls win over environment variables, which
    /// win over defaults. Deprecated names still read: `PHOTON_NATS_STREAM_PREFIX`,
    /// `PHOTON_NATS_STREAM_SHARDS`, `PHOTON_NATS_MAX_AGE` and `PHOTON_NATS_MAX_BYTES`
    /// (whose `k`, `m`, `g` stay binary).
    ///
    /// ```
    /// use photon_backend_nats::NatsStoragePortBuilder;
    /// let builder = NatsStoragePortBuilder::new().url("nats://127.0.0.1:4222").shards(4);
    /// assert_eq!(builder.config().unwrap().shards, 4);
    /// ```
    pub struct NatsStoragePortBuilder;

    /// Server URL(s), comma separated.
    url: Checked<ServerUrls> [into] = DEFAULT_URL.to_owned(),
        env URL_ENV = "PHOTON_NATS_URL", shown "`nats://127.0.0.1:4222`";
    /// Prefix of every stream and subject this port creates.
    ///
    /// `[A-Za-z0-9-]`, 1 to 32 characters.
    prefix: Checked<StreamPrefix> [into] = "photon".to_owned(),
        env PREFIX_ENV = "PHOTON_NATS_PREFIX",
        aliases [Alias::deprecated("PHOTON_NATS_STREAM_PREFIX")],
        file aliases ["stream_prefix"], shown "`photon`";
    /// Stream replicas.
    replicas: Count<usize, 1, 5> = 1, env REPLICAS_ENV = "PHOTON_NATS_REPLICAS", shown "1";
    /// Oldest event kept; unset or zero keeps events regardless of age.
    retention_max_age: Limit<AnyDuration> = None,
        env RETENTION_MAX_AGE_ENV = "PHOTON_NATS_RETENTION_MAX_AGE",
        aliases [Alias::deprecated("PHOTON_NATS_MAX_AGE")], shown "unset (no limit)";
    /// Largest stream size in bytes; unset or zero is unlimited.
    retention_max_bytes: Limit<Size<u64>> = None,
        env RETENTION_MAX_BYTES_ENV = "PHOTON_NATS_RETENTION_MAX_BYTES",
        aliases [Alias::deprecated_binary_letters("PHOTON_NATS_MAX_BYTES")],
        shown "unset (no limit)";
    /// Whether the retention limits apply to dead-letter topics (`*.dlq`) too.
    ///
    /// By default they do not: dead letters are kept until deleted explicitly.
    retention_dead_letters: Flag = false,
        env RETENTION_DEAD_LETTERS_ENV = "PHOTON_NATS_RETENTION_DEAD_LETTERS", shown "`false`";
    /// Streams (shards) per topic; keys are spread over them by a stable hash.
    shards: Count<u32, 1, 64> = 1, env SHARDS_ENV = "PHOTON_NATS_SHARDS",
        aliases [Alias::deprecated("PHOTON_NATS_STREAM_SHARDS")],
        file aliases ["stream_shards"], shown "1";
    /// Whether `append` waits for the server's ack.
    ///
    /// `false`: once sent; a failed ack is reported by `flush()` and the next `append`.
    sync_ack: Flag = true, env SYNC_ACK_ENV = "PHOTON_NATS_SYNC_ACK", shown "`true`";
    /// Publishes awaiting their ack at once.
    max_in_flight: Count<usize, 1, 65_536> = 256,
        env MAX_IN_FLIGHT_ENV = "PHOTON_NATS_MAX_IN_FLIGHT", shown "256";
    /// Replay reach of subscriptions.
    replay_cursor: Choice<ReplayCursor> = ReplayCursor::StreamSeq,
        env REPLAY_CURSOR_ENV = "PHOTON_NATS_REPLAY_CURSOR", shown "`stream_seq`";
    /// How long opening the port keeps trying to reach a server.
    ///
    /// Attempts are retried with a growing pause (up to 1 s) while nothing answers; then
    /// opening fails with [`PhotonError::Unavailable`](photon_core::PhotonError::Unavailable).
    connect_timeout: PositiveDuration = DEFAULT_CONNECT_TIMEOUT,
        env CONNECT_TIMEOUT_ENV = "PHOTON_NATS_CONNECT_TIMEOUT", shown "`30s`";
    /// NATS credentials (`.creds`) file.
    credentials_file: Optional<FilePath> [into] = None,
        env CREDENTIALS_FILE_ENV = "PHOTON_NATS_CREDENTIALS_FILE", shown "none";

    groups {
        /// TLS settings.
        tls: TlsConfig => TlsConfigBuilder;
    }
}

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

impl NatsConfig {
    /// Defaults overridden by the `PHOTON_NATS_*` environment variables.
    ///
    /// # Errors
    /// [`PhotonError::Config`](photon_core::PhotonError::Config) naming the first variable whose value is refused.
    pub fn from_env() -> Result<Self> {
        NatsStoragePortBuilder::new().config()
    }

    /// Checks values that parse but cannot work (empty URLs, a prefix outside
    /// `[A-Za-z0-9-]`, counts out of range, a zero connect timeout, half a client
    /// certificate), naming the field.
    ///
    /// # Errors
    /// [`PhotonError::Config`](photon_core::PhotonError::Config) naming the field and what is accepted.
    pub fn validate(&self) -> Result<()> {
        self.check_settings()?;
        crate::env::check_client_cert(&self.tls)
    }
}

/// The TLS setters reach into the builder's [`TlsConfigBuilder`]; the deprecated names
/// forward to the current ones.
impl NatsStoragePortBuilder {
    /// Requires TLS.
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().tls_required(true);
    /// ```
    pub fn tls_required(mut self, required: bool) -> Self {
        self.tls = self.tls.required(required);
        self
    }

    /// Extra root certificates (PEM file).
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new().tls_ca_file("/etc/photon/ca.pem");
    /// ```
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls = self.tls.ca_file(path);
        self
    }

    /// Client certificate and key (PEM files).
    ///
    /// ```
    /// let b = photon_backend_nats::NatsStoragePortBuilder::new()
    ///     .tls_client_cert("/etc/photon/cert.pem", "/etc/photon/key.pem");
    /// ```
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls = self.tls.cert_file(cert).key_file(key);
        self
    }

    /// Deprecated name of [`NatsStoragePortBuilder::prefix`].
    #[deprecated(note = "use prefix(), the name every adapter uses")]
    pub fn stream_prefix(self, prefix: impl Into<String>) -> Self {
        self.prefix(prefix)
    }

    /// Deprecated name of [`NatsStoragePortBuilder::retention_max_age`].
    #[deprecated(note = "use retention_max_age(), the name every adapter uses")]
    pub fn max_age(self, max_age: Duration) -> Self {
        self.retention_max_age(max_age)
    }

    /// Deprecated name of [`NatsStoragePortBuilder::retention_max_bytes`].
    #[deprecated(note = "use retention_max_bytes(), the name every adapter uses")]
    pub fn max_bytes(self, max_bytes: u64) -> Self {
        self.retention_max_bytes(max_bytes)
    }

    /// Deprecated name of [`NatsStoragePortBuilder::shards`].
    #[deprecated(note = "use shards(), the name every adapter uses")]
    pub fn stream_shards(self, shards: u32) -> Self {
        self.shards(shards)
    }

    /// The resolved configuration (builder, then environment, then defaults), checked.
    ///
    /// # Errors
    /// [`PhotonError::Config`](photon_core::PhotonError::Config) naming the variable or field and the accepted values.
    pub fn config(&self) -> Result<NatsConfig> {
        self.checked(&Env::process())
    }

    /// [`resolve_with`](Self::resolve_with) against `env`, then the checks across settings.
    pub(crate) fn checked(&self, env: &Env) -> Result<NatsConfig> {
        let config = self.clone().resolve_with(env)?;
        crate::env::check_client_cert(&config.tls)?;
        Ok(config)
    }

    /// Connects and returns the port.
    ///
    /// # Errors
    /// [`PhotonError::Config`](photon_core::PhotonError::Config) for a refused value, [`PhotonError::Unavailable`](photon_core::PhotonError::Unavailable) when the
    /// server cannot be reached, [`PhotonError::Unauthorized`](photon_core::PhotonError::Unauthorized)
    /// when it refuses the credentials.
    pub async fn build(self) -> Result<NatsStoragePort> {
        NatsStoragePort::connect(self.config()?).await
    }
}
