//! [`SqliteStoragePort`]: the `StoragePort` impl over one SQLite database file.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use photon_core::group::GroupCoordination;
use photon_core::raw::sql::error::writer_gone;
use photon_core::raw::sql::{SqlPort, SqlSettings};
use photon_core::raw::wake::CommitWakers;
use photon_core::{CheckpointKey, PhotonError, Result};

use crate::checkpoint;
use crate::config::{SqliteConfig, SqliteStoragePortBuilder};
use crate::error::LABEL;
use crate::group::SqliteCoordination;
use crate::reader::Readers;
use crate::schema::open_writer;
use crate::transaction::TransactionWork;
use crate::writer::{Command, Writer};

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

/// What the clones of a port share.
pub struct Inner {
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

    pub(crate) fn readers(&self) -> &Arc<Readers> {
        &self.inner.readers
    }
}

#[async_trait]
impl SqlPort for SqliteStoragePort {
    const LABEL: &'static str = LABEL;
    type Across = ();
    type Own = TransactionWork;
    type Weak = Weak<Inner>;

    fn settings(&self) -> SqlSettings {
        let config = &self.inner.config;
        SqlSettings {
            max_payload_bytes: config.max_payload_bytes,
            page_size: config.page_size,
            recheck: config.poll_interval,
            retry_pause: config.poll_interval,
        }
    }

    fn send(&self, command: Command) -> Result<()> {
        self.inner
            .commands
            .send(command)
            .map_err(|_| writer_gone(LABEL))
    }

    fn heads(&self) -> &CommitWakers {
        &self.inner.heads
    }

    fn coordination(&self) -> Arc<dyn GroupCoordination> {
        Arc::clone(&self.inner.coordination) as Arc<dyn GroupCoordination>
    }

    fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    fn upgrade(weak: &Weak<Inner>) -> Option<Self> {
        weak.upgrade().map(|inner| Self { inner })
    }

    async fn stored_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        checkpoint::load(&self.inner.readers, key).await
    }
}
