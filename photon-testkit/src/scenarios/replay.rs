//! Replay positions and checkpoints.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, FlushPolicy, PhotonError, StartAt, StartPolicy,
};
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context};

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

/// The lanes (shards) a port spreads seqs over, and the highest seq of each lane up to
/// `bound`.
fn lane_maxima(port: &dyn photon_core::StoragePort, topic: &str, bound: i64) -> BTreeMap<u32, i64> {
    let mut maxima = BTreeMap::new();
    for seq in 1..=bound {
        maxima.insert(port.checkpoint_lane(topic, seq), seq);
    }
    maxima
}

/// Commits `seq`, and in every other lane the first seq above it, so that every lane has a
/// position and a sharded port's load (the lowest lane position) is `seq` itself.
async fn commit_in_every_lane(
    port: &dyn photon_core::StoragePort,
    key: &CheckpointKey,
    seq: i64,
    lanes: usize,
) {
    let mut done = std::collections::BTreeSet::new();
    let mut next = seq;
    while done.len() < lanes {
        if done.insert(port.checkpoint_lane(&key.topic, next)) {
            port.commit_checkpoint(key, next).await.unwrap();
        }
        next += 1;
    }
}

/// Commit 10 then a lower seq of the same lane: load returns 10. Two writers racing
/// 1..=1000 end at the resume position of 1000 (1000 itself on an unsharded port).
pub async fn checkpoint_monotonic(ctx: Context) {
    let port = ctx.port().await;
    let key = CheckpointKey::new(ctx.subscription("mono"), ctx.topic("t"), None);
    let lanes = lane_maxima(port.as_ref(), &key.topic, 1000);
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), None);
    commit_in_every_lane(port.as_ref(), &key, 10, lanes.len()).await;
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(10));
    let lane = port.checkpoint_lane(&key.topic, 10);
    let lower = (1..10)
        .rev()
        .find(|seq| port.checkpoint_lane(&key.topic, *seq) == lane)
        .unwrap_or(7);
    port.commit_checkpoint(&key, lower).await.unwrap();
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
    // Every lane ends at its highest seq up to 1000; the load is the lowest of them.
    let expected = lanes.values().copied().min();
    assert_eq!(port.load_checkpoint(&race).await.unwrap(), expected);
    if lanes.len() == 1 {
        assert_eq!(expected, Some(1000));
    }
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
    let lanes = lane_maxima(port.as_ref(), &keys[0].topic, 1000).len();
    for (i, key) in keys.iter().enumerate().take(4) {
        let seq = (i as i64 + 1) * 100;
        if key.key.is_some() {
            // A key lives in one lane: its checkpoint has one position.
            port.commit_checkpoint(key, seq).await.unwrap();
        } else {
            commit_in_every_lane(port.as_ref(), key, seq, lanes).await;
        }
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

/// An operator's reset: a checkpoint moved back reads as the new seq and a durable
/// subscription resumes after it in every shard; a later lower commit is ignored; a removed
/// checkpoint reads as none and resumes per the start policy; a keyed checkpoint moves on
/// its own, and other checkpoints stay.
pub async fn checkpoint_reset(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("reset");
    let mut seqs = Vec::new();
    for i in 0..12 {
        let key = format!("k{}", i % 3);
        let appended = store
            .publish(&topic, Some(&key), json!(null), json!({"i": i}))
            .await
            .unwrap();
        seqs.push((key, appended.seq));
    }
    let whole = CheckpointKey::new(ctx.subscription("whole"), &topic, None);
    let keyed = CheckpointKey::new(ctx.subscription("keyed"), &topic, Some("k1"));
    let other = CheckpointKey::new(ctx.subscription("other"), &topic, Some("k2"));
    for (key, seq) in &seqs {
        port.commit_checkpoint(&whole, *seq).await.unwrap();
        if key == "k1" {
            port.commit_checkpoint(&keyed, *seq).await.unwrap();
        }
        if key == "k2" {
            port.commit_checkpoint(&other, *seq).await.unwrap();
        }
    }
    let other_before = port.load_checkpoint(&other).await.unwrap();
    assert!(other_before.is_some());

    let back = seqs[3].1;
    port.reset_checkpoint(&whole, Some(back)).await.unwrap();
    assert_eq!(port.load_checkpoint(&whole).await.unwrap(), Some(back));
    let mut expected: Vec<i64> = seqs.iter().map(|(_, s)| *s).filter(|s| *s > back).collect();
    let mut resumed = store.subscribe_after_checkpoint(whole.clone(), StartPolicy::Beginning);
    let mut got: Vec<i64> = take_exact(&mut resumed, expected.len())
        .await
        .into_iter()
        .map(|e| ok(e).seq)
        .collect();
    assert_quiet(&mut resumed, Duration::from_millis(200)).await;
    drop(resumed);
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected, "resumed after the reset seq {back}");

    port.commit_checkpoint(&whole, seqs[1].1).await.unwrap();
    assert_eq!(port.load_checkpoint(&whole).await.unwrap(), Some(back));

    port.reset_checkpoint(&whole, None).await.unwrap();
    assert_eq!(port.load_checkpoint(&whole).await.unwrap(), None);
    let mut from_start = store.subscribe_after_checkpoint(whole.clone(), StartPolicy::Beginning);
    let mut all: Vec<i64> = take_exact(&mut from_start, seqs.len())
        .await
        .into_iter()
        .map(|e| ok(e).seq)
        .collect();
    assert_quiet(&mut from_start, Duration::from_millis(200)).await;
    drop(from_start);
    all.sort_unstable();
    let mut every: Vec<i64> = seqs.iter().map(|(_, s)| *s).collect();
    every.sort_unstable();
    assert_eq!(all, every, "resumed from the beginning after the removal");

    let k1: Vec<i64> = seqs
        .iter()
        .filter(|(key, _)| key == "k1")
        .map(|(_, s)| *s)
        .collect();
    port.reset_checkpoint(&keyed, Some(k1[0])).await.unwrap();
    assert_eq!(port.load_checkpoint(&keyed).await.unwrap(), Some(k1[0]));
    let mut keyed_stream = store.subscribe_after_checkpoint(keyed.clone(), StartPolicy::Beginning);
    let keyed_got: Vec<i64> = take_exact(&mut keyed_stream, k1.len() - 1)
        .await
        .into_iter()
        .map(|e| ok(e).seq)
        .collect();
    assert_quiet(&mut keyed_stream, Duration::from_millis(200)).await;
    assert_eq!(keyed_got, k1[1..].to_vec());
    assert_eq!(port.load_checkpoint(&other).await.unwrap(), other_before);
}

/// Consume 500 of 1,000 durably, drop the subscription, resume: exactly the other 500.
pub async fn durable_resume(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("durable");
    super::publish_keyed(&store, &topic, 0..1000, 4).await;
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

/// Dropping a committer without flushing still commits what was acknowledged, and a
/// subscription reopened right after the drop in the same process starts after it: it
/// misses nothing and repeats nothing.
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
    // Unkeyed events all live in one lane. On a sharded port the other lanes (empty here)
    // get a position above `last`, so that the load, the lowest lane position, is `last`.
    let lane = port.checkpoint_lane(&topic, last);
    let lanes = lane_maxima(port.as_ref(), &topic, 1000);
    for other in lanes.keys().filter(|l| **l != lane) {
        let above = (last + 1..)
            .find(|seq| port.checkpoint_lane(&topic, *seq) == *other)
            .unwrap();
        port.commit_checkpoint(&key, above).await.unwrap();
    }
    // No wait: opening the checkpoint again waits for the dropped committer's commit.
    let mut resumed = store.subscribe_after_checkpoint(key.clone(), StartPolicy::Beginning);
    let rest: Vec<i64> = take_exact(&mut resumed, 80)
        .await
        .into_iter()
        .map(|e| ok(e).payload["i"].as_i64().unwrap())
        .collect();
    assert_eq!(rest, (120..200).collect::<Vec<_>>());
    assert_eq!(
        store.port().load_checkpoint(&key).await.unwrap(),
        Some(last)
    );
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

/// Resuming through `load_checkpoint` and `AfterSeq` (the seed trait's
/// `get_checkpoint_seq` then `subscribe`) loses nothing when shards stand at different
/// positions: one lane fully acknowledged, every other lane after its first event only.
/// The resumed subscription yields exactly the events with seq above the loaded position,
/// which include every unacknowledged event (acknowledged ones may come again).
pub async fn sharded_resume_loses_nothing(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("lanes");
    super::publish_keyed(&store, &topic, 0..200, 16).await;
    let mut all = store.subscribe(&topic, None, StartAt::Beginning);
    let events: Vec<_> = take_exact(&mut all, 200)
        .await
        .into_iter()
        .map(ok)
        .collect();
    let mut lanes: std::collections::BTreeMap<u32, Vec<i64>> = Default::default();
    for event in &events {
        lanes
            .entry(port.checkpoint_lane(&topic, event.seq))
            .or_default()
            .push(event.seq);
    }
    let key = CheckpointKey::new(ctx.subscription("lanes"), &topic, None);
    // Acknowledged through: the first lane up to its last event, every other lane up to
    // its first; with a single lane, up to its 10th event.
    let mut acked_through = std::collections::BTreeMap::new();
    for (n, (lane, seqs)) in lanes.iter().enumerate() {
        let through = match (n, lanes.len()) {
            (_, 1) => seqs[9],
            (0, _) => *seqs.last().unwrap(),
            _ => seqs[0],
        };
        acked_through.insert(*lane, through);
    }
    // The highest position first, as a process acknowledging out of lane order would.
    let mut commits: Vec<i64> = acked_through.values().copied().collect();
    commits.sort_unstable_by(|a, b| b.cmp(a));
    for seq in commits {
        port.commit_checkpoint(&key, seq).await.unwrap();
    }
    let unacked: std::collections::BTreeSet<i64> = events
        .iter()
        .map(|e| e.seq)
        .filter(|seq| *seq > acked_through[&port.checkpoint_lane(&topic, *seq)])
        .collect();
    let expected_unacked = if lanes.len() == 1 {
        190
    } else {
        lanes.values().skip(1).map(|seqs| seqs.len() - 1).sum()
    };
    assert_eq!(unacked.len(), expected_unacked);
    let resume = port
        .load_checkpoint(&key)
        .await
        .unwrap()
        .expect("a position");
    let mut resumed = store.subscribe(&topic, None, StartAt::AfterSeq(resume));
    let expected: std::collections::BTreeSet<i64> = events
        .iter()
        .map(|e| e.seq)
        .filter(|seq| *seq > resume)
        .collect();
    let got: Vec<i64> = take_exact(&mut resumed, expected.len())
        .await
        .into_iter()
        .map(|e| ok(e).seq)
        .collect();
    let got_set: std::collections::BTreeSet<i64> = got.iter().copied().collect();
    assert_eq!(got_set.len(), got.len(), "an event came twice");
    assert_eq!(got_set, expected);
    let lost: Vec<&i64> = unacked.difference(&got_set).collect();
    assert!(lost.is_empty(), "unacknowledged events skipped: {lost:?}");
    assert_quiet(&mut resumed, Duration::from_millis(200)).await;
}

/// Truncate below seq `b`, then subscribe after a seq below `b`: exactly one
/// [`photon_core::PhotonError::Gap`] naming the removed range (first missing seq, first
/// seq kept), then exactly the kept events. Starting from the beginning has no gap.
pub async fn gap_after_truncate(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
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

/// Events of the large replay, over [`LARGE_REPLAY_KEYS`] keys from
/// [`LARGE_REPLAY_PUBLISHERS`] concurrent publishers.
const LARGE_REPLAY_EVENTS: usize = 16_000;
const LARGE_REPLAY_PUBLISHERS: usize = 32;
const LARGE_REPLAY_KEYS: usize = 64;

/// A topic larger than one read (16,000 events of about 700 bytes, 11 MB, from 32
/// concurrent publishers over 64 keys) replays from the beginning with every event exactly
/// once and each key in publish order, and without any error item; a keyed subscription
/// from the beginning gets exactly its key's events, in order.
pub async fn large_replay(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("large");
    let filler = "x".repeat(640);
    let mut tasks = Vec::new();
    for publisher in 0..LARGE_REPLAY_PUBLISHERS {
        let (store, topic, filler) = (store.clone(), topic.clone(), filler.clone());
        tasks.push(tokio::spawn(async move {
            // Publisher p owns keys 2p and 2p+1, so each key has one ordered writer.
            let mut i = publisher;
            while i < LARGE_REPLAY_EVENTS {
                let key = format!("k{}", (publisher * 2 + i / LARGE_REPLAY_PUBLISHERS % 2));
                store
                    .publish(
                        &topic,
                        Some(&key),
                        json!(null),
                        json!({"i": i, "data": filler}),
                    )
                    .await
                    .unwrap();
                i += LARGE_REPLAY_PUBLISHERS;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    let mut all = store.subscribe(&topic, None, StartAt::Beginning);
    let events: Vec<_> = take_exact(&mut all, LARGE_REPLAY_EVENTS)
        .await
        .into_iter()
        .enumerate()
        .map(|(n, item)| item.unwrap_or_else(|e| panic!("item {n} of the replay: {e}")))
        .collect();
    assert_quiet(&mut all, Duration::from_millis(200)).await;
    let mut seen = std::collections::BTreeSet::new();
    let mut per_key: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for event in &events {
        assert_eq!(event.payload["data"].as_str(), Some(filler.as_str()));
        let i = event.payload["i"].as_i64().unwrap();
        assert!(seen.insert(i), "event {i} delivered twice");
        per_key
            .entry(event.topic_key.clone().unwrap())
            .or_default()
            .push(i);
    }
    assert_eq!(seen.len(), LARGE_REPLAY_EVENTS);
    assert_eq!(per_key.len(), LARGE_REPLAY_KEYS);
    for (key, is) in &per_key {
        assert!(is.windows(2).all(|w| w[0] < w[1]), "{key} out of order");
    }

    let mut keyed = store.subscribe(&topic, Some("k7"), StartAt::Beginning);
    let expected = per_key["k7"].clone();
    let got: Vec<i64> = take_exact(&mut keyed, expected.len())
        .await
        .into_iter()
        .enumerate()
        .map(|(n, item)| {
            let event = item.unwrap_or_else(|e| panic!("item {n} of the keyed replay: {e}"));
            assert_eq!(event.topic_key.as_deref(), Some("k7"));
            event.payload["i"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(got, expected);
    assert_quiet(&mut keyed, Duration::from_millis(200)).await;
}

/// Retention while a subscriber reads: 2,000 events, a subscriber takes 5, then the events
/// before the 1,501st are removed. The subscriber goes on with the events it had already
/// read (in order, none skipped), then gets one `Gap` from the first event it had not read
/// to the first event kept, then the kept events in order: never a jump without a gap.
pub async fn gap_while_reading(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("gap-live");
    let mut published = Vec::new();
    for chunk in 0..20 {
        let events = (0..100).map(|i| {
            (
                topic.as_str(),
                photon_core::BatchEvent::new(json!({"i": chunk * 100 + i})),
            )
        });
        for appended in store.publish_batch(events).await.unwrap() {
            published.push(appended.seq);
        }
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let first: Vec<i64> = take_exact(&mut stream, 5)
        .await
        .into_iter()
        .map(|item| ok(item).seq)
        .collect();
    assert_eq!(first, published[..5]);
    let bound = published[1500];
    port.truncate_before(&topic, bound).await.unwrap();
    let mut next = 5;
    let mut gap = None;
    while gap.is_none() || next < 1510 {
        let item = take_exact(&mut stream, 1).await.remove(0);
        match item {
            Ok(event) => {
                assert_eq!(
                    event.seq, published[next],
                    "event {next} expected (gap so far: {gap:?})"
                );
                next += 1;
            }
            Err(PhotonError::Gap { from, to, .. }) => {
                assert!(gap.is_none(), "a second gap {from}..{to} after {gap:?}");
                assert_eq!(
                    (from, to),
                    (published[next], bound),
                    "the gap names what was not read"
                );
                gap = Some((from, to));
                next = 1500;
            }
            Err(other) => panic!("unexpected error {other}"),
        }
        assert!(next <= 2000, "read past the end");
    }
}
