//! Replay positions and checkpoints.

use std::time::Duration;

use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, FlushPolicy, PhotonError, ReplayWindow, StartAt,
    StartPolicy,
};
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context, DEADLINE};

/// Subscribing with `after_seq = s` yields exactly the events with seq > s.
pub async fn after_seq_exact(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("after");
    let mut seqs = Vec::new();
    for i in 0..50 {
        seqs.push(
            store
                .publish(&topic, Some("a"), json!(null), json!({"i": i}))
                .await
                .unwrap()
                .seq,
        );
    }
    for cut in [0usize, 1, 25, 49] {
        let after = if cut == 0 { 0 } else { seqs[cut - 1] };
        let mut stream = store.subscribe(&topic, Some("a"), StartAt::AfterSeq(after));
        let got: Vec<i64> = take_exact(&mut stream, 50 - cut)
            .await
            .into_iter()
            .map(|e| ok(e).seq)
            .collect();
        assert_eq!(got, seqs[cut..].to_vec(), "after seq {after}");
        assert_quiet(&mut stream, Duration::from_millis(100)).await;
    }
}

/// Commit 10 then 7: load returns 10. Two writers racing 1..=1000 end at 1000.
pub async fn checkpoint_monotonic(ctx: Context) {
    let port = ctx.port().await;
    let key = CheckpointKey::new(ctx.subscription("mono"), ctx.topic("t"), None);
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), None);
    port.commit_checkpoint(&key, 10).await.unwrap();
    port.commit_checkpoint(&key, 7).await.unwrap();
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(10));

    let race = CheckpointKey::new(ctx.subscription("race"), ctx.topic("t"), None);
    let other = ctx.port().await;
    let writers = [(port.clone(), 0), (other, 1)].map(|(port, parity)| {
        let key = race.clone();
        tokio::spawn(async move {
            for seq in (1..=1000).filter(|s| s % 2 == parity) {
                port.commit_checkpoint(&key, seq).await.unwrap();
            }
        })
    });
    for writer in writers {
        writer.await.unwrap();
    }
    assert_eq!(port.load_checkpoint(&race).await.unwrap(), Some(1000));
}

/// One subscription name on two topics, and on two keys of one topic: separate checkpoints.
pub async fn checkpoint_isolation(ctx: Context) {
    let port = ctx.port().await;
    let name = ctx.subscription("iso");
    let keys = [
        CheckpointKey::new(&name, ctx.topic("one"), None),
        CheckpointKey::new(&name, ctx.topic("two"), None),
        CheckpointKey::new(&name, ctx.topic("one"), Some("k1")),
        CheckpointKey::new(&name, ctx.topic("one"), Some("k2")),
        CheckpointKey::new(ctx.subscription("iso2"), ctx.topic("one"), None),
    ];
    for (i, key) in keys.iter().enumerate().take(4) {
        port.commit_checkpoint(key, (i as i64 + 1) * 100)
            .await
            .unwrap();
    }
    for (i, key) in keys.iter().enumerate().take(4) {
        assert_eq!(
            port.load_checkpoint(key).await.unwrap(),
            Some((i as i64 + 1) * 100),
            "{key:?}"
        );
    }
    assert_eq!(port.load_checkpoint(&keys[4]).await.unwrap(), None);
}

/// Consume 500 of 1,000 durably, drop the subscription, resume: exactly the other 500.
pub async fn durable_resume(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("durable");
    for i in 0..1000 {
        store
            .publish(
                &topic,
                Some(&format!("k{}", i % 4)),
                json!(null),
                json!({"i": i}),
            )
            .await
            .unwrap();
    }
    let key = CheckpointKey::new(ctx.subscription("resume"), &topic, None);
    let committer =
        CheckpointCommitter::new(store.port().clone(), key.clone(), FlushPolicy::default());
    let mut first = store.subscribe_after_checkpoint(key.clone(), StartPolicy::Beginning);
    let mut seen = Vec::new();
    for item in take_exact(&mut first, 500).await {
        let event = ok(item);
        committer.ack(event.seq).await.unwrap();
        seen.push(event.payload["i"].as_i64().unwrap());
    }
    drop(first);
    committer.flush().await.unwrap();
    drop(committer);

    let reopened = ctx.store().await;
    let mut second = reopened.subscribe_after_checkpoint(key, StartPolicy::Beginning);
    for item in take_exact(&mut second, 500).await {
        seen.push(ok(item).payload["i"].as_i64().unwrap());
    }
    assert_quiet(&mut second, Duration::from_millis(300)).await;
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..1000).collect::<Vec<_>>(),
        "nothing missing, nothing twice"
    );
}

/// Dropping a committer without flushing still commits what was acknowledged, within the
/// flush window; the resumed subscription then misses nothing and repeats nothing.
pub async fn durable_resume_on_drop(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("dropflush");
    for i in 0..200 {
        store
            .publish(&topic, None, json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let key = CheckpointKey::new(ctx.subscription("dropflush"), &topic, None);
    let committer =
        CheckpointCommitter::new(store.port().clone(), key.clone(), FlushPolicy::default());
    let mut stream = store.subscribe_after_checkpoint(key.clone(), StartPolicy::Beginning);
    let mut last = 0;
    for item in take_exact(&mut stream, 120).await {
        last = ok(item).seq;
        committer.ack(last).await.unwrap();
    }
    drop(stream);
    drop(committer);
    let port = store.port().clone();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while port.load_checkpoint(&key).await.unwrap() != Some(last) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "dropped committer never flushed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut resumed = store.subscribe_after_checkpoint(key, StartPolicy::Beginning);
    let rest: Vec<i64> = take_exact(&mut resumed, 80)
        .await
        .into_iter()
        .map(|e| ok(e).payload["i"].as_i64().unwrap())
        .collect();
    assert_eq!(rest, (120..200).collect::<Vec<_>>());
}

/// Without a checkpoint, `Beginning` replays history and `Tail` sees only new events.
pub async fn resume_without_checkpoint(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("policy");
    for i in 0..20 {
        store
            .publish(&topic, None, json!(null), json!({"i": i}))
            .await
            .unwrap();
    }
    let from_start = CheckpointKey::new(ctx.subscription("start"), &topic, None);
    let mut beginning = store.subscribe_after_checkpoint(from_start, StartPolicy::Beginning);
    let from_tail = CheckpointKey::new(ctx.subscription("tail"), &topic, None);
    let mut tail = store.subscribe_after_checkpoint(from_tail, StartPolicy::Tail);
    // Polling once establishes the tail position (it resolves the missing checkpoint).
    assert!(
        tokio::time::timeout(Duration::from_millis(500), tail.next())
            .await
            .is_err()
    );
    let history: Vec<i64> = take_exact(&mut beginning, 20)
        .await
        .into_iter()
        .map(|e| ok(e).payload["i"].as_i64().unwrap())
        .collect();
    assert_eq!(history, (0..20).collect::<Vec<_>>());
    store
        .publish(&topic, None, json!(null), json!({"i": 20}))
        .await
        .unwrap();
    let fresh = ok(take_exact(&mut tail, 1).await.remove(0));
    assert_eq!(fresh.payload, json!({"i": 20}));
    assert_quiet(&mut tail, Duration::from_millis(200)).await;
}

/// Truncate below seq `b`, then subscribe after a seq below `b`: exactly one
/// [`photon_core::PhotonError::Gap`] naming the removed range (first missing seq, first
/// seq kept), then exactly the kept events. Starting from the beginning has no gap.
pub async fn gap_after_truncate(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let capabilities = port.capabilities();
    if !capabilities.truncate || capabilities.replay == ReplayWindow::TailOnly {
        return;
    }
    let topic = ctx.topic("gap");
    let mut published = Vec::new();
    for i in 0..30 {
        published.push(
            store
                .publish(&topic, None, json!(null), json!({"i": i}))
                .await
                .unwrap(),
        );
    }
    let bound = published[15].seq;
    assert_eq!(port.truncate_before(&topic, bound).await.unwrap(), 15);
    let kept: Vec<(i64, i64)> = published[15..]
        .iter()
        .zip(15..)
        .map(|(a, i)| (a.seq, i))
        .collect();

    let mut stream = store.subscribe(&topic, None, StartAt::AfterSeq(published[4].seq));
    let mut items = take_exact(&mut stream, 16).await.into_iter();
    match items.next().unwrap() {
        Err(PhotonError::Gap {
            topic: gap_topic,
            from,
            to,
        }) => {
            assert_eq!(
                (gap_topic.as_str(), from, to),
                (topic.as_str(), published[5].seq, bound)
            );
        }
        other => panic!("expected a gap first, got {other:?}"),
    }
    let rest: Vec<(i64, i64)> = items
        .map(ok)
        .map(|e| (e.seq, e.payload["i"].as_i64().unwrap()))
        .collect();
    assert_eq!(rest, kept);
    assert_quiet(&mut stream, Duration::from_millis(200)).await;

    // From the beginning: the kept events, no gap.
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let rest: Vec<(i64, i64)> = take_exact(&mut stream, 15)
        .await
        .into_iter()
        .map(ok)
        .map(|e| (e.seq, e.payload["i"].as_i64().unwrap()))
        .collect();
    assert_eq!(rest, kept);
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}
