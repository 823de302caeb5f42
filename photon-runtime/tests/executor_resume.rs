//! Stopping half-way and resuming on a new `Photon` over the same port: nothing lost,
//! duplicates within the documented bound.

mod executor_support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use executor_support::{eventually, publish_round_robin, HookedPort, Seen};
use photon_core::mem::MemStoragePort;
use photon_runtime::{Event, Executor, ExecutorConfig, FlushPolicy, Photon};

const EVENTS: usize = 2_000;
const KEYS: usize = 20;
const MAX_PENDING: u32 = 100;
const MAX_IN_FLIGHT: usize = 64;

fn flush_policy() -> FlushPolicy {
    // Only the count triggers commits: the window is exactly `MAX_PENDING` events.
    FlushPolicy {
        interval: Duration::from_secs(3600),
        max_pending: MAX_PENDING,
    }
}

fn config() -> ExecutorConfig {
    ExecutorConfig::builder()
        .parallelism(8)
        .max_in_flight(MAX_IN_FLIGHT)
        .shutdown_timeout(Duration::from_millis(200))
        .build()
        .unwrap()
}

/// Starts the recording handler; after `stop_after` events, `on_stop` runs once.
fn start(photon: &Photon, seen: &Seen, crash: Option<HookedPort>, stop_after: usize) -> Executor {
    let handled = Arc::new(AtomicUsize::new(0));
    let seen = seen.clone();
    photon
        .executor()
        .config(config())
        .handler("billing", "orders", move |event: Event| {
            let (seen, handled, crash) = (seen.clone(), handled.clone(), crash.clone());
            async move {
                if crash.as_ref().is_some_and(HookedPort::is_crashed) {
                    // The process is dead: nothing runs any more.
                    std::future::pending::<()>().await;
                }
                tokio::task::yield_now().await;
                seen.record(&event);
                if handled.fetch_add(1, Ordering::SeqCst) + 1 == stop_after {
                    if let Some(port) = &crash {
                        port.crash();
                    }
                }
            }
        })
        .start()
        .unwrap()
}

/// The second run: a new Photon on `memory` (with `flush`, when given), the checkpoint the
/// first run left committed, and the recording handler started on it into `seen`.
async fn resume(
    memory: &MemStoragePort,
    flush: Option<FlushPolicy>,
    seen: &Seen,
) -> (Photon, i64, Executor) {
    let mut builder = Photon::builder().storage_port(memory.clone());
    if let Some(flush) = flush {
        builder = builder.flush_policy(flush);
    }
    let photon = builder.build().unwrap();
    let committed = photon
        .checkpoint("billing", "orders", None)
        .await
        .unwrap()
        .unwrap();
    let executor = start(&photon, seen, None, 0);
    (photon, committed, executor)
}

fn check_resume(first: &Seen, second: &Seen, committed: i64) -> usize {
    let first_seqs: BTreeSet<i64> = first.seqs().into_iter().collect();
    let second_seqs = second.seqs();
    assert_eq!(
        first.seqs().len(),
        first_seqs.len(),
        "no duplicate within the first run"
    );
    // Everything up to the committed checkpoint was handled in the first run...
    assert!((1..=committed).all(|seq| first_seqs.contains(&seq)));
    // ...and the second run handles exactly what follows it, once each, in order per key.
    assert_eq!(
        second_seqs.iter().copied().collect::<BTreeSet<_>>(),
        ((committed + 1)..=EVENTS as i64).collect()
    );
    assert_eq!(second_seqs.len(), EVENTS - committed as usize);
    let all: BTreeSet<i64> = first_seqs
        .iter()
        .chain(second_seqs.iter())
        .copied()
        .collect();
    assert_eq!(all.len(), EVENTS, "every event handled at least once");
    let duplicates = first_seqs.iter().filter(|&&seq| seq > committed).count();
    assert_eq!(duplicates, first_seqs.len() - committed as usize);
    duplicates
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_half_way_redelivers_at_most_one_flush_window_plus_in_flight() {
    let memory = MemStoragePort::new();
    let crashable = HookedPort::new(Arc::new(memory.clone()));
    let first_photon = Photon::builder()
        .storage_port(crashable.clone())
        .flush_policy(flush_policy())
        .build()
        .unwrap();
    publish_round_robin(&first_photon, "orders", EVENTS, KEYS).await;

    let first = Seen::default();
    let executor = start(&first_photon, &first, Some(crashable.clone()), EVENTS / 2);
    assert!(eventually(Duration::from_secs(30), || crashable.is_crashed()).await);
    // Dropping every handle stops the tasks; commits after the crash are lost.
    drop(executor);
    drop(first_photon);
    tokio::time::sleep(Duration::from_millis(400)).await;

    let second = Seen::default();
    let (second_photon, committed, executor) = resume(&memory, Some(flush_policy()), &second).await;
    let expected = EVENTS - committed as usize;
    assert!(eventually(Duration::from_secs(30), || second.len() >= expected).await);
    executor.shutdown().await.unwrap();

    let duplicates = check_resume(&first, &second, committed);
    println!(
        "crash: first run handled {}, committed {committed}, duplicates {duplicates}",
        first.len()
    );
    assert!(
        duplicates <= MAX_PENDING as usize + MAX_IN_FLIGHT,
        "{duplicates} duplicates exceed the documented bound"
    );
    assert_eq!(
        second_photon
            .checkpoint("billing", "orders", None)
            .await
            .unwrap(),
        Some(EVENTS as i64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_shutdown_half_way_commits_everything_finished_in_order() {
    let memory = MemStoragePort::new();
    let first_photon = Photon::builder()
        .storage_port(memory.clone())
        .flush_policy(flush_policy())
        .build()
        .unwrap();
    publish_round_robin(&first_photon, "orders", EVENTS, KEYS).await;

    let first = Seen::default();
    let _executor = start(&first_photon, &first, None, 0);
    assert!(eventually(Duration::from_secs(30), || first.len() >= EVENTS / 2).await);
    first_photon.shutdown().await.unwrap();
    let stopped_at = first.len();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(first.len(), stopped_at, "nothing runs after shutdown");

    let second = Seen::default();
    let (second_photon, committed, executor) = resume(&memory, None, &second).await;
    assert!(
        eventually(Duration::from_secs(30), || second.len()
            >= EVENTS - committed as usize)
        .await
    );
    second_photon.shutdown().await.unwrap();
    drop(executor);

    let duplicates = check_resume(&first, &second, committed);
    println!(
        "graceful: first run handled {}, committed {committed}, duplicates {duplicates}",
        first.len()
    );
    // A graceful shutdown commits every acknowledgement: only finished events waiting
    // behind an unfinished one can come again.
    assert!(
        duplicates <= MAX_IN_FLIGHT,
        "{duplicates} duplicates after a graceful shutdown"
    );
}
