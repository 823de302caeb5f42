//! `photon::testing` used as an application's own tests would use it: typed topics and
//! handlers on the in-process store, waiting until idle, recorded events, and injected
//! failures for retries and dead letters.

use std::sync::atomic::{AtomicUsize, Ordering};

use photon::prelude::*;
use photon::testing::{self, FailFirst, Recorder};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    order_id: String,
    total: u32,
}

#[topic(name = "invoices", keyed_by = "order_id")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Invoice {
    order_id: String,
    amount: u32,
}

/// The application's handler under test: an order without total is refused for good.
async fn bill(order: Order) -> Result<(), PhotonError> {
    if order.total == 0 {
        return Err(PhotonError::handler_permanent(format!(
            "order {} has no total",
            order.order_id
        )));
    }
    Ok(())
}

static AUDITED: AtomicUsize = AtomicUsize::new(0);

/// A declared handler, started with the others by `declared_handlers()`.
#[subscribe(topic = "audit", durable = "audit")]
async fn audit(_event: Event) {
    AUDITED.fetch_add(1, Ordering::SeqCst);
}

fn order(order_id: &str, total: u32) -> Order {
    Order {
        order_id: order_id.to_owned(),
        total,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_typed_handler_is_recorded_in_each_keys_order() {
    let photon = testing::photon().unwrap();
    let billed = Recorder::new();
    let executor = photon
        .executor()
        .handler("billing", Order::TOPIC, billed.wrap(testing::typed(bill)))
        .start()
        .unwrap();
    let orders = [
        order("o-1", 10),
        order("o-2", 20),
        order("o-1", 11),
        order("o-3", 0),
        order("o-2", 21),
        order("o-1", 12),
    ];
    for order in &orders {
        order.publish_on(&photon).await.unwrap();
    }
    executor.wait_idle().await.unwrap();

    assert_eq!(billed.len(), 5);
    assert_eq!(billed.seqs_of_key("o-1"), vec![1, 3, 6]);
    assert_eq!(billed.seqs_of_key("o-2"), vec![2, 5]);
    let mut totals: Vec<u32> = billed
        .values::<Order>()
        .unwrap()
        .iter()
        .map(|order| order.total)
        .collect();
    totals.sort_unstable();
    assert_eq!(totals, vec![10, 11, 12, 20, 21]);

    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.key.as_deref(), Some("o-3"));
    assert_eq!(letters[0].attempts, 1, "a permanent error is not retried");
    assert_eq!(letters[0].error, "handler failed: order o-3 has no total");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn injected_failures_are_retried_then_dead_lettered() {
    let photon = testing::photon().unwrap();
    let billed = Recorder::new();
    // testing::photon() makes 3 attempts per event: o-2 succeeds on its third, o-3 never.
    let flaky = FailFirst::new(2).when(|event| event.topic_key.as_deref() == Some("o-2"));
    let broken = FailFirst::always().when(|event| event.topic_key.as_deref() == Some("o-3"));
    let executor = photon
        .executor()
        .handler(
            "billing",
            Order::TOPIC,
            broken.wrap(flaky.wrap(billed.wrap(testing::typed(bill)))),
        )
        .start()
        .unwrap();
    for (id, total) in [("o-1", 10), ("o-2", 20), ("o-3", 30), ("o-4", 40)] {
        order(id, total).publish_on(&photon).await.unwrap();
    }
    executor.wait_idle().await.unwrap();

    let mut keys: Vec<_> = billed.keys().into_iter().flatten().collect();
    keys.sort();
    assert_eq!(keys, vec!["o-1", "o-2", "o-4"]);
    assert_eq!(flaky.injected(), 2);
    assert_eq!(broken.injected(), 3);
    let o2 = photon.subscribe("orders", Some("o-2"), None).next().await;
    let o2 = o2.unwrap().unwrap();
    assert_eq!(flaky.attempts(&o2.event_id), 3);

    let snapshot = photon.admin_snapshot().await.unwrap();
    let handler = &snapshot.handlers[0];
    assert_eq!(
        (handler.handled, handler.retries, handler.dead_lettered),
        (3, 4, 1)
    );
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.key.as_deref(), Some("o-3"));
    assert_eq!(letters[0].attempts, 3);
    let counts: Vec<_> = snapshot
        .dead_letters
        .iter()
        .map(|dead| (dead.topic.as_str(), dead.count))
        .collect();
    assert_eq!(counts, vec![("invoices", Some(0)), ("orders", Some(1))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_dead_letter_is_handled_once_the_fault_is_gone() {
    let photon = testing::photon().unwrap();
    let billed = Recorder::new();
    // Only the first publication of o-1 (seq 1) fails, as a transient outage would.
    let outage = FailFirst::always().when(|event| event.seq == 1);
    let executor = photon
        .executor()
        .handler("billing", Order::TOPIC, outage.wrap(billed.handler()))
        .start()
        .unwrap();
    order("o-1", 10).publish_on(&photon).await.unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(billed.len(), 0);
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);

    let replayed = photon.replay_dead_letter(&letters[0]).await.unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(billed.seqs(), vec![replayed.seq]);
    assert_eq!(billed.values::<Order>().unwrap(), vec![order("o-1", 10)]);
    assert_eq!(outage.injected(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settle_waits_for_handlers_that_publish_to_each_other() {
    let photon = testing::photon().unwrap();
    let invoiced = Recorder::new();
    let publisher = photon.clone();
    let executor = photon
        .executor()
        .typed_handler("invoicing", move |order: Order| {
            let photon = publisher.clone();
            async move {
                let invoice = Invoice {
                    order_id: order.order_id,
                    amount: order.total,
                };
                invoice.publish_on(&photon).await.map(|_| ())
            }
        })
        .handler("mailing", Invoice::TOPIC, invoiced.handler())
        .start()
        .unwrap();
    for (id, total) in [("o-1", 10), ("o-2", 20), ("o-1", 30)] {
        order(id, total).publish_on(&photon).await.unwrap();
    }
    testing::settle(&executor).await.unwrap();

    let mut amounts: Vec<u32> = invoiced
        .values::<Invoice>()
        .unwrap()
        .into_iter()
        .map(|invoice| invoice.amount)
        .collect();
    amounts.sort_unstable();
    assert_eq!(amounts, vec![10, 20, 30]);
    executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn declared_handlers_run_on_the_test_store() {
    let photon = testing::photon().unwrap();
    let executor = photon.executor().declared_handlers().start().unwrap();
    for n in 0..7 {
        photon
            .publish("audit", None, json!("tester"), json!({ "n": n }))
            .await
            .unwrap();
    }
    executor.wait_idle().await.unwrap();
    assert_eq!(AUDITED.load(Ordering::SeqCst), 7);
    executor.shutdown().await.unwrap();
    assert_eq!(
        photon.checkpoint("audit", "audit", None).await.unwrap(),
        Some(7)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_test_photon_has_a_store_of_its_own() {
    let first = testing::photon().unwrap();
    let second = testing::photon().unwrap();
    order("o-1", 10).publish_on(&first).await.unwrap();
    let appended = order("o-1", 10).publish_on(&second).await.unwrap();
    assert_eq!(appended.seq, 1);
    assert!(!second.store().crypto().is_sealing());
}
