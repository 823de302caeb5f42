//! A server restart while a consumer group of two members (separate port instances, as
//! separate processes would have) handles a keyed stream: every published event is handled
//! and acknowledged, each member handles each key in order within each lease it held, and
//! the group goes on after the restart. The backend's test supplies how to open a port and
//! how to restart its server ([`group_survives_a_restart`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use photon_core::group::GroupOptions;
use photon_core::raw::group::join;
use photon_core::{EventStore, GroupRequest, StartAt, StoragePort, TransportCrypto};
use serde_json::json;

use crate::PortFactory;

const EVENTS: i64 = 2_000;
const KEYS: i64 = 32;

/// The `open` of [`group_survives_a_restart`] for a [`PortFactory`]: each call opens a
/// new port (a member of its own), panicking when the backend refuses.
pub fn opener<F: PortFactory>(
    factory: Arc<F>,
) -> impl Fn() -> BoxFuture<'static, Arc<dyn StoragePort>> {
    move || {
        let factory = Arc::clone(&factory);
        Box::pin(async move { factory.open().await.expect("a port onto the factory") })
    }
}

/// What the members handled and acknowledged: `(member, partition, epoch, key, i)`.
type Handled = Arc<Mutex<Vec<(usize, u32, u64, String, i64)>>>;

/// Runs the scenario: two members with a 2 s lease join group `restart-group` on `topic`,
/// 2,000 keyed events are published (each retried with its own draft until stored, which
/// the backend deduplicates), and `restart` (blocking) runs half-way through; what it
/// returns (a server handle, say) is kept until the scenario ends.
///
/// # Panics
/// When an event is not handled within 90 s of the last publish, a key goes backwards
/// within one lease, or duplicates exceed what was read ahead and not committed.
pub async fn group_survives_a_restart<R: Send + 'static>(
    open: impl Fn() -> BoxFuture<'static, Arc<dyn StoragePort>>,
    topic: &str,
    restart: impl FnOnce() -> R + Send + 'static,
) {
    let handled: Handled = Arc::default();
    let mut members = Vec::new();
    for index in 0..2 {
        let port = open().await;
        let coordination = port
            .group_coordination()
            .expect("the port's groups run the lease protocol");
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
                let ownership = delivery.ack.ownership().expect("a group delivery");
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

    let store = EventStore::new(open().await, TransportCrypto::plaintext());
    let mut restart = Some(restart);
    let mut _restarted = None;
    for i in 0..EVENTS {
        if i == EVENTS / 2 {
            if let Some(restart) = restart.take() {
                _restarted = Some(tokio::task::spawn_blocking(restart).await.unwrap());
            }
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
        while let Err(err) = store.port().append(draft.clone()).await {
            assert!(err.is_retryable(), "{err}");
            attempts += 1;
            assert!(attempts < 600, "the server did not come back: {err}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
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
