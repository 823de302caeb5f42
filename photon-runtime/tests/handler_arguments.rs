//! Handlers that take `State`, `Photon` and `Context` besides their event: what each
//! argument holds per attempt, publishing through the `Photon` argument, and the checks
//! `start` makes (one event argument, every state registered).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use photon_core::group::{partition_of, DEFAULT_PARTITIONS};
use photon_runtime::executor::{Context, State};
use photon_runtime::{Event, ExecutorConfig, HandlerOptions, Photon, PhotonError, TypedTopic};
use serde::{Deserialize, Serialize};
use serde_json::json;

const ORDERS: usize = 30;
const KEYS: usize = 3;

fn config() -> ExecutorConfig {
    ExecutorConfig::builder()
        .parallelism(4)
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(10))
        .jitter(0.0)
        .build()
        .unwrap()
}

/// What the handlers of a test share through `State`: every context they were called
/// with, in call order, and the events they finished.
#[derive(Clone, Default)]
struct Counter {
    contexts: Arc<Mutex<Vec<Context>>>,
    handled: Arc<Mutex<Vec<i64>>>,
}

impl Counter {
    fn contexts(&self) -> Vec<Context> {
        self.contexts.lock().unwrap().clone()
    }

    fn handled(&self) -> Vec<i64> {
        self.handled.lock().unwrap().clone()
    }
}

/// Publishes `ORDERS` orders round-robin over `KEYS` keys; returns `(key, seq, event_id)`
/// in publish order.
async fn publish_orders(photon: &Photon) -> Vec<(String, i64, String)> {
    let mut published = Vec::new();
    for n in 0..ORDERS {
        let key = format!("o-{}", n % KEYS);
        let appended = photon
            .publish("orders", Some(&key), json!("shop"), json!({ "n": n }))
            .await
            .unwrap();
        published.push((key, appended.seq, appended.event_id));
    }
    published
}

/// The seqs of `items` per key, in their order.
fn per_key(items: impl IntoIterator<Item = (String, i64)>) -> BTreeMap<String, Vec<i64>> {
    let mut keys: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (key, seq) in items {
        keys.entry(key).or_default().push(seq);
    }
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closure_takes_state_photon_context_and_event_in_any_order() {
    let photon = Photon::builder().build().unwrap();
    let published = publish_orders(&photon).await;
    // The first attempt of this order fails with a retryable error.
    let flaky = published[7].1;
    let counter = Counter::default();
    let executor = photon
        .executor()
        .config(config())
        .state(counter.clone())
        .handler(
            "billing",
            "orders",
            move |State(counter): State<Counter>,
                  photon: Photon,
                  context: Context,
                  event: Event| async move {
                counter.contexts.lock().unwrap().push(context.clone());
                if context.seq() == flaky && context.attempt() == 1 {
                    return Err(PhotonError::handler("payment service busy"));
                }
                let receipt = json!({ "order_seq": event.seq, "attempt": context.attempt() });
                photon
                    .publish("receipts", context.key(), json!("billing"), receipt)
                    .await?;
                counter.handled.lock().unwrap().push(event.seq);
                Ok(())
            },
        )
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();

    let handled = counter.handled();
    assert_eq!(handled.len(), ORDERS);
    let contexts = counter.contexts();
    assert_eq!(contexts.len(), ORDERS + 1);
    let by_seq: BTreeMap<i64, &(String, i64, String)> =
        published.iter().map(|order| (order.1, order)).collect();
    for context in &contexts {
        let (key, seq, event_id) = by_seq[&context.seq()];
        assert_eq!(context.topic(), "orders");
        assert_eq!(context.key(), Some(key.as_str()));
        assert_eq!(
            (context.seq(), context.event_id()),
            (*seq, event_id.as_str())
        );
        assert_eq!(context.partition(), None);
        assert!(context.headers().is_empty());
    }
    let attempts_of = |seq: i64| -> Vec<u32> {
        contexts
            .iter()
            .filter(|context| context.seq() == seq)
            .map(Context::attempt)
            .collect()
    };
    assert_eq!(attempts_of(flaky), vec![1, 2]);
    for (_, seq, _) in published.iter().filter(|order| order.1 != flaky) {
        assert_eq!(attempts_of(*seq), vec![1], "seq {seq}");
    }

    // One key's events were handled, and their receipts published, in publish order.
    let expected = per_key(published.iter().map(|(key, seq, _)| (key.clone(), *seq)));
    let finished = per_key(handled.iter().map(|seq| (by_seq[seq].0.clone(), *seq)));
    assert_eq!(finished, expected);
    let receipts: Vec<Event> = photon
        .subscribe("receipts", None, None)
        .take(ORDERS)
        .map(Result::unwrap)
        .collect()
        .await;
    let receipt_order = per_key(receipts.iter().map(|receipt| {
        let seq = receipt.payload["order_seq"].as_i64().unwrap();
        (receipt.topic_key.clone().unwrap(), seq)
    }));
    assert_eq!(receipt_order, expected);
    let retried: Vec<&Event> = receipts
        .iter()
        .filter(|receipt| receipt.payload["attempt"] != json!(1))
        .collect();
    assert_eq!(retried.len(), 1);
    assert_eq!(
        retried[0].payload,
        json!({ "order_seq": flaky, "attempt": 2 })
    );
    executor.shutdown().await.unwrap();
    assert_eq!(
        photon.checkpoint("billing", "orders", None).await.unwrap(),
        Some(published[ORDERS - 1].1)
    );
    assert_eq!(photon.dead_letters("orders").await.unwrap(), vec![]);
}

#[derive(Clone)]
struct Missing;

#[tokio::test]
async fn a_state_never_registered_fails_the_start_naming_the_type() {
    let photon = Photon::builder().build().unwrap();
    let refused = photon
        .executor()
        .state(Counter::default())
        .handler(
            "billing",
            "orders",
            |_event: Event, _counter: State<Counter>, _missing: State<Missing>| async {},
        )
        .start()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid configuration ExecutorBuilder::state=\"handler_arguments::Missing\": expected a registered value of this type: handler billing takes State<handler_arguments::Missing> (register one with ExecutorBuilder::state or PhotonBuilder::state)"
    );
    assert!(matches!(refused, PhotonError::Config { .. }));
    // Nothing started: the subscription never read, so it has no checkpoint.
    assert!(photon.admin_snapshot().await.unwrap().handlers.is_empty());
}

#[tokio::test]
async fn a_state_of_the_photon_builder_is_replaced_by_the_executors() {
    let photon = Photon::builder()
        .state(String::from("photon"))
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let start = |executor: photon_runtime::ExecutorBuilder, durable: &str| {
        let seen = seen.clone();
        executor
            .handler(
                durable,
                "orders",
                move |State(origin): State<String>, _event: Event| {
                    seen.lock().unwrap().push(origin);
                    async {}
                },
            )
            .start()
            .unwrap()
    };
    let from_photon = start(photon.executor(), "first");
    photon
        .publish("orders", None, json!(null), json!(1))
        .await
        .unwrap();
    from_photon.wait_idle().await.unwrap();
    from_photon.shutdown().await.unwrap();
    let own = start(photon.executor().state(String::from("executor")), "second");
    own.wait_idle().await.unwrap();
    own.shutdown().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), vec!["photon", "executor"]);
}

#[tokio::test]
async fn a_handler_takes_exactly_one_event_argument() {
    let photon = Photon::builder().build().unwrap();
    let two = photon
        .executor()
        .handler("twice", "orders", |_a: Event, _b: Order| async {})
        .start()
        .unwrap_err();
    assert_eq!(
        two.to_string(),
        "invalid input: handler twice takes 2 event arguments: it takes exactly one, an Event or a #[topic] type (besides any State, Photon and Context)"
    );
    let none = photon
        .executor()
        .handler(
            "none",
            "orders",
            |_context: Context, _photon: Photon| async {},
        )
        .start()
        .unwrap_err();
    assert!(
        none.to_string()
            .contains("handler none takes 0 event arguments"),
        "{none}"
    );
    let untyped = photon
        .executor()
        .typed_handler("raw", |_event: Event, _context: Context| async {})
        .start()
        .unwrap_err();
    assert_eq!(
        untyped.to_string(),
        "invalid input: handler raw names no topic and takes an Event: register it with ExecutorBuilder::handler and a topic"
    );
    let elsewhere = photon
        .executor()
        .handler("misplaced", "payments", |_order: Order| async {})
        .start()
        .unwrap_err();
    assert_eq!(
        elsewhere.to_string(),
        "invalid input: handler misplaced is registered on topic \"payments\" but its argument is published on \"orders\""
    );
}

/// A typed topic, written by hand (`#[topic]` lives in the `photon` facade).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: String,
    total: u32,
}

impl TypedTopic for Order {
    const TOPIC: &'static str = "orders";

    fn topic_key(&self) -> Option<String> {
        Some(self.id.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_handler_takes_its_context() {
    let photon = Photon::builder().build().unwrap();
    let mut published = Vec::new();
    for (id, total) in [("o-1", 12), ("o-2", 30), ("o-1", 7)] {
        let order = Order {
            id: id.into(),
            total,
        };
        let appended = photon
            .publish(Order::TOPIC, Some(id), json!(null), json!(order))
            .await
            .unwrap();
        published.push((order, appended.seq, appended.event_id));
    }
    // Does not decode as an `Order`: dead-lettered before the handler is called.
    let broken = photon
        .publish(Order::TOPIC, Some("o-3"), json!(null), json!({ "id": 3 }))
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let executor = photon
        .executor()
        .config(config())
        .typed_handler("invoicing", {
            let seen = seen.clone();
            move |context: Context, order: Order| {
                seen.lock().unwrap().push((order, context));
                async {}
            }
        })
        .start()
        .unwrap();
    assert_eq!(executor.handlers()[0].topic(), "orders");
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), published.len());
    let mut seen_sorted = seen.clone();
    seen_sorted.sort_by_key(|(_, context)| context.seq());
    for ((order, context), (sent, seq, event_id)) in seen_sorted.iter().zip(&published) {
        assert_eq!(order, sent);
        assert_eq!(
            (
                context.topic(),
                context.key(),
                context.seq(),
                context.event_id()
            ),
            ("orders", Some(sent.id.as_str()), *seq, event_id.as_str())
        );
        assert_eq!((context.attempt(), context.partition()), (1, None));
    }
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.seq, broken.seq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_handlers_context_names_its_partition() {
    let photon = Photon::builder().build().unwrap();
    let mut expected = BTreeMap::new();
    for n in 0..24 {
        let key = format!("o-{}", n % 8);
        let seq = photon
            .publish("orders", Some(&key), json!(null), json!({ "n": n }))
            .await
            .unwrap()
            .seq;
        expected.insert(seq, partition_of(Some(&key), seq, DEFAULT_PARTITIONS));
    }
    let counter = Counter::default();
    let executor = photon
        .executor()
        .config(config())
        .state(counter.clone())
        .handler_with(
            HandlerOptions::new("packing", "orders")
                .group("packing")
                .member("packer-0"),
            |context: Context, State(counter): State<Counter>, _event: Event| async move {
                counter.contexts.lock().unwrap().push(context);
            },
        )
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();
    let partitions: BTreeMap<i64, u32> = counter
        .contexts()
        .iter()
        .map(|context| {
            (
                context.seq(),
                context.partition().expect("a group partition"),
            )
        })
        .collect();
    assert_eq!(partitions, expected);
}
