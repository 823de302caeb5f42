//! `Executor::wait_idle`: it returns once every handler finished exactly the events stored
//! at the call (handled or dead-lettered), and fails with a typed error naming what is
//! missing when it cannot.

mod executor_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use executor_support::{publish_round_robin, HookedPort, TestStore, BACKENDS};
use photon_core::mem::MemStoragePort;
use photon_runtime::testing::{self, FailFirst, Recorder};
use photon_runtime::{Event, HandlerOptions, Photon, PhotonError, StartPolicy};
use serde_json::json;

fn photon_on(port: Arc<dyn photon_core::StoragePort>) -> Photon {
    testing::builder()
        .shared_storage_port(port)
        .build()
        .unwrap()
}

/// A handler that yields once, so that keys really interleave.
fn yielding(recorder: &Recorder) -> impl Fn(Event) -> photon_runtime::HandlerFuture + Send + Sync {
    recorder.wrap(|_event: Event| async {
        tokio::task::yield_now().await;
        Ok::<(), PhotonError>(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn it_returns_once_every_event_stored_at_the_call_is_handled() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let photon = photon_on(store.port.clone());
        let published = publish_round_robin(&photon, "orders", 60, 6).await;
        let billed = Recorder::new();
        let executor = photon
            .executor()
            .handler("billing", "orders", yielding(&billed))
            .start()
            .unwrap();
        executor.wait_idle().await.unwrap();

        assert_eq!(billed.len(), 60, "{backend:?}");
        for (key, seqs) in &published {
            assert_eq!(&billed.seqs_of_key(key), seqs, "{backend:?} key {key}");
        }
        let snapshot = photon.admin_snapshot().await.unwrap();
        assert_eq!(snapshot.handlers[0].handled, 60);
        assert_eq!(snapshot.handlers[0].outstanding, 0);
        executor.shutdown().await.unwrap();
        let head = published.values().flatten().max().copied();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            head
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_without_handlers_or_events_is_idle_at_once() {
    let photon = testing::photon().unwrap();
    let empty = photon.executor().start().unwrap();
    empty.wait_idle().await.unwrap();
    let recorder = Recorder::new();
    let executor = photon
        .executor()
        .handler("billing", "orders", recorder.handler())
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(recorder.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_and_dead_letters_are_waited_for() {
    let photon = testing::photon().unwrap();
    let handled = Recorder::new();
    // Three attempts per event (testing::executor_config): n = 4 succeeds on its third,
    // the events of key "bad" fail all three and are dead-lettered.
    let flaky = FailFirst::new(2).when(|event| event.payload["n"] == 4);
    let broken = FailFirst::always().when(|event| event.topic_key.as_deref() == Some("bad"));
    let executor = photon
        .executor()
        .handler(
            "billing",
            "orders",
            broken.wrap(flaky.wrap(handled.handler())),
        )
        .start()
        .unwrap();
    for n in 0..10 {
        let key = if n % 5 == 0 { "bad" } else { "good" };
        photon
            .publish("orders", Some(key), json!(null), json!({ "n": n }))
            .await
            .unwrap();
    }
    executor.wait_idle().await.unwrap();

    assert_eq!(handled.seqs(), vec![2, 3, 4, 5, 7, 8, 9, 10]);
    assert_eq!(flaky.injected(), 2);
    assert_eq!(broken.injected(), 6);
    let letters = photon.dead_letters("orders").await.unwrap();
    let dead: Vec<_> = letters
        .iter()
        .map(|l| (l.original.seq, l.attempts))
        .collect();
    assert_eq!(dead, vec![(1, 3), (6, 3)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn undecodable_records_are_waited_for_until_their_dead_letter_is_stored() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let photon = photon_on(store.port.clone());
        photon
            .publish("orders", Some("k"), json!(null), json!(1))
            .await
            .unwrap();
        let garbage = store.store_garbage("orders", Some("k")).await;
        photon
            .publish("orders", Some("k"), json!(null), json!(3))
            .await
            .unwrap();
        let handled = Recorder::new();
        let executor = photon
            .executor()
            .handler("billing", "orders", handled.handler())
            .start()
            .unwrap();
        executor.wait_idle().await.unwrap();

        assert_eq!(handled.payloads(), vec![json!(1), json!(3)], "{backend:?}");
        let letters = photon.dead_letters("orders").await.unwrap();
        assert_eq!(letters.len(), 1, "{backend:?}");
        assert_eq!(letters[0].original.seq, garbage);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_handler_waits_for_its_key_only() {
    let photon = testing::photon().unwrap();
    let published = publish_round_robin(&photon, "orders", 10, 2).await;
    let k1 = Recorder::new();
    let executor = photon
        .executor()
        .handler_with(HandlerOptions::new("vip", "orders").key("k1"), k1.handler())
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(k1.seqs(), published["k1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_at_its_checkpoint_is_idle_at_once() {
    let photon = testing::photon().unwrap();
    publish_round_robin(&photon, "orders", 5, 1).await;
    let first = Recorder::new();
    let executor = photon
        .executor()
        .handler("billing", "orders", first.handler())
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();
    assert_eq!(first.len(), 5);

    let second = Recorder::new();
    let executor = photon
        .executor()
        .handler("billing", "orders", second.handler())
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(second.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_start_does_not_wait_for_what_was_stored_before_it() {
    let mut config = testing::executor_config();
    config.start_policy = StartPolicy::Tail;
    let photon = testing::builder().executor_config(config).build().unwrap();
    publish_round_robin(&photon, "orders", 3, 1).await;
    let live = Recorder::new();
    let executor = photon
        .executor()
        .handler("live", "orders", live.handler())
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(live.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_handler_times_out_naming_the_handler_and_its_event() {
    let mut config = testing::executor_config();
    config.shutdown_timeout = Duration::from_millis(20);
    let photon = testing::builder().executor_config(config).build().unwrap();
    let executor = photon
        .executor()
        .handler("billing", "orders", |event: Event| async move {
            if event.seq == 2 {
                std::future::pending::<()>().await;
            }
        })
        .start()
        .unwrap();
    publish_round_robin(&photon, "orders", 3, 1).await;
    let waited = executor.wait_idle_for(Duration::from_millis(300)).await;
    let Err(PhotonError::Timeout {
        operation,
        waited,
        missing,
    }) = waited
    else {
        panic!("expected a timeout, got {waited:?}");
    };
    assert_eq!(operation, "Executor::wait_idle");
    assert_eq!(waited, Duration::from_millis(300));
    assert_eq!(
        missing,
        "handler billing on topic \"orders\": the event at seq 2 (of those up to seq 3, the head at the call) is not finished; 2 in flight"
    );
    executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_executor_ends_the_wait_as_closed() {
    let mut config = testing::executor_config();
    config.shutdown_timeout = Duration::from_millis(20);
    let photon = testing::builder().executor_config(config).build().unwrap();
    let executor = photon
        .executor()
        .handler("billing", "orders", |_event: Event| {
            std::future::pending::<()>()
        })
        .start()
        .unwrap();
    publish_round_robin(&photon, "orders", 1, 1).await;
    let waiting = tokio::spawn({
        let executor = executor.clone();
        async move { executor.wait_idle().await }
    });
    executor.shutdown().await.unwrap();
    let waited = waiting.await.unwrap();
    assert!(
        matches!(&waited, Err(PhotonError::Closed(what)) if what == "the executor (while waiting until idle)"),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_that_cannot_list_is_refused_as_unsupported() {
    let mut port = HookedPort::new(Arc::new(MemStoragePort::new()));
    port.without_list = true;
    let photon = photon_on(Arc::new(port));
    let executor = photon
        .executor()
        .handler("billing", "orders", Recorder::new().handler())
        .start()
        .unwrap();
    let waited = executor.wait_idle().await;
    assert!(
        matches!(&waited, Err(PhotonError::Unsupported { operation, .. }) if operation.starts_with("Executor::wait_idle")),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_handlers_wait_for_the_whole_group() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let photon = photon_on(store.port.clone());
        let (first, second) = (Recorder::new(), Recorder::new());
        let options = HandlerOptions::new("billing", "orders").group("billing");
        let executors = [&first, &second].map(|recorder| {
            photon
                .executor()
                .handler_with(options.clone(), recorder.handler())
                .start()
                .unwrap()
        });
        publish_round_robin(&photon, "orders", 40, 8).await;
        executors[0].wait_idle().await.unwrap();

        let mut seqs = first.seqs();
        seqs.extend(second.seqs());
        let distinct: BTreeSet<i64> = seqs.iter().copied().collect();
        assert_eq!(seqs.len(), 40, "{backend:?}: handled once each");
        assert_eq!(distinct.len(), 40, "{backend:?}");
        for executor in &executors {
            executor.shutdown().await.unwrap();
        }
    }
}
