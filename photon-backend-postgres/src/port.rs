//! [`PostgresStoragePort`]: the `StoragePort` impl over one PostgreSQL schema.

use std::sync::{Arc, Weak};

use std::convert::Infallible;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use photon_core::group::GroupCoordination;
use photon_core::raw::sql::{SqlPort, SqlSettings};
use photon_core::raw::wake::CommitWakers;
use photon_core::{CheckpointKey, Result};
use tokio::sync::watch;

use crate::config::{PostgresConfig, PostgresStoragePortBuilder};
use crate::error::LABEL;
use crate::group::PostgresCoordination;
use crate::lanes::{Across, Lanes};
use crate::writer::Command;
use crate::{checkpoint, connection, consumer, listen, retention, schema};

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

/// What the clones of a port share.
pub struct Inner {
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
    /// [`photon_core::PhotonError::Unauthorized`] when it refuses the credentials (naming
    /// the server and the user),
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
                .map_err(|e| server.pool_connect_error("connect to create the schema", e))?;
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

    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }
}

#[async_trait]
impl SqlPort for PostgresStoragePort {
    const LABEL: &'static str = LABEL;
    type Across = Option<Across>;
    type Own = Infallible;
    type Weak = Weak<Inner>;

    fn settings(&self) -> SqlSettings {
        let config = &self.inner.config;
        SqlSettings {
            max_payload_bytes: config.max_payload_bytes,
            page_size: config.page_size,
            recheck: config.recheck_interval,
            retry_pause: consumer::RETRY_PAUSE,
        }
    }

    /// To the writer task of the command's lane.
    fn send(&self, command: Command) -> Result<()> {
        self.inner.lanes.send(command)
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
        checkpoint::load(&self.inner.pool, key).await
    }

    /// Directly, not through the writer: the mark needs no order with appends.
    async fn mark_dead_letters(&self, topic: &str) -> Result<()> {
        retention::declare_dead_letters(&self.inner.pool, topic).await
    }
}
