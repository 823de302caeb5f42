//! The metrics Photon records, counted exactly on the mem port with a local
//! `DebuggingRecorder`: an executor scenario (a retry and a dead letter), and the durable
//! and group subscription streams.

mod executor_support;
mod recording;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use executor_support::{eventually, Seen};
use futures::StreamExt;
use metrics_util::debugging::DebugValue;
use photon_core::group::GroupOptions;
use photon_core::metrics as names;
use photon_runtime::{Event, ExecutorConfig, FlushPolicy, Photon, PhotonError};
use recording::{recorded, series};
use serde_json::json;

const ORDERS: &[(&str, &str)] = &[("backend", "mem"), ("topic", "orders")];
const DLQ: &[(&str, &str)] = &[("backend", "mem"), ("topic", "orders.dlq")];
const BILLING: &[(&str, &str)] = &[
    ("backend", "mem"),
    ("topic", "orders"),
    ("subscription", "billing"),
];

#[test]
fn an_executor_run_with_one_retry_and_one_dead_letter_counts_exactly() {
    let mut metrics = recorded(|| async {
        let photon = Photon::builder()
            .flush_policy(FlushPolicy::immediate())
            .build()
            .unwrap();
        for n in 1..=5 {
            photon
                .publish("orders", Some("k"), json!("tester"), json!({ "n": n }))
                .await
                .unwrap();
        }
        let seen = Seen::default();
        let second_attempts = Arc::new(AtomicU32::new(0));
        let config = ExecutorConfig::builder()
            .max_attempts(3)
            .initial_backoff(Duration::from_millis(1))
            .max_backoff(Duration::from_millis(1))
            .jitter(0.0)
            .build()
            .unwrap();
        let executor = photon
            .executor()
            .config(config)
            .handler("billing", "orders", {
                let (seen, second_attempts) = (seen.clone(), second_attempts.clone());
                move |event: Event| {
                    let (seen, second_attempts) = (seen.clone(), second_attempts.clone());
                    async move {
                        match event.seq {
                            2 if second_attempts.fetch_add(1, Ordering::SeqCst) == 0 => {
                                return Err(PhotonError::handler("flaky once"));
                            }
                            4 => return Err(PhotonError::handler_permanent("refused")),
                            _ => {}
                        }
                        seen.record(&event);
                        Ok(())
                    }
                }
            })
            .start()
            .unwrap();
        let finished = eventually(Duration::from_secs(10), || {
            let letters = futures::executor::block_on(photon.dead_letters("orders")).unwrap();
            seen.len() == 4 && letters.len() == 1
        })
        .await;
        assert!(finished, "4 events handled and 1 dead letter within 10 s");
        executor.shutdown().await.unwrap();
        photon.shutdown().await.unwrap();
        assert_eq!(seen.seqs(), vec![1, 2, 3, 5]);
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(5)
        );
    });

    let durations = metrics
        .remove(&series(names::HANDLER_DURATION, BILLING))
        .expect("handler durations recorded");
    let DebugValue::Histogram(durations) = durations else {
        panic!("{durations:?} is no histogram")
    };
    // Five events, one of them tried twice.
    assert_eq!(durations.len(), 6);
    assert!(durations
        .iter()
        .all(|seconds| seconds.0 >= 0.0 && seconds.0 < 10.0));

    let expected = BTreeMap::from([
        (series(names::PUBLISHED, ORDERS), DebugValue::Counter(5)),
        (series(names::PUBLISHED, DLQ), DebugValue::Counter(1)),
        (series(names::DELIVERED, BILLING), DebugValue::Counter(5)),
        (series(names::ACKNOWLEDGED, BILLING), DebugValue::Counter(5)),
        (series(names::RETRIES, BILLING), DebugValue::Counter(1)),
        (series(names::DEAD_LETTERS, BILLING), DebugValue::Counter(1)),
        // One key, handled in order, each acknowledgement committed at once.
        (
            series(names::CHECKPOINT_COMMITS, BILLING),
            DebugValue::Counter(5),
        ),
        (
            series(names::SUBSCRIPTION_LAG, BILLING),
            DebugValue::Gauge(0.0.into()),
        ),
    ]);
    assert_eq!(metrics, expected);
}

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
