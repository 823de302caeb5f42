//! `#[topic]` and `#[subscribe]` end to end through the facade.

use std::sync::Mutex;
use std::time::Duration;

use photon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    order_id: String,
    total: u32,
}

#[topic(name = "audit.log")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AuditLine {
    text: String,
}

static BILLED: Mutex<Vec<Order>> = Mutex::new(Vec::new());
static AUDITED: Mutex<Vec<(i64, serde_json::Value)>> = Mutex::new(Vec::new());

#[subscribe(durable = "billing")]
async fn bill(order: Order) -> Result<(), PhotonError> {
    BILLED.lock().unwrap().push(order);
    Ok(())
}

#[subscribe(topic = "audit.log", durable = "audit-raw")]
async fn audit_raw(event: Event) {
    AUDITED.lock().unwrap().push((event.seq, event.payload));
}

fn order(id: &str, total: u32) -> Order {
    Order {
        order_id: id.to_owned(),
        total,
    }
}

async fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..2000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

#[test]
fn topics_are_declared_in_the_registry() {
    let photon = Photon::builder().build().unwrap();
    let orders = photon.registry().get("orders").unwrap();
    assert_eq!(orders.keyed_by, Some("order_id"));
    assert_eq!(orders.type_name, "typed_topics::Order");
    let audit = photon.registry().get("audit.log").unwrap();
    assert_eq!(
        (audit.keyed_by, audit.type_name),
        (None, "typed_topics::AuditLine")
    );
    assert_eq!(<Order as TypedTopic>::TOPIC, "orders");
    assert_eq!(order("o-7", 1).topic_key(), Some("o-7".to_owned()));
    assert_eq!(AuditLine { text: "x".into() }.topic_key(), None);
}

#[tokio::test]
async fn typed_values_round_trip_and_live_subscriptions_see_only_new_ones() {
    let photon = Photon::builder().build().unwrap();
    for (id, total) in [("o-1", 10), ("o-2", 20), ("o-1", 30)] {
        order(id, total).publish_on(&photon).await.unwrap();
    }
    let mut live = Order::subscribe_on(&photon, SubscribeOptions::live());
    let mut history = Order::subscribe_on(&photon, SubscribeOptions::from_beginning().key("o-1"));
    order("o-3", 40).publish_on(&photon).await.unwrap();
    order("o-1", 50).publish_on(&photon).await.unwrap();

    let mut seen = Vec::new();
    for _ in 0..3 {
        let received = history.next().await.unwrap().unwrap();
        assert_eq!(received.event.topic_key.as_deref(), Some("o-1"));
        seen.push((received.event.seq, received.value));
    }
    assert_eq!(
        seen,
        vec![
            (1, order("o-1", 10)),
            (3, order("o-1", 30)),
            (5, order("o-1", 50))
        ]
    );

    let mut fresh = Vec::new();
    for _ in 0..2 {
        fresh.push(live.next().await.unwrap().unwrap().value);
    }
    assert_eq!(fresh, vec![order("o-3", 40), order("o-1", 50)]);
    let nothing_more = tokio::time::timeout(Duration::from_millis(100), live.next()).await;
    assert!(
        nothing_more.is_err(),
        "a live subscription sees only new values"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_handlers_run_on_the_executor() {
    let photon = Photon::builder().build().unwrap();
    let orders = [
        order("o-1", 1),
        order("o-2", 2),
        order("o-1", 3),
        order("o-2", 4),
        order("o-1", 5),
    ];
    for value in &orders {
        value.publish_on(&photon).await.unwrap();
    }
    // A payload that is not an Order cannot be decoded: dead-lettered, not retried.
    photon
        .publish("orders", Some("o-9"), json!(null), json!({"oops": true}))
        .await
        .unwrap();
    AuditLine {
        text: "started".into(),
    }
    .publish_on(&photon)
    .await
    .unwrap();

    let executor = photon.start_executor().unwrap();
    let mut handlers: Vec<_> = executor
        .handlers()
        .iter()
        .map(|h| (h.durable().to_owned(), h.topic().to_owned()))
        .collect();
    handlers.sort();
    assert_eq!(
        handlers,
        vec![
            ("audit-raw".to_owned(), "audit.log".to_owned()),
            ("billing".to_owned(), "orders".to_owned())
        ]
    );
    assert!(
        wait_for(|| BILLED.lock().unwrap().len() == 5 && AUDITED.lock().unwrap().len() == 1).await
    );
    assert!(
        wait_for(
            || futures::executor::block_on(photon.checkpoint("billing", "orders", None)).unwrap()
                == Some(6)
        )
        .await
    );
    photon.shutdown().await.unwrap();

    let billed = BILLED.lock().unwrap().clone();
    let per_key = |id: &str| {
        billed
            .iter()
            .filter(|o| o.order_id == id)
            .map(|o| o.total)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (per_key("o-1"), per_key("o-2")),
        (vec![1, 3, 5], vec![2, 4])
    );
    assert_eq!(
        *AUDITED.lock().unwrap(),
        vec![(1, json!({"text": "started"}))]
    );
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].original.seq, letters[0].attempts), (6, 1));
    assert!(
        letters[0]
            .error
            .starts_with("cannot encode or decode payload of event"),
        "{}",
        letters[0].error
    );
    assert_eq!(letters[0].handler, "typed_topics::bill");
    assert_eq!(
        photon
            .checkpoint("audit-raw", "audit.log", None)
            .await
            .unwrap(),
        Some(1)
    );
}
