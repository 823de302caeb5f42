//! [`NatsStoragePort`]: the `StoragePort` impl on NATS JetStream.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, context::ContextBuilder};
use async_nats::{ConnectErrorKind, ConnectOptions, ServerAddr};
use async_trait::async_trait;
use futures::StreamExt;
use photon_core::group::GroupCoordination;
use photon_core::{
    Appended, CheckpointKey, DeliveryStream, GroupRequest, PhotonError, Record, RecordDraft,
    RecordStream, ReplayWindow, Result, StorageCapabilities, StoragePort, StoredCheckpoint,
    SubscribeRequest, TopicInfo,
};

use crate::checkpoint::Checkpoints;
use crate::codec::split_seq;
use crate::config::{NatsConfig, ReplayCursor, CREDENTIALS_FILE_ENV, URL_ENV};
use crate::env::redact_url;
use crate::error::{unavailable, LABEL};
use crate::publish::Publisher;
use crate::topic::{Names, Streams};

/// Room kept in every message for the record's own fields (topic, key, ids, time) and
/// headers, on top of the body.
const RECORD_OVERHEAD_BYTES: usize = 4096;

/// Photon storage on NATS JetStream.
///
/// - One stream per topic (and shard), created on first use; subjects carry the topic and
///   key, so a key subscription is filtered by the server.
/// - `seq` is the stream sequence (`stream_seq × shards + shard` with several shards);
///   `event_id` is `<stream>:<stream sequence>`, found again by a direct get.
/// - Checkpoints live in a stream used as a compare-and-set key-value store and never
///   regress.
/// - Consumer groups run the lease protocol of `photon_core::group`: heartbeats and
///   partition leases (with each partition's checkpoint) live in a compare-and-set stream
///   on the server, so members in any process share the work (see `group_coordination`).
///
/// Clones share one connection. The client reconnects by itself after a server restart;
/// subscriptions resume where they were.
#[derive(Clone)]
pub struct NatsStoragePort {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: NatsConfig,
    pub(crate) client: async_nats::Client,
    pub(crate) names: Names,
    pub(crate) streams: Streams,
    pub(crate) publisher: Publisher,
    pub(crate) checkpoints: Checkpoints,
    max_payload_bytes: usize,
}

impl std::fmt::Debug for NatsStoragePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsStoragePort")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl NatsStoragePort {
    /// A builder; see [`crate::NatsStoragePortBuilder`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> photon_core::Result<()> {
    /// use photon_backend_nats::NatsStoragePort;
    /// let port = NatsStoragePort::builder()
    ///     .url("nats://127.0.0.1:4222")
    ///     .stream_prefix("shop")
    ///     .stream_shards(4)
    ///     .build()
    ///     .await?;
    /// # let _ = port; Ok(()) }
    /// ```
    pub fn builder() -> crate::NatsStoragePortBuilder {
        crate::NatsStoragePortBuilder::new()
    }

    /// Connects with the configuration of the `PHOTON_NATS_*` variables and defaults.
    ///
    /// # Errors
    /// As [`crate::NatsStoragePortBuilder::build`].
    pub async fn from_env() -> Result<Self> {
        Self::builder().build().await
    }

    /// Connects with a resolved (or deserialized) configuration. While no server answers,
    /// it keeps trying (pauses growing up to 1 s) for `connect_timeout`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] for a value that cannot work ([`NatsConfig::validate`]), an
    /// unusable URL or credentials file,
    /// [`PhotonError::Unavailable`] naming the address when no server answered within
    /// `connect_timeout`, [`PhotonError::Unauthorized`] naming the server and the user
    /// (or credentials file) when it refused the credentials: at once, without retrying.
    pub async fn connect(config: NatsConfig) -> Result<Self> {
        config.validate()?;
        let client = connect_client(&config).await?;
        let context = ContextBuilder::new()
            .timeout(Duration::from_secs(10))
            .max_ack_inflight(config.max_in_flight + 1024)
            .backpressure_on_inflight(true)
            .build(client.clone());
        let server_max = client.server_info().max_payload;
        let max_payload_bytes = server_max.saturating_sub(RECORD_OVERHEAD_BYTES) / 4 * 3;
        let names = Names::new(&config.prefix, config.shards);
        let streams = Streams::new(context, &config);
        Ok(Self {
            inner: Arc::new(Inner {
                publisher: Publisher::new(config.max_in_flight),
                checkpoints: Checkpoints::new(config.replicas),
                config,
                client,
                names,
                streams,
                max_payload_bytes,
            }),
        })
    }

    /// The configuration this port runs with.
    pub fn config(&self) -> &NatsConfig {
        &self.inner.config
    }

    /// Stable label for logs and metrics: `"nats"`.
    pub fn telemetry_label(&self) -> &'static str {
        LABEL
    }

    /// The NATS client this port publishes and reads with.
    pub fn client(&self) -> &async_nats::Client {
        &self.inner.client
    }

    /// The JetStream context, for tools that need the raw client.
    pub fn jetstream(&self) -> &jetstream::Context {
        self.inner.streams.context()
    }

    /// Deletes every stream of this port's prefix: all topics' events and all checkpoints.
    /// Meant for tests and decommissioning; returns how many streams were deleted.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the server does not answer.
    pub async fn delete_all_streams(&self) -> Result<usize> {
        let context = self.jetstream();
        let mut names = context.stream_names();
        let mut mine = Vec::new();
        while let Some(name) = names.next().await {
            let name = name.map_err(|err| unavailable("cannot list streams", err))?;
            if self.inner.names.owns_stream(&name) {
                mine.push(name);
            }
        }
        for name in &mine {
            context
                .delete_stream(name)
                .await
                .map_err(|err| unavailable(format!("cannot delete stream {name}"), err))?;
            self.inner.streams.forget(name);
        }
        Ok(mine.len())
    }
}

/// Connects, retrying with a growing pause (10 ms doubling up to 1 s) while no server
/// answers, until `connect_timeout` has passed: a service and its NATS server started
/// together need not be started in order.
async fn connect_client(config: &NatsConfig) -> Result<async_nats::Client> {
    let mut addresses = Vec::new();
    for part in config.url.split(',') {
        let address: ServerAddr = part.trim().parse().map_err(|_| {
            PhotonError::config(
                URL_ENV,
                redact_url(&config.url),
                "nats://host:port URLs, comma separated",
            )
        })?;
        addresses.push(address);
    }
    let started = tokio::time::Instant::now();
    let deadline = started + config.connect_timeout;
    let mut pause = Duration::from_millis(10);
    let mut attempts = 0_u32;
    loop {
        attempts += 1;
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let options =
            connect_options(config, &addresses, remaining.min(Duration::from_secs(5))).await?;
        match options.connect(addresses.clone()).await {
            Ok(client) => return Ok(client),
            // Only an unreachable server is waited for: refused credentials or a TLS
            // mismatch get the same answer every time.
            Err(err)
                if matches!(
                    err.kind(),
                    ConnectErrorKind::Io | ConnectErrorKind::TimedOut | ConnectErrorKind::Dns
                ) && tokio::time::Instant::now() < deadline =>
            {
                tracing::debug!(port = LABEL, %err, attempts, "nats server not reachable yet; retrying");
                let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                tokio::time::sleep(pause.min(remaining)).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(err)
                if matches!(
                    err.kind(),
                    ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication
                ) =>
            {
                return Err(PhotonError::unauthorized(
                    LABEL,
                    redact_url(&config.url),
                    identity(config, &addresses),
                    err.to_string(),
                    err,
                ));
            }
            Err(err) => {
                return Err(unavailable(
                    format!(
                        "cannot connect to {} ({attempts} attempts in {:.1} s)",
                        redact_url(&config.url),
                        started.elapsed().as_secs_f64()
                    ),
                    err,
                ))
            }
        }
    }
}

/// Who a connection presents itself as, for a refusal: the credentials file, the URL's
/// user, the client certificate, or none; never a secret.
fn identity(config: &NatsConfig, addresses: &[ServerAddr]) -> String {
    if let Some(path) = &config.credentials_file {
        return format!("the credentials file {}", path.display());
    }
    if let Some(user) = addresses.iter().find_map(ServerAddr::username) {
        return format!("user {user:?}");
    }
    if let Some(cert) = &config.tls.cert_file {
        return format!("the client certificate {}", cert.display());
    }
    "a connection without credentials".to_owned()
}

/// The client options of one connection attempt. Credentials in the URL
/// (`nats://user:password@host`, or `nats://token@host`) are sent as such: the client
/// reads the address from the URL but not its credentials.
async fn connect_options(
    config: &NatsConfig,
    addresses: &[ServerAddr],
    attempt_timeout: Duration,
) -> Result<ConnectOptions> {
    let mut options = ConnectOptions::new()
        .name("photon")
        .connection_timeout(attempt_timeout.max(Duration::from_millis(100)))
        .event_callback(|event| async move {
            tracing::info!(port = LABEL, %event, "nats connection event");
        });
    if let Some(path) = &config.credentials_file {
        options = options.credentials_file(path).await.map_err(|err| {
            PhotonError::config(
                CREDENTIALS_FILE_ENV,
                path.display().to_string(),
                format!("a readable NATS credentials file ({err})"),
            )
        })?;
    }
    if let Some(address) = addresses.iter().find(|address| address.has_user_pass()) {
        let user = address.username().unwrap_or_default().to_owned();
        options = match address.password() {
            Some(password) => options.user_and_password(user, password.to_owned()),
            None => options.token(user),
        };
    }
    if config.tls.required {
        options = options.require_tls(true);
    }
    if let Some(ca) = &config.tls.ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&config.tls.cert_file, &config.tls.key_file) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    Ok(options)
}

#[async_trait]
impl StoragePort for NatsStoragePort {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn capabilities(&self) -> StorageCapabilities {
        StorageCapabilities {
            replay: match self.inner.config.replay_cursor {
                ReplayCursor::StreamSeq => ReplayWindow::Retention,
                ReplayCursor::TailOnly => ReplayWindow::TailOnly,
            },
            // A batch is pipelined message by message: JetStream has no transaction.
            atomic_batches: false,
            durable: true,
            max_payload_bytes: self.inner.max_payload_bytes,
            ..StorageCapabilities::queryable()
        }
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        self.publish(draft).await
    }

    async fn append_batch(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        self.publish_batch(drafts).await
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.open_subscription(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.find(event_id).await
    }

    async fn list_by_topic(&self, topic: &str, after: i64, limit: usize) -> Result<Vec<Record>> {
        self.list_after(topic, after, limit).await
    }

    async fn list_recent(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        self.list_newest(topic, limit).await
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>> {
        self.topics().await
    }

    async fn list_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        self.checkpoints().await
    }

    async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        self.head(topic, key).await
    }

    async fn truncate_before(&self, topic: &str, before_seq: i64) -> Result<u64> {
        self.purge_before(topic, before_seq).await
    }

    async fn declare_dead_letter_topic(&self, topic: &str) -> Result<()> {
        photon_core::validate_topic_name(topic)?;
        let inner = &self.inner;
        inner.streams.keep_dead_letters(&inner.names, topic).await
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        // The lowest shard position: resuming every shard after it loses nothing (see
        // `photon_core::raw::shard::resume_seq`); durable subscriptions resume shard by shard.
        let positions = self.checkpoint_positions(key).await?;
        let names = &self.inner.names;
        let wanted: Vec<u32> = match key.key.as_deref() {
            Some(topic_key) => vec![names.shard_of(Some(topic_key))],
            None => (0..names.shards()).collect(),
        };
        Ok(photon_core::raw::shard::resume_seq(&positions, wanted))
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        self.raise_checkpoint(key, seq).await
    }

    async fn reset_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) -> Result<()> {
        self.replace_checkpoint(key, seq).await
    }

    fn checkpoint_lane(&self, _topic: &str, seq: i64) -> u32 {
        split_seq(seq, self.inner.names.shards()).1
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        photon_core::raw::group::subscribe_group(self, request)
    }

    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        Some(self.coordination())
    }

    async fn flush(&self) -> Result<()> {
        self.wait_for_acks().await
    }
}
