//! [`PostgresStoragePort`]: the `StoragePort` impl over one PostgreSQL schema.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use deadpool_postgres::Pool;
use photon_core::group::GroupCoordination;
use photon_core::{
    Appended, CheckpointKey, DeliveryStream, GroupRequest, Record, RecordDraft, RecordStream,
    Result, StorageCapabilities, StoragePort, StoredCheckpoint, SubscribeRequest, TopicInfo,
};
use tokio::sync::watch;

use crate::checkpoint::Write;
use crate::config::{PostgresConfig, PostgresStoragePortBuilder};
use crate::error::{pool_error, LABEL};
use crate::group::PostgresCoordination;
use crate::lanes::Lanes;
use crate::writer::Command;
use crate::{connection, listen, retention, schema};
use photon_core::raw::wake::CommitWakers;

/// Durable storage in one PostgreSQL schema, shareable by any number of processes.
///
/// - One writer task per topic group-commits that topic's concurrent appends into one
///   transaction, and one more the checkpoint commits; `append` returns after that commit.
///   With PostgreSQL's default `synchronous_commit = on`, the commit is flushed to the
///   server's WAL on disk first.
/// - Seq is per topic, starting at 1, without gaps, assigned under the topic row's lock in
///   the appending transaction, so processes appending to one topic take turns. An append
///   waiting for that lock (held by a caller's open transaction that published to the
///   topic) holds up only the appends to the same topic.
/// - Every session of the port has `lock_timeout` set (5 s by default): a lock wait that
///   outlasts it fails with a retryable [`photon_core::PhotonError::Unavailable`] instead
///   of hanging.
/// - An event id already stored is not stored again (a retried append returns the stored
///   seq).
/// - Live subscribers are woken by `LISTEN`/`NOTIFY` on commit, from any process; replay
///   reads pages of `page_size` records.
/// - Consumer groups span every process using the schema; leases expire on the database
///   server's clock.
///
/// Clones share the same writer tasks, pools and listener. The background tasks stop once the
/// last clone is dropped (the writer after committing what it holds); streams made from
/// the port keep reading through the pool.
#[derive(Clone)]
pub struct PostgresStoragePort {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: PostgresConfig,
    pool: Pool,
    lanes: Lanes,
    heads: Arc<CommitWakers>,
    coordination: Arc<PostgresCoordination>,
    /// Dropped with the last clone: stops the listener and the retention task.
    _stop: watch::Sender<()>,
}

impl std::fmt::Debug for PostgresStoragePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStoragePort")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl PostgresStoragePort {
    /// A builder; unset fields come from `PHOTON_POSTGRES_*` variables, then defaults.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> photon_core::Result<()> {
    /// use std::sync::Arc;
    /// use photon_backend_postgres::PostgresStoragePort;
    /// use photon_core::{EventStore, TransportCrypto};
    ///
    /// let port = PostgresStoragePort::builder()
    ///     .url("postgres://app@127.0.0.1:5432/app")
    ///     .schema("events")
    ///     .build()
    ///     .await?;
    /// let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
    /// store.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(1)).await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> PostgresStoragePortBuilder {
        PostgresStoragePortBuilder::new()
    }

    /// Opens the port configured by the `PHOTON_POSTGRES_*` variables and defaults.
    ///
    /// # Errors
    /// As [`PostgresStoragePortBuilder::build`].
    pub async fn from_env() -> Result<Self> {
        Self::builder().build().await
    }

    /// Opens a port with a resolved (or deserialized) configuration: connects, creates the
    /// schema and tables when missing and starts listening; writer tasks start on the
    /// calling tokio runtime as writes come.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] for a value that cannot work (see
    /// [`PostgresConfig::validate`]) or a TLS certificate or key file that cannot be used
    /// (naming `sslrootcert`, `sslcert` or `sslkey` and the path),
    /// [`photon_core::PhotonError::Unavailable`] when the server cannot be reached,
    /// [`photon_core::PhotonError::Storage`] when it refuses the schema or a TLS
    /// certificate is refused (the message names the cause).
    pub async fn open(config: PostgresConfig) -> Result<Self> {
        config.validate()?;
        let server = connection::Server::new(&config)?;
        let pool = server.pool(config.pool_size)?;
        {
            let mut client = pool
                .get()
                .await
                .map_err(|e| pool_error("connect to create the schema", e))?;
            schema::migrate(&mut client, &config.schema).await?;
            connection::warn_unless_durable(&client).await;
        }
        let heads = Arc::new(CommitWakers::default());
        let (stop, stopped) = watch::channel(());
        listen::start(
            server.clone(),
            config.schema.clone(),
            Arc::clone(&heads),
            stopped.clone(),
        )
        .await?;
        // The writer lanes on connections of their own: page reads and transactional
        // handlers holding the read pool must not hold up appends and checkpoint commits.
        let lanes = Lanes::new(
            server.pool(config.writer_connections)?,
            Arc::clone(&heads),
            config.max_batch,
            listen::channel(&config.schema),
        );
        if config.has_retention() {
            tokio::spawn(retention::sweep_every(
                pool.clone(),
                config.clone(),
                stopped,
            ));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                // Leases and heartbeats on connections of their own: a pool busy with page
                // reads or appends must not let a member's leases lapse.
                coordination: Arc::new(PostgresCoordination::new(
                    server.pool(connection::COORDINATION_CONNECTIONS)?,
                )),
                config,
                pool,
                lanes,
                heads,
                _stop: stop,
            }),
        })
    }

    /// The configuration this port runs with.
    pub fn config(&self) -> &PostgresConfig {
        &self.inner.config
    }

    /// A handle that does not keep the port (and its tasks) alive.
    pub(crate) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// The port of a weak handle, while any clone of it lives.
    pub(crate) fn upgrade(weak: &Weak<Inner>) -> Option<Self> {
        weak.upgrade().map(|inner| Self { inner })
    }

    /// The group primitive over this port's schema.
    pub(crate) fn coordination(&self) -> Arc<dyn GroupCoordination> {
        Arc::clone(&self.inner.coordination) as Arc<dyn GroupCoordination>
    }

    pub(crate) fn heads(&self) -> &CommitWakers {
        &self.inner.heads
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// Hands a command to the writer task of its lane.
    pub(crate) fn send(&self, command: Command) -> Result<()> {
        self.inner.lanes.send(command)
    }
}

#[async_trait]
impl StoragePort for PostgresStoragePort {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn capabilities(&self) -> StorageCapabilities {
        StorageCapabilities {
            get_event: true,
            list: true,
            truncate: true,
            consumer_groups: true,
            head_seq: true,
            catalog: true,
            checkpoint_reset: true,
            atomic_batches: true,
            durable: true,
            max_payload_bytes: self.inner.config.max_payload_bytes,
            ..StorageCapabilities::default()
        }
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        self.append_row(draft).await
    }

    async fn append_batch(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        self.append_rows(drafts).await
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.open_subscription(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.find(event_id).await
    }

    async fn list_by_topic(
        &self,
        topic: &str,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<Record>> {
        self.list_after(topic, after_seq, limit).await
    }

    async fn list_recent(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        self.newest(topic, limit).await
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
        self.truncate(topic, before_seq).await
    }

    async fn declare_dead_letter_topic(&self, topic: &str) -> Result<()> {
        self.declare_dead_letters(topic).await
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        self.load(key).await
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        self.write_checkpoint(key, Write::Raise(seq)).await
    }

    async fn reset_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) -> Result<()> {
        self.write_checkpoint(key, Write::Replace(seq)).await
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        photon_core::raw::group::subscribe_group(self, request)
    }

    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        Some(self.coordination())
    }

    fn transactional_port(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
