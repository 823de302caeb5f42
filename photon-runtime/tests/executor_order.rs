//! Per-key order, bounded parallelism and exactly-once handling in a run without failures.

mod executor_support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_support::{eventually, mem_photon_with_orders, Seen};
use photon_runtime::{Event, ExecutorConfig, PhotonError};
use tokio::sync::Barrier;

const EVENTS: usize = 10_000;
const KEYS: usize = 50;
const PARALLELISM: usize = 16;

#[derive(Default)]
struct Concurrency {
    busy_keys: Mutex<HashSet<String>>,
    overlaps: AtomicUsize,
    current: AtomicUsize,
    max: AtomicUsize,
    barrier_timeouts: AtomicUsize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_events_keep_per_key_order_with_16_way_parallelism() {
    let (photon, published) = mem_photon_with_orders(EVENTS, KEYS).await;

    let seen = Seen::default();
    let concurrency = Arc::new(Concurrency::default());
    // The first 16 events have 16 different keys: they can only all pass this barrier if
    // 16 handlers run at once.
    let barrier = Arc::new(Barrier::new(PARALLELISM));
    let config = ExecutorConfig::builder()
        .parallelism(PARALLELISM)
        .build()
        .unwrap();
    let executor = photon
        .executor()
        .config(config)
        .handler("billing", "orders", {
            let seen = seen.clone();
            let concurrency = concurrency.clone();
            move |event: Event| {
                let seen = seen.clone();
                let concurrency = concurrency.clone();
                let barrier = barrier.clone();
                async move {
                    let key = event.topic_key.clone().unwrap();
                    if !concurrency.busy_keys.lock().unwrap().insert(key.clone()) {
                        concurrency.overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let now = concurrency.current.fetch_add(1, Ordering::SeqCst) + 1;
                    concurrency.max.fetch_max(now, Ordering::SeqCst);
                    if event.seq <= PARALLELISM as i64
                        && tokio::time::timeout(Duration::from_secs(10), barrier.wait())
                            .await
                            .is_err()
                    {
                        concurrency.barrier_timeouts.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    seen.record(&event);
                    concurrency.current.fetch_sub(1, Ordering::SeqCst);
                    concurrency.busy_keys.lock().unwrap().remove(&key);
                    Ok::<(), PhotonError>(())
                }
            }
        })
        .start()
        .unwrap();

    assert!(
        eventually(Duration::from_secs(120), || seen.len() >= EVENTS).await,
        "handled {}",
        seen.len()
    );
    executor.shutdown().await.unwrap();
    // Nothing more arrives after the last event: no event is handled twice.
    tokio::time::sleep(Duration::from_millis(200)).await;

    assert_eq!(seen.len(), EVENTS);
    assert_eq!(seen.distinct_ids(), EVENTS);
    assert_eq!(seen.by_key(), published);
    assert_eq!(concurrency.overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(concurrency.barrier_timeouts.load(Ordering::SeqCst), 0);
    assert_eq!(concurrency.max.load(Ordering::SeqCst), PARALLELISM);
    assert_eq!(
        photon.checkpoint("billing", "orders", None).await.unwrap(),
        Some(EVENTS as i64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_filtered_handler_resumes_from_its_own_checkpoint() {
    let (photon, published) = mem_photon_with_orders(30, 3).await;
    photon
        .set_checkpoint("vip", "orders", Some("k1"), published["k1"][4])
        .await
        .unwrap();

    let seen = Seen::default();
    let executor = photon
        .executor()
        .handler_with(
            photon_runtime::HandlerOptions::new("vip", "orders").key("k1"),
            seen.handler(),
        )
        .start()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || seen.len() >= 5).await);
    executor.shutdown().await.unwrap();
    assert_eq!(seen.seqs(), published["k1"][5..].to_vec());
    assert_eq!(
        photon
            .checkpoint("vip", "orders", Some("k1"))
            .await
            .unwrap(),
        Some(published["k1"][9])
    );
    assert_eq!(
        photon.checkpoint("vip", "orders", None).await.unwrap(),
        None
    );
}
