//! Batch handlers on the in-process store, SQLite and NATS (when one answers at the
//! default URL): exact batch contents, the size and wait limits, acknowledgement of a
//! whole batch (a failed one is delivered again after a restart, a handled one never),
//! retries then a dead letter per event, per-key order across batches, a group member's
//! batches, and the typed errors for bad limits and arguments.
//!
//! Tests wait on what the handler reports (channels), never on sleeps.

mod executor_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use executor_support::fast_retries;
use photon_backend_nats::NatsStoragePort;
use photon_backend_sqlite::SqliteStoragePort;
use photon_core::mem::MemStoragePort;
use photon_core::StoragePort;
use photon_runtime::executor::{BatchPolicy, Context, Executor, State};
use photon_runtime::{
    Event, ExecutorConfig, HandlerOptions, Photon, PhotonError, TransportCrypto, TypedEvent,
    TypedTopic,
};
use serde_json::json;
use tokio::sync::mpsc;

/// Long enough never to flush a batch in these tests unless they mean it to.
const NEVER: Duration = Duration::from_secs(600);

/// How long a test waits for a batch before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// A store to run the scenarios on; the temporary directory lives as long as the port.
struct Backend {
    name: &'static str,
    port: Arc<dyn StoragePort>,
    _directory: Option<tempfile::TempDir>,
}

/// The in-process store, SQLite, and NATS when it answers.
async fn backends() -> Vec<Backend> {
    let mut backends = vec![Backend {
        name: "mem",
        port: Arc::new(MemStoragePort::new()),
        _directory: None,
    }];
    let directory = tempfile::tempdir().unwrap();
    let sqlite = SqliteStoragePort::builder()
        .path(directory.path().join("batch.db"))
        .poll_interval(Duration::from_millis(10))
        .build()
        .await
        .unwrap();
    backends.push(Backend {
        name: "sqlite",
        port: Arc::new(sqlite),
        _directory: Some(directory),
    });
    let url = std::env::var(photon_backend_nats::URL_ENV)
        .unwrap_or_else(|_| photon_backend_nats::DEFAULT_URL.to_owned());
    let prefix = format!("batch{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    match NatsStoragePort::builder()
        .url(url.clone())
        .prefix(prefix)
        .build()
        .await
    {
        Ok(port) => backends.push(Backend {
            name: "nats",
            port: Arc::new(port),
            _directory: None,
        }),
        Err(err) => photon_testkit::skip_or_fail("nats", &format!("NATS at {url}: {err}")),
    }
    backends
}

/// A `Photon` on `port` (a restart is another one on the same port).
fn photon_on(port: &Arc<dyn StoragePort>) -> Photon {
    let config = ExecutorConfig::builder()
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(1))
        .jitter(0.0)
        .build()
        .unwrap();
    Photon::builder()
        .shared_storage_port(port.clone())
        .transport_crypto(TransportCrypto::plaintext())
        .executor_config(config)
        .build()
        .unwrap()
}

/// Publishes `count` events round-robin over `keys` keys (`k0`, `k1`, ...); returns
/// `(key, seq)` in publish order.
async fn publish(photon: &Photon, topic: &str, count: usize, keys: usize) -> Vec<(String, i64)> {
    let mut published = Vec::new();
    for n in 0..count {
        let key = format!("k{}", n % keys);
        let appended = photon
            .publish(topic, Some(&key), json!(null), json!({ "n": n }))
            .await
            .unwrap();
        published.push((key, appended.seq));
    }
    published
}

fn positions(events: &[Event]) -> Vec<(String, i64)> {
    events
        .iter()
        .map(|event| (event.topic_key.clone().unwrap_or_default(), event.seq))
        .collect()
}

/// The events of one key, in the order given.
fn by_key(positions: &[(String, i64)]) -> HashMap<String, Vec<i64>> {
    let mut keys: HashMap<String, Vec<i64>> = HashMap::new();
    for (key, seq) in positions {
        keys.entry(key.clone()).or_default().push(*seq);
    }
    keys
}

/// A batch handler that reports each batch's positions on a channel.
fn reporting(
    batches: mpsc::UnboundedSender<Vec<(String, i64)>>,
) -> impl Fn(Vec<Event>) -> std::future::Ready<Result<(), PhotonError>> + Send + Sync + 'static {
    move |events: Vec<Event>| {
        let _ = batches.send(positions(&events));
        std::future::ready(Ok(()))
    }
}

/// Starts a batch handler that reports each batch's positions on `batches`.
fn start_reporting(
    photon: &Photon,
    options: HandlerOptions,
    policy: BatchPolicy,
    batches: mpsc::UnboundedSender<Vec<(String, i64)>>,
) -> Executor {
    photon
        .executor()
        .batch_handler(options, policy, reporting(batches))
        .start()
        .unwrap()
}

/// Waits until `executor` is idle, then stops it.
async fn settle(executor: Executor) {
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();
}

async fn next_batch(
    batches: &mut mpsc::UnboundedReceiver<Vec<(String, i64)>>,
) -> Vec<(String, i64)> {
    tokio::time::timeout(PATIENCE, batches.recv())
        .await
        .expect("a batch in time")
        .expect("the handler is alive")
}

/// Receives batches until `count` events came; returns them in order.
async fn batches_of(
    batches: &mut mpsc::UnboundedReceiver<Vec<(String, i64)>>,
    count: usize,
) -> Vec<Vec<(String, i64)>> {
    let mut received = Vec::new();
    let mut seen = 0;
    while seen < count {
        let batch = next_batch(batches).await;
        seen += batch.len();
        received.push(batch);
    }
    assert_eq!(seen, count, "{received:?}");
    received
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_batches_hold_the_events_in_read_order_up_to_max() {
    for backend in backends().await {
        let photon = photon_on(&backend.port);
        let published = publish(&photon, "orders", 12, 3).await;
        let (sender, mut batches) = mpsc::unbounded_channel();
        let executor = start_reporting(
            &photon,
            HandlerOptions::new("audit", "orders"),
            BatchPolicy::new(4, NEVER),
            sender,
        );
        let received = batches_of(&mut batches, 12).await;
        let sizes: Vec<usize> = received.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![4, 4, 4], "{}: {received:?}", backend.name);
        let all: Vec<(String, i64)> = received.concat();
        if backend.name == "nats" {
            // Keys are spread over streams there: the read order interleaves them.
            assert_eq!(by_key(&all), by_key(&published), "{}", backend.name);
        } else {
            assert_eq!(all, published, "{}", backend.name);
        }
        settle(executor).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_flushes_a_partial_batch() {
    for backend in backends().await {
        let photon = photon_on(&backend.port);
        let published = publish(&photon, "clicks", 3, 1).await;
        let (sender, mut batches) = mpsc::unbounded_channel();
        let executor = start_reporting(
            &photon,
            HandlerOptions::new("counter", "clicks"),
            BatchPolicy::new(100, Duration::from_millis(50)),
            sender,
        );
        assert_eq!(
            next_batch(&mut batches).await,
            published,
            "{}",
            backend.name
        );
        // A later event makes a batch of its own, after its own wait.
        let later = publish(&photon, "clicks", 1, 1).await;
        assert_eq!(next_batch(&mut batches).await, later, "{}", backend.name);
        settle(executor).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_is_delivered_again_whole_and_a_handled_one_never() {
    for backend in backends().await {
        let photon = photon_on(&backend.port);
        let published = publish(&photon, "payments", 4, 2).await;
        // First run: the batch fails and keeps retrying until shutdown.
        let (failures, mut failed) = mpsc::unbounded_channel();
        let executor = photon
            .executor()
            .batch_handler(
                HandlerOptions::new("ledger", "payments").retry(fast_retries(u32::MAX)),
                BatchPolicy::new(4, NEVER),
                move |events: Vec<Event>| {
                    let _ = failures.send(positions(&events));
                    std::future::ready(Err::<(), _>(PhotonError::handler("ledger unreachable")))
                },
            )
            .start()
            .unwrap();
        let first = next_batch(&mut failed).await;
        assert_eq!(by_key(&first), by_key(&published), "{}", backend.name);
        executor.shutdown().await.unwrap();
        drop(photon);

        // Restart: the whole batch again, then it is acknowledged.
        let photon = photon_on(&backend.port);
        let (sender, mut batches) = mpsc::unbounded_channel();
        let executor = start_reporting(
            &photon,
            HandlerOptions::new("ledger", "payments"),
            BatchPolicy::new(4, NEVER),
            sender.clone(),
        );
        assert_eq!(next_batch(&mut batches).await, first, "{}", backend.name);
        settle(executor).await;
        drop(photon);

        // Restart again: only what is new.
        let photon = photon_on(&backend.port);
        let executor = start_reporting(
            &photon,
            HandlerOptions::new("ledger", "payments"),
            BatchPolicy::new(4, Duration::from_millis(20)),
            sender,
        );
        let new = publish(&photon, "payments", 1, 1).await;
        assert_eq!(next_batch(&mut batches).await, new, "{}", backend.name);
        settle(executor).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_retried_whole_then_each_event_is_dead_lettered() {
    for backend in backends().await {
        let photon = photon_on(&backend.port);
        let published = publish(&photon, "invoices", 3, 3).await;
        let calls = Arc::new(AtomicU32::new(0));
        let (sender, mut batches) = mpsc::unbounded_channel();
        let counted = calls.clone();
        let executor = photon
            .executor()
            .batch_handler(
                HandlerOptions::new("mailer", "invoices").retry(fast_retries(3)),
                BatchPolicy::new(3, NEVER),
                move |events: Vec<Event>| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = sender.send(positions(&events));
                    std::future::ready(Err::<(), _>(PhotonError::handler("smtp down")))
                },
            )
            .start()
            .unwrap();
        let attempts: Vec<_> = [
            next_batch(&mut batches).await,
            next_batch(&mut batches).await,
            next_batch(&mut batches).await,
        ]
        .into();
        assert!(attempts
            .iter()
            .all(|batch| by_key(batch) == by_key(&published)));
        executor.wait_idle().await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3, "{}", backend.name);
        let letters = photon.dead_letters("invoices").await.unwrap();
        let mut lettered: Vec<(String, i64)> = letters
            .iter()
            .map(|letter| {
                (
                    letter.original.key.clone().unwrap_or_default(),
                    letter.original.seq,
                )
            })
            .collect();
        lettered.sort();
        let mut expected = published.clone();
        expected.sort();
        assert_eq!(lettered, expected, "{}", backend.name);
        for letter in &letters {
            assert_eq!(letter.attempts, 3);
            assert!(letter.error.contains("smtp down"), "{}", letter.error);
            assert_eq!(letter.subscription, "mailer");
        }
        executor.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_keeps_its_order_across_batches_published_while_running() {
    for backend in backends().await {
        let photon = photon_on(&backend.port);
        let (sender, mut batches) = mpsc::unbounded_channel();
        let executor = start_reporting(
            &photon,
            HandlerOptions::new("tracker", "moves"),
            BatchPolicy::new(5, Duration::from_millis(5)),
            sender,
        );
        let published = publish(&photon, "moves", 60, 4).await;
        let received = batches_of(&mut batches, 60).await;
        assert!(received.iter().all(|batch| (1..=5).contains(&batch.len())));
        assert_eq!(
            by_key(&received.concat()),
            by_key(&published),
            "{}",
            backend.name
        );
        settle(executor).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_limit_bounds_each_attempt_of_a_batch() {
    let photon = photon_on(&(Arc::new(MemStoragePort::new()) as Arc<dyn StoragePort>));
    publish(&photon, "slow", 2, 1).await;
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let executor = photon
        .executor()
        .batch_handler(
            HandlerOptions::new("stuck", "slow")
                .retry(fast_retries(2))
                .max_handler_time(Duration::from_millis(20)),
            BatchPolicy::new(2, NEVER),
            move |_events: Vec<Event>| {
                counted.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>()
            },
        )
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let letters = photon.dead_letters("slow").await.unwrap();
    assert_eq!(letters.len(), 2);
    assert!(
        letters[0]
            .error
            .contains("timed out: the handler of a batch of 2 events of slow (seqs 1 to 2)"),
        "{}",
        letters[0].error
    );
    executor.shutdown().await.unwrap();
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Shipment {
    order_id: String,
    weight: u32,
}

impl TypedTopic for Shipment {
    const TOPIC: &'static str = "shipments";
    const KEYED_BY: Option<&'static str> = Some("order_id");

    fn topic_key(&self) -> Option<String> {
        Some(self.order_id.clone())
    }
}

#[derive(Clone)]
struct Scale(u32);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_batches_take_state_and_dead_letter_what_does_not_decode() {
    let photon = photon_on(&(Arc::new(MemStoragePort::new()) as Arc<dyn StoragePort>));
    for n in 0..3 {
        let shipment = Shipment {
            order_id: format!("o-{n}"),
            weight: n,
        };
        shipment.publish_on(&photon).await.unwrap();
    }
    photon
        .publish(
            "shipments",
            Some("o-9"),
            json!(null),
            json!({"not": "a shipment"}),
        )
        .await
        .unwrap();
    let (sender, mut weights) = mpsc::unbounded_channel();
    let executor = photon
        .executor()
        .state(Scale(10))
        .batch_handler(
            HandlerOptions::new("weigher", Shipment::TOPIC),
            BatchPolicy::new(4, Duration::from_millis(20)),
            move |shipments: Vec<TypedEvent<Shipment>>, State(scale): State<Scale>, _: Photon| {
                let weighed: Vec<u32> =
                    shipments.iter().map(|s| s.value.weight * scale.0).collect();
                let _ = sender.send(weighed);
                async {}
            },
        )
        .start()
        .unwrap();
    let weighed = tokio::time::timeout(PATIENCE, weights.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(weighed, vec![0, 10, 20]);
    executor.wait_idle().await.unwrap();
    let letters = photon.dead_letters("shipments").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.key.as_deref(), Some("o-9"));
    executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_member_handles_its_share_in_batches() {
    for backend in backends().await {
        if !backend.port.capabilities().consumer_groups {
            continue;
        }
        let photon = photon_on(&backend.port);
        let published = publish(&photon, "parcels", 20, 4).await;
        let (sender, mut batches) = mpsc::unbounded_channel();
        let executor = start_reporting(
            &photon,
            HandlerOptions::new("packers", "parcels").group("packers"),
            BatchPolicy::new(8, Duration::from_millis(20)),
            sender,
        );
        let received = batches_of(&mut batches, 20).await;
        assert!(received.iter().all(|batch| batch.len() <= 8));
        assert_eq!(
            by_key(&received.concat()),
            by_key(&published),
            "{}",
            backend.name
        );
        // The group's committed positions cover every event.
        settle(executor).await;
    }
}

#[tokio::test]
async fn bad_limits_and_arguments_are_refused_naming_the_handler() {
    let photon = Photon::builder().build().unwrap();
    let start = |policy: BatchPolicy| {
        photon
            .executor()
            .batch_handler(
                HandlerOptions::new("audit", "orders"),
                policy,
                |_events: Vec<Event>| async {},
            )
            .start()
    };
    let empty = start(BatchPolicy::new(0, Duration::from_millis(50))).unwrap_err();
    assert!(matches!(empty, PhotonError::Config { .. }), "{empty:?}");
    assert!(
        empty.to_string().starts_with(
            "invalid configuration handler audit on topic \"orders\": batch max_events=\"0\""
        ),
        "{empty}"
    );
    let beyond_window = start(BatchPolicy::new(1000, Duration::from_millis(50))).unwrap_err();
    assert!(
        beyond_window
            .to_string()
            .contains("ExecutorConfig::max_in_flight, 256"),
        "{beyond_window}"
    );
    let instant = start(BatchPolicy::new(10, Duration::ZERO)).unwrap_err();
    assert!(instant.to_string().contains("batch max_wait"), "{instant}");
    let forever = start(BatchPolicy::new(10, Duration::from_secs(365 * 86_400))).unwrap_err();
    assert!(forever.to_string().contains("batch max_wait"), "{forever}");

    let parallel = photon
        .executor()
        .batch_handler(
            HandlerOptions::new("audit", "orders").concurrency(4),
            BatchPolicy::new(10, Duration::from_millis(50)),
            |_events: Vec<Event>| async {},
        )
        .start()
        .unwrap_err();
    assert!(parallel.to_string().contains("concurrency"), "{parallel}");
    let with_context = photon
        .executor()
        .batch_handler(
            HandlerOptions::new("audit", "orders"),
            BatchPolicy::new(10, Duration::from_millis(50)),
            |_events: Vec<Event>, _context: Context| async {},
        )
        .start()
        .unwrap_err();
    assert!(
        with_context
            .to_string()
            .contains("batch handler audit takes a Context"),
        "{with_context}"
    );
    let wrong_topic = photon
        .executor()
        .batch_handler(
            HandlerOptions::new("weigher", "orders"),
            BatchPolicy::new(10, Duration::from_millis(50)),
            |_shipments: Vec<TypedEvent<Shipment>>| async {},
        )
        .start()
        .unwrap_err();
    assert!(
        wrong_topic
            .to_string()
            .contains("published on \"shipments\""),
        "{wrong_topic}"
    );
}
