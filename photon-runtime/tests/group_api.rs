//! `Photon::group`: members on separate instances share a topic's events, opened with the
//! sealed envelope; events can be given back; typed groups decode `#[topic]` values.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use photon_core::group::GroupOptions;
use photon_core::mem::MemStoragePort;
use photon_core::{Event, PhotonError, StoragePort, TransportCrypto};
use photon_runtime::{GroupSubscription, Photon, TypedTopic};
use serde::{Deserialize, Serialize};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

fn sealed() -> TransportCrypto {
    TransportCrypto::plaintext()
        .with_key("k1", [9u8; 32])
        .unwrap()
}

fn photon(port: &MemStoragePort) -> Photon {
    Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(sealed())
        .build()
        .unwrap()
}

fn options(member: &str) -> GroupOptions {
    GroupOptions::new(member).heartbeat(Duration::from_millis(50))
}

async fn next(member: &mut GroupSubscription) -> Event {
    tokio::time::timeout(DEADLINE, member.next())
        .await
        .expect("an event within the deadline")
        .expect("the stream goes on")
        .expect("the event opens")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_on_two_instances_share_sealed_events() {
    let port = MemStoragePort::new();
    let (first, second) = (photon(&port), photon(&port));
    let members = vec![
        first.group_with("billing", "orders", options("a")),
        second.group_with("billing", "orders", options("b")),
    ];
    // Both members join and split the partitions before anything is published.
    tokio::time::sleep(Duration::from_millis(400)).await;
    for n in 0..120 {
        first
            .publish(
                "orders",
                Some(&format!("o-{}", n % 12)),
                json!(null),
                json!({"n": n}),
            )
            .await
            .unwrap();
    }
    let stored = port.list_by_topic("orders", 0, 1000).await.unwrap();
    assert_eq!(stored.len(), 120);
    assert!(
        stored
            .iter()
            .all(|record| !serde_json::to_string(&record.body)
                .unwrap()
                .contains("\"n\"")),
        "bodies are sealed at rest"
    );
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, mut member) in members.into_iter().enumerate() {
        let done_tx = done_tx.clone();
        tokio::spawn(async move {
            while let Some(item) = member.next().await {
                let event = item.unwrap();
                member.ack(&event).await.unwrap();
                let key = event.topic_key.clone().unwrap();
                let n = event.payload["n"].as_i64().unwrap();
                if done_tx.send((index, key, n)).is_err() {
                    return;
                }
            }
        });
    }
    let mut handled = Vec::new();
    while handled.len() < 120 {
        let item = tokio::time::timeout(DEADLINE, done_rx.recv())
            .await
            .expect("every event within the deadline")
            .unwrap();
        handled.push(item);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), done_rx.recv())
            .await
            .is_err(),
        "nothing is handled twice"
    );
    let unique: HashSet<i64> = handled.iter().map(|(_, _, n)| *n).collect();
    assert_eq!(unique.len(), 120);
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for (_, key, n) in &handled {
        if let Some(previous) = last.insert(key, *n) {
            assert!(previous < *n, "key {key}: {n} after {previous}");
        }
    }
    let by_member: HashSet<usize> = handled.iter().map(|(m, _, _)| *m).collect();
    assert_eq!(by_member.len(), 2, "both members have a share");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_event_comes_back_first() {
    let port = MemStoragePort::new();
    let photon = photon(&port);
    for n in 0..3 {
        photon
            .publish("jobs", Some("j"), json!(null), json!({"n": n}))
            .await
            .unwrap();
    }
    let mut member = photon.group_with("workers", "jobs", options("solo"));
    let first = next(&mut member).await;
    assert_eq!(first.payload["n"], 0);
    member.release(&first).await.unwrap();
    let again = next(&mut member).await;
    assert_eq!(
        (again.event_id.as_str(), &again.payload),
        (first.event_id.as_str(), &json!({"n": 0}))
    );
    member.ack(&again).await.unwrap();
    match member.ack(&again).await {
        Err(PhotonError::InvalidInput(_)) => {}
        other => panic!("a second ack names the mistake, got {other:?}"),
    }
    for n in 1..3 {
        let event = next(&mut member).await;
        assert_eq!(event.payload["n"], n);
        member.ack(&event).await.unwrap();
    }
    member.leave().await;
    // The group resumes after everything acknowledged.
    let mut rejoined = photon.group_with("workers", "jobs", options("solo"));
    photon
        .publish("jobs", Some("j"), json!(null), json!({"n": 3}))
        .await
        .unwrap();
    assert_eq!(next(&mut rejoined).await.payload["n"], 3);
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shipment {
    id: String,
    weight: u32,
}

impl TypedTopic for Shipment {
    const TOPIC: &'static str = "shipments";
    const KEYED_BY: Option<&'static str> = Some("id");

    fn topic_key(&self) -> Option<String> {
        Some(self.id.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_group_decodes_values() {
    let port = MemStoragePort::new();
    let photon = photon(&port);
    for weight in [5, 7] {
        let shipment = Shipment {
            id: "s-1".into(),
            weight,
        };
        shipment.publish_on(&photon).await.unwrap();
    }
    let mut member = photon
        .group_with("dock", Shipment::TOPIC, options("d"))
        .typed::<Shipment>();
    let mut weights = Vec::new();
    for _ in 0..2 {
        let value = tokio::time::timeout(DEADLINE, member.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        weights.push(value.value.weight);
        member.ack(&value).await.unwrap();
    }
    assert_eq!(weights, vec![5, 7]);
}

#[tokio::test]
async fn a_bad_topic_is_refused() {
    let photon = photon(&MemStoragePort::new());
    let mut member = photon.group("g", "Not A Topic");
    match member.next().await {
        Some(Err(PhotonError::InvalidTopic { .. })) => {}
        other => panic!("expected InvalidTopic, got {other:?}"),
    }
    assert!(member.next().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_members_owners_and_positions() {
    let port = MemStoragePort::new();
    let photon = photon(&port);
    let mut a = photon.group_with("audit", "ledger", options("a"));
    let mut b = photon.group_with("audit", "ledger", options("b"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut last_seq_of = BTreeMap::new();
    for n in 0..40 {
        let key = format!("e-{}", n % 10);
        let appended = photon
            .publish("ledger", Some(&key), json!(null), json!({"n": n}))
            .await
            .unwrap();
        let partition = photon_core::group::partition_of(Some(&key), appended.seq, 8);
        last_seq_of.insert(partition, appended.seq);
    }
    let mut handled = 0;
    while handled < 40 {
        tokio::select! {
            Some(Ok(event)) = a.next() => { a.ack(&event).await.unwrap(); handled += 1; }
            Some(Ok(event)) = b.next() => { b.ack(&event).await.unwrap(); handled += 1; }
            () = tokio::time::sleep(DEADLINE) => panic!("only {handled} of 40 handled"),
        }
    }
    // The acknowledged positions are committed within the commit interval (100 ms).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let status = photon.group_status("audit", "ledger").await.unwrap();
    assert_eq!(status.members, vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(status.partitions.len(), 8);
    // Balanced: four partitions each (which four depends on who joined first).
    for owner in ["a", "b"] {
        let owned = status
            .partitions
            .iter()
            .filter(|p| p.owner.as_deref() == Some(owner))
            .count();
        assert_eq!(owned, 4, "{owner}: {:?}", status.partitions);
    }
    for partition in &status.partitions {
        let checkpoint = last_seq_of.get(&partition.partition).copied();
        assert_eq!(partition.checkpoint, checkpoint, "{partition:?}");
        assert_eq!(partition.behind_head, Some(40 - checkpoint.unwrap_or(0)));
    }
    // The admin snapshot carries the same view for the groups this instance joined.
    let snapshot = photon.admin_snapshot().await.unwrap();
    assert_eq!(snapshot.groups, vec![status]);
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_record_holds_the_partition_until_acknowledged() {
    let port = MemStoragePort::new();
    let photon = photon(&port);
    let mut member = photon.group_with("repair", "parts", options("a"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut seqs = Vec::new();
    for n in 0..3 {
        let appended = photon
            .publish("parts", Some("p-1"), json!(null), json!({"n": n}))
            .await
            .unwrap();
        seqs.push(appended.seq);
    }
    let bad = port.append_undecodable("parts", Some("p-1"), b"\x00damaged");
    for n in 3..5 {
        let appended = photon
            .publish("parts", Some("p-1"), json!(null), json!({"n": n}))
            .await
            .unwrap();
        seqs.push(appended.seq);
    }
    let partition = photon_core::group::partition_of(Some("p-1"), bad.seq, 8);
    let mut got = Vec::new();
    for _ in 0..3 {
        let event = next(&mut member).await;
        member.ack(&event).await.unwrap();
        got.push(event.seq);
    }
    let error = tokio::time::timeout(DEADLINE, member.next())
        .await
        .expect("an item within the deadline")
        .expect("the stream goes on")
        .expect_err("the damaged record is an error item");
    match &error {
        PhotonError::Undecodable {
            event_id,
            seq,
            stored,
            ..
        } => {
            assert_eq!((event_id.as_str(), *seq), (bad.event_id.as_str(), bad.seq));
            assert_eq!(&**stored, b"\x00damaged");
        }
        other => panic!("expected Undecodable, got {other:?}"),
    }
    for _ in 0..2 {
        let event = next(&mut member).await;
        member.ack(&event).await.unwrap();
        got.push(event.seq);
    }
    assert_eq!(got, seqs);
    let checkpoint = |photon: Photon| async move {
        let status = photon.group_status("repair", "parts").await.unwrap();
        status
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .and_then(|p| p.checkpoint)
    };
    // Every event is acknowledged but the damaged record: the position stays before it.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(checkpoint(photon.clone()).await, Some(seqs[2]));
    member.ack_id(&bad.event_id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(checkpoint(photon.clone()).await, Some(seqs[4]));
    drop(member);
}
