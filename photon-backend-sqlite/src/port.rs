//! [`SqliteStoragePort`]: the `StoragePort` impl over one SQLite database file.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use photon_core::group::GroupCoordination;
use photon_core::{
    Appended, CheckpointKey, DeliveryStream, GroupRequest, PhotonError, Record, RecordDraft,
    RecordStream, Result, StorageCapabilities, StoragePort, StoredCheckpoint, SubscribeRequest,
    TopicInfo,
};

use crate::checkpoint::Write;
use crate::config::{SqliteConfig, SqliteStoragePortBuilder};
use crate::error::{writer_gone, LABEL};
use crate::group::SqliteCoordination;
use crate::reader::Readers;
use crate::schema::open_writer;
use crate::writer::{Command, Writer};
use photon_core::raw::wake::CommitWakers;

/// Durable storage in one SQLite file (WAL mode), shareable by several processes.
///
/// - One writer thread per port group-commits concurrent appends and checkpoint commits
///   into one transaction; `append` returns after that commit.
/// - Seq is per topic (so strictly increasing per key too), starting at 1, assigned in the
///   appending transaction under SQLite's write lock.
/// - Reads run on tokio's blocking pool over pooled read connections; replay streams in
///   pages of `page_size` records.
/// - Live subscribers are woken at once by this port's commits and see other processes'
///   appends within `poll_interval`.
/// - Durability: see [`crate::Synchronous`]; with the default `full`, nothing acknowledged
///   is lost, even on power loss; with `normal`, a killed process loses nothing
///   acknowledged but a power loss or OS crash may lose the last acknowledged transactions.
///
/// Clones share the same writer and connections. The writer thread stops once the last
/// clone is dropped, after committing what it holds; streams made from the port do not
/// keep it alive (they keep reading; a tail subscription not yet established then fails
/// with [`PhotonError::Closed`]).
#[derive(Clone)]
pub struct SqliteStoragePort {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: SqliteConfig,
    commands: Sender<Command>,
    heads: Arc<CommitWakers>,
    readers: Arc<Readers>,
    coordination: Arc<SqliteCoordination>,
}

impl std::fmt::Debug for SqliteStoragePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStoragePort")
            .field("path", &self.inner.config.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStoragePort {
    /// A builder; unset fields come from `PHOTON_SQLITE_*` variables, then defaults.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use photon_backend_sqlite::SqliteStoragePort;
    /// use photon_core::{EventStore, TransportCrypto};
    ///
    /// let directory = tempfile::tempdir().unwrap();
    /// let port = SqliteStoragePort::builder()
    ///     .path(directory.path().join("events.db"))
    ///     .build()
    ///     .await?;
    /// let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
    /// let appended = store.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(1)).await?;
    /// assert_eq!(appended.seq, 1);
    /// # Ok::<_, photon_core::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn builder() -> SqliteStoragePortBuilder {
        SqliteStoragePortBuilder::new()
    }

    /// Opens the port configured by the `PHOTON_SQLITE_*` variables and defaults.
    ///
    /// # Errors
    /// As [`SqliteStoragePortBuilder::build`].
    pub async fn from_env() -> Result<Self> {
        Self::builder().build().await
    }

    /// Opens a port with a resolved (or deserialized) configuration; the file and schema
    /// are created when missing. The blocking work runs on tokio's blocking pool.
    ///
    /// # Errors
    /// [`PhotonError::Config`] for a value that cannot work (see [`SqliteConfig::validate`]),
    /// [`PhotonError::Storage`] (or [`PhotonError::Unavailable`] when another process holds
    /// the lock past the busy timeout) when the database cannot be opened.
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        tokio::task::spawn_blocking(move || Self::open_blocking(config))
            .await
            .map_err(|join| PhotonError::storage(LABEL, "open task failed", join))?
    }

    /// Opens a port from synchronous code, blocking the calling thread while opening.
    ///
    /// # Errors
    /// As [`SqliteStoragePort::open`].
    pub fn open_blocking(config: SqliteConfig) -> Result<Self> {
        config.validate()?;
        let connection = open_writer(&config)?;
        let (commands, inbox) = std::sync::mpsc::channel();
        let heads = Arc::new(CommitWakers::default());
        let writer = Writer::new(connection, config.clone(), Arc::clone(&heads), inbox);
        std::thread::Builder::new()
            .name("photon-sqlite-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| PhotonError::storage(LABEL, "cannot start the writer thread", e))?;
        let readers = Arc::new(Readers::new(config.clone()));
        // Open one read connection now so that a broken setup fails here, not later.
        readers.read_now(|_| Ok(()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                coordination: Arc::new(SqliteCoordination::new(config.clone())),
                config,
                commands,
                heads,
                readers,
            }),
        })
    }

    /// The configuration this port runs with.
    pub fn config(&self) -> &SqliteConfig {
        &self.inner.config
    }

    /// A handle that does not keep the port (and its writer thread) alive.
    pub(crate) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// The port of a weak handle, while any clone of it lives.
    pub(crate) fn upgrade(weak: &Weak<Inner>) -> Option<Self> {
        weak.upgrade().map(|inner| Self { inner })
    }

    /// The group primitive over this port's file.
    pub(crate) fn coordination(&self) -> Arc<dyn GroupCoordination> {
        Arc::clone(&self.inner.coordination) as Arc<dyn GroupCoordination>
    }

    pub(crate) fn heads(&self) -> &CommitWakers {
        &self.inner.heads
    }

    pub(crate) fn readers(&self) -> &Arc<Readers> {
        &self.inner.readers
    }

    /// Hands a command to the writer thread.
    pub(crate) fn send(&self, command: Command) -> Result<()> {
        self.inner.commands.send(command).map_err(|_| writer_gone())
    }
}

#[async_trait]
impl StoragePort for SqliteStoragePort {
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
