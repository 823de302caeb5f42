//! Batch publishing: order, exact content, several topics, refusal before storing.

use std::time::Duration;

use photon_core::{BatchEvent, PhotonError, StartAt};
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context};

/// A batch's seqs come back in order, strictly increasing per topic (consecutive where the
/// port claims `atomic_batches`); a subscriber from the beginning gets exactly the batch,
/// in order, with its keys, actors and payloads; a batch spanning two topics lands on
/// both; an invalid event at index k refuses the whole batch, naming k, and stores nothing.
pub async fn publish_batch(ctx: Context) {
    let store = ctx.store().await;
    let atomic = store.port().capabilities().atomic_batches;
    let orders = ctx.topic("batch-orders");
    let audit = ctx.topic("batch-audit");

    // An invalid event at index 2 (over the size limit) refuses everything, first.
    let limit = store.port().capabilities().max_payload_bytes;
    let refused = vec![
        (orders.as_str(), BatchEvent::new(json!({"n": -1})).key("k1")),
        (audit.as_str(), BatchEvent::new(json!({"n": -2}))),
        (
            orders.as_str(),
            BatchEvent::new(json!({ "blob": "x".repeat(limit) })).key("k1"),
        ),
        (orders.as_str(), BatchEvent::new(json!({"n": -3})).key("k1")),
    ];
    match store.publish_batch(refused).await {
        Err(PhotonError::BatchEventRefused { index, source }) => {
            assert_eq!(index, 2);
            assert!(
                matches!(*source, PhotonError::PayloadTooLarge { ref topic, .. } if *topic == orders),
                "{source}"
            );
        }
        other => panic!("expected BatchEventRefused at index 2, got {other:?}"),
    }
    // An invalid key at index 1 too.
    let bad_key = vec![
        (orders.as_str(), BatchEvent::new(json!({"n": -4})).key("k1")),
        (orders.as_str(), BatchEvent::new(json!({"n": -5})).key("")),
    ];
    match store.publish_batch(bad_key).await {
        Err(PhotonError::BatchEventRefused { index, source }) => {
            assert_eq!(index, 1);
            assert!(
                matches!(*source, PhotonError::InvalidKey { .. }),
                "{source}"
            );
        }
        other => panic!("expected BatchEventRefused at index 1, got {other:?}"),
    }

    // The batch: ten events on `orders` (one key), three on `audit`, interleaved.
    let mut batch = Vec::new();
    for n in 0..10 {
        batch.push((
            orders.as_str(),
            BatchEvent::new(json!({"n": n, "s": "order"}))
                .key("k1")
                .actor(json!({"user": n})),
        ));
        if n % 4 == 0 {
            batch.push((audit.as_str(), BatchEvent::new(json!({"audit": n}))));
        }
    }
    let topics: Vec<&str> = batch.iter().map(|(topic, _)| *topic).collect();
    let appended = store.publish_batch(batch).await.unwrap();
    assert_eq!(appended.len(), 13);
    for topic in [orders.as_str(), audit.as_str()] {
        let seqs: Vec<i64> = appended
            .iter()
            .zip(&topics)
            .filter(|(_, t)| **t == topic)
            .map(|(a, _)| a.seq)
            .collect();
        assert!(
            seqs.windows(2).all(|pair| pair[0] < pair[1]),
            "seqs of {topic} must strictly increase in batch order: {seqs:?}"
        );
        if atomic {
            assert!(
                seqs.windows(2).all(|pair| pair[1] == pair[0] + 1),
                "an atomic batch gives one topic consecutive seqs: {seqs:?}"
            );
        }
    }

    // Nothing of the refused batches was stored: the subscribers see exactly the batch.
    let mut stream = store.subscribe(&orders, None, StartAt::Beginning);
    let events: Vec<_> = take_exact(&mut stream, 10)
        .await
        .into_iter()
        .map(ok)
        .collect();
    let order_appends: Vec<_> = appended
        .iter()
        .zip(&topics)
        .filter(|(_, t)| **t == orders)
        .map(|(a, _)| a)
        .collect();
    for (n, (event, appended)) in events.iter().zip(&order_appends).enumerate() {
        assert_eq!(event.payload, json!({"n": n, "s": "order"}));
        assert_eq!(event.actor, json!({"user": n}));
        assert_eq!(event.topic_key.as_deref(), Some("k1"));
        assert_eq!(
            (event.seq, event.event_id.as_str()),
            (appended.seq, appended.event_id.as_str())
        );
    }
    assert_quiet(&mut stream, Duration::from_millis(200)).await;

    let mut stream = store.subscribe(&audit, None, StartAt::Beginning);
    let payloads: Vec<_> = take_exact(&mut stream, 3)
        .await
        .into_iter()
        .map(|item| ok(item).payload)
        .collect();
    assert_eq!(
        payloads,
        vec![
            json!({"audit": 0}),
            json!({"audit": 4}),
            json!({"audit": 8})
        ]
    );
    assert_quiet(&mut stream, Duration::from_millis(200)).await;

    // An empty batch stores nothing and returns nothing.
    let empty: Vec<(&str, BatchEvent)> = Vec::new();
    assert!(store.publish_batch(empty).await.unwrap().is_empty());
}
