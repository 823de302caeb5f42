//! A server restart while a consumer group of two members (separate connections) handles a
//! keyed stream: every published event is handled and acknowledged, each member handles
//! each key in order within each lease it held, and the group goes on after the restart.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{NatsFactory, OwnServer};
use futures::StreamExt;
use photon_core::group::{join, GroupOptions};
use photon_core::{EventStore, GroupRequest, StartAt, StoragePort, TransportCrypto};
use serde_json::json;

const EVENTS: i64 = 2_000;
const KEYS: i64 = 32;
/// Server down time: with the 2 s lease, renewals fail past the members' local deadline
/// (1.6 s after the last renewal) and leases expire during the restart.
const OUTAGE_MS: u64 = 1300;

/// What the members handled and acknowledged: `(member, partition, epoch, key, i)`.
type Handled = Arc<Mutex<Vec<(usize, u32, u64, String, i64)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_survives_a_server_restart() {
    let Some(mut server) = OwnServer::start() else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let Some(factory) = NatsFactory::on(server.url(), 1).await else {
        return;
    };
    let topic = "restart.group";
    let handled: Handled = Arc::default();
    let mut members = Vec::new();
    for index in 0..2 {
        let port: Arc<dyn StoragePort> = Arc::new(factory.port().await.unwrap());
        let coordination = port.group_coordination().unwrap();
        let options = GroupOptions::new(format!("m{index}"))
            .lease(Duration::from_secs(2))
            .heartbeat(Duration::from_millis(200));
        let request = GroupRequest {
            group: "restart-group".into(),
            member: format!("m{index}"),
            topic: topic.into(),
            start: StartAt::Beginning,
        };
        let opener = EventStore::new(port.clone(), TransportCrypto::plaintext());
        let mut deliveries = join(port, coordination, request, options);
        let handled = handled.clone();
        members.push(tokio::spawn(async move {
            while let Some(delivery) = deliveries.next().await {
                // Errors while the server is away are reported and the stream goes on.
                let Ok(delivery) = delivery else { continue };
                let ownership = delivery.ack.ownership().unwrap();
                let i = opener.open(delivery.record.clone()).unwrap().payload["i"]
                    .as_i64()
                    .unwrap();
                if delivery.ack.ack().await.is_ok() {
                    handled.lock().unwrap().push((
                        index,
                        ownership.partition,
                        ownership.epoch,
                        delivery.record.topic_key.clone().unwrap_or_default(),
                        i,
                    ));
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;

    let store = EventStore::new(
        Arc::new(factory.port().await.unwrap()),
        TransportCrypto::plaintext(),
    );
    for i in 0..EVENTS {
        if i == EVENTS / 2 {
            server = tokio::task::spawn_blocking(move || {
                server.stop();
                std::thread::sleep(Duration::from_millis(OUTAGE_MS));
                server.restart();
                server
            })
            .await
            .unwrap();
        }
        let draft = store
            .draft(
                topic,
                Some(&format!("k{}", i % KEYS)),
                json!(null),
                json!({"i": i}),
            )
            .unwrap();
        let mut attempts = 0;
        // Retrying the same draft (same envelope id) is deduplicated by the server.
        while let Err(err) = store.port().append(draft.clone()).await {
            assert!(err.is_retryable(), "{err}");
            attempts += 1;
            assert!(attempts < 300, "the server did not come back: {err}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let distinct: BTreeSet<i64> = handled.lock().unwrap().iter().map(|h| h.4).collect();
        if distinct.len() == EVENTS as usize {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {EVENTS} events handled after the restart",
            distinct.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for member in &members {
        member.abort();
    }
    let handled = handled.lock().unwrap().clone();
    let distinct: BTreeSet<i64> = handled.iter().map(|h| h.4).collect();
    assert_eq!(distinct, (0..EVENTS).collect::<BTreeSet<i64>>());
    // Within one lease (member, partition, epoch), each key's events go up.
    let mut last: BTreeMap<(usize, u32, u64, String), i64> = BTreeMap::new();
    for (member, partition, epoch, key, i) in &handled {
        if let Some(previous) = last.insert((*member, *partition, *epoch, key.clone()), *i) {
            assert!(
                previous < *i,
                "member {member} handled {key} #{i} after #{previous}"
            );
        }
    }
    let duplicates = handled.len() - distinct.len();
    println!(
        "group restart: {} handled, {duplicates} duplicates",
        handled.len()
    );
    // At most what was read ahead and not committed, per partition, per handover.
    assert!(duplicates <= 8 * 256, "{duplicates} duplicates");
}
