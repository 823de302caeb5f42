//! get_event, listing, the catalog and truncation (each registered with its capability).

use std::time::Duration;

use photon_core::{CheckpointKey, StartAt, StoredCheckpoint};
use serde_json::json;

use super::ok;
use crate::capability::Capability;
use crate::context::{assert_quiet, take_exact, Context};

/// Event ids no port hands out (empty, words, numbers out of range, an emoji, too many
/// parts): `get_event` finds none of them, and the ports' id parsers refuse them.
pub const MALFORMED_EVENT_IDS: [&str; 7] = [
    "",
    "no-such-event",
    "0",
    "-1",
    "😀",
    "x:y:z:1",
    "99999999999999999999999",
];

/// Every id returned by publish finds its event; unknown and malformed ids are `None`.
pub async fn get_event(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("get");
    let mut published = Vec::new();
    for i in 0..30 {
        let key = (i % 2 == 0).then_some("even");
        let appended = store
            .publish(&topic, key, json!({"a": i}), json!({"i": i}))
            .await
            .unwrap();
        published.push((appended, key, i));
    }
    let reopened = ctx.store().await;
    for (appended, key, i) in &published {
        let event = reopened.get_event(&appended.event_id).await.unwrap();
        let event = event.unwrap_or_else(|| panic!("event {} not found", appended.event_id));
        assert_eq!(event.event_id, appended.event_id);
        assert_eq!(event.seq, appended.seq);
        assert_eq!(event.topic_name, topic);
        assert_eq!(event.topic_key.as_deref(), *key);
        assert_eq!(event.payload, json!({"i": i}));
        assert_eq!(event.actor, json!({"a": i}));
    }
    for unknown in MALFORMED_EVENT_IDS {
        match reopened.get_event(unknown).await {
            Ok(None) => {}
            Ok(Some(event)) => panic!("id {unknown:?} found {event:?}"),
            Err(err) => panic!("id {unknown:?} should be None, got error {err}"),
        }
    }
}

/// `list_by_topic` pages oldest first; `list_recent` returns the newest first.
pub async fn listing(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("list");
    let mut seqs = Vec::new();
    for i in 0..25 {
        seqs.push(
            store
                .publish(&topic, None, json!(null), json!({"i": i}))
                .await
                .unwrap()
                .seq,
        );
    }
    store
        .publish(&ctx.topic("other"), None, json!(null), json!({}))
        .await
        .unwrap();
    let first: Vec<i64> = port
        .list_by_topic(&topic, 0, 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(first, seqs[..10].to_vec());
    let next: Vec<i64> = port
        .list_by_topic(&topic, seqs[9], 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(next, seqs[10..].to_vec());
    let recent: Vec<i64> = port
        .list_recent(&topic, 3)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(recent, vec![seqs[24], seqs[23], seqs[22]]);
    assert!(port
        .list_by_topic(&ctx.topic("empty"), 0, 10)
        .await
        .unwrap()
        .is_empty());
    if Capability::HeadSeq.offered(&ctx, &port).await {
        assert_eq!(port.head_seq(&topic, None).await.unwrap(), Some(seqs[24]));
        assert_eq!(
            port.head_seq(&ctx.topic("empty"), None).await.unwrap(),
            None
        );
    }
}

/// `list_topics` names every topic with its head and event count, dead-letter topics
/// included; `list_checkpoints` lists every durable checkpoint as `load_checkpoint` reads
/// it. (A port without the `catalog` capability refuses both with `Unsupported`: checked by
/// the runner.)
pub async fn catalog(ctx: Context) {
    let store = ctx.store().await;
    let (orders, audit) = (ctx.topic("orders"), ctx.topic("audit"));
    let dead_letters = format!("{orders}.dlq");
    let mut seqs: Vec<i64> = Vec::new();
    for key in [Some("k1"), Some("k2"), None] {
        seqs.push(
            store
                .publish(&orders, key, json!(null), json!({}))
                .await
                .unwrap()
                .seq,
        );
    }
    for _ in 0..2 {
        store
            .publish(&audit, Some("a"), json!(null), json!({}))
            .await
            .unwrap();
    }
    store
        .publish(&dead_letters, None, json!(null), json!({}))
        .await
        .unwrap();
    let reopened = ctx.store().await;
    let port = reopened.port().clone();
    let head_seq = Capability::HeadSeq.offered(&ctx, &port).await;
    let ours = ctx.topic("");
    let topics: Vec<_> = port
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.name.starts_with(&ours))
        .collect();
    let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        vec![audit.as_str(), orders.as_str(), dead_letters.as_str()]
    );
    for (topic, events) in topics.iter().zip([2, 3, 1]) {
        if head_seq {
            assert_eq!(
                topic.head_seq,
                port.head_seq(&topic.name, None).await.unwrap(),
                "{topic:?}"
            );
        }
        assert!(topic.head_seq.is_some(), "{topic:?}");
        if let Some(stored) = topic.events {
            assert_eq!(stored, events, "{topic:?}");
        }
        assert!(topic.shards >= 1, "{topic:?}");
    }
    let keys = [
        CheckpointKey::new(ctx.subscription("billing"), &orders, None),
        CheckpointKey::new(ctx.subscription("billing"), &orders, Some("k1")),
        CheckpointKey::new(ctx.subscription("audit"), &audit, None),
    ];
    for (key, seq) in keys.iter().zip([seqs[1], seqs[0], seqs[2]]) {
        port.commit_checkpoint(key, seq).await.unwrap();
    }
    let ours = ctx.subscription("");
    let listed: Vec<StoredCheckpoint> = port
        .list_checkpoints()
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.subscription.starts_with(&ours))
        .collect();
    let mut expected = Vec::new();
    for key in &keys {
        expected.push(StoredCheckpoint {
            subscription: key.subscription.clone(),
            topic: key.topic.clone(),
            key: key.key.clone(),
            seq: port.load_checkpoint(key).await.unwrap().unwrap(),
        });
    }
    expected.sort_by(|a, b| {
        (&a.subscription, &a.topic, &a.key).cmp(&(&b.subscription, &b.topic, &b.key))
    });
    assert_eq!(listed, expected);
}

/// Records below the bound are gone; the rest stay intact with their seqs; a bound at or
/// below the first seq removes nothing.
pub async fn truncate(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("trunc");
    let mut published = Vec::new();
    for i in 0..40 {
        published.push(
            store
                .publish(&topic, None, json!(null), json!({"i": i}))
                .await
                .unwrap(),
        );
    }
    // Bounds at or below the first seq remove nothing (a NATS purge up to its first
    // position removed the whole stream).
    for nothing_below in [0, 1, published[0].seq] {
        assert_eq!(
            port.truncate_before(&topic, nothing_below).await.unwrap(),
            0,
            "truncate_before({nothing_below})"
        );
    }
    let bound = published[15].seq;
    assert_eq!(port.truncate_before(&topic, bound).await.unwrap(), 15);
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let rest: Vec<(i64, i64)> = take_exact(&mut stream, 25)
        .await
        .into_iter()
        .map(ok)
        .map(|e| (e.seq, e.payload["i"].as_i64().unwrap()))
        .collect();
    let expected: Vec<(i64, i64)> = published[15..]
        .iter()
        .zip(15..)
        .map(|(a, i)| (a.seq, i))
        .collect();
    assert_eq!(rest, expected);
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
    if Capability::GetEvent.offered(&ctx, &port).await {
        assert!(store
            .get_event(&published[3].event_id)
            .await
            .unwrap()
            .is_none());
        assert!(store
            .get_event(&published[20].event_id)
            .await
            .unwrap()
            .is_some());
    }
    assert_eq!(port.truncate_before(&topic, bound).await.unwrap(), 0);
}
