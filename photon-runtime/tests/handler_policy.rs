//! Per-handler policy on the in-process store: a handler's own retry policy beside the
//! executor's, a per-attempt time limit that ends in a dead letter, a concurrency cap per
//! handler, and tower middleware around each attempt.

mod executor_support;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use executor_support::{
    fast_retries, first_handler_outcomes, publish_one_and_settle, retrying_at_once,
};
use photon_runtime::executor::{HandlerRequest, HandlerService};
use photon_runtime::{Event, ExecutorConfig, HandlerOptions, Photon, PhotonError, RetryPolicy};
use serde_json::json;
use tokio::sync::{mpsc, Semaphore};
use tower::ServiceExt;

/// A handler that counts its calls and always fails with a retryable error.
fn failing(
    calls: &Arc<AtomicU32>,
) -> impl Fn(Event) -> std::future::Ready<Result<(), PhotonError>> + Send + Sync + 'static {
    let calls = calls.clone();
    move |_event: Event| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err(PhotonError::handler("payment service unreachable")))
    }
}

#[tokio::test]
async fn a_handlers_retry_policy_overrides_the_executors() {
    let photon = Photon::builder().build().unwrap();
    let (own, default) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let executor = photon
        .executor()
        .config(retrying_at_once(5))
        .handler_with(
            HandlerOptions::new("impatient", "orders").retry(fast_retries(2)),
            failing(&own),
        )
        .handler("patient", "orders", failing(&default))
        .start()
        .unwrap();
    publish_one_and_settle(&photon, &executor, Some("o-1")).await;
    assert_eq!(own.load(Ordering::SeqCst), 2, "its own policy: 2 attempts");
    assert_eq!(
        default.load(Ordering::SeqCst),
        5,
        "the executor's policy: 5 attempts"
    );
    let mut letters: Vec<_> = photon
        .dead_letters("orders")
        .await
        .unwrap()
        .into_iter()
        .map(|letter| (letter.subscription, letter.attempts))
        .collect();
    letters.sort();
    assert_eq!(
        letters,
        vec![("impatient".to_owned(), 2), ("patient".to_owned(), 5)]
    );
    executor.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_hung_attempt_times_out_is_retried_then_dead_lettered() {
    let photon = Photon::builder().build().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let executor = photon
        .executor()
        .config(retrying_at_once(5))
        .handler_with(
            HandlerOptions::new("stuck", "orders")
                .max_handler_time(Duration::from_millis(50))
                .retry(fast_retries(3)),
            hanging(&calls),
        )
        .start()
        .unwrap();
    publish_one_and_settle(&photon, &executor, Some("o-1")).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].attempts, 3);
    assert!(
        letters[0].error.starts_with("handler failed: timed out: "),
        "{}",
        letters[0].error
    );
    assert!(letters[0].error.contains("50ms"), "{}", letters[0].error);
    assert_eq!(first_handler_outcomes(&photon).await, (0, 2, 1));
    executor.shutdown().await.unwrap();
}

/// A handler that counts its calls and never finishes.
fn hanging(
    calls: &Arc<AtomicU32>,
) -> impl Fn(Event) -> std::future::Pending<()> + Send + Sync + 'static {
    let calls = calls.clone();
    move |_event: Event| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>()
    }
}

/// How many attempts run at once, and the most seen.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

#[tokio::test]
async fn concurrency_caps_a_handlers_attempts_below_the_executors_parallelism() {
    let photon = Photon::builder().build().unwrap();
    for n in 0..6 {
        photon
            .publish(
                "orders",
                Some(&format!("o-{n}")),
                json!(null),
                json!({"n": n}),
            )
            .await
            .unwrap();
    }
    let gauge = Arc::new(Gauge::default());
    // Closed until the test opens it: every attempt that starts stays running.
    let gate = Arc::new(Semaphore::new(0));
    let (started, mut starts) = mpsc::unbounded_channel();
    let (handler_gauge, handler_gate) = (gauge.clone(), gate.clone());
    let executor = photon
        .executor()
        .config(ExecutorConfig::builder().parallelism(8).build().unwrap())
        .handler_with(
            HandlerOptions::new("slow", "orders").concurrency(2),
            move |event: Event| {
                let (gauge, gate, started) =
                    (handler_gauge.clone(), handler_gate.clone(), started.clone());
                async move {
                    let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
                    gauge.max.fetch_max(now, Ordering::SeqCst);
                    started.send(event.topic_key.clone()).unwrap();
                    gate.acquire().await.unwrap().forget();
                    gauge.now.fetch_sub(1, Ordering::SeqCst);
                }
            },
        )
        .start()
        .unwrap();
    for _ in 0..2 {
        starts.recv().await.unwrap();
    }
    // Every event read and waiting for its key's worker: without the cap (parallelism 8)
    // the other four would start now.
    loop {
        let snapshot = photon.admin_snapshot().await.unwrap();
        if snapshot.handlers[0].outstanding == 6 {
            break;
        }
        tokio::task::yield_now().await;
    }
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(starts.try_recv().is_err(), "a third attempt started");
    assert_eq!(gauge.now.load(Ordering::SeqCst), 2);
    let mut keys = Vec::new();
    for _ in 2..6 {
        gate.add_permits(1);
        keys.push(starts.recv().await.unwrap());
    }
    gate.add_permits(2);
    executor.wait_idle().await.unwrap();
    assert_eq!(keys.len(), 4);
    assert_eq!(gauge.max.load(Ordering::SeqCst), 2);
    assert_eq!(
        photon.admin_snapshot().await.unwrap().handlers[0].handled,
        6
    );
    executor.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_tower_layer_sees_every_attempt_retries_included() {
    let photon = Photon::builder().build().unwrap();
    let seen = Arc::new(AtomicU32::new(0));
    let calls = Arc::new(AtomicU32::new(0));
    let counter = seen.clone();
    let counting = tower::layer::layer_fn(move |inner: HandlerService| {
        let counter = counter.clone();
        inner.map_request(move |request: HandlerRequest| {
            counter.fetch_add(1, Ordering::SeqCst);
            request
        })
    });
    // Outermost first: the counting layer is the innermost, around the handler.
    let layers = tower::ServiceBuilder::new()
        .concurrency_limit(1)
        .timeout(Duration::from_secs(30))
        .layer(counting);
    let handler_calls = calls.clone();
    let executor = photon
        .executor()
        .config(retrying_at_once(5))
        .handler_layered(
            HandlerOptions::new("flaky", "orders"),
            layers,
            move |_event: Event, context: photon_runtime::Context| {
                handler_calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if context.attempt() < 3 {
                        return Err(PhotonError::handler("not yet"));
                    }
                    Ok(())
                }
            },
        )
        .start()
        .unwrap();
    for key in ["o-1", "o-2"] {
        photon
            .publish("orders", Some(key), json!(null), json!({}))
            .await
            .unwrap();
    }
    executor.wait_idle().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 6, "three attempts per event");
    assert_eq!(seen.load(Ordering::SeqCst), 6, "the layer saw each attempt");
    assert_eq!(first_handler_outcomes(&photon).await, (2, 4, 0));
    executor.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_tower_timeout_bounds_one_attempt_and_its_error_is_retried() {
    let photon = Photon::builder().build().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let executor = photon
        .executor()
        .config(retrying_at_once(5))
        .handler_layered(
            HandlerOptions::new("slow", "orders").retry(fast_retries(2)),
            tower::timeout::TimeoutLayer::new(Duration::from_millis(20)),
            hanging(&calls),
        )
        .start()
        .unwrap();
    publish_one_and_settle(&photon, &executor, None).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].attempts, 2);
    assert_eq!(letters[0].error, "handler failed: request timed out");
    executor.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_middlewares_permanent_error_is_dead_lettered_at_once() {
    let photon = Photon::builder().build().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let refuse = tower::layer::layer_fn(|inner: HandlerService| {
        inner.and_then(|()| async { Err(PhotonError::handler_permanent("refused by policy")) })
    });
    let executor = photon
        .executor()
        .config(retrying_at_once(5))
        .handler_layered(
            HandlerOptions::new("guarded", "orders"),
            refuse,
            move |_event: Event| {
                counter.fetch_add(1, Ordering::SeqCst);
                async {}
            },
        )
        .start()
        .unwrap();
    publish_one_and_settle(&photon, &executor, None).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(
        (letters[0].attempts, letters[0].error.as_str()),
        (1, "handler failed: refused by policy")
    );
    executor.shutdown().await.unwrap();
}

#[tokio::test]
async fn start_refuses_a_policy_without_attempts_or_slots() {
    let photon = Photon::builder().build().unwrap();
    let no_attempt = photon
        .executor()
        .handler_with(
            HandlerOptions::new("billing", "orders").retry(RetryPolicy::default().max_attempts(0)),
            |_event: Event| async {},
        )
        .start()
        .unwrap_err();
    assert!(
        matches!(&no_attempt, PhotonError::Config { variable, .. } if variable == "handler billing: retry.max_attempts"),
        "{no_attempt:?}"
    );
    let no_slot = photon
        .executor()
        .handler_with(
            HandlerOptions::new("billing", "orders").concurrency(0),
            |_event: Event| async {},
        )
        .start()
        .unwrap_err();
    assert!(
        matches!(&no_slot, PhotonError::Config { variable, .. } if variable == "handler billing: concurrency"),
        "{no_slot:?}"
    );
}
