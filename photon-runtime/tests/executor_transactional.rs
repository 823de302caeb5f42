//! Transactional handlers on SQLite: the handler's writes and the checkpoint advance commit
//! together; a failed attempt rolls its writes back; a dead letter commits with the
//! checkpoint advance; events run in seq order across keys; two consumers of one
//! subscription never apply an event twice.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use photon_backend_sqlite::rusqlite::Connection;
use photon_backend_sqlite::{sqlite_error, transactional_handler, SqliteStoragePort};
use photon_runtime::{
    Event, ExecutorConfig, HandlerOptions, Photon, PhotonError, TransactionalPort,
};
use serde_json::json;

async fn open(db: &std::path::Path) -> (Arc<SqliteStoragePort>, Photon) {
    let port = SqliteStoragePort::builder()
        .path(db)
        .poll_interval(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    port.transaction(|tx| {
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS ledger (n INTEGER PRIMARY KEY AUTOINCREMENT, \
             event_id TEXT NOT NULL, seq INTEGER NOT NULL, topic_key TEXT)",
        )
        .map_err(|e| sqlite_error("create the ledger", e))
    })
    .await
    .unwrap();
    let config = ExecutorConfig::builder()
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(2))
        .jitter(0.0)
        .build()
        .unwrap();
    let photon = Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(photon_runtime::TransportCrypto::plaintext())
        .executor_config(config)
        .build()
        .unwrap();
    (Arc::new(port), photon)
}

fn insert_row(tx: &Connection, event: &Event) -> Result<(), PhotonError> {
    tx.execute(
        "INSERT INTO ledger (event_id, seq, topic_key) VALUES (?1, ?2, ?3)",
        (&event.event_id, event.seq, &event.topic_key),
    )
    .map(drop)
    .map_err(|e| sqlite_error("insert into the ledger", e))
}

/// The ledger's `(seq, event_id)` rows in insertion order.
fn ledger(db: &std::path::Path) -> Vec<(i64, String)> {
    let connection = Connection::open(db).unwrap();
    let mut statement = connection
        .prepare("SELECT seq, event_id FROM ledger ORDER BY n")
        .unwrap();
    let rows = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_roll_back_and_dead_letters_commit_with_the_checkpoint() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("tx.db");
    let (port, photon) = open(&db).await;
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    // seq 2 fails its first attempt after writing (retryable); seq 3 fails for good.
    let handler = transactional_handler(move |tx, event| {
        insert_row(tx, event)?;
        let attempt = counted.fetch_add(1, Ordering::SeqCst);
        match event.payload["n"].as_i64() {
            Some(2) if attempt == 1 => Err(PhotonError::handler("flaky")),
            Some(3) => Err(PhotonError::handler_permanent("declined")),
            _ => Ok(()),
        }
    });
    let executor = photon
        .executor()
        .transactional_handler(HandlerOptions::new("ledger", "orders"), port, handler)
        .start()
        .unwrap();
    let mut published = Vec::new();
    for n in 1..=4 {
        let key = format!("o-{n}");
        let appended = photon
            .publish("orders", Some(&key), json!(null), json!({ "n": n }))
            .await
            .unwrap();
        published.push(appended);
    }
    executor.wait_idle().await.unwrap();
    // 1, 2 twice (the first rolled back), 3 once (not retryable: rolled back), 4.
    assert_eq!(attempts.load(Ordering::SeqCst), 1 + 2 + 1 + 1);
    let expected: Vec<(i64, String)> = [0, 1, 3]
        .iter()
        .map(|&i| (published[i].seq, published[i].event_id.clone()))
        .collect();
    assert_eq!(ledger(&db), expected);
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.event_id, published[2].event_id);
    assert_eq!(letters[0].attempts, 1);
    assert_eq!(letters[0].error, "handler failed: declined");
    assert_eq!(
        photon.checkpoint("ledger", "orders", None).await.unwrap(),
        Some(4)
    );
    executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_different_keys_run_in_seq_order() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("order.db");
    let (port, photon) = open(&db).await;
    let handler = transactional_handler(|tx, event| {
        // Slow on some keys, so that a parallel run would finish them out of order.
        if event.seq % 3 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        insert_row(tx, event)
    });
    let executor = photon
        .executor()
        .transactional_handler(HandlerOptions::new("ledger", "orders"), port, handler)
        .start()
        .unwrap();
    for n in 0..60 {
        let key = format!("k{}", n % 7);
        photon
            .publish("orders", Some(&key), json!(null), json!({ "n": n }))
            .await
            .unwrap();
    }
    executor.wait_idle().await.unwrap();
    let seqs: Vec<i64> = ledger(&db).into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(seqs, (1..=60).collect::<Vec<i64>>());
    executor.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_of_one_subscription_apply_each_event_and_letter_once() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("two.db");
    let (port_a, photon_a) = open(&db).await;
    let (port_b, photon_b) = open(&db).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let mut executors = Vec::new();
    for (port, photon) in [(port_a, &photon_a), (port_b, &photon_b)] {
        let calls = calls.clone();
        let handler = transactional_handler(move |tx, event| {
            if event.payload == json!(100) {
                return Err(PhotonError::handler_permanent("declined"));
            }
            calls.fetch_add(1, Ordering::SeqCst);
            insert_row(tx, event)
        });
        executors.push(
            photon
                .executor()
                .transactional_handler(HandlerOptions::new("ledger", "orders"), port, handler)
                .start()
                .unwrap(),
        );
    }
    let mut ids = Vec::new();
    for n in 0..200 {
        let appended = photon_a
            .publish(
                "orders",
                Some(&format!("k{}", n % 5)),
                json!(null),
                json!(n),
            )
            .await
            .unwrap();
        ids.push((appended.seq, appended.event_id));
    }
    for executor in &executors {
        executor.wait_idle().await.unwrap();
    }
    let failed = ids.remove(100);
    assert_eq!(ledger(&db), ids);
    // Each event's handler committed once: the other consumer found the checkpoint past
    // it, and did not call the handler.
    assert_eq!(calls.load(Ordering::SeqCst), 199);
    // One letter for the failed event: the second consumer's letter found the checkpoint
    // moved with the first one's.
    let letters = photon_a.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.event_id, failed.1);
    for executor in executors {
        executor.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_covered_event_is_not_handled_and_a_group_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("covered.db");
    let (port, photon) = open(&db).await;
    let appended = photon
        .publish("orders", None, json!(null), json!(1))
        .await
        .unwrap();
    let event = photon.get_event(&appended.event_id).await.unwrap().unwrap();
    let handler = transactional_handler(|tx, event| insert_row(tx, event));
    let checkpoint = photon_runtime::CheckpointKey::new("ledger", "orders", None);
    let first = port
        .handle_in_transaction(handler.clone(), event.clone(), checkpoint.clone())
        .await
        .unwrap();
    let second = port
        .handle_in_transaction(handler.clone(), event, checkpoint)
        .await
        .unwrap();
    assert_eq!(
        (first, second),
        (
            photon_runtime::TransactionOutcome::Committed,
            photon_runtime::TransactionOutcome::AlreadyHandled
        )
    );
    assert_eq!(ledger(&db).len(), 1);
    assert_eq!(
        photon.checkpoint("ledger", "orders", None).await.unwrap(),
        Some(1)
    );

    let refused = photon
        .executor()
        .transactional_handler(
            HandlerOptions::new("ledger", "orders").group("billing"),
            port,
            handler,
        )
        .start();
    match refused {
        Err(PhotonError::InvalidInput(message)) => {
            assert!(message.contains("\"billing\""), "{message}")
        }
        other => panic!("expected InvalidInput, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_record_is_dead_lettered_in_the_transaction() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("damaged.db");
    let (port, photon) = open(&db).await;
    let damaged = photon
        .publish("orders", Some("k1"), json!(null), json!(1))
        .await
        .unwrap();
    Connection::open(&db)
        .unwrap()
        .execute("UPDATE events SET body = '{not json' WHERE seq = 1", [])
        .unwrap();
    let healthy = photon
        .publish("orders", Some("k2"), json!(null), json!(2))
        .await
        .unwrap();
    let handler = transactional_handler(|tx, event| insert_row(tx, event));
    let executor = photon
        .executor()
        .transactional_handler(HandlerOptions::new("ledger", "orders"), port, handler)
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(ledger(&db), vec![(2, healthy.event_id)]);
    let letters = photon.dead_letters("orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.event_id, damaged.event_id);
    assert_eq!(letters[0].original.seq, 1);
    assert!(letters[0].original.undecodable.is_some());
    assert_eq!(
        photon.checkpoint("ledger", "orders", None).await.unwrap(),
        Some(2)
    );
    executor.shutdown().await.unwrap();
}
