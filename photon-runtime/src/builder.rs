//! [`PhotonBuilder`]: assembles a [`Photon`] from a storage port, keys and policies.

use std::sync::Arc;

use photon_core::mem::MemStoragePort;
use photon_core::{FlushPolicy, Result, StoragePort, TopicRegistry, TransportCrypto};

use crate::executor::arguments::States;
use crate::executor::ExecutorConfig;
use crate::photon::Photon;
use crate::schedule::SchedulerConfig;

/// Builds a [`Photon`]. Every setting has a default: the in-process `mem` port (configured by
/// `PHOTON_MEM_*`), the keys of
/// `PHOTON_TRANSPORT_KEYS` / `PHOTON_TRANSPORT_KEY` (plaintext when unset), the topics
/// declared with `#[topic]`, and the default checkpoint flush policy.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::PhotonBuilder;
/// use photon_core::mem::MemStoragePort;
///
/// let photon = PhotonBuilder::new()
///     .storage_port(MemStoragePort::new())
///     .transport_key("2026-11", [7u8; 32])
///     .build()
///     .unwrap();
/// let published = photon.publish("orders", Some("o-1"), serde_json::json!("alice"), serde_json::json!({"total": 12})).await.unwrap();
/// assert_eq!(published.seq, 1);
/// # });
/// ```
#[derive(Default)]
pub struct PhotonBuilder {
    port: Option<Arc<dyn StoragePort>>,
    crypto: Option<TransportCrypto>,
    keys: Vec<(String, Vec<u8>)>,
    registry: Option<TopicRegistry>,
    flush_policy: FlushPolicy,
    executor_config: Option<ExecutorConfig>,
    scheduler: SchedulerConfig,
    states: States,
}

impl std::fmt::Debug for PhotonBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key_ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("PhotonBuilder")
            .field("port", &self.port.as_ref().map(|p| p.label()))
            .field("crypto", &self.crypto)
            .field("key_ids", &key_ids)
            .field("flush_policy", &self.flush_policy)
            .field("executor_config", &self.executor_config)
            .field("scheduler", &self.scheduler)
            .field("states", &self.states.len())
            .finish_non_exhaustive()
    }
}

impl PhotonBuilder {
    /// A builder with every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores events in `port` instead of the in-process store.
    pub fn storage_port(mut self, port: impl StoragePort) -> Self {
        self.port = Some(Arc::new(port));
        self
    }

    /// Stores events in a port that is already shared.
    pub fn shared_storage_port(mut self, port: Arc<dyn StoragePort>) -> Self {
        self.port = Some(port);
        self
    }

    /// Uses this key ring instead of the environment's.
    pub fn transport_crypto(mut self, crypto: TransportCrypto) -> Self {
        self.crypto = Some(crypto);
        self
    }

    /// Adds a 32-byte transport key; the last one added seals new events. Keys added here
    /// extend the ring of [`PhotonBuilder::transport_crypto`] or, without it, replace the
    /// environment's.
    pub fn transport_key(mut self, id: impl Into<String>, key: impl AsRef<[u8]>) -> Self {
        self.keys.push((id.into(), key.as_ref().to_vec()));
        self
    }

    /// Uses this topic registry instead of the `#[topic]` declarations.
    pub fn registry(mut self, registry: TopicRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// When durable subscriptions commit their checkpoints.
    pub fn flush_policy(mut self, policy: FlushPolicy) -> Self {
        self.flush_policy = policy;
        self
    }

    /// Settings of the handler executor (default: `ExecutorConfig::from_env`).
    ///
    /// ```
    /// use photon_runtime::{ExecutorConfig, PhotonBuilder};
    /// let photon = PhotonBuilder::new()
    ///     .executor_config(ExecutorConfig::builder().parallelism(4).build().unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(photon.executor_config().parallelism, 4);
    /// ```
    pub fn executor_config(mut self, config: ExecutorConfig) -> Self {
        self.executor_config = Some(config);
        self
    }

    /// Where events published for later are kept and how the scheduler runs (see
    /// [`crate::schedule`]; default [`SchedulerConfig::default`]).
    ///
    /// ```
    /// use photon_runtime::{PhotonBuilder, SchedulerConfig};
    /// let photon = PhotonBuilder::new()
    ///     .scheduler(SchedulerConfig::default().topic("billing.schedule"))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(photon.scheduler_config().topic, "billing.schedule");
    /// ```
    pub fn scheduler(mut self, config: SchedulerConfig) -> Self {
        self.scheduler = config;
        self
    }

    /// Registers `value` for the handlers of every executor of this `Photon` that take
    /// [`State<T>`](crate::executor::State) (with `T` its type), as
    /// [`ExecutorBuilder::state`](crate::ExecutorBuilder::state) does for one executor
    /// (whose own value of a type replaces this one).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::executor::State;
    /// use photon_runtime::{Event, PhotonBuilder, PhotonError};
    ///
    /// #[derive(Clone)]
    /// struct Greeting(&'static str);
    ///
    /// let photon = PhotonBuilder::new().state(Greeting("hello")).build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("greeter", "visits", |event: Event, State(greeting): State<Greeting>| async move {
    ///         println!("{} {}", greeting.0, event.payload);
    ///     })
    ///     .start()?;
    /// # executor.shutdown().await?;
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// Builds the handle.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] for a malformed key (naming the variable or key
    /// id) or a bad `PHOTON_EXECUTOR_*` (or, without a port, `PHOTON_MEM_*`) variable, and
    /// [`photon_core::PhotonError::InvalidTopic`] for a bad `#[topic]` declaration;
    /// `Config` naming a bad scheduler setting.
    pub fn build(self) -> Result<Photon> {
        self.scheduler.validate()?;
        let mut crypto = match (self.crypto, self.keys.is_empty()) {
            (Some(crypto), _) => crypto,
            (None, false) => TransportCrypto::plaintext(),
            (None, true) => TransportCrypto::from_env()?,
        };
        for (id, key) in self.keys {
            crypto = crypto.with_key(id, key)?;
        }
        let registry = match self.registry {
            Some(registry) => registry,
            None => TopicRegistry::from_inventory()?,
        };
        let port: Arc<dyn StoragePort> = match self.port {
            Some(port) => port,
            None => Arc::new(MemStoragePort::from_env()?),
        };
        let executor_config = match self.executor_config {
            Some(config) => {
                config.validate()?;
                config
            }
            None => ExecutorConfig::from_env()?,
        };
        Ok(Photon::assemble(
            port,
            crypto,
            registry,
            self.flush_policy,
            executor_config,
            self.scheduler,
            self.states,
        ))
    }
}
