//! Consumer groups (where the capability says so).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use photon_core::{DeliveryStream, GroupRequest, StartAt};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::context::{Context, DEADLINE};

/// What members of one group handled, in handling order: `(member, key, i)`.
type Log = Arc<Mutex<Vec<(usize, String, i64)>>>;

fn join(
    ctx: &Context,
    port: &Arc<dyn photon_core::StoragePort>,
    group: &str,
    member: usize,
    topic: &str,
) -> DeliveryStream {
    port.subscribe_group(GroupRequest {
        group: ctx.subscription(group),
        member: format!("member-{member}"),
        topic: topic.to_owned(),
        start: StartAt::Beginning,
    })
}

/// Publishes events `{"i": 0..count}` round-robin over keys `k0..k{keys-1}`.
async fn publish_keyed(store: &photon_core::EventStore, topic: &str, count: i64, keys: i64) {
    for i in 0..count {
        store
            .publish(
                topic,
                Some(&format!("k{}", i % keys)),
                json!(null),
                json!({"i": i}),
            )
            .await
            .unwrap();
    }
}

/// Handles deliveries until `stop_after` (if any) have been handled, acknowledging each.
fn run_member(
    member: usize,
    mut stream: DeliveryStream,
    log: Log,
    stop_after: Option<usize>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut handled = 0;
        while let Some(item) = stream.next().await {
            let delivery = item.unwrap();
            let record = &delivery.record;
            let body = serde_json::to_value(&record.body).unwrap();
            let i = body["payload"]["i"].as_i64().unwrap();
            log.lock()
                .unwrap()
                .push((member, record.topic_key.clone().unwrap(), i));
            delivery.ack.ack().await.unwrap();
            handled += 1;
            if Some(handled) == stop_after {
                return;
            }
        }
    })
}

async fn wait_for(log: &Log, count: usize) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while log.lock().unwrap().len() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deadline passed with {} of {count} handled",
            log.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Anything beyond `count` would be a duplicate: give it time to show up.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

fn assert_per_key_order(log: &[(usize, String, i64)]) {
    let mut last: HashMap<&str, i64> = HashMap::new();
    for (_, key, i) in log {
        if let Some(previous) = last.insert(key, *i) {
            assert!(previous < *i, "key {key}: {i} handled after {previous}");
        }
    }
}

/// Two groups each receive every event; within a group each event goes to exactly one
/// member, and each key's events are handled in publish order.
pub async fn groups_share_work(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    if !port.capabilities().consumer_groups {
        return;
    }
    let topic = ctx.topic("groups");
    let (blue, red): (Log, Log) = Default::default();
    let mut members = Vec::new();
    for member in 0..2 {
        members.push(run_member(
            member,
            join(&ctx, &port, "blue", member, &topic),
            blue.clone(),
            None,
        ));
    }
    members.push(run_member(
        0,
        join(&ctx, &port, "red", 0, &topic),
        red.clone(),
        None,
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish_keyed(&store, &topic, 400, 20).await;
    wait_for(&blue, 400).await;
    wait_for(&red, 400).await;
    for log in [&blue, &red] {
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 400, "each event handled exactly once per group");
        let unique: HashSet<i64> = log.iter().map(|(_, _, i)| *i).collect();
        assert_eq!(unique.len(), 400);
        assert_per_key_order(&log);
    }
    let shares: BTreeMap<usize, usize> =
        blue.lock()
            .unwrap()
            .iter()
            .fold(BTreeMap::new(), |mut m, (member, _, _)| {
                *m.entry(*member).or_default() += 1;
                m
            });
    assert_eq!(
        shares.len(),
        2,
        "both members of a group get a share: {shares:?}"
    );
    for member in members {
        member.abort();
    }
}

/// A member leaves after 20 events: the other member takes over its share; every event is
/// handled exactly once and key order holds.
pub async fn group_member_leaves(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    if !port.capabilities().consumer_groups {
        return;
    }
    let topic = ctx.topic("handover");
    let log: Log = Default::default();
    let leaver = run_member(0, join(&ctx, &port, "g", 0, &topic), log.clone(), Some(20));
    let stayer = run_member(1, join(&ctx, &port, "g", 1, &topic), log.clone(), None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish_keyed(&store, &topic, 300, 10).await;
    wait_for(&log, 300).await;
    leaver.await.unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 300);
    let unique: HashSet<i64> = log.iter().map(|(_, _, i)| *i).collect();
    assert_eq!(unique.len(), 300);
    assert_eq!(log.iter().filter(|(member, _, _)| *member == 0).count(), 20);
    assert_per_key_order(&log);
    stayer.abort();
}

/// A group's only member handles and acknowledges 40 of 100 events, then leaves. On a newly
/// opened port the group resumes with exactly the other 60: none lost, no acknowledged one
/// handed out again, each key in order (an event given back at the handover may arrive
/// twice in a row).
pub async fn group_resumes_after_restart(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    if !port.capabilities().consumer_groups {
        return;
    }
    let topic = ctx.topic("group-resume");
    publish_keyed(&store, &topic, 100, 10).await;
    let first: Log = Default::default();
    run_member(
        0,
        join(&ctx, &port, "resume", 0, &topic),
        first.clone(),
        Some(40),
    )
    .await
    .unwrap();
    // The member left: the group's position is flushed behind its last acknowledgement.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reopened = ctx.store().await.port().clone();
    let second: Log = Default::default();
    let member = run_member(
        1,
        join(&ctx, &reopened, "resume", 1, &topic),
        second.clone(),
        None,
    );
    wait_for(&second, 60).await;
    member.abort();
    let first: HashSet<i64> = first.lock().unwrap().iter().map(|(_, _, i)| *i).collect();
    assert_eq!(first.len(), 40);
    // A broker may hand the event a key had in flight at the handover to the new member
    // twice in a row (it was given back by the member that left); nothing else repeats.
    let mut by_key: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (_, key, i) in second.lock().unwrap().iter() {
        by_key.entry(key.clone()).or_default().push(*i);
    }
    let mut resumed = Vec::new();
    for (key, mut seen) in by_key {
        if seen.len() > 1 && seen[0] == seen[1] {
            seen.remove(0);
        }
        assert!(
            seen.windows(2).all(|pair| pair[0] < pair[1]),
            "key {key}: {seen:?} repeats or is out of order"
        );
        resumed.extend(seen);
    }
    let resumed_set: HashSet<i64> = resumed.iter().copied().collect();
    assert_eq!(resumed.len(), 60, "exactly the unacknowledged events");
    assert_eq!(resumed_set.len(), 60);
    assert!(
        first.is_disjoint(&resumed_set),
        "an acknowledged event came back"
    );
    assert_eq!(
        first.union(&resumed_set).copied().collect::<HashSet<_>>(),
        (0..100).collect::<HashSet<_>>()
    );
}
