//! Shutdown with a stuck handler, stop on drop, admin snapshot, and start-up checks.

mod executor_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_support::eventually;
use photon_core::mem::MemStoragePort;
use photon_runtime::{Event, ExecutorConfig, FlushPolicy, HandlerOptions, Photon, PhotonError};
use serde_json::json;

async fn publish(photon: &Photon, topic: &str, count: usize) {
    for n in 0..count {
        photon
            .publish(topic, None, json!(null), json!({ "n": n }))
            .await
            .unwrap();
    }
}

fn counting(
    counter: &Arc<AtomicUsize>,
) -> impl Fn(Event) -> std::future::Ready<()> + Send + Sync + 'static {
    let counter = counter.clone();
    move |_event| {
        counter.fetch_add(1, Ordering::SeqCst);
        std::future::ready(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_abandons_a_stuck_handler_after_the_timeout_and_commits_the_rest() {
    let photon = Photon::builder()
        .flush_policy(FlushPolicy::immediate())
        .executor_config(
            ExecutorConfig::builder()
                .shutdown_timeout(Duration::from_millis(200))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    publish(&photon, "jobs", 10).await;
    let handled = Arc::new(AtomicUsize::new(0));
    let executor = photon
        .executor()
        .handler("worker", "jobs", {
            let handled = handled.clone();
            move |event: Event| {
                let handled = handled.clone();
                async move {
                    if event.seq == 4 {
                        std::future::pending::<()>().await;
                    }
                    handled.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
        .start()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || handled.load(Ordering::SeqCst)
            == 3)
        .await
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            futures::executor::block_on(photon.checkpoint("worker", "jobs", None)).unwrap()
                == Some(3)
        })
        .await
    );

    let snapshot = photon.admin_snapshot().await.unwrap();
    assert_eq!(snapshot.port, "mem");
    assert_eq!(snapshot.handlers.len(), 1);
    let handler = &snapshot.handlers[0];
    assert_eq!(
        (
            handler.durable.as_str(),
            handler.topic.as_str(),
            handler.checkpoint,
            handler.lag
        ),
        ("worker", "jobs", Some(3), Some(7))
    );
    assert_eq!(
        (handler.handled, handler.outstanding, handler.running),
        (3, 7, true)
    );
    assert_eq!(snapshot.topics.len(), 1);
    assert_eq!(
        (
            snapshot.topics[0].name.as_str(),
            snapshot.topics[0].head_seq
        ),
        ("jobs", Some(10))
    );
    assert_eq!(snapshot.dead_letters[0].count, Some(0));
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(json["handlers"][0]["lag"], json!(7));

    let started = Instant::now();
    photon.shutdown().await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(
        photon.checkpoint("worker", "jobs", None).await.unwrap(),
        Some(3)
    );
    let snapshot = photon.admin_snapshot().await.unwrap();
    assert!(!snapshot.handlers[0].running);
    // A second shutdown returns at once.
    executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_photon_and_the_executor_stops_the_handlers() {
    let port = MemStoragePort::new();
    let photon = Photon::builder()
        .storage_port(port.clone())
        .build()
        .unwrap();
    publish(&photon, "jobs", 5).await;
    let handled = Arc::new(AtomicUsize::new(0));
    let executor = photon
        .executor()
        .handler("worker", "jobs", counting(&handled))
        .start()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || handled.load(Ordering::SeqCst)
            == 5)
        .await
    );
    drop(executor);
    drop(photon);
    // The dropped committer commits what was acknowledged.
    let other = Photon::builder()
        .storage_port(port.clone())
        .build()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || {
            futures::executor::block_on(other.checkpoint("worker", "jobs", None)).unwrap()
                == Some(5)
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    publish(&other, "jobs", 5).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        handled.load(Ordering::SeqCst),
        5,
        "a dropped executor handles nothing more"
    );

    let resumed = Arc::new(AtomicUsize::new(0));
    let executor = other
        .executor()
        .handler("worker", "jobs", counting(&resumed))
        .start()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || resumed.load(Ordering::SeqCst)
            == 5)
        .await
    );
    executor.shutdown().await.unwrap();
    assert_eq!(resumed.load(Ordering::SeqCst), 5);
    assert_eq!(
        other.checkpoint("worker", "jobs", None).await.unwrap(),
        Some(10)
    );
}

#[tokio::test]
async fn start_refuses_conflicting_or_invalid_handlers() {
    let photon = Photon::builder().build().unwrap();
    let counter = Arc::new(AtomicUsize::new(0));
    let twice = photon
        .executor()
        .handler("worker", "jobs", counting(&counter))
        .handler("worker", "jobs", counting(&counter))
        .start()
        .unwrap_err();
    assert!(
        matches!(twice, PhotonError::InvalidInput(ref m) if m.contains("\"worker\"")),
        "{twice}"
    );
    let bad_topic = photon
        .executor()
        .handler("worker", "Jobs", counting(&counter))
        .start()
        .unwrap_err();
    assert!(matches!(bad_topic, PhotonError::InvalidTopic { ref topic, .. } if topic == "Jobs"));
    let too_long = "t".repeat(126);
    let bad_dlq = photon
        .executor()
        .handler("worker", &too_long, counting(&counter))
        .start()
        .unwrap_err();
    assert!(
        matches!(bad_dlq, PhotonError::InvalidTopic { ref topic, .. } if *topic == format!("{too_long}.dlq"))
    );
    let bad_key = photon
        .executor()
        .handler_with(
            HandlerOptions::new("worker", "jobs").key(""),
            counting(&counter),
        )
        .start()
        .unwrap_err();
    assert!(matches!(bad_key, PhotonError::InvalidKey { .. }));
    // Same name on two keys of one topic: two subscriptions, two checkpoints.
    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new("worker", "jobs").key("a"),
            counting(&counter),
        )
        .handler_with(
            HandlerOptions::new("worker", "jobs").key("b"),
            counting(&counter),
        )
        .start()
        .unwrap();
    assert_eq!(executor.handlers().len(), 2);
    executor.shutdown().await.unwrap();
}

#[test]
fn start_outside_a_runtime_is_an_error() {
    let photon = Photon::builder().build().unwrap();
    let err = photon
        .executor()
        .handler("worker", "jobs", |_event: Event| async {})
        .start()
        .unwrap_err();
    assert!(
        matches!(err, PhotonError::InvalidInput(ref m) if m.contains("tokio runtime")),
        "{err}"
    );
}
