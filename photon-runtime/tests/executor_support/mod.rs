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
use photon_runtime::Photon;
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

/// What handlers saw, per key, in the order they saw it.
#[derive(Default, Clone)]
pub struct Seen {
    inner: Arc<Mutex<Vec<(String, i64, String)>>>,
}

impl Seen {
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

/// A mem port that can "crash": after `crash()`, checkpoint commits are lost, as when the
/// process dies before its pending writes reach storage.
#[derive(Clone)]
pub struct CrashablePort {
    pub inner: MemStoragePort,
    crashed: Arc<AtomicBool>,
}

impl CrashablePort {
    pub fn new(inner: MemStoragePort) -> Self {
        Self {
            inner,
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
impl StoragePort for CrashablePort {
    fn label(&self) -> &'static str {
        "crashable-mem"
    }

    fn capabilities(&self) -> StorageCapabilities {
        self.inner.capabilities()
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        self.inner.append(draft).await
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        self.inner.subscribe(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.inner.get_record(event_id).await
    }

    async fn list_by_topic(
        &self,
        topic: &str,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<Record>> {
        self.inner.list_by_topic(topic, after_seq, limit).await
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
        self.inner.commit_checkpoint(key, seq).await
    }
}
