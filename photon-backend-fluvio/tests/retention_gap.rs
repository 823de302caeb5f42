//! Retention removed events a subscriber had not read: the subscriber gets one
//! `PhotonError::Gap` naming their seqs, then exactly the events Fluvio still holds,
//! instead of retrying the removed offset for ever. A start from the beginning has no gap.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::FluvioFactory;
use futures::StreamExt;
use photon_core::{Event, EventStore, EventStream, PhotonError, StartAt, TransportCrypto};
use serde_json::json;

/// How long the cluster may take to remove expired segments: the 10 s retention plus two
/// of the SPU's 10 s cleaning rounds.
const EVICTION_DEADLINE: Duration = Duration::from_secs(45);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_behind_retention_gets_one_gap_then_the_kept_events() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    // The topic is made beforehand with 1 KiB segments and 10 s retention, so that old
    // segments expire within the test; the port finds it and uses it.
    common::create_expiring_topic(&factory, format!("{}-gapped", factory.prefix)).await;

    let port = factory.port().await.unwrap();
    let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
    let mut published = Vec::new();
    for i in 0..60 {
        let appended = store
            .publish(
                "gapped",
                None,
                json!(null),
                json!({"i": i, "pad": "x".repeat(120)}),
            )
            .await
            .unwrap();
        published.push(appended.seq);
    }
    let last = *published.last().unwrap();

    // Wait until the oldest segments are gone: a subscription from the beginning then
    // starts later than the first event, without a gap.
    let started = Instant::now();
    let first_kept = loop {
        let mut from_start = store.subscribe("gapped", None, StartAt::Beginning);
        let first = tokio::time::timeout(Duration::from_secs(10), from_start.next())
            .await
            .expect("the first kept event within 10 s")
            .expect("the stream goes on")
            .expect("an event, no gap from the beginning");
        if first.seq > published[10] {
            break first.seq;
        }
        assert!(
            started.elapsed() < EVICTION_DEADLINE,
            "no segment was removed within {EVICTION_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(first_kept <= last, "the active segment is kept");

    let mut behind = store.subscribe("gapped", None, StartAt::AfterSeq(published[2]));
    match next(&mut behind).await {
        Err(PhotonError::Gap { topic, from, to }) => {
            assert_eq!(topic, "gapped");
            assert_eq!(from, published[3]);
            assert_eq!(to, first_kept);
        }
        other => panic!("expected one Gap, got {other:?}"),
    }
    let kept: Vec<i64> = published
        .iter()
        .copied()
        .filter(|seq| *seq >= first_kept)
        .collect();
    let mut got = Vec::new();
    for _ in 0..kept.len() {
        let event = next(&mut behind).await.expect("an event after the gap");
        let i = event.payload["i"].as_i64().unwrap();
        assert_eq!(published[usize::try_from(i).unwrap()], event.seq);
        got.push(event.seq);
    }
    assert_eq!(got, kept);
    let quiet = tokio::time::timeout(Duration::from_millis(500), behind.next()).await;
    assert!(quiet.is_err(), "nothing after the last event: {quiet:?}");
}

async fn next(stream: &mut EventStream) -> photon_core::Result<Event> {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("an item within 20 s")
        .expect("the stream goes on")
}
