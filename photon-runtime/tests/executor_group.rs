//! Group handlers: executors on two instances share a topic through a consumer group;
//! per-key order holds, each event is handled once, and a permanent failure becomes one
//! dead letter.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use photon_core::mem::MemStoragePort;
use photon_core::{PhotonError, TransportCrypto};
use photon_runtime::{HandlerOptions, Photon};
use serde_json::json;

type Log = Arc<Mutex<Vec<(usize, String, i64)>>>;

fn photon(port: &MemStoragePort) -> Photon {
    Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(
            TransportCrypto::plaintext()
                .with_key("k1", [3u8; 32])
                .unwrap(),
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_share_a_topic() {
    let port = MemStoragePort::new();
    let instances = [photon(&port), photon(&port)];
    let log: Log = Arc::default();
    let mut executors = Vec::new();
    for (index, instance) in instances.iter().enumerate() {
        let log = log.clone();
        let executor = instance
            .executor()
            .handler_with(
                HandlerOptions::new("billing", "orders").group("billing"),
                move |event: photon_core::Event| {
                    let log = log.clone();
                    async move {
                        let n = event.payload["n"].as_i64().unwrap();
                        if n == 7 {
                            return Err(PhotonError::handler_permanent("order 7 is refused"));
                        }
                        log.lock()
                            .unwrap()
                            .push((index, event.topic_key.clone().unwrap(), n));
                        Ok(())
                    }
                },
            )
            .start()
            .unwrap();
        executors.push(executor);
    }
    // Both members join and split the partitions before anything is published.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut last_of_partition: BTreeMap<u32, i64> = BTreeMap::new();
    for n in 0..200 {
        let key = format!("o-{}", n % 16);
        let seq = instances[0]
            .publish("orders", Some(&key), json!(null), json!({"n": n}))
            .await
            .unwrap()
            .seq;
        last_of_partition.insert(photon_core::group::partition_of(Some(&key), seq, 8), seq);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while log.lock().unwrap().len() < 199 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "handlers did not finish"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The admin snapshot shows the group: both members, one owner per partition, and each
    // partition's checkpoint at its last event once committed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let snapshot = loop {
        let snapshot = instances[1].admin_snapshot().await.unwrap();
        let checkpoints: BTreeMap<u32, i64> = snapshot.groups[0]
            .partitions
            .iter()
            .filter_map(|p| Some((p.partition, p.checkpoint?)))
            .collect();
        if checkpoints == last_of_partition {
            break snapshot;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "group checkpoints {checkpoints:?}, expected {last_of_partition:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(snapshot.groups.len(), 1);
    let group = &snapshot.groups[0];
    assert_eq!(
        (group.group.as_str(), group.topic.as_str()),
        ("billing", "orders")
    );
    assert_eq!(group.members.len(), 2);
    assert_eq!(group.partitions.len(), 8);
    let owners: HashSet<&str> = group
        .partitions
        .iter()
        .map(|p| {
            p.owner
                .as_deref()
                .expect("every partition has a live owner")
        })
        .collect();
    assert_eq!(owners, group.members.iter().map(String::as_str).collect());
    let head = *last_of_partition.values().max().unwrap();
    let behind: Vec<Option<i64>> = group.partitions.iter().map(|p| p.behind_head).collect();
    let expected: Vec<Option<i64>> = last_of_partition
        .values()
        .map(|seq| Some(head - seq))
        .collect();
    assert_eq!(behind, expected);
    assert_eq!(snapshot.handlers.len(), 1);
    assert_eq!(snapshot.handlers[0].group.as_deref(), Some("billing"));
    assert_eq!(snapshot.handlers[0].checkpoint, None);
    for executor in &executors {
        executor.shutdown().await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 199, "each event handled once");
    let unique: HashSet<i64> = log.iter().map(|(_, _, n)| *n).collect();
    assert_eq!(unique, (0..200).filter(|n| *n != 7).collect());
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for (_, key, n) in log.iter() {
        if let Some(previous) = last.insert(key, *n) {
            assert!(previous < *n, "key {key}: {n} after {previous}");
        }
    }
    let members: HashSet<usize> = log.iter().map(|(m, _, _)| *m).collect();
    assert_eq!(members.len(), 2, "both executors handled a share");
    let letters = instances[0].dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.payload, json!({"n": 7}));
    assert_eq!(letters[0].subscription, "billing");
}

#[tokio::test]
async fn a_group_handler_with_a_key_is_refused() {
    let photon = photon(&MemStoragePort::new());
    let started = photon
        .executor()
        .handler_with(
            HandlerOptions::new("billing", "orders")
                .group("billing")
                .key("o-1"),
            |_event: photon_core::Event| async {},
        )
        .start();
    match started {
        Err(PhotonError::InvalidInput(message)) => assert!(message.contains("group"), "{message}"),
        other => panic!("expected InvalidInput, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_record_in_a_group_is_dead_lettered_before_the_position_passes_it() {
    let port = MemStoragePort::new();
    let photon = photon(&port);
    let handled: Log = Arc::default();
    let log = handled.clone();
    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new("repair", "parts").group("repair"),
            move |event: photon_core::Event| {
                let log = log.clone();
                async move {
                    let n = event.payload["n"].as_i64().unwrap();
                    log.lock().unwrap().push((0, event.topic_key.unwrap(), n));
                    Ok::<(), PhotonError>(())
                }
            },
        )
        .start()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut last = 0;
    for n in 0..3 {
        photon
            .publish("parts", Some("p-1"), json!(null), json!({"n": n}))
            .await
            .unwrap();
    }
    let bad = port.append_undecodable("parts", Some("p-1"), b"\x00damaged");
    for n in 3..6 {
        last = photon
            .publish("parts", Some("p-1"), json!(null), json!({"n": n}))
            .await
            .unwrap()
            .seq;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let partition = photon_core::group::partition_of(Some("p-1"), last, 8);
    loop {
        let status = photon.group_status("repair", "parts").await.unwrap();
        let checkpoint = status
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .and_then(|p| p.checkpoint);
        if checkpoint == Some(last) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the partition stopped at {checkpoint:?}, before {last}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    executor.shutdown().await.unwrap();
    let handled: Vec<i64> = handled.lock().unwrap().iter().map(|(_, _, n)| *n).collect();
    assert_eq!(handled, (0..6).collect::<Vec<_>>());
    let letters = photon.dead_letters("parts").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.event_id, bad.event_id);
    assert_eq!(letters[0].original.seq, bad.seq);
    let undecodable = letters[0].original.undecodable.as_ref().unwrap();
    assert_eq!(undecodable.stored().unwrap(), b"\x00damaged");
}
