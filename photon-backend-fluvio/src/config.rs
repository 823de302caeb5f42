//! Settings of the Fluvio port, from one settings table (`photon_core::settings!`):
//! builder call > environment variable > default, in Photon's one dialect
//! (`photon_core::config`). Every value is resolved once, in
//! [`FluvioStoragePortBuilder::build`]; nothing reads the environment at append time. The
//! TLS settings, which turn each other on and off, are a group resolved by hand
//! ([`TlsBuilder`] in `env.rs`).

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{
    parse_choice, Alias, AnyDuration, Checked, Choice, Choices, Count, Env, Flag, Text,
};
use photon_core::Result;
use serde::Deserialize;

pub use crate::env::{BatchSize, RetentionAge, TlsBuilder, TopicPrefix};
use crate::port::FluvioStoragePort;
use crate::retention::DEFAULT_RETENTION;
use crate::stream_shard::{MAX_TOPIC_SHARDS, TOPIC_SHARDS_ENV};

/// Environment variable for max in-flight publishes per port (default 256); the name this
/// port has always read, as [`MAX_IN_FLIGHT_ENV`].
pub const MAX_INFLIGHT_ENV: &str = "PHOTON_FLUVIO_MAX_INFLIGHT";
/// Environment variable for Fluvio topic retention (e.g. `7d`, `3600s`; default `7d`); the
/// name this port has always read, as [`RETENTION_MAX_AGE_ENV`].
pub const RETENTION_ENV: &str = "PHOTON_FLUVIO_RETENTION";

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplayCursor {
    /// Seqs are produce offsets + 1 (with shards, `(offset + 1) × shards + shard`):
    /// subscriptions replay from any seq and durable ones resume after their checkpoint.
    #[default]
    StreamSeq,
    /// Every subscription starts at `Offset::end()`: no replay (capability `TailOnly`).
    TailOnly,
}

impl Choices for ReplayCursor {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("stream_seq", Self::StreamSeq),
        ("tail_only", Self::TailOnly),
    ];
}

impl ReplayCursor {
    /// Parses `stream_seq` or `tail_only`, in any case.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming `variable` and the accepted values.
    pub fn parse(variable: &str, value: &str) -> Result<Self> {
        parse_choice(variable, value, Self::CHOICES)
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

photon_core::settings! {
    /// Resolved Fluvio adapter settings (no env lookups at append time). Deserializable
    /// (missing fields take their defaults; every value in the dialect of
    /// `photon_core::config`, checked, a refused one named); connecting checks it again,
    /// TLS files included ([`FluvioConfig::validate`]).
    ///
    /// ```
    /// let config: photon_backend_fluvio::FluvioConfig = serde_json::from_str(
    ///     r#"{"prefix": "shop", "shards": 4, "retention_max_age": "3d", "batch_size": "256KiB"}"#,
    /// ).unwrap();
    /// assert_eq!(config.shards, 4);
    /// assert_eq!(config.batch_size, 256 * 1024);
    /// ```
    #[derive(Eq)]
    pub struct FluvioConfig;

    /// Builder for [`super::port::FluvioStoragePort`]. Each setting falls back to its
    /// environment variable, then to its default (the table of `docs/configuration.md`).
    ///
    /// Values use Photon's one dialect (`photon_core::config`): durations such as `3600s`
    /// or `7d`, sizes such as `256KiB`, flags such as `1`, `on` or `true`. Where a setting
    /// has two variables, the first is the name every adapter uses and the second the name
    /// this port has always read ([`TOPIC_SHARDS_ENV`], [`MAX_INFLIGHT_ENV`],
    /// [`RETENTION_ENV`]); both work, and setting them to different values is refused.
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
    pub struct FluvioStoragePortBuilder;

    /// SC endpoint, `host:port`.
    endpoint: Text [into] = DEFAULT_ENDPOINT.to_owned(),
        env ENDPOINT_ENV = "PHOTON_FLUVIO_ENDPOINT", shown "`127.0.0.1:9003`";
    /// Prefix of every Fluvio topic this port uses.
    prefix: Checked<TopicPrefix> [into] = DEFAULT_PREFIX.to_owned(),
        env PREFIX_ENV = "PHOTON_FLUVIO_PREFIX", shown "`photon`";
    /// Fluvio topics (shards) per Photon topic.
    shards: Count<u32, 1, { MAX_TOPIC_SHARDS as u64 }> = 1,
        env SHARDS_ENV = "PHOTON_FLUVIO_SHARDS", aliases [Alias::also(TOPIC_SHARDS_ENV)],
        file aliases ["topic_shards"], shown "1";
    /// Publishes in flight per port.
    max_in_flight: Count<usize, 1> = DEFAULT_MAX_INFLIGHT,
        env MAX_IN_FLIGHT_ENV = "PHOTON_FLUVIO_MAX_IN_FLIGHT",
        aliases [Alias::also(MAX_INFLIGHT_ENV)], file aliases ["max_inflight"], shown "256";
    /// Whether `append` waits for the broker's ack.
    sync_ack: Flag = true, env SYNC_ACK_ENV = "PHOTON_FLUVIO_SYNC_ACK", shown "`true`";
    /// Replay mode.
    replay_cursor: Choice<ReplayCursor> = ReplayCursor::StreamSeq,
        env REPLAY_CURSOR_ENV = "PHOTON_FLUVIO_REPLAY_CURSOR", shown "`stream_seq`";
    /// Retention of created topics: segments older than this are removed.
    retention_max_age: RetentionAge = DEFAULT_RETENTION,
        env RETENTION_MAX_AGE_ENV = "PHOTON_FLUVIO_RETENTION_MAX_AGE",
        aliases [Alias::also(RETENTION_ENV)], file aliases ["retention"], shown "`7d`";
    /// Whether dead-letter topics get the retention of every topic too.
    ///
    /// Off: they are kept for [`crate::DEAD_LETTER_RETENTION`].
    retention_dead_letters: Flag = false,
        env RETENTION_DEAD_LETTERS_ENV = "PHOTON_FLUVIO_RETENTION_DEAD_LETTERS",
        shown "`false`";
    /// Replication factor of created topics.
    replicas: Count<u32, 1, { u32::MAX as u64 }> = 1,
        env REPLICAS_ENV = "PHOTON_FLUVIO_REPLICAS", shown "1";
    /// Producer linger: how long a batch waits for more records.
    linger: AnyDuration = Duration::ZERO, env LINGER_ENV = "PHOTON_FLUVIO_LINGER",
        shown "`0ms`";
    /// Producer batch size in bytes.
    batch_size: BatchSize = DEFAULT_BATCH_SIZE, env BATCH_SIZE_ENV = "PHOTON_FLUVIO_BATCH_SIZE",
        shown "`64KiB`";

    groups {
        /// TLS to the SC and SPUs; `None`: plain TCP.
        tls: Option<TlsConfig> => TlsBuilder;
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

/// The TLS setters reach into the builder's [`TlsBuilder`]; the deprecated names forward
/// to the current ones.
impl FluvioStoragePortBuilder {
    /// Deprecated name of [`FluvioStoragePortBuilder::shards`].
    #[deprecated(note = "use shards(), the name every adapter uses")]
    pub fn topic_shards(self, shards: u32) -> Self {
        self.shards(shards)
    }

    /// Deprecated name of [`FluvioStoragePortBuilder::max_in_flight`].
    #[deprecated(note = "use max_in_flight(), the name every adapter uses")]
    pub fn max_inflight(self, max: usize) -> Self {
        self.max_in_flight(max)
    }

    /// Deprecated name of [`FluvioStoragePortBuilder::retention_max_age`].
    #[deprecated(note = "use retention_max_age(), the name every adapter uses")]
    pub fn retention(self, retention: Duration) -> Self {
        self.retention_max_age(retention)
    }

    /// Connect over TLS (`true`) or plain TCP (`false`). Unset, TLS is on when a CA is set;
    /// on without a CA trusts the system's root certificates. `false` with another TLS
    /// setting is refused. `.tls(true)`
    pub fn tls(mut self, on: bool) -> Self {
        self.tls.on = Some(on);
        self
    }

    /// PEM file of the CA certificates that sign the cluster's certificates; turns TLS on.
    ///
    /// ```
    /// let b = photon_backend_fluvio::FluvioStoragePortBuilder::new().tls_ca("/etc/photon/fluvio-ca.pem");
    /// ```
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca = Some(path.into());
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
        self.tls.client_cert = Some((cert.into(), key.into()));
        self
    }

    /// DNS name the SC's certificate must hold; each SPU's must hold `<spu name>.<domain>`
    /// (default: the endpoint's host; needs TLS on). `.tls_domain("fluvio.example.com")`
    pub fn tls_domain(mut self, domain: impl Into<String>) -> Self {
        self.tls.domain = Some(domain.into());
        self
    }

    /// Resolves every setting (builder > environment > default), each checked, and loads
    /// the TLS files as connecting would.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field or variable of a refused value.
    pub fn resolve(&self) -> Result<FluvioConfig> {
        self.checked(&Env::process())
    }

    /// The resolved configuration, as every port's builder names it; the same as
    /// [`FluvioStoragePortBuilder::resolve`].
    ///
    /// # Errors
    /// As [`FluvioStoragePortBuilder::resolve`].
    pub fn config(&self) -> Result<FluvioConfig> {
        self.resolve()
    }

    /// [`resolve_with`](Self::resolve_with) against `env`, then the TLS files loaded,
    /// a refused one named as it was given (its variable, or its setter).
    pub(crate) fn checked(&self, env: &Env) -> Result<FluvioConfig> {
        let names = self.tls.names();
        let config = self.clone().resolve_with(env)?;
        crate::env::check_tls(&config, &names)?;
        Ok(config)
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
