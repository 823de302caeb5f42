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
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(400));
    let fresh = factory.port().await.unwrap();
    assert_eq!(fresh.load_checkpoint(&key).await.unwrap(), Some(400));
}
