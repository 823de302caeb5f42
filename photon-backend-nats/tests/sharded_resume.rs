//! A whole-topic durable subscription over 4 stream shards resumes every shard from its own
//! position: nothing lost, nothing replayed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::NatsFactory;
use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, EventStore, FlushPolicy, StartPolicy, TransportCrypto,
};
use serde_json::json;

const EVENTS: i64 = 2000;
const FIRST_RUN: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_resumes_from_its_own_position() {
    let Some(factory) = NatsFactory::from_env(4).await else {
        return;
    };
    let store = EventStore::new(
        std::sync::Arc::new(factory.port().await.unwrap()),
        TransportCrypto::plaintext(),
    );
    let topic = "sharded.resume";
    let mut lanes = BTreeSet::new();
    for i in 0..EVENTS {
        let appended = store
            .publish(
                topic,
                Some(&format!("k{}", i % 40)),
                json!(null),
                json!({"i": i}),
            )
            .await
            .unwrap();
        lanes.insert(store.port().checkpoint_lane(topic, appended.seq));
    }
    assert_eq!(lanes.len(), 4, "40 keys spread over all 4 shards");

    let key = CheckpointKey::new("resumer", topic, None);
    let mut seen: Vec<i64> = Vec::new();
    let mut last_per_key: BTreeMap<String, i64> = BTreeMap::new();
    let mut record = |event: photon_core::Event| {
        let i = event.payload["i"].as_i64().unwrap();
        let key = event.topic_key.clone().unwrap();
        if let Some(previous) = last_per_key.insert(key.clone(), i) {
            assert!(previous < i, "key {key}: {i} after {previous}");
        }
        seen.push(i);
        event.seq
    };

    let committer =
        CheckpointCommitter::new(store.port().clone(), key.clone(), FlushPolicy::default());
    let mut first = store.subscribe_after_checkpoint(key.clone(), StartPolicy::Beginning);
    let mut acked_lanes = BTreeMap::new();
    for _ in 0..FIRST_RUN {
        let event = tokio::time::timeout(Duration::from_secs(30), first.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let seq = record(event);
        acked_lanes.insert(store.port().checkpoint_lane(topic, seq), seq);
        committer.ack(seq).await.unwrap();
    }
    drop(first);
    committer.flush().await.unwrap();
    assert_eq!(committer.acknowledged(), acked_lanes);
    drop(committer);
    assert_eq!(
        store.port().load_checkpoint(&key).await.unwrap(),
        photon_core::raw::shard::resume_seq(&acked_lanes, 0..4),
        "load returns the lowest shard position"
    );

    // A new process: resumes each shard after its own position.
    let reopened = EventStore::new(
        std::sync::Arc::new(factory.port().await.unwrap()),
        TransportCrypto::plaintext(),
    );
    let mut second = reopened.subscribe_after_checkpoint(key, StartPolicy::Beginning);
    for _ in FIRST_RUN..EVENTS as usize {
        let event = tokio::time::timeout(Duration::from_secs(30), second.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        record(event);
    }
    let extra = tokio::time::timeout(Duration::from_millis(500), second.next()).await;
    assert!(extra.is_err(), "nothing replayed: got {extra:?}");
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(seen.len(), EVENTS as usize, "no event twice");
    assert_eq!(unique, (0..EVENTS).collect(), "no event missing");
}
