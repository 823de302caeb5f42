//! Retries, contiguous checkpoints while an event fails, dead letters and their replay.

mod executor_support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_support::{eventually, mem_photon_with_orders, publish_round_robin, Seen};
use photon_core::mem::MemStoragePort;
use photon_core::{CheckpointKey, StoragePort};
use photon_runtime::{Event, ExecutorConfig, FlushPolicy, Photon, PhotonError};
use serde_json::json;

const EVENTS: usize = 200;
const KEYS: usize = 10;

fn config(max_attempts: u32) -> ExecutorConfig {
    ExecutorConfig::builder()
        .parallelism(4)
        .max_attempts(max_attempts)
        .initial_backoff(Duration::from_millis(20))
        .max_backoff(Duration::from_millis(50))
        .jitter(0.0)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flaky_event_is_retried_and_holds_the_checkpoint_back_meanwhile() {
    let port = MemStoragePort::new();
    let photon = Photon::builder()
        .storage_port(port.clone())
        .flush_policy(FlushPolicy::immediate())
        .build()
        .unwrap();
    let published = publish_round_robin(&photon, "orders", EVENTS, KEYS).await;
    const FLAKY: i64 = 55; // key k4
    let before_on_its_key = published["k4"].iter().filter(|&&s| s < FLAKY).count();
    let unblocked = EVENTS - published["k4"].len() + before_on_its_key;

    let seen = Seen::default();
    let attempts = Arc::new(AtomicU32::new(0));
    let observed = Arc::new(Mutex::new(None));
    let checkpoint = CheckpointKey::new("billing", "orders", None);
    let executor = photon
        .executor()
        .config(config(5))
        .handler("billing", "orders", {
            let (seen, attempts, observed) = (seen.clone(), attempts.clone(), observed.clone());
            move |event: Event| {
                let (seen, attempts, observed) = (seen.clone(), attempts.clone(), observed.clone());
                let (port, checkpoint) = (port.clone(), checkpoint.clone());
                async move {
                    if event.seq == FLAKY {
                        let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                        if attempt == 3 {
                            // Every event not queued behind this one finishes meanwhile.
                            let done =
                                eventually(Duration::from_secs(10), || seen.len() == unblocked)
                                    .await;
                            let mut committed = None;
                            eventually(Duration::from_secs(10), || {
                                committed =
                                    futures::executor::block_on(port.load_checkpoint(&checkpoint))
                                        .unwrap();
                                committed >= Some(FLAKY - 1)
                            })
                            .await;
                            *observed.lock().unwrap() = Some((done, seen.len(), committed));
                        }
                        if attempt <= 3 {
                            return Err(PhotonError::handler(format!("flaky attempt {attempt}")));
                        }
                    }
                    seen.record(&event);
                    Ok(())
                }
            }
        })
        .start()
        .unwrap();

    assert!(eventually(Duration::from_secs(30), || seen.len() >= EVENTS).await);
    executor.shutdown().await.unwrap();

    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    assert_eq!(
        *observed.lock().unwrap(),
        Some((true, unblocked, Some(FLAKY - 1)))
    );
    assert_eq!(seen.len(), EVENTS);
    assert_eq!(seen.distinct_ids(), EVENTS);
    assert_eq!(seen.by_key(), published);
    assert_eq!(
        photon.checkpoint("billing", "orders", None).await.unwrap(),
        Some(EVENTS as i64)
    );
    assert_eq!(photon.dead_letters("orders").await.unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failing_events_land_in_the_dead_letter_topic_once_and_can_be_replayed() {
    let (photon, published) = mem_photon_with_orders(EVENTS, KEYS).await;
    const ALWAYS_FAILS: i64 = 77; // retryable, exhausts 3 attempts
    const PERMANENT: i64 = 120; // not retryable: 1 attempt
    const PANICS: i64 = 150; // a panic: 1 attempt

    let seen = Seen::default();
    let calls = Arc::new(Mutex::new(std::collections::HashMap::<i64, u32>::new()));
    let fixed = Arc::new(AtomicBool::new(false));
    let executor = photon
        .executor()
        .config(config(3))
        .handler("billing", "orders", {
            let (seen, calls, fixed) = (seen.clone(), calls.clone(), fixed.clone());
            move |event: Event| {
                let (seen, calls, fixed) = (seen.clone(), calls.clone(), fixed.clone());
                async move {
                    *calls.lock().unwrap().entry(event.seq).or_default() += 1;
                    if !fixed.load(Ordering::SeqCst) {
                        match event.seq {
                            ALWAYS_FAILS => {
                                return Err(PhotonError::handler("inventory service down"))
                            }
                            PERMANENT => {
                                return Err(PhotonError::handler_permanent("malformed order"))
                            }
                            PANICS => panic!("unexpected order shape"),
                            _ => {}
                        }
                    }
                    seen.record(&event);
                    Ok(())
                }
            }
        })
        .start()
        .unwrap();

    assert!(eventually(Duration::from_secs(30), || seen.len() >= EVENTS - 3).await);
    let checkpoint_reached = eventually(Duration::from_secs(10), || {
        futures::executor::block_on(photon.checkpoint("billing", "orders", None)).unwrap()
            == Some(EVENTS as i64)
    })
    .await;
    assert!(checkpoint_reached, "checkpoint ends at the head");
    assert_eq!(seen.len(), EVENTS - 3);
    assert_eq!(seen.distinct_ids(), EVENTS - 3);
    {
        let calls = calls.lock().unwrap();
        assert_eq!(calls[&ALWAYS_FAILS], 3);
        assert_eq!(calls[&PERMANENT], 1);
        assert_eq!(calls[&PANICS], 1);
        assert_eq!(calls.values().sum::<u32>(), EVENTS as u32 - 3 + 5);
    }

    let mut letters = photon.dead_letters("orders").await.unwrap();
    letters.sort_by_key(|l| l.original.seq);
    let summary: Vec<_> = letters
        .iter()
        .map(|l| {
            (
                l.original.seq,
                l.attempts,
                l.error.clone(),
                l.subscription.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                ALWAYS_FAILS,
                3,
                "handler failed: inventory service down".to_owned(),
                "billing".to_owned()
            ),
            (
                PERMANENT,
                1,
                "handler failed: malformed order".to_owned(),
                "billing".to_owned()
            ),
            (
                PANICS,
                1,
                "handler failed: handler panicked: unexpected order shape".to_owned(),
                "billing".to_owned()
            ),
        ]
    );
    let original = photon
        .get_event(&letters[0].original.event_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(letters[0].original.topic, "orders");
    assert_eq!(letters[0].original.key, original.topic_key);
    assert_eq!(letters[0].original.key.as_deref(), Some("k6"));
    assert_eq!(letters[0].original.actor, json!("tester"));
    assert_eq!(letters[0].original.payload, json!({ "n": 76 }));
    assert_eq!(letters[0].original.payload, original.payload);
    assert_eq!(letters[0].original.created_at, original.created_at);
    assert!(published["k6"].contains(&ALWAYS_FAILS));

    let snapshot = photon.admin_snapshot().await.unwrap();
    let handler = &snapshot.handlers[0];
    assert_eq!(
        (
            handler.checkpoint,
            handler.lag,
            handler.handled,
            handler.retries,
            handler.dead_lettered
        ),
        (Some(EVENTS as i64), Some(0), EVENTS as u64 - 3, 2, 3)
    );
    let orders_dlq = snapshot
        .dead_letters
        .iter()
        .find(|d| d.topic == "orders")
        .unwrap();
    assert_eq!(
        (orders_dlq.dead_letter_topic.as_str(), orders_dlq.count),
        ("orders.dlq", Some(3))
    );

    // Fixed: the replayed copy is handled like any new event.
    fixed.store(true, Ordering::SeqCst);
    let replayed = photon.replay_dead_letter(&letters[0]).await.unwrap();
    assert_eq!(replayed.seq, EVENTS as i64 + 1);
    assert!(eventually(Duration::from_secs(10), || seen.len() >= EVENTS - 2).await);
    executor.shutdown().await.unwrap();
    let last = seen.by_key()["k6"].last().copied();
    assert_eq!(last, Some(EVENTS as i64 + 1));
    let replayed_event = photon.get_event(&replayed.event_id).await.unwrap().unwrap();
    assert_eq!(replayed_event.payload, json!({ "n": 76 }));
    assert_eq!(
        photon.checkpoint("billing", "orders", None).await.unwrap(),
        Some(EVENTS as i64 + 1)
    );
    assert_eq!(photon.dead_letters("orders").await.unwrap().len(), 3);
}

fn photon_with_keys(port: &MemStoragePort, keys: &[(&str, u8)]) -> Photon {
    let mut builder = Photon::builder().storage_port(port.clone());
    for (id, byte) in keys {
        builder = builder.transport_key(*id, [*byte; 32]);
    }
    builder.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_that_cannot_be_opened_are_dead_lettered_in_order_and_replay_once_the_key_is_back() {
    let port = MemStoragePort::new();
    let current = photon_with_keys(&port, &[("current", 2)]);
    let retired = photon_with_keys(&port, &[("retired", 1)]);
    // seqs 1, 2 sealed with the current key; 3, 4 with a key the consumer lacks; 5 current.
    let mut published = Vec::new();
    for (i, publisher) in [&current, &current, &retired, &retired, &current]
        .into_iter()
        .enumerate()
    {
        let appended = publisher
            .publish(
                "payments",
                Some("acct-1"),
                json!("teller"),
                json!({ "n": i }),
            )
            .await
            .unwrap();
        published.push(appended);
    }

    let seen = Seen::default();
    let executor = current
        .executor()
        .config(config(3))
        .handler("ledger", "payments", seen.handler())
        .start()
        .unwrap();
    let reached = eventually(Duration::from_secs(10), || {
        futures::executor::block_on(current.checkpoint("ledger", "payments", None)).unwrap()
            == Some(5)
    })
    .await;
    assert!(
        reached,
        "the checkpoint moves past the unopened events once dead-lettered"
    );
    assert_eq!(seen.seqs(), vec![1, 2, 5]);

    let letters = current.dead_letters("payments").await.unwrap();
    let summary: Vec<_> = letters
        .iter()
        .map(|l| {
            (
                l.original.seq,
                l.original.event_id.clone(),
                l.attempts,
                l.handler.clone(),
                l.original.actor.clone(),
                l.original.stored.as_ref().map(|s| s.envelope_id.is_empty()),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                3,
                published[2].event_id.clone(),
                0,
                "ledger".to_owned(),
                json!(null),
                Some(false)
            ),
            (
                4,
                published[3].event_id.clone(),
                0,
                "ledger".to_owned(),
                json!(null),
                Some(false)
            ),
        ]
    );
    assert!(
        letters[0].error.starts_with(&format!(
            "cannot open event {} (seq 3) on topic \"payments\": ",
            published[2].event_id
        )),
        "{}",
        letters[0].error
    );

    // Without the retired key the replay is refused and nothing is published.
    let refused = current.replay_dead_letter(&letters[0]).await.unwrap_err();
    assert!(matches!(refused, PhotonError::Crypto { .. }), "{refused}");
    // With it back in the ring the event is opened and published anew, sealed with the
    // newest key.
    let restored = photon_with_keys(&port, &[("retired", 1), ("current", 2)]);
    let mut replayed = Vec::new();
    for letter in &letters {
        replayed.push(restored.replay_dead_letter(letter).await.unwrap());
    }
    assert_eq!(
        replayed.iter().map(|a| a.seq).collect::<Vec<_>>(),
        vec![6, 7]
    );
    assert!(eventually(Duration::from_secs(10), || seen.len() == 5).await);
    let handled = seen.seqs();
    assert_eq!(handled, vec![1, 2, 5, 6, 7]);
    let event = current.get_event(&published[3].event_id).await;
    assert!(matches!(event, Err(PhotonError::Crypto { .. })));
    let replayed_event = current
        .get_event(&replayed[1].event_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replayed_event.payload, json!({ "n": 3 }));
    assert_eq!(replayed_event.actor, json!("teller"));
    executor.shutdown().await.unwrap();
}
