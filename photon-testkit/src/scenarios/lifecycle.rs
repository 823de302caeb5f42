//! Lifecycle and failure: closing subscribers, failing handlers, dropped publishers.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use photon_core::{CheckpointCommitter, CheckpointKey, FlushPolicy, StartAt, StartPolicy};
use serde_json::json;
use tokio::sync::mpsc;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context, DEADLINE};

/// 10 subscribers dropped at once; a new subscriber still gets everything, old and new.
pub async fn concurrent_close(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("close");
    for i in 0..100 {
        store
            .publish(&topic, None, json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let mut subscribers = Vec::new();
    for _ in 0..10 {
        let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
        assert_eq!(take_exact(&mut stream, 10).await.len(), 10);
        subscribers.push(stream);
    }
    let closers: Vec<_> = subscribers
        .into_iter()
        .map(|stream| tokio::spawn(async move { drop(stream) }))
        .collect();
    for closer in closers {
        closer.await.unwrap();
    }
    for i in 100..150 {
        store
            .publish(&topic, None, json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let mut fresh = store.subscribe(&topic, None, StartAt::Beginning);
    let got: Vec<i64> = take_exact(&mut fresh, 150)
        .await
        .into_iter()
        .map(|e| ok(e).payload["i"].as_i64().unwrap())
        .collect();
    assert_eq!(got, (0..150).collect::<Vec<_>>());
}

/// A handler fails at event 300: resubscribing from the checkpoint redelivers it and what
/// follows it; nothing is lost, nothing handled twice, each key's events stay in order.
pub async fn subscriber_error_resume(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("fails");
    super::publish_keyed(&store, &topic, 0..500, 3).await;
    let key = CheckpointKey::new(ctx.subscription("fails"), &topic, None);
    let mut handled = Vec::new();
    for attempt in 0..2 {
        let committer =
            CheckpointCommitter::new(store.port().clone(), key.clone(), FlushPolicy::default());
        let mut stream = store.subscribe_after_checkpoint(key.clone(), StartPolicy::Beginning);
        while handled.len() < 500 {
            let event = ok(take_exact(&mut stream, 1).await.remove(0));
            let i = event.payload["i"].as_i64().unwrap();
            if attempt == 0 && i == 300 {
                break; // the handler failed: not acknowledged
            }
            handled.push(i);
            committer.ack(event.seq).await.unwrap();
        }
        committer.flush().await.unwrap();
    }
    for k in 0..3 {
        let of_key: Vec<i64> = handled.iter().copied().filter(|i| i % 3 == k).collect();
        let expected: Vec<i64> = (0..500).filter(|i| i % 3 == k).collect();
        assert_eq!(of_key, expected, "key k{k}");
    }
    assert_eq!(handled.len(), 500);
}

/// Every publish that returned Ok before the publisher was dropped is stored.
pub async fn publisher_drop(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("pubdrop");
    // The first publish creates the topic on brokers that provision on first use.
    let first = store
        .publish(&topic, None, json!(null), json!({"i": -1}))
        .await
        .unwrap();
    let (acked_tx, mut acked_rx) = mpsc::unbounded_channel();
    acked_tx.send(first.event_id).unwrap();
    let publisher = {
        let store = store.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            for i in 0..1_000_000 {
                let appended = store
                    .publish(&topic, None, json!(null), json!({"i": i}))
                    .await
                    .unwrap();
                if acked_tx.send(appended.event_id).is_err() {
                    return;
                }
            }
        })
    };
    // Dropped while publishing: once 50 publishes after the first returned Ok, so that the
    // abort lands with the next one in flight, whatever the machine's speed.
    let mut acked = HashSet::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while acked.len() < 51 {
        match tokio::time::timeout_at(deadline, acked_rx.recv()).await {
            Ok(Some(id)) => acked.insert(id),
            _ => panic!(
                "{} of 51 publishes acknowledged by the deadline",
                acked.len()
            ),
        };
    }
    publisher.abort();
    let _ = publisher.await;
    while let Ok(id) = acked_rx.try_recv() {
        acked.insert(id);
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let mut stored: HashSet<String> = take_exact(&mut stream, acked.len())
        .await
        .into_iter()
        .map(|e| ok(e).event_id)
        .collect();
    // The publish cancelled by the abort may or may not have landed; nothing else may.
    if let Ok(Some(extra)) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
        stored.insert(ok(extra).event_id);
    }
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
    let missing: Vec<_> = acked.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    assert!(
        stored.len() <= acked.len() + 1,
        "{} stored for {} acked",
        stored.len(),
        acked.len()
    );
}
