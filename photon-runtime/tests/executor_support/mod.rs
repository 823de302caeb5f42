//! Helpers shared by the executor tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use photon_core::mem::MemStoragePort;
use photon_core::{
    Appended, CheckpointKey, Event, Record, RecordDraft, RecordStream, Result, StorageCapabilities,
    StoragePort, SubscribeRequest,
};
use photon_runtime::{Executor, ExecutorConfig, Photon, PhotonError, RetryPolicy};
use serde_json::json;

/// Publishes `count` events round-robin over `keys` keys (`k0`, `k1`, ...); returns the
/// seqs per key in publish order.
pub async fn publish_round_robin(
    photon: &Photon,
    topic: &str,
    count: usize,
    keys: usize,
) -> HashMap<String, Vec<i64>> {
    let mut by_key: HashMap<String, Vec<i64>> = HashMap::new();
    for i in 0..count {
        let key = format!("k{}", i % keys);
        let Appended { seq, .. } = photon
            .publish(topic, Some(&key), json!("tester"), json!({ "n": i }))
            .await
            .unwrap();
        by_key.entry(key).or_default().push(seq);
    }
    by_key
}

/// A handler's retry policy that retries at once (1 ms backoff, no jitter), `attempts`
/// attempts per event.
pub fn fast_retries(attempts: u32) -> RetryPolicy {
    RetryPolicy::default()
        .max_attempts(attempts)
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(1))
        .jitter(0.0)
}

/// An executor config that retries at once (1 ms backoff, no jitter), `max_attempts`
/// attempts per event.
pub fn retrying_at_once(max_attempts: u32) -> ExecutorConfig {
    ExecutorConfig::builder()
        .max_attempts(max_attempts)
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(1))
        .jitter(0.0)
        .build()
        .unwrap()
}

/// Publishes `{"n": 1}` to `orders` under `key` and waits until `executor` is idle.
pub async fn publish_one_and_settle(photon: &Photon, executor: &Executor, key: Option<&str>) {
    photon
        .publish("orders", key, json!(null), json!({"n": 1}))
        .await
        .unwrap();
    executor.wait_idle().await.unwrap();
}

/// The first handler's `(handled, retries, dead_lettered)` in the admin snapshot.
pub async fn first_handler_outcomes(photon: &Photon) -> (u64, u64, u64) {
    let handler = &photon.admin_snapshot().await.unwrap().handlers[0];
    (handler.handled, handler.retries, handler.dead_lettered)
}

/// A Photon on a fresh in-process port, with `count` `orders` published by
/// [`publish_round_robin`] over `keys` keys (their seqs per key).
pub async fn mem_photon_with_orders(
    count: usize,
    keys: usize,
) -> (Photon, HashMap<String, Vec<i64>>) {
    let photon = Photon::builder()
        .storage_port(MemStoragePort::new())
        .build()
        .unwrap();
    let published = publish_round_robin(&photon, "orders", count, keys).await;
    (photon, published)
}

/// What handlers saw, per key, in the order they saw it.
#[derive(Default, Clone)]
pub struct Seen {
    inner: Arc<Mutex<Vec<(String, i64, String)>>>,
}

impl Seen {
    /// A handler that records every event it is given and succeeds.
    pub fn handler(
        &self,
    ) -> impl Fn(Event) -> std::future::Ready<std::result::Result<(), PhotonError>> + Send + Sync + 'static
    {
        let seen = self.clone();
        move |event: Event| {
            seen.record(&event);
            std::future::ready(Ok(()))
        }
    }

    pub fn record(&self, event: &Event) {
        let key = event.topic_key.clone().unwrap_or_default();
        self.inner
            .lock()
            .unwrap()
            .push((key, event.seq, event.event_id.clone()));
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().len()
    }

    pub fn seqs(&self) -> Vec<i64> {
        self.inner
            .lock()
            .unwrap()
            .iter()
            .map(|(_, seq, _)| *seq)
            .collect()
    }

    pub fn by_key(&self) -> HashMap<String, Vec<i64>> {
        let mut by_key: HashMap<String, Vec<i64>> = HashMap::new();
        for (key, seq, _) in self.inner.lock().unwrap().iter() {
            by_key.entry(key.clone()).or_default().push(*seq);
        }
        by_key
    }

    pub fn distinct_ids(&self) -> usize {
        let ids: std::collections::HashSet<String> = self
            .inner
            .lock()
            .unwrap()
            .iter()
            .map(|(_, _, id)| id.clone())
            .collect();
        ids.len()
    }
}

/// Polls `condition` every 5 ms until it holds or `deadline` passes; returns whether it held.
pub async fn eventually(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = tokio::time::Instant::now();
    loop {
        if condition() {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A port in front of another that can slow checkpoint commits down (so that a commit is
/// in flight when a test looks), hold appends to dead-letter topics until released, and
/// "crash": after `crash()`, checkpoint commits are lost, as when the process dies before
/// its pending writes reach storage.
#[derive(Clone)]
pub struct HookedPort {
    pub inner: Arc<dyn StoragePort>,
    pub commit_delay: Duration,
    /// Appends to topics ending in `.dlq` take a permit first (none are added unless the
    /// test opens the gate).
    pub dead_letter_gate: Option<Arc<tokio::sync::Semaphore>>,
    /// Claims no `list` capability (a port that cannot list a topic's records).
    pub without_list: bool,
    /// Checkpoint commits fail while set.
    pub failing_commits: Arc<AtomicBool>,
    crashed: Arc<AtomicBool>,
}

impl HookedPort {
    pub fn new(inner: Arc<dyn StoragePort>) -> Self {
        Self {
            inner,
            commit_delay: Duration::ZERO,
            dead_letter_gate: None,
            without_list: false,
            failing_commits: Arc::new(AtomicBool::new(false)),
            crashed: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn crash(&self) {
        self.crashed.store(true, Ordering::SeqCst);
    }

    pub fn is_crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl StoragePort for HookedPort {
    fn label(&self) -> &'static str {
        self.inner.label()
    }

    fn capabilities(&self) -> StorageCapabilities {
        let mut capabilities = self.inner.capabilities();
        capabilities.list &= !self.without_list;
        capabilities
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        if let Some(gate) = &self.dead_letter_gate {
            if draft.topic_name.ends_with(".dlq") {
                gate.acquire().await.unwrap().forget();
            }
        }
        self.inner.append(draft).await
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.inner.subscribe(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.inner.get_record(event_id).await
    }

    async fn list_by_topic(&self, topic: &str, after: i64, limit: usize) -> Result<Vec<Record>> {
        self.inner.list_by_topic(topic, after, limit).await
    }

    async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        self.inner.head_seq(topic, key).await
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        self.inner.load_checkpoint(key).await
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        if self.is_crashed() {
            return Ok(());
        }
        if self.failing_commits.load(Ordering::SeqCst) {
            return Err(photon_core::PhotonError::Storage {
                backend: "hooked",
                message: format!("commit of {seq} refused by the test"),
                source: None,
            });
        }
        tokio::time::sleep(self.commit_delay).await;
        self.inner.commit_checkpoint(key, seq).await
    }

    async fn reset_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) -> Result<()> {
        self.inner.reset_checkpoint(key, seq).await
    }

    fn checkpoint_lane(&self, topic: &str, seq: i64) -> u32 {
        self.inner.checkpoint_lane(topic, seq)
    }

    async fn flush(&self) -> Result<()> {
        self.inner.flush().await
    }
}

/// The backends the failure-path tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Mem,
    Sqlite,
}

pub const BACKENDS: [Backend; 2] = [Backend::Mem, Backend::Sqlite];

/// A fresh store of one backend, and a way to damage a record in it.
pub struct TestStore {
    pub port: Arc<dyn StoragePort>,
    mem: Option<MemStoragePort>,
    // Kept so that the database lives as long as the store.
    directory: Option<tempfile::TempDir>,
}

/// Bytes no port decodes as a record.
pub const GARBAGE: &[u8] = b"not a photon record {";

impl TestStore {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Mem => {
                let mem = MemStoragePort::new();
                Self {
                    port: Arc::new(mem.clone()),
                    mem: Some(mem),
                    directory: None,
                }
            }
            Backend::Sqlite => {
                let directory = tempfile::tempdir().unwrap();
                let port = photon_backend_sqlite::SqliteStoragePort::builder()
                    .path(directory.path().join("photon.db"))
                    .poll_interval(Duration::from_millis(20))
                    .build()
                    .await
                    .unwrap();
                Self {
                    port: Arc::new(port),
                    mem: None,
                    directory: Some(directory),
                }
            }
        }
    }

    /// Stores `GARBAGE` as the next record of `topic` under `key`; returns its seq.
    pub async fn store_garbage(&self, topic: &str, key: Option<&str>) -> i64 {
        if let Some(mem) = &self.mem {
            return mem.append_undecodable(topic, key, GARBAGE).seq;
        }
        let store = photon_core::EventStore::new(
            self.port.clone(),
            photon_core::TransportCrypto::plaintext(),
        );
        let placeholder = store
            .publish(topic, key, json!(null), json!(null))
            .await
            .unwrap();
        store.port().flush().await.unwrap();
        let path = self.directory.as_ref().unwrap().path().join("photon.db");
        let connection = rusqlite::Connection::open(path).unwrap();
        connection.busy_timeout(Duration::from_secs(10)).unwrap();
        let changed = connection
            .execute(
                "UPDATE events SET body = ?1 WHERE event_id = ?2",
                rusqlite::params![GARBAGE, placeholder.event_id],
            )
            .unwrap();
        assert_eq!(changed, 1);
        placeholder.seq
    }
}
