//! The SPU restarts mid-stream: every acknowledged event is delivered.
//!
//! Needs a cluster started by `scripts/fluvio-local.sh start` (it restarts the SPU from the
//! script's state directory, `PHOTON_FLUVIO_STATE`, default `/tmp/photon-fluvio`); skips
//! with a message otherwise.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{owned_state, restart_spu, FluvioFactory};
use futures::StreamExt;
use photon_core::{PhotonError, StartAt};
use serde_json::json;

/// One SPU restart at a time: the tests of this file share the cluster's only SPU.
static SPU: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spu_restart_loses_no_acknowledged_event() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let Some(state) = owned_state() else {
        return;
    };
    let _spu = SPU.lock().await;
    let store = factory.store().await;
    let topic = "restart.stream";
    let publisher = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut attempted = HashSet::new();
            for i in 0..3000i64 {
                attempted.insert(i);
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                loop {
                    match store
                        .publish(
                            topic,
                            Some(&format!("k{}", i % 8)),
                            json!(null),
                            json!({"i": i}),
                        )
                        .await
                    {
                        Ok(appended) => {
                            acked.push((appended.event_id, i));
                            break;
                        }
                        Err(err @ PhotonError::Unavailable { .. }) => {
                            assert!(tokio::time::Instant::now() < deadline, "no recovery: {err}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(err) => panic!("publish {i}: {err}"),
                    }
                }
                if i % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            (acked, attempted)
        })
    };
    let mut live = store.subscribe(topic, None, StartAt::Beginning);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let restarter = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || restart_spu(&state))
    };
    restarter.await.unwrap();
    let (acked, attempted) = publisher.await.unwrap();
    assert_eq!(acked.len(), 3000);
    let wanted: HashSet<String> = acked.iter().map(|(id, _)| id.clone()).collect();
    let mut delivered = HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !wanted.is_subset(&delivered) {
        let item = tokio::time::timeout_at(deadline, live.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "deadline: {} of {} acked delivered",
                    wanted.intersection(&delivered).count(),
                    wanted.len()
                )
            })
            .expect("stream ended")
            .expect("error item");
        let i = item.payload["i"].as_i64().unwrap();
        assert!(attempted.contains(&i), "unknown event {i}");
        delivered.insert(item.event_id);
    }
    println!(
        "{} acked, {} delivered (duplicates from retried publishes allowed)",
        wanted.len(),
        delivered.len()
    );
}

/// A port that only consumes (it never publishes, so no failed send can tell it that its
/// connection broke) recovers from the SPU restart on its own and delivers every event
/// exactly once: the publisher retries each append with the same draft, and the second
/// copy of an append stored twice is dropped by its envelope id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_only_port_recovers_after_spu_restart() {
    const EVENTS: i64 = 3000;
    for shards in [1, 4] {
        let Some(factory) = FluvioFactory::from_env(shards).await else {
            return;
        };
        let Some(state) = owned_state() else {
            return;
        };
        let _spu = SPU.lock().await;
        let publishing = factory.store().await;
        let consuming = factory.store().await;
        let topic = "restart.consume-only";
        let mut live = consuming.subscribe(topic, None, StartAt::Beginning);
        let publisher = {
            let store = publishing.clone();
            tokio::spawn(async move {
                for i in 0..EVENTS {
                    let draft = store
                        .draft(
                            topic,
                            Some(&format!("k{}", i % 8)),
                            json!(null),
                            json!({"i": i}),
                        )
                        .unwrap();
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
                    loop {
                        match store.port().append(draft.clone()).await {
                            Ok(_) => break,
                            Err(err @ PhotonError::Unavailable { .. }) => {
                                assert!(
                                    tokio::time::Instant::now() < deadline,
                                    "no recovery: {err}"
                                );
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            Err(err) => panic!("append {i}: {err}"),
                        }
                    }
                    if i % 100 == 0 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        };
        // The consumer's streams are open and reading before the SPU goes away.
        let first = tokio::time::timeout(Duration::from_secs(30), live.next())
            .await
            .expect("first event")
            .expect("stream ended")
            .expect("error item");
        let mut per_key: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
        let mut note = |event: photon_core::Event| {
            per_key
                .entry(event.topic_key.clone().unwrap())
                .or_default()
                .push(event.payload["i"].as_i64().unwrap());
        };
        note(first);
        let restarter = {
            let state = state.clone();
            tokio::task::spawn_blocking(move || restart_spu(&state))
        };
        restarter.await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        for received in 1..EVENTS {
            let event = tokio::time::timeout_at(deadline, live.next())
                .await
                .unwrap_or_else(|_| panic!("{shards} shards: deadline after {received} events"))
                .expect("stream ended")
                .unwrap_or_else(|err| panic!("{shards} shards: error item: {err}"));
            note(event);
        }
        publisher.await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(1), live.next())
                .await
                .is_err(),
            "{shards} shards: an event beyond the {EVENTS} published"
        );
        for k in 0..8 {
            let expected: Vec<i64> = (0..EVENTS).filter(|i| i % 8 == k).collect();
            assert_eq!(
                per_key.remove(&format!("k{k}")).unwrap_or_default(),
                expected,
                "{shards} shards, key k{k}: every event once, in order"
            );
        }
        assert!(per_key.is_empty());
    }
}
