//! Settings of the Fluvio port: typed config and builder (resolved against the environment
//! in `env.rs`, in Photon's one dialect: `photon_core::config`).
//!
//! Precedence: builder call > environment variable > default. Every value is resolved once,
//! in [`FluvioStoragePortBuilder::build`]; nothing reads the environment at append time.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{de, parse_choice, Env};
use photon_core::Result;
use serde::Deserialize;

use crate::port::FluvioStoragePort;
use crate::retention::DEFAULT_RETENTION;
#[cfg(doc)]
use crate::stream_shard::TOPIC_SHARDS_ENV;

/// Environment variable for Fluvio SC endpoint (`host:port`, default `127.0.0.1:9003`).
pub const ENDPOINT_ENV: &str = "PHOTON_FLUVIO_ENDPOINT";
/// Environment variable for max in-flight publishes per port (default 256).
pub const MAX_INFLIGHT_ENV: &str = "PHOTON_FLUVIO_MAX_INFLIGHT";
/// Environment variable for topic name prefix (default `photon`).
pub const PREFIX_ENV: &str = "PHOTON_FLUVIO_PREFIX";
/// Environment variable for replay cursor mode (`stream_seq`, default, or `tail_only`).
pub const REPLAY_CURSOR_ENV: &str = "PHOTON_FLUVIO_REPLAY_CURSOR";
/// Environment variable for topic replication factor (default 1).
pub const REPLICAS_ENV: &str = "PHOTON_FLUVIO_REPLICAS";
/// Environment variable for Fluvio topic retention (e.g. `7d`, `3600s`; default `7d`).
pub const RETENTION_ENV: &str = "PHOTON_FLUVIO_RETENTION";
/// Environment variable for synchronous publish ack (1 / 0).
pub const SYNC_ACK_ENV: &str = "PHOTON_FLUVIO_SYNC_ACK";
/// Environment variable for max in-flight publishes per port, spelled as in every adapter
/// (`PHOTON_<ADAPTER>_MAX_IN_FLIGHT`); [`MAX_INFLIGHT_ENV`] is read too.
pub const MAX_IN_FLIGHT_ENV: &str = "PHOTON_FLUVIO_MAX_IN_FLIGHT";
/// Environment variable for Fluvio topics (shards) per Photon topic, named as in every
/// adapter (`PHOTON_<ADAPTER>_SHARDS`); [`TOPIC_SHARDS_ENV`] is read too.
pub const SHARDS_ENV: &str = "PHOTON_FLUVIO_SHARDS";
/// Environment variable for the retention of created topics, a duration, named as in every
/// adapter (`PHOTON_<ADAPTER>_RETENTION_MAX_AGE`); [`RETENTION_ENV`] is read too.
pub const RETENTION_MAX_AGE_ENV: &str = "PHOTON_FLUVIO_RETENTION_MAX_AGE";
/// Environment variable: when on, dead-letter topics are created with the retention of
/// every topic instead of [`crate::DEAD_LETTER_RETENTION`] (a flag, default off), named as
/// in every adapter (`PHOTON_<ADAPTER>_RETENTION_DEAD_LETTERS`).
pub const RETENTION_DEAD_LETTERS_ENV: &str = "PHOTON_FLUVIO_RETENTION_DEAD_LETTERS";
/// Environment variable for the producer linger, a duration (default `0ms`).
pub const LINGER_ENV: &str = "PHOTON_FLUVIO_LINGER";
/// Environment variable for the producer batch size, a size (default `64KiB`, at least
/// `1KiB`).
pub const BATCH_SIZE_ENV: &str = "PHOTON_FLUVIO_BATCH_SIZE";

/// Environment variable: a flag turning TLS on or off. TLS is on when it is on, or when it
/// is unset and [`TLS_CA_ENV`] is set; on without a CA, the system's root certificates are
/// trusted. Off while another `PHOTON_FLUVIO_TLS_*` variable is set is refused.
pub const TLS_ENV: &str = "PHOTON_FLUVIO_TLS";
/// Environment variable: path of a PEM file of the CA certificates that sign the cluster's
/// certificates (turns TLS on).
pub const TLS_CA_ENV: &str = "PHOTON_FLUVIO_TLS_CA";
/// Environment variable: path of the PEM client certificate (chain), for clusters that
/// require client certificates; set with [`TLS_KEY_ENV`].
pub const TLS_CERT_ENV: &str = "PHOTON_FLUVIO_TLS_CERT";
/// Environment variable: path of the PEM private key of [`TLS_CERT_ENV`] (PKCS#8, PKCS#1
/// or SEC1).
pub const TLS_KEY_ENV: &str = "PHOTON_FLUVIO_TLS_KEY";
/// Environment variable: the DNS name the SC's certificate must hold; an SPU's must hold
/// `<spu name>.<domain>` (default: the endpoint's host).
pub const TLS_DOMAIN_ENV: &str = "PHOTON_FLUVIO_TLS_DOMAIN";

/// Default SC endpoint: a local single-node cluster.
pub const DEFAULT_ENDPOINT: &str = "127.0.0.1:9003";
/// Default topic prefix.
pub const DEFAULT_PREFIX: &str = "photon";
/// Default number of publishes in flight per port.
pub const DEFAULT_MAX_INFLIGHT: usize = 256;
/// Default producer batch size in bytes.
pub const DEFAULT_BATCH_SIZE: usize = 64 * 1024;

/// Read Fluvio endpoint from the environment.
///
/// `None` when [`ENDPOINT_ENV`] is unset or blank.
pub fn fluvio_endpoint_from_env() -> Option<String> {
    std::env::var(ENDPOINT_ENV)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// How durable replay and checkpoints map to Fluvio offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReplayCursor {
    /// Seqs are produce offsets + 1 (with shards, `(offset + 1) × shards + shard`):
    /// subscriptions replay from any seq and durable ones resume after their checkpoint.
    #[default]
    StreamSeq,
    /// Every subscription starts at `Offset::end()`: no replay (capability `TailOnly`).
    TailOnly,
}

impl ReplayCursor {
    /// The words of the dialect, in any case.
    pub(crate) const CHOICES: [(&'static str, Self); 2] = [
        ("stream_seq", Self::StreamSeq),
        ("tail_only", Self::TailOnly),
    ];

    /// Parses `stream_seq` or `tail_only`, in any case.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming `variable` and the accepted values.
    pub fn parse(variable: &str, value: &str) -> Result<Self> {
        parse_choice(variable, value, &Self::CHOICES)
    }
}

/// TLS to the cluster (feature `tls`): which certificates the port trusts, the client
/// certificate it shows, and the name it checks. Deserializable like [`FluvioConfig`]:
/// `{"tls": {"ca": "/etc/photon/fluvio-ca.pem"}}`; `{"tls": {}}` trusts the system's roots.
///
/// The port checks the SC's certificate against [`TlsConfig::domain`] and each SPU's against
/// `<spu name>.<domain>` (the SPU's name in the cluster, e.g. `custom-spu-5001`), as
/// Fluvio's own client does: a cluster certificate holding `<domain>` and `*.<domain>` (at
/// least two labels, e.g. `fluvio.example.com`) serves both.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct TlsConfig {
    /// PEM file of the CA certificates to trust; `None`: the system's root certificates.
    pub ca: Option<PathBuf>,
    /// PEM files of the client certificate (chain) and its private key, for clusters that
    /// require client certificates.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// DNS name of the SC's certificate; `None`: the endpoint's host (which must then be a
    /// DNS name, not an IP address).
    pub domain: Option<String>,
}

/// Resolved Fluvio adapter settings (no env lookups at append time). Deserializable
/// (missing fields take their defaults; durations and sizes in the dialect of
/// `photon_core::config`); connecting checks it ([`FluvioConfig::validate`]).
///
/// ```
/// let config: photon_backend_fluvio::FluvioConfig = serde_json::from_str(
///     r#"{"prefix": "shop", "shards": 4, "retention_max_age": "3d", "batch_size": "256KiB"}"#,
/// ).unwrap();
/// assert_eq!(config.shards, 4);
/// assert_eq!(config.batch_size, 256 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct FluvioConfig {
    /// SC endpoint, `host:port`.
    pub endpoint: String,
    /// Prefix of every Fluvio topic this port uses.
    pub prefix: String,
    /// Fluvio topics (shards) per Photon topic.
    #[serde(alias = "topic_shards")]
    pub shards: u32,
    /// Publishes in flight per port.
    #[serde(alias = "max_inflight")]
    pub max_in_flight: usize,
    /// Whether `append` waits for the broker's ack.
    #[serde(deserialize_with = "de::flag")]
    pub sync_ack: bool,
    /// Replay mode.
    pub replay_cursor: ReplayCursor,
    /// Retention of created topics: segments older than this are removed.
    #[serde(alias = "retention", deserialize_with = "de::duration")]
    pub retention_max_age: Duration,
    /// Whether dead-letter topics get [`retention_max_age`](Self::retention_max_age) too
    /// (their letters then go with age); off: they are kept for
    /// [`crate::DEAD_LETTER_RETENTION`].
    #[serde(deserialize_with = "de::flag")]
    pub retention_dead_letters: bool,
    /// Replication factor of created topics.
    pub replicas: u32,
    /// Producer linger: how long a batch waits for more records.
    #[serde(deserialize_with = "de::duration")]
    pub linger: Duration,
    /// Producer batch size in bytes.
    #[serde(deserialize_with = "de::size")]
    pub batch_size: usize,
    /// TLS to the SC and SPUs; `None`: plain TCP.
    pub tls: Option<TlsConfig>,
}

impl Default for FluvioConfig {
    fn default() -> Self {
        Self {
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            prefix: DEFAULT_PREFIX.to_owned(),
            shards: 1,
            max_in_flight: DEFAULT_MAX_INFLIGHT,
            sync_ack: true,
            replay_cursor: ReplayCursor::StreamSeq,
            retention_max_age: DEFAULT_RETENTION,
            retention_dead_letters: false,
            replicas: 1,
            linger: Duration::ZERO,
            batch_size: DEFAULT_BATCH_SIZE,
            tls: None,
        }
    }
}

impl FluvioConfig {
    /// Settings from the environment and defaults only.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the variable of a malformed value.
    pub fn from_env() -> Result<Self> {
        FluvioStoragePortBuilder::new().resolve()
    }

    /// Checks values that parse but cannot work: a prefix Fluvio cannot hold, counts out of
    /// range, a retention Fluvio refuses, a batch below 1 KiB, TLS files that cannot be read
    /// or hold no usable PEM, a TLS domain that is not a DNS name (this reads the TLS files).
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field, the value (a file's path) and
    /// what is accepted; TLS settings in a build without the `tls` feature.
    pub fn validate(&self) -> Result<()> {
        crate::env::validate(self)
    }

    /// The connector the port connects with: [`crate::prompt_connector`] without TLS, else
    /// the TLS one of [`TlsConfig`] (see `prompt_tls_connector`), for raw `fluvio` clients
    /// that should reach the cluster as the port does.
    ///
    /// ```no_run
    /// # async fn run() -> anyhow::Result<()> {
    /// let config = photon_backend_fluvio::FluvioConfig::from_env()?;
    /// let cluster = fluvio::FluvioClusterConfig::new(config.endpoint.clone());
    /// let fluvio = fluvio::Fluvio::connect_with_connector(config.connector()?, &cluster).await?;
    /// # let _ = fluvio; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] as [`FluvioConfig::validate`] for the TLS settings
    /// (this reads the TLS files).
    pub fn connector(&self) -> Result<fluvio_future::net::DomainConnector> {
        match &self.tls {
            None => Ok(crate::prompt_connector()),
            Some(tls) => crate::tls::connector(tls, &self.endpoint, &crate::tls::FIELD_NAMES),
        }
    }
}

/// Builder for [`super::port::FluvioStoragePort`].
///
/// Each setting falls back to its environment variable, then to its default:
///
/// | setting | variable | default |
/// |---|---|---|
/// | [`endpoint`](Self::endpoint) | [`ENDPOINT_ENV`] | `127.0.0.1:9003` |
/// | [`prefix`](Self::prefix) | [`PREFIX_ENV`] | `photon` |
/// | [`shards`](Self::shards) | [`SHARDS_ENV`] or [`TOPIC_SHARDS_ENV`] | 1 |
/// | [`max_in_flight`](Self::max_in_flight) | [`MAX_IN_FLIGHT_ENV`] or [`MAX_INFLIGHT_ENV`] | 256 |
/// | [`sync_ack`](Self::sync_ack) | [`SYNC_ACK_ENV`] | on |
/// | [`replay_cursor`](Self::replay_cursor) | [`REPLAY_CURSOR_ENV`] | `stream_seq` |
/// | [`retention_max_age`](Self::retention_max_age) | [`RETENTION_MAX_AGE_ENV`] or [`RETENTION_ENV`] | `7d` |
/// | [`retention_dead_letters`](Self::retention_dead_letters) | [`RETENTION_DEAD_LETTERS_ENV`] | off |
/// | [`replicas`](Self::replicas) | [`REPLICAS_ENV`] | 1 |
/// | [`linger`](Self::linger) | [`LINGER_ENV`] | `0ms` |
/// | [`batch_size`](Self::batch_size) | [`BATCH_SIZE_ENV`] | `64KiB` |
/// | [`tls`](Self::tls) | [`TLS_ENV`] | on when a CA is set, else off |
/// | [`tls_ca`](Self::tls_ca) | [`TLS_CA_ENV`] | none (the system's roots when TLS is on) |
/// | [`tls_client_cert`](Self::tls_client_cert) | [`TLS_CERT_ENV`] and [`TLS_KEY_ENV`] | none |
/// | [`tls_domain`](Self::tls_domain) | [`TLS_DOMAIN_ENV`] | the endpoint's host |
///
/// Values use Photon's one dialect (`photon_core::config`): durations such as `3600s` or
/// `7d`, sizes such as `256KiB`, flags such as `1`, `on` or `true`. Where a setting has two
/// variables, the first is the name every adapter uses and the second the name this port
/// has always read; both work, and setting them to different values is refused.
///
/// ```no_run
/// # async fn run() -> photon_core::Result<()> {
/// use photon_backend_fluvio::FluvioStoragePortBuilder;
/// let port = FluvioStoragePortBuilder::new()
///     .endpoint("127.0.0.1:9003")
///     .prefix("shop")
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct FluvioStoragePortBuilder {
    pub(crate) endpoint: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) shards: Option<u32>,
    pub(crate) max_in_flight: Option<usize>,
    pub(crate) sync_ack: Option<bool>,
    pub(crate) replay_cursor: Option<ReplayCursor>,
    pub(crate) retention_max_age: Option<Duration>,
    pub(crate) retention_dead_letters: Option<bool>,
    pub(crate) replicas: Option<u32>,
    pub(crate) linger: Option<Duration>,
    pub(crate) batch_size: Option<usize>,
    pub(crate) tls: Option<bool>,
    pub(crate) tls_ca: Option<PathBuf>,
    pub(crate) tls_client_cert: Option<(PathBuf, PathBuf)>,
    pub(crate) tls_domain: Option<String>,
}

impl FluvioStoragePortBuilder {
    /// A builder with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// SC endpoint. `FluvioStoragePortBuilder::new().endpoint("10.0.0.5:9003")`
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Topic prefix (`[a-z0-9-]`, at most 20 characters). `.prefix("shop")`
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Fluvio topics (shards) per Photon topic, 1 to 256. `.shards(4)`
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Deprecated name of [`FluvioStoragePortBuilder::shards`].
    #[deprecated(note = "use shards(), the name every adapter uses")]
    pub fn topic_shards(self, shards: u32) -> Self {
        self.shards(shards)
    }

    /// Publishes in flight per port (at least 1). `.max_in_flight(64)`
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = Some(max);
        self
    }

    /// Deprecated name of [`FluvioStoragePortBuilder::max_in_flight`].
    #[deprecated(note = "use max_in_flight(), the name every adapter uses")]
    pub fn max_inflight(self, max: usize) -> Self {
        self.max_in_flight(max)
    }

    /// Whether `append` waits for the broker ack (default on). `.sync_ack(false)`
    pub fn sync_ack(mut self, on: bool) -> Self {
        self.sync_ack = Some(on);
        self
    }

    /// Replay mode. `.replay_cursor(ReplayCursor::TailOnly)`
    pub fn replay_cursor(mut self, cursor: ReplayCursor) -> Self {
        self.replay_cursor = Some(cursor);
        self
    }

    /// Retention of created topics (at least 10 s).
    /// `.retention_max_age(Duration::from_secs(3600))`
    pub fn retention_max_age(mut self, retention: Duration) -> Self {
        self.retention_max_age = Some(retention);
        self
    }

    /// Whether dead-letter topics get the retention of every topic (on) or are kept for
    /// [`crate::DEAD_LETTER_RETENTION`] (off, the default). `.retention_dead_letters(true)`
    pub fn retention_dead_letters(mut self, on: bool) -> Self {
        self.retention_dead_letters = Some(on);
        self
    }

    /// Deprecated name of [`FluvioStoragePortBuilder::retention_max_age`].
    #[deprecated(note = "use retention_max_age(), the name every adapter uses")]
    pub fn retention(self, retention: Duration) -> Self {
        self.retention_max_age(retention)
    }

    /// Replication factor of created topics (at least 1). `.replicas(3)`
    pub fn replicas(mut self, replicas: u32) -> Self {
        self.replicas = Some(replicas);
        self
    }

    /// Producer linger (default 0: send as soon as the previous batch left).
    /// `.linger(Duration::from_millis(2))`
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = Some(linger);
        self
    }

    /// Producer batch size in bytes (default 64 KiB, at least 1 KiB). `.batch_size(256 * 1024)`
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.batch_size = Some(bytes);
        self
    }

    /// Connect over TLS (`true`) or plain TCP (`false`). Unset, TLS is on when a CA is set;
    /// on without a CA trusts the system's root certificates. `false` with another TLS
    /// setting is refused. `.tls(true)`
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = Some(on);
        self
    }

    /// PEM file of the CA certificates that sign the cluster's certificates; turns TLS on.
    ///
    /// ```
    /// let b = photon_backend_fluvio::FluvioStoragePortBuilder::new().tls_ca("/etc/photon/fluvio-ca.pem");
    /// ```
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca = Some(path.into());
        self
    }

    /// PEM files of the client certificate (chain) and its private key, for clusters that
    /// require client certificates (needs TLS on).
    ///
    /// ```
    /// let b = photon_backend_fluvio::FluvioStoragePortBuilder::new()
    ///     .tls_ca("/etc/photon/fluvio-ca.pem")
    ///     .tls_client_cert("/etc/photon/client.pem", "/etc/photon/client-key.pem");
    /// ```
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls_client_cert = Some((cert.into(), key.into()));
        self
    }

    /// DNS name the SC's certificate must hold; each SPU's must hold `<spu name>.<domain>`
    /// (default: the endpoint's host; needs TLS on). `.tls_domain("fluvio.example.com")`
    pub fn tls_domain(mut self, domain: impl Into<String>) -> Self {
        self.tls_domain = Some(domain.into());
        self
    }

    /// Resolves every setting (builder > environment > default).
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field or variable of a refused value.
    pub fn resolve(&self) -> Result<FluvioConfig> {
        self.resolve_with(&Env::process())
    }

    /// The resolved configuration, as every port's builder names it; the same as
    /// [`FluvioStoragePortBuilder::resolve`].
    ///
    /// # Errors
    /// As [`FluvioStoragePortBuilder::resolve`].
    pub fn config(&self) -> Result<FluvioConfig> {
        self.resolve()
    }

    /// Resolves the settings, connects to the cluster and creates the checkpoint topics.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] for a refused setting (a TLS file that cannot be
    /// read or parsed names its variable or field and its path);
    /// [`photon_core::PhotonError::Unavailable`] when the cluster cannot be reached, or a
    /// TLS handshake fails (the message names the cause, e.g. `unknown issuer` or
    /// `name mismatch`).
    pub async fn build(self) -> Result<FluvioStoragePort> {
        FluvioStoragePort::connect(self.resolve()?).await
    }
}
