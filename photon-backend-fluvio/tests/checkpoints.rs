//! Checkpoints on a real cluster: two writers never regress a checkpoint, loads span
//! snapshots, and every shard keeps its own position.

mod common;

use common::FluvioFactory;
use photon_core::{CheckpointKey, StoragePort};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_never_regress_across_snapshots() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let a = factory.port().await.unwrap();
    let b = factory.port().await.unwrap();
    let key = CheckpointKey::new("race", "orders", None);
    // 600 commits in all: more than two snapshot intervals of 256.
    let writers = [(a.clone(), 0), (b.clone(), 1)].map(|(port, parity)| {
        let key = key.clone();
        tokio::spawn(async move {
            for seq in (1..=1200).filter(|s| s % 2 == parity) {
                if seq % 4 == parity {
                    port.commit_checkpoint(&key, seq).await.unwrap();
                }
            }
        })
    });
    for writer in writers {
        writer.await.unwrap();
    }
    // A stale lower write from the other writer changes nothing.
    b.commit_checkpoint(&key, 3).await.unwrap();
    assert_eq!(a.load_checkpoint(&key).await.unwrap(), Some(1200));
    assert_eq!(b.load_checkpoint(&key).await.unwrap(), Some(1200));
    let fresh = factory.port().await.unwrap();
    assert_eq!(fresh.load_checkpoint(&key).await.unwrap(), Some(1200));
    assert_eq!(
        fresh
            .load_checkpoint(&CheckpointKey::new("race", "orders", Some("k")))
            .await
            .unwrap(),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_checkpoints_keep_one_position_per_shard() {
    let Some(factory) = FluvioFactory::from_env(4).await else {
        return;
    };
    let port = factory.port().await.unwrap();
    let key = CheckpointKey::new("lanes", "orders", None);
    // seq = (offset + 1) * 4 + shard: 41 is shard 1, 42 shard 2, 400 shard 0.
    for seq in [41, 42, 400, 37] {
        port.commit_checkpoint(&key, seq).await.unwrap();
    }
    assert_eq!(port.checkpoint_lane("orders", 41), 1);
    assert_eq!(port.checkpoint_lane("orders", 37), 1);
    // Shard 3 acknowledged nothing: resuming every shard after 0 loses nothing.
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(0));
    port.commit_checkpoint(&key, 43).await.unwrap();
    // The lowest shard position: shard 1 at 41.
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(41));
    let fresh = factory.port().await.unwrap();
    assert_eq!(fresh.load_checkpoint(&key).await.unwrap(), Some(41));
}

/// Commits `commits` checkpoints over `keys` subscriptions from 64 tasks, then times a
/// fresh port's first load; every loaded position is exact.
async fn commit_then_load(keys: usize, commits: usize) {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let port = factory.port().await.unwrap();
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..64)
        .map(|task| {
            let port = port.clone();
            tokio::spawn(async move {
                for commit in (task..commits).step_by(64) {
                    let key = CheckpointKey::new(format!("s{}", commit % keys), "orders", None);
                    let seq = i64::try_from(commit).unwrap() + 1;
                    port.commit_checkpoint(&key, seq).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let committing = started.elapsed();
    let fresh = factory.port().await.unwrap();
    let started = std::time::Instant::now();
    let first = fresh
        .load_checkpoint(&CheckpointKey::new("s0", "orders", None))
        .await
        .unwrap();
    let load = started.elapsed();
    println!(
        "{commits} commits over {keys} checkpoints: committed in {committing:?}, first load by a new port {load:?}"
    );
    // The last commit of key `s{k}` is the highest commit index with that remainder.
    let last_seq = |k: usize| {
        let rounds = (commits - 1 - k) / keys;
        i64::try_from(k + rounds * keys).unwrap() + 1
    };
    assert_eq!(first, Some(last_seq(0)));
    for k in (0..keys).step_by(keys / 50) {
        let key = CheckpointKey::new(format!("s{k}"), "orders", None);
        assert_eq!(
            fresh.load_checkpoint(&key).await.unwrap(),
            Some(last_seq(k)),
            "s{k}"
        );
    }
}

/// More checkpoints than one snapshot record can hold (parts of 256 KiB): loads stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_in_parts_load_exactly() {
    commit_then_load(6_000, 12_000).await;
}

/// The measurement of issue 12 item 12: 100k commits over 50k checkpoints (past the old
/// single-record snapshot limit of about 20k). Run with `--ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: takes minutes"]
async fn load_after_100k_commits_over_50k_checkpoints() {
    commit_then_load(50_000, 100_000).await;
}
