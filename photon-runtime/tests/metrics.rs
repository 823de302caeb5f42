//! The metrics the durable and group subscription streams record, counted exactly on the
//! mem port with a local `DebuggingRecorder` (the executor's are in
//! `telemetry_on_backends.rs`, on every backend).

mod recording;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use metrics_util::debugging::DebugValue;
use photon_core::group::GroupOptions;
use photon_core::metrics as names;
use photon_runtime::{FlushPolicy, Photon, PhotonError};
use recording::{recorded, series};
use serde_json::json;

const ORDERS: &[(&str, &str)] = &[("backend", "mem"), ("topic", "orders")];

#[test]
fn durable_and_group_streams_count_deliveries_acknowledgements_commits_and_lag() {
    let metrics = recorded(|| async {
        let photon = Photon::builder()
            .flush_policy(FlushPolicy::immediate())
            .build()
            .unwrap();
        for n in 1..=3 {
            photon
                .publish(
                    "orders",
                    Some(&format!("k{n}")),
                    json!(null),
                    json!({ "n": n }),
                )
                .await
                .unwrap();
        }
        let refused = photon
            .publish("orders", Some(""), json!(null), json!({}))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, PhotonError::InvalidKey { .. }),
            "{refused}"
        );
        // An invalid topic name gets no series.
        assert!(photon
            .publish("bad topic name!", None, json!(null), json!({}))
            .await
            .is_err());

        let mut audit = photon.durable("audit", "orders", None);
        let first = audit.next().await.unwrap().unwrap();
        let second = audit.next().await.unwrap().unwrap();
        audit.ack(&first).await.unwrap();
        audit.release(&second).unwrap();
        let again = audit.next().await.unwrap().unwrap();
        assert_eq!(again.event_id, second.event_id);
        audit.ack(&again).await.unwrap();
        let third = audit.next().await.unwrap().unwrap();
        audit.ack(&third).await.unwrap();
        // Acknowledging twice counts once.
        audit.ack(&third).await.unwrap();
        drop(audit);

        let mut options = GroupOptions::new("member-1").partitions(1);
        // Only leaving commits: one commit, whatever the timing.
        options.commit_interval = Duration::from_secs(3600);
        let mut shipping = photon.group_with("shipping", "orders", options);
        for _ in 0..3 {
            let event = shipping.next().await.unwrap().unwrap();
            shipping.ack(&event).await.unwrap();
        }
        shipping.leave().await;
        photon.shutdown().await.unwrap();
        assert_eq!(
            photon.checkpoint("audit", "orders", None).await.unwrap(),
            Some(3)
        );
    });

    let audit = &[
        ("backend", "mem"),
        ("topic", "orders"),
        ("subscription", "audit"),
    ];
    let shipping = &[
        ("backend", "mem"),
        ("topic", "orders"),
        ("group", "shipping"),
    ];
    let partition = &[
        ("backend", "mem"),
        ("topic", "orders"),
        ("group", "shipping"),
        ("partition", "0"),
    ];
    let expected = BTreeMap::from([
        (series(names::PUBLISHED, ORDERS), DebugValue::Counter(3)),
        (
            series(names::PUBLISH_ERRORS, ORDERS),
            DebugValue::Counter(1),
        ),
        // The released event is delivered twice.
        (series(names::DELIVERED, audit), DebugValue::Counter(4)),
        (series(names::ACKNOWLEDGED, audit), DebugValue::Counter(3)),
        (
            series(names::CHECKPOINT_COMMITS, audit),
            DebugValue::Counter(3),
        ),
        (
            series(names::SUBSCRIPTION_LAG, audit),
            DebugValue::Gauge(0.0.into()),
        ),
        (series(names::DELIVERED, shipping), DebugValue::Counter(3)),
        (
            series(names::ACKNOWLEDGED, shipping),
            DebugValue::Counter(3),
        ),
        (
            series(names::CHECKPOINT_COMMITS, shipping),
            DebugValue::Counter(1),
        ),
        (
            series(names::GROUP_PARTITION_LAG, partition),
            DebugValue::Gauge(0.0.into()),
        ),
    ]);
    assert_eq!(metrics, expected);
}

#[test]
fn each_event_of_a_batch_counts_once() {
    use photon_runtime::BatchEvent;
    let metrics = recorded(|| async {
        let photon = Photon::builder().build().unwrap();
        let stored = photon
            .publish_batch(
                "orders",
                (1..=4).map(|n| BatchEvent::new(json!({ "n": n }))),
            )
            .await
            .unwrap();
        assert_eq!(stored.len(), 4);
        let refused = photon
            .publish_batch(
                "orders",
                vec![BatchEvent::new(json!(5)), BatchEvent::new(json!(6)).key("")],
            )
            .await
            .unwrap_err();
        assert!(
            matches!(refused, PhotonError::BatchEventRefused { index: 1, .. }),
            "{refused}"
        );
        photon.shutdown().await.unwrap();
    });
    let expected = BTreeMap::from([
        (series(names::PUBLISHED, ORDERS), DebugValue::Counter(4)),
        (
            series(names::PUBLISH_ERRORS, ORDERS),
            DebugValue::Counter(2),
        ),
    ]);
    assert_eq!(metrics, expected);
}

#[test]
fn a_delayed_event_counts_as_published_once_when_it_is_appended() {
    let metrics = recorded(|| async {
        let photon = Photon::builder().build().unwrap();
        let mut reminders = photon.subscribe("reminders", None, None);
        photon
            .publish_after(
                "reminders",
                None,
                json!(null),
                json!("pay"),
                Duration::from_millis(10),
            )
            .await
            .unwrap();
        let event = reminders.next().await.unwrap().unwrap();
        assert_eq!(event.payload, json!("pay"));
        photon.shutdown().await.unwrap();
    });
    // The schedule's own records (entry, mark) are no publishes.
    let published: BTreeMap<_, _> = metrics
        .into_iter()
        .filter(|(series, _)| series.0 == names::PUBLISHED || series.0 == names::PUBLISH_ERRORS)
        .collect();
    let reminders = &[("backend", "mem"), ("topic", "reminders")];
    assert_eq!(
        published,
        BTreeMap::from([(series(names::PUBLISHED, reminders), DebugValue::Counter(1))])
    );
}
