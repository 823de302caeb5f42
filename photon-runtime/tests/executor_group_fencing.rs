//! Group handlers under their lease: a member that joins while another works through a
//! backlog takes partitions over without any key running on both at once and without any
//! event handled twice (the first member gives back the queued events of the partitions
//! it lost instead of starting them), and an attempt that hangs is cancelled after
//! `max_handler_time` and retried.

mod executor_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use executor_support::{first_handler_outcomes, publish_one_and_settle};
use photon_core::mem::MemStoragePort;
use photon_core::{Event, PhotonError};
use photon_runtime::{current_ownership, HandlerOptions, Photon};
use serde_json::json;

/// `(member, key, seq, start, end)` of one attempt.
type Attempt = (usize, String, i64, Instant, Instant);
/// Every attempt.
type Attempts = Arc<Mutex<Vec<Attempt>>>;

fn photon(port: &MemStoragePort) -> Photon {
    Photon::builder()
        .storage_port(port.clone())
        .build()
        .unwrap()
}

fn member(photon: &Photon, index: usize, attempts: &Attempts) -> photon_runtime::Executor {
    let attempts = attempts.clone();
    photon
        .executor()
        .handler_with(
            HandlerOptions::new("billing", "orders")
                .group("billing")
                .member(format!("member-{index}")),
            move |event: Event| {
                let attempts = attempts.clone();
                async move {
                    assert!(current_ownership().is_some(), "runs under a lease");
                    let start = Instant::now();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    attempts.lock().unwrap().push((
                        index,
                        event.topic_key.clone().unwrap(),
                        event.seq,
                        start,
                        Instant::now(),
                    ));
                    Ok::<(), PhotonError>(())
                }
            },
        )
        .start()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_during_a_backlog_hands_keys_over_without_overlap_or_repeat() {
    let port = MemStoragePort::new();
    let (first, second) = (photon(&port), photon(&port));
    let mut published = BTreeSet::new();
    for n in 0..400 {
        let key = format!("o-{}", n % 8);
        let appended = first
            .publish("orders", Some(&key), json!(null), json!({"n": n}))
            .await
            .unwrap();
        published.insert(appended.seq);
    }
    let attempts: Attempts = Arc::default();
    let first_executor = member(&first, 0, &attempts);
    // The second member joins once the first is working through the backlog, its
    // executor holding up to 256 events read ahead.
    let deadline = Instant::now() + Duration::from_secs(20);
    while attempts.lock().unwrap().len() < 16 {
        assert!(
            Instant::now() < deadline,
            "the first member handles nothing"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second_executor = member(&second, 1, &attempts);
    while attempts.lock().unwrap().len() < 400 {
        assert!(
            Instant::now() < deadline + Duration::from_secs(20),
            "{} of 400 handled",
            attempts.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    second_executor.wait_idle().await.unwrap();
    first_executor.wait_idle().await.unwrap();
    let attempts = attempts.lock().unwrap().clone();
    let handled: Vec<i64> = attempts.iter().map(|a| a.2).collect();
    assert_eq!(handled.len(), 400, "each event handled exactly once");
    assert_eq!(handled.iter().copied().collect::<BTreeSet<_>>(), published);
    let by_member: BTreeMap<usize, usize> = attempts.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(a.0).or_default() += 1;
        m
    });
    assert_eq!(
        by_member.len(),
        2,
        "both members handled events: {by_member:?}"
    );
    // Per key: attempts one after the other, in seq order, whichever member ran them.
    let mut by_key: BTreeMap<&str, Vec<&Attempt>> = BTreeMap::new();
    for attempt in &attempts {
        by_key.entry(&attempt.1).or_default().push(attempt);
    }
    for (key, mut runs) in by_key {
        runs.sort_by_key(|a| a.3);
        for pair in runs.windows(2) {
            assert!(
                pair[1].3 >= pair[0].4,
                "key {key}: {:?} overlaps {:?}",
                pair[1],
                pair[0]
            );
            assert!(
                pair[1].2 > pair[0].2,
                "key {key}: seq {} after {}",
                pair[1].2,
                pair[0].2
            );
        }
    }
    // Each instance's counters match what its handler logged; the second member never lost
    // a partition, so it gave nothing back.
    for (index, photon) in [&first, &second].into_iter().enumerate() {
        let handler = &photon.admin_snapshot().await.unwrap().handlers[0];
        assert_eq!(handler.handled, by_member[&index] as u64, "member {index}");
    }
    assert_eq!(
        second.admin_snapshot().await.unwrap().handlers[0].given_back,
        0
    );
    first_executor.shutdown().await.unwrap();
    second_executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_past_max_handler_time_is_cancelled_and_retried() {
    let port = MemStoragePort::new();
    let photon = photon(&port);
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new("billing", "orders")
                .group("billing")
                .max_handler_time(Duration::from_millis(200)),
            move |_event: Event| {
                let call = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    if call == 0 {
                        // Hangs: only the limit ends it.
                        std::future::pending::<()>().await;
                    }
                    Ok::<(), PhotonError>(())
                }
            },
        )
        .start()
        .unwrap();
    publish_one_and_settle(&photon, &executor, Some("o-1")).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one cancelled attempt, one retry"
    );
    assert_eq!(first_handler_outcomes(&photon).await, (1, 1, 0));
    executor.shutdown().await.unwrap();
}
