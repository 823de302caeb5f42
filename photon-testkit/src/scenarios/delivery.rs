//! Publish and subscribe: round trip, live delivery, concurrency, isolation, order.

use std::collections::HashSet;
use std::time::Duration;

use photon_core::StartAt;
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context};

/// 100 events published before subscribing from the beginning all arrive intact, in order.
pub async fn round_trip(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("orders");
    for i in 0..100 {
        store
            .publish(
                &topic,
                Some("k1"),
                json!({"user": i}),
                json!({"n": i, "s": "x"}),
            )
            .await
            .unwrap();
    }
    let mut stream = store.subscribe(&topic, None, StartAt::AfterSeq(0));
    let events: Vec<_> = take_exact(&mut stream, 100)
        .await
        .into_iter()
        .map(ok)
        .collect();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.topic_name, topic);
        assert_eq!(event.topic_key.as_deref(), Some("k1"));
        assert_eq!(event.actor, json!({"user": i}));
        assert_eq!(event.payload, json!({"n": i, "s": "x"}));
    }
    assert!(
        events.windows(2).all(|w| w[0].seq < w[1].seq),
        "seq not increasing"
    );
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// A subscriber started first receives the next 1,000 publishes, none missing or twice,
/// each key's events in publish order.
pub async fn live_delivery(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("live");
    // No pause: a tail subscription includes everything published after it returns.
    let mut stream = store.subscribe(&topic, None, StartAt::Tail);
    for i in 0..1000 {
        let key = format!("k{}", i % 7);
        store
            .publish(&topic, Some(&key), json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let mut per_key = super::payloads_per_key(&mut stream, 1000).await;
    for k in 0..7 {
        let expected: Vec<i64> = (0..1000).filter(|i| i % 7 == k).collect();
        assert_eq!(
            per_key.remove(&format!("k{k}")).unwrap_or_default(),
            expected,
            "key k{k}"
        );
    }
    assert!(per_key.is_empty(), "unexpected keys {per_key:?}");
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// 50 tasks × 100 events: every event arrives exactly once.
pub async fn concurrent_publishers(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("fan-in");
    let mut tasks = Vec::new();
    for task in 0..50 {
        let store = store.clone();
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..100 {
                store
                    .publish(
                        &topic,
                        Some(&format!("p{task}")),
                        json!(task),
                        json!({"t": task, "i": i}),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let events = take_exact(&mut stream, 5000).await;
    let unique: HashSet<(i64, i64)> = events
        .into_iter()
        .map(ok)
        .map(|e| {
            (
                e.payload["t"].as_i64().unwrap(),
                e.payload["i"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(unique.len(), 5000);
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// 20 topics × 100 events: each subscriber sees only its topic, all of it.
pub async fn many_topics(ctx: Context) {
    let store = ctx.store().await;
    let topics: Vec<String> = (0..20).map(|t| ctx.topic(&format!("many{t}"))).collect();
    for i in 0..100 {
        for (t, topic) in topics.iter().enumerate() {
            store
                .publish(topic, None, json!(null), json!({"t": t, "i": i}))
                .await
                .unwrap();
        }
    }
    for (t, topic) in topics.iter().enumerate() {
        let mut stream = store.subscribe(topic, None, StartAt::Beginning);
        let events = take_exact(&mut stream, 100).await;
        for (i, event) in events.into_iter().map(ok).enumerate() {
            assert_eq!(event.topic_name, *topic);
            assert_eq!(event.payload, json!({"t": t, "i": i}));
        }
        assert_quiet(&mut stream, Duration::from_millis(100)).await;
    }
}

/// `a.b`, `a-b` and `a_b` are three different topics.
pub async fn topic_isolation(ctx: Context) {
    let store = ctx.store().await;
    let names = [ctx.topic("a.b"), ctx.topic("a-b"), ctx.topic("a_b")];
    for (n, topic) in names.iter().enumerate() {
        for i in 0..=n {
            store
                .publish(topic, None, json!(null), json!({"topic": n, "i": i}))
                .await
                .unwrap();
        }
    }
    for (n, topic) in names.iter().enumerate() {
        let mut stream = store.subscribe(topic, None, StartAt::Beginning);
        let events = take_exact(&mut stream, n + 1).await;
        for (i, event) in events.into_iter().map(ok).enumerate() {
            assert_eq!(event.topic_name, *topic);
            assert_eq!(event.payload, json!({"topic": n, "i": i}));
        }
        assert_quiet(&mut stream, Duration::from_millis(200)).await;
    }
}

/// A subscriber for key `k3` receives exactly the events of `k3`, in order.
pub async fn key_filter(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("keyed");
    super::publish_keyed(&store, &topic, 0..200, 5).await;
    let mut stream = store.subscribe(&topic, Some("k3"), StartAt::Beginning);
    let got: Vec<i64> = take_exact(&mut stream, 40)
        .await
        .into_iter()
        .map(ok)
        .inspect(|e| assert_eq!(e.topic_key.as_deref(), Some("k3")))
        .map(|e| e.payload["i"].as_i64().unwrap())
        .collect();
    assert_eq!(got, (0..200).filter(|i| i % 5 == 3).collect::<Vec<_>>());
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// 8 publishers on 16 keys: each key's events arrive in publish order.
pub async fn per_key_order(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("order");
    let mut tasks = Vec::new();
    for publisher in 0..8 {
        let store = store.clone();
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            // Publisher p owns keys 2p and 2p+1, so each key has one ordered writer.
            for i in 0..125 {
                let key = format!("key{}", publisher * 2 + i % 2);
                store
                    .publish(&topic, Some(&key), json!(null), json!({"i": i}))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let per_key = super::payloads_per_key(&mut stream, 1000).await;
    assert_eq!(per_key.len(), 16);
    for (key, order) in per_key {
        let parity: i64 = key.trim_start_matches("key").parse::<i64>().unwrap() % 2;
        let expected: Vec<i64> = (0..125).filter(|i| i % 2 == parity).collect();
        assert_eq!(order, expected, "order of {key}");
    }
}

/// History published before subscribing is replayed in full, then live events follow.
pub async fn late_subscriber(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("late");
    for i in 0..300 {
        store
            .publish(&topic, None, json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let history = take_exact(&mut stream, 300).await;
    for i in 300..310 {
        store
            .publish(&topic, None, json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let live = take_exact(&mut stream, 10).await;
    let got: Vec<i64> = history
        .into_iter()
        .chain(live)
        .map(|item| ok(item).payload["i"].as_i64().unwrap())
        .collect();
    assert_eq!(got, (0..310).collect::<Vec<_>>());
}

/// Seq strictly increases within a partition, and publish returns the seq delivered.
pub async fn seq_strictly_increasing(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("seq");
    let mut published = Vec::new();
    for i in 0..60 {
        let key = format!("s{}", i % 3);
        let appended = store
            .publish(&topic, Some(&key), json!(null), json!({"i": i}))
            .await
            .unwrap();
        published.push((key, appended));
    }
    for key in ["s0", "s1", "s2"] {
        let mine: Vec<_> = published
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, a)| a.clone())
            .collect();
        assert!(
            mine.windows(2).all(|w| w[0].seq < w[1].seq),
            "publish seqs of {key}"
        );
        let mut stream = store.subscribe(&topic, Some(key), StartAt::Beginning);
        let events = take_exact(&mut stream, 20).await;
        let seen: Vec<(String, i64)> = events
            .into_iter()
            .map(ok)
            .map(|e| (e.event_id, e.seq))
            .collect();
        let expected: Vec<(String, i64)> = mine.into_iter().map(|a| (a.event_id, a.seq)).collect();
        assert_eq!(seen, expected, "delivered ids and seqs of {key}");
    }
}
