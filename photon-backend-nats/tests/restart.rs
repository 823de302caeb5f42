//! A server restart while 20,000 events are published and consumed: every acknowledged
//! event reaches the durable subscriber.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{NatsFactory, OwnServer};
use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, EventStore, FlushPolicy, StartPolicy, StoragePort,
    TransportCrypto,
};
use serde_json::json;

const EVENTS: usize = 20_000;
const PUBLISHERS: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_loses_no_acknowledged_event() {
    let Some(mut server) = OwnServer::start() else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let Some(factory) = NatsFactory::on(server.url(), 1).await else {
        return;
    };
    let port: Arc<dyn StoragePort> = Arc::new(factory.port().await.unwrap());
    let store = EventStore::new(port.clone(), TransportCrypto::plaintext());
    let topic = "restart.events";

    // The durable subscriber counts what it receives and acknowledges it.
    let received: Arc<Mutex<HashMap<i64, usize>>> = Arc::default();
    let checkpoint = CheckpointKey::new("restart-sub", topic, None);
    let committer =
        CheckpointCommitter::new(port.clone(), checkpoint.clone(), FlushPolicy::default());
    let mut stream = store.subscribe_after_checkpoint(checkpoint.clone(), StartPolicy::Beginning);
    let subscriber = {
        let received = received.clone();
        let committer = committer.clone();
        tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                let Ok(event) = item else { continue };
                *received
                    .lock()
                    .unwrap()
                    .entry(event.payload["i"].as_i64().unwrap())
                    .or_default() += 1;
                let _ = committer.ack(event.seq).await;
            }
        })
    };

    // Publishers retry the same draft (same envelope id) until the server acknowledges it.
    let acked = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let mut publishers = Vec::new();
    for p in 0..PUBLISHERS {
        let (store, acked, retries) = (store.clone(), acked.clone(), retries.clone());
        publishers.push(tokio::spawn(async move {
            for i in (p..EVENTS).step_by(PUBLISHERS) {
                let draft = store
                    .draft(
                        topic,
                        Some(&format!("k{}", i % 64)),
                        json!(null),
                        json!({"i": i}),
                    )
                    .unwrap();
                loop {
                    match store.port().append(draft.clone()).await {
                        Ok(_) => break,
                        Err(err) => {
                            assert!(err.is_retryable(), "{err}");
                            retries.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
                acked.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    // Restart once a quarter is published, while publishing and consuming go on.
    while acked.load(Ordering::Relaxed) < EVENTS / 4 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at_stop = acked.load(Ordering::Relaxed);
    let server = tokio::task::spawn_blocking(move || {
        server.stop();
        std::thread::sleep(Duration::from_millis(500));
        server.restart();
        server
    })
    .await
    .unwrap();
    for publisher in publishers {
        publisher.await.unwrap();
    }
    assert_eq!(acked.load(Ordering::Relaxed), EVENTS);
    assert!(at_stop < EVENTS, "the restart happened mid-stream");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while received.lock().unwrap().len() < EVENTS && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    subscriber.abort();
    committer.flush().await.unwrap();

    let received = received.lock().unwrap().clone();
    let missing = (0..EVENTS as i64)
        .filter(|i| !received.contains_key(i))
        .count();
    let duplicates: usize = received.values().map(|n| n - 1).sum();
    println!(
        "restart: {EVENTS} acknowledged, {} received, missing {missing}, duplicates {duplicates}, publish retries {}",
        received.len(),
        retries.load(Ordering::Relaxed)
    );
    assert_eq!(missing, 0, "acknowledged events missing after the restart");
    assert_eq!(received.len(), EVENTS);
    // The subscriber keeps its cursor across the restart and publishes are deduplicated by
    // envelope id: a duplicate could only come from a retry outside the duplicate window.
    assert!(
        duplicates <= FlushPolicy::default().max_pending as usize,
        "{duplicates} duplicates"
    );
    assert!(port
        .load_checkpoint(&checkpoint)
        .await
        .unwrap()
        .is_some_and(|seq| seq >= EVENTS as i64));
    drop(factory);
    drop(server);
}
