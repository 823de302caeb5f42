//! A whole-topic durable subscription over a port's 4 shards resumes every shard from its
//! own position: nothing lost, nothing replayed, each key in order; `AfterSeq` on the whole
//! topic is exact per shard. The port's test supplies a factory whose ports have 4 shards
//! ([`every_shard_resumes_from_its_own_position`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, EventStore, FlushPolicy, StartAt, StartPolicy,
    TransportCrypto,
};
use serde_json::json;

use crate::PortFactory;

const EVENTS: i64 = 2000;
const FIRST_RUN: usize = 1000;
const SHARDS: u32 = 4;

async fn next_event(stream: &mut photon_core::EventStream) -> photon_core::Event {
    tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("deadline")
        .expect("stream ended")
        .expect("error item")
}

/// Publishes 2,000 events on 40 keys, checks that they spread over all 4 shards and that
/// `AfterSeq` yields exactly the later ones, then reads 1,000 through a durable
/// subscription, commits, and reads the rest from a second port (a new process): every
/// event once, each key in order, and the stored checkpoint is the lowest shard position.
///
/// # Panics
/// When any of that fails, or an event takes over 30 s.
pub async fn every_shard_resumes_from_its_own_position(factory: &impl PortFactory) {
    let store = EventStore::new(factory.open().await.unwrap(), TransportCrypto::plaintext());
    let topic = "sharded.resume";
    let mut lanes = BTreeSet::new();
    let mut seqs = Vec::new();
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
        seqs.push(appended.seq);
    }
    assert_eq!(lanes.len(), 4, "40 keys spread over all 4 shards");

    // AfterSeq(s) on the whole topic yields exactly the events with seq > s.
    let cut = seqs[EVENTS as usize / 2];
    let expected = seqs.iter().filter(|s| **s > cut).count();
    let mut after = store.subscribe(topic, None, StartAt::AfterSeq(cut));
    for _ in 0..expected {
        assert!(next_event(&mut after).await.seq > cut);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(500), after.next())
            .await
            .is_err()
    );

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
        let seq = record(next_event(&mut first).await);
        acked_lanes.insert(store.port().checkpoint_lane(topic, seq), seq);
        committer.ack(seq).await.unwrap();
    }
    drop(first);
    committer.flush().await.unwrap();
    assert_eq!(committer.acknowledged(), acked_lanes);
    drop(committer);
    assert_eq!(
        store.port().load_checkpoint(&key).await.unwrap(),
        photon_core::raw::shard::resume_seq(&acked_lanes, 0..SHARDS),
        "load returns the lowest shard position"
    );

    // A new process: resumes each shard after its own position.
    let reopened = EventStore::new(factory.open().await.unwrap(), TransportCrypto::plaintext());
    let mut second = reopened.subscribe_after_checkpoint(key, StartPolicy::Beginning);
    for _ in FIRST_RUN..EVENTS as usize {
        record(next_event(&mut second).await);
    }
    let extra = tokio::time::timeout(Duration::from_millis(500), second.next()).await;
    assert!(extra.is_err(), "nothing replayed: got {extra:?}");
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(seen.len(), EVENTS as usize, "no event twice");
    assert_eq!(unique, (0..EVENTS).collect(), "no event missing");
}
