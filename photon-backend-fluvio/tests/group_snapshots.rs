//! Snapshots of the group coordination log: a port instance started after many commands
//! reads the newest snapshot and only the records after it, and sees the state of the
//! instance that applied them all; records that retention removed with no snapshot
//! covering them make calls fail with `PhotonError::Unavailable` naming the topic and the
//! offsets, instead of a silently empty state, until an instance that applied them writes
//! a snapshot (here the one due after 10 minutes of log time).
//!
//! The commands are written straight to the coordination topic (the port's own
//! serialization, batched): through the API each costs a round trip.

mod common;

use std::time::{Duration, Instant};

use common::FluvioFactory;
use fluvio::{Fluvio, FluvioClusterConfig, RecordKey, TopicProducerConfigBuilder};
use photon_backend_fluvio::testing::{
    acquire_record, commit_record, groups_topic_name, heartbeat_record, renew_many_record,
    GroupLogStats, GROUP_SNAPSHOT_EVERY, GROUP_SNAPSHOT_STAGGER,
};
use photon_backend_fluvio::FluvioStoragePort;
use photon_core::group::{Claim, GroupScope, Heartbeat};
use photon_core::{PhotonError, StoragePort};

const GROUP: &str = "busy";
const TOPIC: &str = "orders";
const MEMBERS: u32 = 4;
const PARTITIONS: u32 = 8;
/// Leases and heartbeats outlive the test: the state compared does not change with time.
const TTL_MS: i64 = 3_600_000;

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The `i`-th command of a busy group of 4 members and 8 partitions: each member in turn
/// heartbeats, renews its 2 leases in one command and commits each of them; the first 8
/// commands take the leases. Returns the record and the last seq committed per partition.
fn command(i: u64, base_ms: i64) -> Vec<u8> {
    let at_ms = base_ms + i64::try_from(i).unwrap();
    let owner = |member: u32| format!("m{member}#1");
    if i < u64::from(PARTITIONS) {
        let partition = u32::try_from(i).unwrap();
        return acquire_record(
            at_ms,
            GROUP,
            TOPIC,
            partition,
            &owner(partition % MEMBERS),
            TTL_MS,
        );
    }
    let step = i - u64::from(PARTITIONS);
    let round = step / 4;
    let member = u32::try_from(round % u64::from(MEMBERS)).unwrap();
    let mine = [member, member + MEMBERS];
    match step % 4 {
        0 => heartbeat_record(
            at_ms,
            GROUP,
            TOPIC,
            &format!("m{member}"),
            &owner(member),
            TTL_MS,
        ),
        1 => renew_many_record(
            at_ms,
            GROUP,
            TOPIC,
            &owner(member),
            &[(mine[0], 1), (mine[1], 1)],
            TTL_MS,
        ),
        half => commit_record(
            at_ms,
            GROUP,
            TOPIC,
            mine[usize::try_from(half - 2).unwrap()],
            &owner(member),
            1,
            i64::try_from(i).unwrap(),
        ),
    }
}

async fn raw_client(factory: &FluvioFactory) -> Fluvio {
    Fluvio::connect_with_config(&FluvioClusterConfig::new(factory.endpoint.clone()))
        .await
        .unwrap()
}

/// Writes commands `from..to` to the coordination topic in batches, in order; returns how
/// many were written before `stop_after` passed.
async fn write_commands(
    client: &Fluvio,
    prefix: &str,
    from: u64,
    to: u64,
    base_ms: i64,
    stop_after: Duration,
) -> u64 {
    let config = TopicProducerConfigBuilder::default()
        .batch_size(512 * 1024)
        .linger(Duration::from_millis(5))
        .build()
        .unwrap();
    let producer = client
        .topic_producer_with_config(groups_topic_name(prefix), config)
        .await
        .unwrap();
    let started = Instant::now();
    let mut i = from;
    while i < to && started.elapsed() < stop_after {
        let end = (i + 10_000).min(to);
        let mut acks = Vec::new();
        for n in i..end {
            acks.push(
                producer
                    .send(RecordKey::NULL, command(n, base_ms))
                    .await
                    .unwrap(),
            );
        }
        producer.flush().await.unwrap();
        for ack in acks {
            ack.wait().await.unwrap();
        }
        i = end;
    }
    i
}

/// Waits (bounded) until `port` has applied the log up to `end` and writes no snapshot.
async fn settled(port: &FluvioStoragePort, end: i64, within: Duration) -> GroupLogStats {
    let deadline = Instant::now() + within;
    loop {
        let stats = port.group_log_stats();
        if stats.next_offset >= end && !stats.snapshot_writing {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "not applied to {end} within {within:?}: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The state a port instance sees: members, leases and each partition's checkpoint.
async fn state_seen(port: &FluvioStoragePort) -> String {
    let coordination = port.group_coordination().unwrap();
    let scope = GroupScope::new(GROUP, TOPIC);
    let members = coordination.members(&scope).await.unwrap();
    let leases = coordination.leases(&scope).await.unwrap();
    let mut checkpoints = Vec::new();
    for partition in 0..PARTITIONS {
        checkpoints.push(
            coordination
                .load_checkpoint(&scope, partition)
                .await
                .unwrap(),
        );
    }
    format!("{members:?}\n{leases:?}\n{checkpoints:?}")
}

/// Starts `port`'s reader (an empty group: nothing to apply yet).
async fn start_reader(port: &FluvioStoragePort) {
    let coordination = port.group_coordination().unwrap();
    coordination
        .members(&GroupScope::new(GROUP, TOPIC))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_catches_up_from_a_snapshot() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    const COMMANDS: u64 = 30_000;
    // Two running instances: both may write snapshots, racing or not.
    let writer = factory.port().await.unwrap();
    let other = factory.port().await.unwrap();
    start_reader(&writer).await;
    start_reader(&other).await;
    let client = raw_client(&factory).await;
    let base_ms = now_ms();
    let written = write_commands(
        &client,
        &factory.prefix,
        0,
        COMMANDS,
        base_ms,
        Duration::MAX,
    )
    .await;
    assert_eq!(written, COMMANDS);
    let burst = settled(
        &writer,
        i64::try_from(COMMANDS).unwrap(),
        Duration::from_secs(120),
    )
    .await;
    let burst_beside = settled(
        &other,
        i64::try_from(COMMANDS).unwrap(),
        Duration::from_secs(120),
    )
    .await;
    assert!(
        burst.snapshots_written + burst_beside.snapshots_written >= 1,
        "30,000 commands, snapshots every {GROUP_SNAPSHOT_EVERY}: {burst:?} {burst_beside:?}"
    );
    // Then fewer commands than make a snapshot due: the joining instance must apply
    // exactly the records after the newest snapshot, some of them, and not more than the
    // bound.
    let newest = burst.newest_snapshot.max(burst_beside.newest_snapshot);
    let behind = i64::try_from(COMMANDS).unwrap() - newest;
    let extra = u64::try_from((GROUP_SNAPSHOT_EVERY - 1 - behind).clamp(0, 3_000)).unwrap();
    let written = write_commands(
        &client,
        &factory.prefix,
        COMMANDS,
        COMMANDS + extra,
        base_ms,
        Duration::MAX,
    )
    .await;
    let end = i64::try_from(written).unwrap();
    let before = settled(&writer, end, Duration::from_secs(120)).await;
    let beside = settled(&other, end, Duration::from_secs(120)).await;
    println!("other {beside:?}");
    assert_eq!(
        before.newest_snapshot.max(beside.newest_snapshot),
        newest,
        "no snapshot due after the burst: {before:?} {beside:?}"
    );
    let expected = state_seen(&writer).await;
    assert_eq!(state_seen(&other).await, expected);

    let joining = factory.port().await.unwrap();
    let seen = state_seen(&joining).await;
    let stats = joining.group_log_stats();
    println!("writer {before:?}\njoining {stats:?}");
    let loaded = stats.loaded_snapshot.expect("started from a snapshot");
    assert_eq!(loaded, before.newest_snapshot.max(beside.newest_snapshot));
    let bound = u64::try_from(GROUP_SNAPSHOT_EVERY + GROUP_SNAPSHOT_STAGGER).unwrap();
    assert!(
        stats.applied_records <= bound,
        "applied {} records after the snapshot at {loaded}, bound {bound}",
        stats.applied_records
    );
    assert_eq!(stats.applied_records, u64::try_from(end - loaded).unwrap());
    assert!(stats.applied_records > 0, "{stats:?}");
    assert_eq!(seen, expected);
    assert!(seen.contains("m3"), "{seen}");

    // The joining instance goes on from there: its commands are decided as everywhere.
    let coordination = joining.group_coordination().unwrap();
    let scope = GroupScope::new(GROUP, TOPIC);
    let taken = coordination.acquire(&scope, late_claim()).await.unwrap();
    assert_eq!(taken, None, "partition 0 is held by m0#1");
    let members = coordination
        .heartbeat(&scope, beat("late", "late#1"))
        .await
        .unwrap();
    assert_eq!(members.len(), 5, "{members:?}");
    let on_writer = writer
        .group_coordination()
        .unwrap()
        .members(&scope)
        .await
        .unwrap();
    assert_eq!(on_writer, members);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_removed_before_any_snapshot_are_reported() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    // The coordination topic is made beforehand with 1 KiB segments and 10 s retention,
    // so that its first records go within the test; the port finds it and uses it.
    let name = groups_topic_name(&factory.prefix);
    common::create_expiring_topic(&factory, name.clone()).await;

    let first = factory.port().await.unwrap();
    let coordination = first.group_coordination().unwrap();
    let scope = GroupScope::new(GROUP, TOPIC);
    for _ in 0..40 {
        coordination
            .heartbeat(&scope, beat("m0", "m0#1"))
            .await
            .unwrap();
    }
    // Wait (bounded) until the oldest segments are gone.
    let client = raw_client(&factory).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut stream = client
            .consumer_with_config(
                fluvio::consumer::ConsumerConfigExtBuilder::default()
                    .topic(name.clone())
                    .partition(0)
                    .offset_start(fluvio::Offset::beginning())
                    .disable_continuous(true)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
        use futures::StreamExt;
        let head = stream.next().await.unwrap().unwrap().offset();
        if head > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no segment removed within 60 s");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let late = factory.port().await.unwrap();
    let err = late
        .group_coordination()
        .unwrap()
        .members(&scope)
        .await
        .unwrap_err();
    let PhotonError::Unavailable { message, .. } = &err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert!(message.contains(&name), "{message}");
    assert!(message.contains("records 0.."), "{message}");
    // Commands are refused too: nothing is decided on a state known to be incomplete.
    let refused = late
        .group_coordination()
        .unwrap()
        .acquire(&scope, late_claim())
        .await;
    assert!(
        matches!(refused, Err(PhotonError::Unavailable { .. })),
        "{refused:?}"
    );
    // The instance that applied everything still works.
    assert_eq!(coordination.members(&scope).await.unwrap().len(), 1);

    // A command 11 minutes later on the log clock makes the first instance write a
    // snapshot (10 minutes of log time since it started); the late instance finds it at
    // its next retry and goes on from there, with the same state.
    let producer = client.topic_producer(name.clone()).await.unwrap();
    let later = heartbeat_record(now_ms() + 660_000, GROUP, TOPIC, "m1", "m1#1", TTL_MS);
    producer
        .send(RecordKey::NULL, later)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match late.group_coordination().unwrap().members(&scope).await {
            Ok(_) => break,
            Err(PhotonError::Unavailable { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("the late instance did not recover within 30 s: {err}"),
        }
    }
    let stats = late.group_log_stats();
    assert!(
        first.group_log_stats().snapshots_written >= 1,
        "{:?}",
        first.group_log_stats()
    );
    assert!(stats.loaded_snapshot.is_some(), "{stats:?}");
    assert_eq!(state_seen(&late).await, state_seen(&first).await);
}

/// Catch-up time of a fresh instance after as many commands as can be written in about a
/// minute (`PHOTON_BENCH_GROUP_COMMANDS`, default 2,000,000, and at most
/// `PHOTON_BENCH_GROUP_SECONDS`, default 90): a week of a busy group is tens of millions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: prints the catch-up figure"]
async fn catch_up_after_a_long_log() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let wanted: u64 = std::env::var("PHOTON_BENCH_GROUP_COMMANDS")
        .ok()
        .map_or(2_000_000, |v| v.parse().unwrap());
    let seconds: u64 = std::env::var("PHOTON_BENCH_GROUP_SECONDS")
        .ok()
        .map_or(90, |v| v.parse().unwrap());
    let writer = factory.port().await.unwrap();
    start_reader(&writer).await;
    let client = raw_client(&factory).await;
    let started = Instant::now();
    let written = write_commands(
        &client,
        &factory.prefix,
        0,
        wanted,
        now_ms(),
        Duration::from_secs(seconds),
    )
    .await;
    let write_time = started.elapsed();
    let end = i64::try_from(written).unwrap();
    let applied = settled(&writer, end, Duration::from_secs(600)).await;
    let apply_time = started.elapsed();

    let started = Instant::now();
    let joining = factory.port().await.unwrap();
    let connect_time = started.elapsed();
    let seen = state_seen(&joining).await;
    let catch_up = started.elapsed() - connect_time;
    let stats = joining.group_log_stats();
    assert_eq!(seen, state_seen(&writer).await);
    let bound = u64::try_from(GROUP_SNAPSHOT_EVERY + GROUP_SNAPSHOT_STAGGER).unwrap();
    assert!(stats.applied_records <= bound, "{stats:?}");
    let rate = written as f64 / apply_time.as_secs_f64();
    println!(
        "group log: {written} commands written in {write_time:.1?}, applied by the running instance in {apply_time:.1?} ({rate:.0} records/s, {} snapshots written)",
        applied.snapshots_written
    );
    println!(
        "fresh instance: connect {connect_time:.1?}, catch-up (snapshot at {:?} + {} records, then members, leases and 8 checkpoints) {catch_up:.1?}; a full replay at that rate would take {:.1} s",
        stats.loaded_snapshot,
        stats.applied_records,
        written as f64 / rate
    );
}

/// A heartbeat over the tests' partition count, alive for a minute.
fn beat<'a>(member: &'a str, owner: &'a str) -> Heartbeat<'a> {
    Heartbeat {
        member,
        owner,
        partitions: PARTITIONS,
        ttl: Duration::from_secs(60),
    }
}

/// A late member's claim on partition 0.
fn late_claim() -> Claim<'static> {
    Claim {
        partition: 0,
        owner: "late#1",
        ttl: Duration::from_secs(5),
    }
}
