//! Consumer groups (registered with the `consumer_groups` capability). Members join through
//! separate port instances (separate connections, as separate processes would have); the
//! scenarios about leases and fencing use the port's group primitive (`group_coordination`),
//! which every port claiming `consumer_groups` provides.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use photon_core::group::{
    owner_name, partition_of, Claim, GroupOptions, GroupScope, HeldLease, DEFAULT_PARTITIONS,
};
use photon_core::{DeliveryStream, GroupCoordination, GroupRequest, PhotonError, StartAt};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::context::{assert_quiet, eventually, take_exact, Context, DEADLINE};
use crate::scenarios::{publish_keyed, publish_over};

/// What members of one group handled, in handling order: `(member, key, i)`.
type Log = Arc<Mutex<Vec<(usize, String, i64)>>>;

/// The port's group primitive, which a port claiming `consumer_groups` must provide.
fn coordination(port: &Arc<dyn photon_core::StoragePort>) -> Arc<dyn GroupCoordination> {
    port.group_coordination().unwrap_or_else(|| {
        panic!(
            "{} claims consumer_groups, so it must provide group_coordination (the group protocol of photon_core::group)",
            port.label()
        )
    })
}

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

/// The partition count of `topic` for a group: the store's shards where it dictates them.
fn partition_count(port: &Arc<dyn photon_core::StoragePort>, topic: &str) -> u32 {
    coordination(port)
        .topic_partitions(topic)
        .unwrap_or(DEFAULT_PARTITIONS)
}

/// Waits until the partitions of `group` (as [`join`] names it) on `topic` are split
/// between `members` (their indexes in [`join`]): every partition under a live lease of one
/// of them, each with at least its even share. Returns each member's partitions, in the
/// order of `members`. A scenario publishes only after this, so that what it asserts
/// about shares does not depend on how fast the members joined.
///
/// # Panics
/// When the split is not reached within [`DEADLINE`].
async fn split_between(
    ctx: &Context,
    port: &Arc<dyn photon_core::StoragePort>,
    group: &str,
    topic: &str,
    members: &[usize],
) -> Vec<HashSet<u32>> {
    let coordination = coordination(port);
    let scope = GroupScope::new(ctx.subscription(group), topic);
    let partitions = partition_count(port, topic);
    let fair = partitions as usize / members.len();
    let what = format!("group {group} on {topic}: partitions split between members {members:?}");
    eventually(&what, || async {
        let leases = coordination.leases(&scope).await.unwrap();
        let owned: Vec<HashSet<u32>> = members
            .iter()
            .map(|member| {
                let name = format!("member-{member}");
                leases
                    .iter()
                    .filter(|lease| lease.live && owner_name(&lease.owner) == name)
                    .map(|lease| lease.partition)
                    .collect()
            })
            .collect();
        let held: usize = owned.iter().map(HashSet::len).sum();
        if held == partitions as usize && owned.iter().all(|own| own.len() >= fair) {
            Ok(owned)
        } else {
            Err(format!("{leases:?}"))
        }
    })
    .await
}

/// Waits until no lease of `group` on `topic` is live: the members left, each after
/// committing its position.
///
/// # Panics
/// When a lease is still live after [`DEADLINE`].
async fn all_released(
    ctx: &Context,
    port: &Arc<dyn photon_core::StoragePort>,
    group: &str,
    topic: &str,
) {
    let coordination = coordination(port);
    let scope = GroupScope::new(ctx.subscription(group), topic);
    let what = format!("group {group} on {topic}: every lease released after the members left");
    eventually(&what, || async {
        let leases = coordination.leases(&scope).await.unwrap();
        if leases.iter().all(|lease| !lease.live) {
            Ok(())
        } else {
            Err(format!("{leases:?}"))
        }
    })
    .await;
}

/// `per_member` key names for each of the given partition sets, each key living in its
/// set's partitions: so every member of a split has events of its own.
fn keys_in(owned: &[HashSet<u32>], partitions: u32, per_member: usize) -> Vec<String> {
    let mut keys = Vec::new();
    for partitions_of_member in owned {
        let before = keys.len();
        keys.extend(
            (0..100_000)
                .map(|j| format!("k{j}"))
                .filter(|key| {
                    partitions_of_member.contains(&partition_of(Some(key), 0, partitions))
                })
                .take(per_member),
        );
        assert_eq!(
            keys.len() - before,
            per_member,
            "keys for {partitions_of_member:?}"
        );
    }
    keys
}

/// Waits for a member's task (one that stops after a number of events) to finish.
///
/// # Panics
/// When it does not finish within [`DEADLINE`] or panicked.
async fn finished(member: JoinHandle<()>, what: &str) {
    match tokio::time::timeout(DEADLINE, member).await {
        Ok(result) => result.unwrap(),
        Err(_) => panic!("{what} did not finish within {DEADLINE:?}"),
    }
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
    let topic = ctx.topic("groups");
    let (blue, red): (Log, Log) = Default::default();
    let mut members = Vec::new();
    for member in 0..2 {
        let own_port = ctx.port().await;
        members.push(run_member(
            member,
            join(&ctx, &own_port, "blue", member, &topic),
            blue.clone(),
            None,
        ));
    }
    let red_port = ctx.port().await;
    members.push(run_member(
        0,
        join(&ctx, &red_port, "red", 0, &topic),
        red.clone(),
        None,
    ));
    let blue_split = split_between(&ctx, &red_port, "blue", &topic, &[0, 1]).await;
    split_between(&ctx, &red_port, "red", &topic, &[0]).await;
    let keys = keys_in(&blue_split, partition_count(&red_port, &topic), 10);
    publish_over(&store, &topic, 0..400, &keys).await;
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
    let topic = ctx.topic("handover");
    let log: Log = Default::default();
    let leaver_port = ctx.port().await;
    let leaver = run_member(
        0,
        join(&ctx, &leaver_port, "g", 0, &topic),
        log.clone(),
        Some(20),
    );
    let stayer = run_member(1, join(&ctx, &port, "g", 1, &topic), log.clone(), None);
    // Half the keys live in the leaver's partitions: it has far more than its 20 to handle.
    let split = split_between(&ctx, &port, "g", &topic, &[0, 1]).await;
    let keys = keys_in(&split, partition_count(&port, &topic), 5);
    publish_over(&store, &topic, 0..300, &keys).await;
    wait_for(&log, 300).await;
    finished(leaver, "the member leaving after 20 events").await;
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
    let topic = ctx.topic("group-resume");
    publish_keyed(&store, &topic, 0..100, 10).await;
    let first: Log = Default::default();
    run_member(
        0,
        join(&ctx, &port, "resume", 0, &topic),
        first.clone(),
        Some(40),
    )
    .await
    .unwrap();
    // The member left: its leases go once the group's position is committed behind its
    // last acknowledgement.
    all_released(&ctx, &port, "resume", &topic).await;
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

/// Two members on separate ports share a topic; one leaves (drops its stream) and events
/// published from then on are all handled by the other, which takes the leaver's
/// partitions over at once (before their leases would have expired).
pub async fn group_leave_hands_over_quickly(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("leave-fast");
    let log: Log = Default::default();
    let leaver_port = ctx.port().await;
    let leaver = run_member(
        0,
        join(&ctx, &leaver_port, "g", 0, &topic),
        log.clone(),
        None,
    );
    let stayer = run_member(1, join(&ctx, &port, "g", 1, &topic), log.clone(), None);
    let split = split_between(&ctx, &port, "g", &topic, &[0, 1]).await;
    let keys = keys_in(&split, partition_count(&port, &topic), 8);
    publish_over(&store, &topic, 0..200, &keys).await;
    wait_for(&log, 200).await;
    let shares: HashSet<usize> = log.lock().unwrap().iter().map(|(m, _, _)| *m).collect();
    assert_eq!(shares.len(), 2, "both members had a share before the leave");
    leaver.abort();
    let left = tokio::time::Instant::now();
    publish_over(&store, &topic, 200..300, &keys).await;
    let deadline = left + DEADLINE;
    while log.lock().unwrap().len() < 300 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "handover never completed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let handover = left.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 300, "no event handled twice");
    assert!(
        log[200..].iter().all(|(member, _, _)| *member == 1),
        "only the stayer handles events after the leave"
    );
    assert_per_key_order(&log);
    // A member that leaves releases its leases at once; without that the stayer would wait
    // for them to expire (the lease, 5 s, from the last renewal). The time includes
    // publishing the 100 events, which a loaded machine slows down, so the bound is the
    // lease rather than a guess at the machine's speed.
    assert!(
        handover < photon_core::group::DEFAULT_LEASE,
        "the leave took {handover:?} to hand over: the stayer waited for the leases to expire"
    );
    stayer.abort();
}

/// Fencing through the port's group primitive: a member whose partition lease moved to
/// another owner hands out no more of that partition's events, and both its late
/// acknowledgement and its late checkpoint commit are refused; the new owner's commit
/// stands.
pub async fn group_lost_lease_is_fenced(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let (own, other) = (coordination(&port), coordination(&ctx.port().await));
    let topic = ctx.topic("fenced");
    let group = ctx.subscription("fenced");
    let scope = GroupScope::new(&group, &topic);
    let first = store
        .publish(&topic, Some("k0"), json!(null), json!({"i": 0}))
        .await
        .unwrap();
    // A store that splits the topic itself (broker shards) dictates the partition count.
    let partitions = other.topic_partitions(&topic).unwrap_or(DEFAULT_PARTITIONS);
    let partition = partition_of(Some("k0"), first.seq, partitions);
    let member_lease = Duration::from_millis(1500);
    let options = GroupOptions::new("a")
        .lease(member_lease)
        .heartbeat(Duration::from_millis(100));
    let mut member = photon_core::raw::group::join(
        port.clone(),
        own,
        GroupRequest {
            group: group.clone(),
            member: "a".into(),
            topic: topic.clone(),
            start: StartAt::Beginning,
        },
        options,
    );
    let delivery = take_exact(&mut member, 1).await.remove(0).unwrap();
    assert_eq!(delivery.record.seq, first.seq);
    let held = other
        .leases(&scope)
        .await
        .unwrap()
        .into_iter()
        .find(|lease| lease.partition == partition)
        .expect("the member holds the partition's lease");
    assert!(held.live);
    // The lease moves to an intruder: released under the holder's token, then taken. The
    // member may take a free partition back between the two (its next rebalance), so the
    // move is repeated, bounded, until the intruder holds it.
    let mut current = (held.owner.clone(), held.epoch);
    let mut intruder_epoch = None;
    let mut retaken = false;
    for _ in 0..50 {
        other
            .release(&scope, lease(partition, &current.0, current.1))
            .await
            .unwrap();
        let claim = Claim {
            partition,
            owner: "intruder",
            ttl: Duration::from_secs(60),
        };
        if let Some(epoch) = other.acquire(&scope, claim).await.unwrap() {
            assert_eq!(
                epoch,
                current.1 + 1,
                "an acquisition raises the epoch by one"
            );
            intruder_epoch = Some((epoch, tokio::time::Instant::now()));
            break;
        }
        let holder = other
            .leases(&scope)
            .await
            .unwrap()
            .into_iter()
            .find(|lease| lease.partition == partition && lease.live)
            .expect("a released lease the intruder could not take was taken back");
        current = (holder.owner, holder.epoch);
        retaken = true;
    }
    let (intruder_epoch, intruded) =
        intruder_epoch.expect("the intruder takes the lease within 50 tries");
    // The member's next renewal (within one heartbeat) finds the lease gone; the delivery
    // stops being current then.
    eventually("the member gives up the moved lease", || async {
        if delivery.ack.current() {
            Err("the delivery is still current".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    match delivery.ack.ack().await {
        Err(PhotonError::Fenced {
            partition: p,
            epoch,
            ..
        }) => {
            assert_eq!((p, epoch), (partition, held.epoch));
        }
        other => panic!("a late ack must be refused, got {other:?}"),
    }
    match other
        .commit(&scope, lease(partition, &held.owner, held.epoch), first.seq)
        .await
    {
        Err(PhotonError::Fenced { .. }) => {}
        other => panic!("a late commit must be refused, got {other:?}"),
    }
    assert_eq!(
        other.load_checkpoint(&scope, partition).await.unwrap(),
        None
    );
    if retaken {
        // An incarnation of the member took the free lease back during the move and has
        // not necessarily renewed since: it counts the partition as its own until its
        // local deadline, at most one lease after the intruder took it.
        tokio::time::sleep_until(intruded + member_lease).await;
    }
    store
        .publish(&topic, Some("k0"), json!(null), json!({"i": 1}))
        .await
        .unwrap();
    // Nothing of the partition comes any more, except that the incarnation which took the
    // lease back may have handed the first event out again before it lost it in turn.
    let quiet_until = tokio::time::Instant::now() + Duration::from_millis(800);
    while let Ok(Some(item)) = tokio::time::timeout_at(quiet_until, member.next()).await {
        let seq = item.map(|delivery| delivery.record.seq);
        assert!(
            retaken && matches!(seq, Ok(seq) if seq == first.seq),
            "expected no more events from the moved partition, got {seq:?}"
        );
    }
    other
        .commit(
            &scope,
            lease(partition, "intruder", intruder_epoch),
            first.seq,
        )
        .await
        .unwrap();
    assert_eq!(
        other.load_checkpoint(&scope, partition).await.unwrap(),
        Some(first.seq)
    );
}

/// Read-ahead stays bounded while one delivery stays unacknowledged: with a read-ahead of
/// 16 on one partition, a member hands out exactly 16 events while the first is held (the
/// other 15 acknowledged), and the rest once it is acknowledged. A restart then resumes
/// after all of them.
pub async fn group_read_ahead_bounded(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let coordination = coordination(&port);
    let topic = ctx.topic("read-ahead");
    let group = ctx.subscription("read-ahead");
    // One key: all events in one partition also where the store dictates the partition
    // count (broker shards), so the bound applies to all of them.
    publish_keyed(&store, &topic, 0..100, 1).await;
    let options = || {
        let mut options = GroupOptions::new("solo")
            .partitions(1)
            .heartbeat(Duration::from_millis(100));
        options.read_ahead = 16;
        options
    };
    let request = GroupRequest {
        group: group.clone(),
        member: "solo".into(),
        topic: topic.clone(),
        start: StartAt::Beginning,
    };
    let mut member = photon_core::raw::group::join(
        port.clone(),
        coordination.clone(),
        request.clone(),
        options(),
    );
    let mut first_batch = take_exact(&mut member, 16).await;
    let held = first_batch.remove(0).unwrap();
    for delivery in &first_batch {
        delivery.as_ref().unwrap().ack.ack().await.unwrap();
    }
    assert_quiet(&mut member, Duration::from_millis(500)).await;
    held.ack.ack().await.unwrap();
    let mut seqs: Vec<i64> = std::iter::once(held.record.seq)
        .chain(first_batch.iter().map(|d| d.as_ref().unwrap().record.seq))
        .collect();
    for _ in 0..84 {
        let delivery = take_exact(&mut member, 1).await.remove(0).unwrap();
        seqs.push(delivery.record.seq);
        delivery.ack.ack().await.unwrap();
    }
    assert_eq!(seqs.len(), 100);
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "one partition in seq order"
    );
    member.leave().await;
    let mut again =
        photon_core::raw::group::join(ctx.port().await, coordination, request, options());
    assert_quiet(&mut again, Duration::from_millis(800)).await;
}

/// What the members of one group handled, in handling order: `(member, key, seq)`.
type Handled = Arc<Mutex<Vec<(usize, String, i64)>>>;

/// Handles deliveries as `member`, acknowledging each after `pause`, until `stop_after`
/// (if any) of this member's were handled.
fn run_paced_member(
    member: usize,
    mut stream: DeliveryStream,
    handled: Handled,
    pause: Duration,
    stop_after: Option<usize>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut count = 0;
        while let Some(item) = stream.next().await {
            let delivery = item.unwrap();
            tokio::time::sleep(pause).await;
            let key = delivery.record.topic_key.clone().unwrap();
            // Logged before the acknowledgement, so that the log's order is the handling
            // order also across a handover.
            handled
                .lock()
                .unwrap()
                .push((member, key, delivery.record.seq));
            delivery.ack.ack().await.unwrap();
            count += 1;
            if Some(count) == stop_after {
                return;
            }
        }
    })
}

/// A member reads the topic once for all the partitions it owns: it owns half of them, its
/// reader passes the whole topic, then it takes over the other half when the slow second
/// member leaves after 30 events. Each partition's events are handled exactly once, in seq
/// order, across both members: none repeated, none lost.
pub async fn group_member_takes_over_partitions(ctx: Context) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let coordination = coordination(&port);
    let topic = ctx.topic("takeover");
    let handled: Handled = Arc::default();
    let stayer = run_paced_member(
        0,
        join(&ctx, &port, "g", 0, &topic),
        handled.clone(),
        Duration::ZERO,
        None,
    );
    let leaver_port = ctx.port().await;
    let leaver = run_paced_member(
        1,
        join(&ctx, &leaver_port, "g", 1, &topic),
        handled.clone(),
        Duration::from_millis(20),
        Some(30),
    );
    // Both members split the partitions before anything is published, and half the keys
    // live in the leaver's: it leaves with events of its partitions still to hand over.
    let split = split_between(&ctx, &port, "g", &topic, &[0, 1]).await;
    let keys = keys_in(&split, partition_count(&port, &topic), 8);
    let mut published: Vec<(String, i64)> = Vec::new();
    for i in 0..400_usize {
        let key = keys[i % keys.len()].clone();
        let appended = store
            .publish(&topic, Some(&key), json!(null), json!({"i": i}))
            .await
            .unwrap();
        published.push((key, appended.seq));
    }
    finished(leaver, "the member leaving after 30 events").await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while handled.lock().unwrap().len() < 400 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deadline passed with {} of 400 handled",
            handled.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Anything beyond 400 would be a repeat: give it time to show up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stayer.abort();
    let handled = handled.lock().unwrap().clone();
    assert_eq!(handled.len(), 400, "each event handled exactly once");
    assert_eq!(handled.iter().filter(|(m, _, _)| *m == 1).count(), 30);
    let partitions = coordination
        .topic_partitions(&topic)
        .unwrap_or(DEFAULT_PARTITIONS);
    let partition = |key: &str, seq: i64| partition_of(Some(key), seq, partitions);
    let mut expected: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    for (key, seq) in &published {
        expected.entry(partition(key, *seq)).or_default().push(*seq);
    }
    let mut actual: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    let mut members: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (member, key, seq) in &handled {
        actual.entry(partition(key, *seq)).or_default().push(*seq);
        let owners = members.entry(partition(key, *seq)).or_default();
        if owners.last() != Some(member) {
            owners.push(*member);
        }
    }
    assert_eq!(
        actual, expected,
        "each partition's events handled exactly once, in seq order"
    );
    assert!(
        members.values().any(|owners| owners == &[1, 0]),
        "the stayer took over a partition of the leaver: {members:?}"
    );
    assert!(
        members.values().any(|owners| owners == &[0]),
        "the stayer kept its own partitions: {members:?}"
    );
}

/// A group moves to another partition count without losing an event, both ways (16 -> 8
/// and 8 -> 16) and with uneven progress: the first member acknowledges only the events of
/// its even partitions. A member started with the new count meanwhile owns nothing and
/// keeps running (it neither fails nor stops the member of the stored count); once that
/// member left, it moves the group to its count and is handed every event the first one
/// did not acknowledge, each key in seq order, under partitions of the new layout.
/// (A store that dictates the partition count, broker shards, has nothing to change.)
pub async fn group_partitions_change(ctx: Context) {
    for (from, to) in [(16, 8), (8, 16)] {
        change_partitions(&ctx, from, to).await;
    }
}

async fn change_partitions(ctx: &Context, from: u32, to: u32) {
    let store = ctx.store().await;
    let port = store.port().clone();
    let coordination = coordination(&port);
    let topic = ctx.topic(&format!("resize-{from}-{to}"));
    if coordination.topic_partitions(&topic).is_some() {
        return;
    }
    let group = ctx.subscription(&format!("resize-{from}-{to}"));
    let mut published = Vec::new();
    for i in 0..800 {
        let key = format!("k{}", i % 40);
        let appended = store
            .publish(&topic, Some(&key), json!(null), json!({"i": i}))
            .await
            .unwrap();
        published.push(appended.seq);
    }
    let request = |member: &str| GroupRequest {
        group: group.clone(),
        member: member.to_owned(),
        topic: topic.clone(),
        start: StartAt::Beginning,
    };
    let options = |member: &str, partitions: u32| {
        GroupOptions::new(member)
            .partitions(partitions)
            .lease(Duration::from_secs(1))
            .heartbeat(Duration::from_millis(100))
    };
    let mut first = photon_core::raw::group::join(
        port.clone(),
        coordination.clone(),
        request("first"),
        options("first", from),
    );
    let mut acknowledged = HashSet::new();
    for item in take_exact(&mut first, 800).await {
        let delivery = item.unwrap();
        let record = &delivery.record;
        if partition_of(record.topic_key.as_deref(), record.seq, from).is_multiple_of(2) {
            delivery.ack.ack().await.unwrap();
            acknowledged.insert(record.seq);
        }
    }
    assert_eq!(
        acknowledged.len(),
        400,
        "{from} -> {to}: half the partitions acknowledged"
    );
    let second_port = ctx.port().await;
    let mut second = photon_core::raw::group::join(
        second_port.clone(),
        coordination.clone(),
        request("second"),
        options("second", to),
    );
    // The member of the stored count is alive: the newcomer waits, owning nothing.
    assert_quiet(&mut second, Duration::from_millis(600)).await;
    first.leave().await;
    let expected: HashSet<i64> = published
        .iter()
        .copied()
        .filter(|seq| !acknowledged.contains(seq))
        .collect();
    let mut handed: Vec<(String, i64)> = Vec::new();
    let mut seen = HashSet::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !expected.iter().all(|seq| seen.contains(seq)) {
        let item = tokio::time::timeout_at(deadline, second.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{from} -> {to}: {} of {} unacknowledged events handed out by the deadline",
                    expected.iter().filter(|seq| seen.contains(*seq)).count(),
                    expected.len()
                )
            })
            .expect("the stream stays open");
        let delivery = item.unwrap();
        let ownership = delivery.ack.ownership().unwrap();
        assert_eq!(
            ownership.partition >> 16,
            1,
            "{from} -> {to}: handed out under a partition of the new layout"
        );
        handed.push((
            delivery.record.topic_key.clone().unwrap(),
            delivery.record.seq,
        ));
        seen.insert(delivery.record.seq);
        delivery.ack.ack().await.unwrap();
    }
    let mut last: HashMap<&str, i64> = HashMap::new();
    for (key, seq) in &handed {
        if let Some(previous) = last.insert(key, *seq) {
            assert!(
                previous < *seq,
                "{from} -> {to}: key {key} went from {previous} to {seq}"
            );
        }
    }
    second.leave().await;
}

fn lease(partition: u32, owner: &str, epoch: u64) -> HeldLease<'_> {
    HeldLease {
        partition,
        owner,
        epoch,
    }
}
