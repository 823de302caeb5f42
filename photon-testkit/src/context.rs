//! What a scenario works with: a port factory and a fresh namespace.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use photon_core::{
    Appended, Body, EventStore, Headers, PhotonError, RecordDraft, Result, StoragePort,
    TransportCrypto,
};
use serde_json::{json, Value};

/// Environment variable naming adapters whose absence fails the suite instead of skipping
/// it, e.g. `PHOTON_TEST_REQUIRE=nats,fluvio`.
pub const REQUIRE_ENV: &str = "PHOTON_TEST_REQUIRE";

/// A record no decoder reads, for [`PortFactory::store_undecodable`] to store.
#[derive(Debug, Clone, Copy)]
pub struct UndecodableRecord<'a> {
    /// A record just appended to the topic: where the damaged one goes (a broker port
    /// rewrites its subject or partition).
    pub next_to: &'a Appended,
    /// The topic.
    pub topic: &'a str,
    /// The key.
    pub key: Option<&'a str>,
    /// The bytes to store as the record's body.
    pub stored: &'a [u8],
}

/// Opens ports onto one backend.
///
/// Every port one factory opens sees the same stored data (so a second `open` is a restart
/// or a second process), and no data of other factories.
#[async_trait]
pub trait PortFactory: Send + Sync + 'static {
    /// Opens a port onto this factory's backend.
    ///
    /// # Errors
    /// Whatever opening the backend returns; the scenario fails with it.
    async fn open(&self) -> Result<Arc<dyn StoragePort>>;

    /// Stores `stored` as it is, as a new record of `topic` under `key` that the port
    /// cannot decode (what a damaged disk, another program or a bug could leave behind):
    /// the SQLite factory overwrites a new row's body, the broker factories write the bytes
    /// on the partition of `next_to` (a record of `topic` and `key` published just before,
    /// which the injected one follows), the mem factory uses
    /// `MemStoragePort::append_undecodable`. Called before any subscriber reads the topic.
    ///
    /// # Errors
    /// Whatever writing the bytes returns; by default [`PhotonError::Unsupported`], which
    /// fails the `undecodable_record` scenario: every port's test must supply this hook.
    async fn store_undecodable(&self, record: UndecodableRecord<'_>) -> Result<()> {
        let _ = record;
        Err(PhotonError::Unsupported {
            backend: "test factory",
            operation: "store_undecodable",
        })
    }

    /// Removes what a run under `namespace` (see [`Context::topic`]) left in the backend
    /// that would otherwise pile up over a long soak (a broker's topics, say). Called after
    /// each composition schedule, once every port it opened is dropped. By default nothing:
    /// a factory that cleans up when dropped, or whose backend is cheap to fill, needs
    /// nothing here.
    ///
    /// # Errors
    /// Whatever removing returns; the caller reports it and goes on.
    async fn remove_namespace(&self, namespace: &str) -> Result<()> {
        let _ = namespace;
        Ok(())
    }
}

/// Decides what a test does when its backend is absent: prints `skipped: <why>` and
/// returns, or panics when [`REQUIRE_ENV`] names `adapter`.
///
/// # Panics
/// When the adapter is required.
pub fn skip_or_fail(adapter: &str, why: &str) {
    let required = std::env::var(REQUIRE_ENV).unwrap_or_default();
    if required.split(',').any(|name| name.trim() == adapter) {
        panic!("{adapter} is required by {REQUIRE_ENV} but unavailable: {why}");
    }
    println!("skipped: {why}");
}

/// A scenario's working set.
pub struct Context {
    /// The backend.
    pub factory: Arc<dyn PortFactory>,
    namespace: String,
    /// A port opened (by the runner) and not used yet: the next [`Context::port`] returns it
    /// instead of opening another.
    unused: Mutex<Option<Arc<dyn StoragePort>>>,
}

/// Deadline for anything a scenario waits for.
pub const DEADLINE: Duration = Duration::from_secs(30);

impl Context {
    /// A context with a fresh namespace.
    pub fn new(factory: Arc<dyn PortFactory>) -> Self {
        let unique = uuid::Uuid::new_v4().simple().to_string();
        Self {
            factory,
            namespace: format!("ck{}", &unique[..10]),
            unused: Mutex::new(None),
        }
    }

    /// Gives a port opened by this context and not used yet to the next [`Context::port`].
    pub(crate) fn hand_back(&self, port: Arc<dyn StoragePort>) {
        *self.unused.lock().unwrap_or_else(|p| p.into_inner()) = Some(port);
    }

    /// The prefix of every topic and subscription name of this run.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A topic name unique to this run.
    pub fn topic(&self, name: &str) -> String {
        format!("{}.{name}", self.namespace)
    }

    /// A subscription name unique to this run.
    pub fn subscription(&self, name: &str) -> String {
        format!("{}-{name}", self.namespace)
    }

    /// A new port onto the backend.
    ///
    /// # Panics
    /// When the backend cannot be opened.
    pub async fn port(&self) -> Arc<dyn StoragePort> {
        let unused = self.unused.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(port) = unused {
            return port;
        }
        match self.factory.open().await {
            Ok(port) => port,
            Err(err) => panic!("cannot open the port: {err}"),
        }
    }

    /// An event store over a new port, in plaintext.
    pub async fn store(&self) -> EventStore {
        EventStore::new(self.port().await, TransportCrypto::plaintext())
    }

    /// An event store over a new port with a key ring.
    pub async fn sealed_store(&self, crypto: TransportCrypto) -> EventStore {
        EventStore::new(self.port().await, crypto)
    }
}

/// Takes exactly `count` items from a stream within [`DEADLINE`].
///
/// # Panics
/// When the stream ends or the deadline passes first, with how many items arrived.
pub async fn take_exact<S, T>(stream: &mut S, count: usize) -> Vec<T>
where
    S: Stream<Item = T> + Unpin,
{
    let mut items = Vec::with_capacity(count);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while items.len() < count {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(item)) => items.push(item),
            Ok(None) => panic!("stream ended after {} of {count} items", items.len()),
            Err(_) => panic!("deadline passed after {} of {count} items", items.len()),
        }
    }
    items
}

/// Polls `observe` until it reports what a scenario waits for (`Ok`), within
/// [`DEADLINE`]: for state a scenario can look at but not be woken by (leases in the
/// store, a delivery's ownership).
///
/// # Panics
/// When the deadline passes first, with `what` and the last state `observe` described.
pub(crate) async fn eventually<T, F, Fut>(what: &str, mut observe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match observe().await {
            Ok(value) => return value,
            Err(state) => assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: not within {DEADLINE:?}; last seen: {state}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts that nothing more arrives on a stream within `quiet`.
///
/// # Panics
/// When an item arrives.
pub async fn assert_quiet<S, T: std::fmt::Debug>(stream: &mut S, quiet: Duration)
where
    S: Stream<Item = T> + Unpin,
{
    if let Ok(Some(item)) = tokio::time::timeout(quiet, stream.next()).await {
        panic!("expected no more items, got {item:?}");
    }
}

/// A plaintext draft for [`StoragePort::append`]: a new envelope id, no actor, no
/// headers, created now; what tests that write below the [`EventStore`] append.
#[must_use]
pub fn plain_draft(topic: &str, key: Option<&str>, payload: Value) -> RecordDraft {
    RecordDraft {
        envelope_id: uuid::Uuid::now_v7().to_string(),
        topic_name: topic.to_owned(),
        topic_key: key.map(str::to_owned),
        created_at: chrono::Utc::now(),
        body: Body::Plain {
            actor: json!(null),
            payload,
            headers: Headers::new(),
        },
    }
}

/// The error of a [`PortFactory::store_undecodable`] hook whose write failed: `what`
/// failed because of `err`.
pub fn injection_failed(what: &str, err: &dyn std::fmt::Display) -> PhotonError {
    PhotonError::InvalidInput(format!("{what}: {err}"))
}

/// Asserts that `result` is [`photon_core::PhotonError::Undecodable`] naming `topic`,
/// `event_id` and `seq` and keeping the `stored` bytes: a port's decoder tests.
pub fn assert_undecodable<T: std::fmt::Debug>(
    result: photon_core::Result<T>,
    (topic, event_id, seq): (&str, &str, i64),
    stored: &[u8],
) {
    match result {
        Err(photon_core::PhotonError::Undecodable {
            topic: found_topic,
            event_id: found_id,
            seq: found_seq,
            stored: found_stored,
            ..
        }) => {
            assert_eq!(
                (found_topic.as_str(), found_id.as_str(), found_seq),
                (topic, event_id, seq)
            );
            assert_eq!(&*found_stored, stored, "the error keeps the stored bytes");
        }
        other => panic!("expected Undecodable, got {other:?}"),
    }
}
