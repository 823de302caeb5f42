//! Settings of the Fluvio port: typed config, environment fallbacks, builder.
//!
//! Precedence: builder call > environment variable > default. Every value is resolved once,
//! in [`FluvioStoragePortBuilder::build`]; nothing reads the environment at append time.

use std::time::Duration;

use photon_core::{PhotonError, Result};

use crate::port::FluvioStoragePort;
use crate::retention::{parse_retention, DEFAULT_RETENTION};
use crate::stream_shard::{parse_topic_shards, TOPIC_SHARDS_ENV};
use crate::topic::{is_valid_prefix, MAX_PREFIX_LEN};

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

/// Default SC endpoint: a local single-node cluster.
pub const DEFAULT_ENDPOINT: &str = "127.0.0.1:9003";
/// Default topic prefix.
pub const DEFAULT_PREFIX: &str = "photon";
/// Default number of publishes in flight per port.
pub const DEFAULT_MAX_INFLIGHT: usize = 256;

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

impl ReplayCursor {
    /// Parses `stream_seq` or `tail_only`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming `variable` and the accepted values.
    pub fn parse(variable: &str, value: &str) -> Result<Self> {
        match value.trim() {
            "stream_seq" => Ok(Self::StreamSeq),
            "tail_only" => Ok(Self::TailOnly),
            _ => Err(PhotonError::config(
                variable,
                value,
                "stream_seq or tail_only",
            )),
        }
    }
}

/// Resolved Fluvio adapter settings (no env lookups at append time).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FluvioConfig {
    /// SC endpoint, `host:port`.
    pub endpoint: String,
    /// Prefix of every Fluvio topic this port uses.
    pub prefix: String,
    /// Fluvio topics (shards) per Photon topic.
    pub topic_shards: u32,
    /// Publishes in flight per port.
    pub max_inflight: usize,
    /// Whether `append` waits for the broker's ack.
    pub sync_ack: bool,
    /// Replay mode.
    pub replay_cursor: ReplayCursor,
    /// Retention of created topics.
    pub retention: Duration,
    /// Replication factor of created topics.
    pub replicas: u32,
    /// Producer linger: how long a batch waits for more records.
    pub linger: Duration,
    /// Producer batch size in bytes.
    pub batch_size: usize,
}

impl FluvioConfig {
    /// Settings from the environment and defaults only.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable of a malformed value.
    pub fn from_env() -> Result<Self> {
        FluvioStoragePortBuilder::new().resolve()
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
/// | [`topic_shards`](Self::topic_shards) | [`TOPIC_SHARDS_ENV`] | 1 |
/// | [`max_inflight`](Self::max_inflight) | [`MAX_INFLIGHT_ENV`] | 256 |
/// | [`sync_ack`](Self::sync_ack) | [`SYNC_ACK_ENV`] | on |
/// | [`replay_cursor`](Self::replay_cursor) | [`REPLAY_CURSOR_ENV`] | `stream_seq` |
/// | [`retention`](Self::retention) | [`RETENTION_ENV`] | `7d` |
/// | [`replicas`](Self::replicas) | [`REPLICAS_ENV`] | 1 |
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
pub struct FluvioStoragePortBuilder {
    endpoint: Option<String>,
    prefix: Option<String>,
    topic_shards: Option<u32>,
    max_inflight: Option<usize>,
    sync_ack: Option<bool>,
    replay_cursor: Option<ReplayCursor>,
    retention: Option<Duration>,
    replicas: Option<u32>,
    linger: Option<Duration>,
    batch_size: Option<usize>,
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

    /// Fluvio topics per Photon topic, 1 to 256. `.topic_shards(4)`
    pub fn topic_shards(mut self, shards: u32) -> Self {
        self.topic_shards = Some(shards);
        self
    }

    /// Publishes in flight per port (at least 1). `.max_inflight(64)`
    pub fn max_inflight(mut self, max: usize) -> Self {
        self.max_inflight = Some(max);
        self
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

    /// Retention of created topics (at least 10 s). `.retention(Duration::from_secs(3600))`
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
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

    /// Producer batch size in bytes (default 64 KiB). `.batch_size(256 * 1024)`
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.batch_size = Some(bytes);
        self
    }

    /// Resolves every setting (builder > environment > default).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the field or variable of a refused value.
    pub fn resolve(&self) -> Result<FluvioConfig> {
        self.resolve_with(|name| std::env::var(name).ok())
    }

    fn resolve_with(&self, env: impl Fn(&str) -> Option<String>) -> Result<FluvioConfig> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let endpoint = self
            .endpoint
            .clone()
            .or_else(|| env(ENDPOINT_ENV).map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let prefix = match (&self.prefix, env(PREFIX_ENV)) {
            (Some(p), _) => check_prefix("prefix", p)?,
            (None, Some(p)) => check_prefix(PREFIX_ENV, &p)?,
            (None, None) => DEFAULT_PREFIX.to_owned(),
        };
        let topic_shards = match (self.topic_shards, env(TOPIC_SHARDS_ENV)) {
            (Some(n), _) => parse_topic_shards("topic_shards", &n.to_string())?,
            (None, Some(v)) => parse_topic_shards(TOPIC_SHARDS_ENV, &v)?,
            (None, None) => 1,
        };
        let max_inflight = match (self.max_inflight, env(MAX_INFLIGHT_ENV)) {
            (Some(n), _) => positive("max_inflight", &n.to_string())?,
            (None, Some(v)) => positive(MAX_INFLIGHT_ENV, &v)?,
            (None, None) => DEFAULT_MAX_INFLIGHT,
        };
        let sync_ack = match (self.sync_ack, env(SYNC_ACK_ENV)) {
            (Some(on), _) => on,
            (None, Some(v)) => parse_flag(SYNC_ACK_ENV, &v)?,
            (None, None) => true,
        };
        let replay_cursor = match (self.replay_cursor, env(REPLAY_CURSOR_ENV)) {
            (Some(c), _) => c,
            (None, Some(v)) => ReplayCursor::parse(REPLAY_CURSOR_ENV, &v)?,
            (None, None) => ReplayCursor::StreamSeq,
        };
        let retention = match (self.retention, env(RETENTION_ENV)) {
            (Some(d), _) => parse_retention("retention", &format!("{}s", d.as_secs()))?,
            (None, Some(v)) => parse_retention(RETENTION_ENV, &v)?,
            (None, None) => DEFAULT_RETENTION,
        };
        let replicas = match (self.replicas, env(REPLICAS_ENV)) {
            (Some(n), _) => positive("replicas", &n.to_string())?,
            (None, Some(v)) => positive(REPLICAS_ENV, &v)?,
            (None, None) => 1,
        };
        Ok(FluvioConfig {
            endpoint,
            prefix,
            topic_shards,
            max_inflight,
            sync_ack,
            replay_cursor,
            retention,
            replicas: u32::try_from(replicas)
                .map_err(|_| PhotonError::config("replicas", replicas.to_string(), "a u32"))?,
            linger: self.linger.unwrap_or(Duration::ZERO),
            batch_size: self.batch_size.unwrap_or(64 * 1024).max(1024),
        })
    }

    /// Resolves the settings, connects to the cluster and creates the checkpoint topics.
    ///
    /// # Errors
    /// [`PhotonError::Config`] for a refused setting; [`PhotonError::Unavailable`] when the
    /// cluster cannot be reached.
    pub async fn build(self) -> Result<FluvioStoragePort> {
        FluvioStoragePort::connect(self.resolve()?).await
    }
}

fn check_prefix(variable: &str, value: &str) -> Result<String> {
    if is_valid_prefix(value) {
        Ok(value.to_owned())
    } else {
        Err(PhotonError::config(
            variable,
            value,
            format!(
                "1 to {MAX_PREFIX_LEN} characters of [a-z0-9-], no leading, trailing or double '-'"
            ),
        ))
    }
}

fn positive(variable: &str, value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(PhotonError::config(
            variable,
            value,
            "an integer of at least 1",
        )),
    }
}

fn parse_flag(variable: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(PhotonError::config(
            variable,
            value,
            "1 or 0 (also true/false, on/off)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(builder: FluvioStoragePortBuilder, vars: &[(&str, &str)]) -> Result<FluvioConfig> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        builder.resolve_with(|name| vars.get(name).cloned())
    }

    #[test]
    fn defaults() {
        let config = resolve(FluvioStoragePortBuilder::new(), &[]).unwrap();
        assert_eq!(config.endpoint, "127.0.0.1:9003");
        assert_eq!(config.prefix, "photon");
        assert_eq!(config.topic_shards, 1);
        assert_eq!(config.max_inflight, 256);
        assert!(config.sync_ack);
        assert_eq!(config.replay_cursor, ReplayCursor::StreamSeq);
        assert_eq!(config.retention, DEFAULT_RETENTION);
        assert_eq!(config.replicas, 1);
    }

    #[test]
    fn env_then_builder_precedence() {
        let vars = [
            (ENDPOINT_ENV, "10.0.0.1:9003"),
            (PREFIX_ENV, "shop"),
            (TOPIC_SHARDS_ENV, "4"),
            (MAX_INFLIGHT_ENV, "8"),
            (SYNC_ACK_ENV, "0"),
            (REPLAY_CURSOR_ENV, "tail_only"),
            (RETENTION_ENV, "3600s"),
            (REPLICAS_ENV, "3"),
        ];
        let config = resolve(FluvioStoragePortBuilder::new(), &vars).unwrap();
        assert_eq!(config.endpoint, "10.0.0.1:9003");
        assert_eq!(config.prefix, "shop");
        assert_eq!(config.topic_shards, 4);
        assert_eq!(config.max_inflight, 8);
        assert!(!config.sync_ack);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.retention, Duration::from_secs(3600));
        assert_eq!(config.replicas, 3);
        let builder = FluvioStoragePortBuilder::new()
            .prefix("built")
            .topic_shards(2)
            .sync_ack(true)
            .replicas(1);
        let config = resolve(builder, &vars).unwrap();
        assert_eq!(config.prefix, "built");
        assert_eq!(config.topic_shards, 2);
        assert!(config.sync_ack);
        assert_eq!(config.replicas, 1);
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (name, value) in [
            (PREFIX_ENV, "Bad_Prefix"),
            (TOPIC_SHARDS_ENV, "0"),
            (MAX_INFLIGHT_ENV, "none"),
            (SYNC_ACK_ENV, "maybe"),
            (REPLAY_CURSOR_ENV, "offset"),
            (RETENTION_ENV, "1w"),
            (REPLICAS_ENV, "0"),
        ] {
            let err = resolve(FluvioStoragePortBuilder::new(), &[(name, value)]).unwrap_err();
            assert!(
                matches!(&err, PhotonError::Config { variable, .. } if variable == name),
                "{name}: {err}"
            );
        }
        let err = resolve(FluvioStoragePortBuilder::new().topic_shards(0), &[]).unwrap_err();
        assert!(err.to_string().contains("topic_shards"), "{err}");
    }
}
