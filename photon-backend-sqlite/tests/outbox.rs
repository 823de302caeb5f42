//! The transactional outbox on SQLite: an event published inside a transaction is
//! delivered exactly when the transaction commits, never after a rollback, and a live
//! subscriber is woken by the commit (its poll interval is far longer than the test's
//! deadline, so only the wake can deliver in time).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_backend_sqlite::rusqlite::{Connection, TransactionBehavior};
use photon_backend_sqlite::{publish_in_tx, sqlite_error, SqliteStoragePort};
use photon_core::{Event, EventStore, Headers, PhotonError, StartAt, StoragePort, TransportCrypto};
use photon_testkit::outbox;
use serde_json::json;

/// Long enough that a delivery within [`DEADLINE`] can only come from the commit's wake.
const POLL: Duration = Duration::from_secs(60);
const DEADLINE: Duration = Duration::from_secs(5);

async fn open(db: &std::path::Path) -> (SqliteStoragePort, EventStore) {
    let port = SqliteStoragePort::builder()
        .path(db)
        .poll_interval(POLL)
        .build()
        .await
        .unwrap();
    let crypto = TransportCrypto::plaintext()
        .with_key("k1", [7u8; 32])
        .unwrap();
    let store = EventStore::new(Arc::new(port.clone()), crypto);
    (port, store)
}

fn create_orders(tx: &Connection) -> photon_core::Result<()> {
    tx.execute_batch("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER)")
        .map_err(|e| sqlite_error("create the orders table", e))
}

fn order_count(db: &std::path::Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM orders", [], |row| row.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolled_back_publishes_nothing_committed_wakes_the_subscriber_once() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("outbox.db");
    let (port, store) = open(&db).await;
    port.transaction(|tx| create_orders(tx)).await.unwrap();

    // Started before both transactions; it must be woken by the commit, not a poll.
    let first = outbox::first_event(&store, "orders");
    // Let the subscriber reach its wait on the empty topic.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let draft = store
        .draft("orders", Some("o-1"), json!("shop"), json!({"total": 1}))
        .unwrap();
    let rolled_back = port
        .transaction(move |tx| {
            tx.execute("INSERT INTO orders (id, total) VALUES ('o-1', 1)", [])
                .map_err(|e| sqlite_error("insert o-1", e))?;
            tx.publish(draft)?;
            Err::<(), _>(PhotonError::handler_permanent("payment declined"))
        })
        .await;
    assert!(
        matches!(&rolled_back, Err(PhotonError::Handler { message, .. }) if message == "payment declined"),
        "{rolled_back:?}"
    );
    assert_eq!(order_count(&db), 0);
    assert_eq!(port.config().path, db);

    let headers = Headers::from([("request-id".to_owned(), "r-2".to_owned())]);
    let draft = store
        .draft_with_headers(
            "orders",
            Some("o-2"),
            json!("shop"),
            json!({"total": 2}),
            headers.clone(),
        )
        .unwrap();
    let appended = port
        .transaction(move |tx| {
            tx.execute("INSERT INTO orders (id, total) VALUES ('o-2', 2)", [])
                .map_err(|e| sqlite_error("insert o-2", e))?;
            tx.publish(draft)
        })
        .await
        .unwrap();
    // The rolled-back publish used no seq.
    assert_eq!(appended.seq, 1);

    let (event, mut subscriber) = outbox::assert_committed_order(
        first,
        &appended,
        DEADLINE,
        "the commit wakes the subscriber",
    )
    .await;
    assert_eq!(event.headers, headers);
    assert_eq!(order_count(&db), 1);

    // Delivered once: a normal publish after it is the very next event.
    outbox::assert_next_publish_follows(&store, &mut subscriber, DEADLINE).await;

    // Sealed exactly as a publish: the stored body holds no plaintext.
    let body: String = Connection::open(&db)
        .unwrap()
        .query_row("SELECT body FROM events WHERE seq = 1", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert!(
        !body.contains("total") && !body.contains("request-id"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_the_transaction_rolls_back_and_the_writer_goes_on() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("panic.db");
    let (port, store) = open(&db).await;
    port.transaction(|tx| create_orders(tx)).await.unwrap();
    let draft = store
        .draft("orders", None, json!(null), json!({"total": 1}))
        .unwrap();
    let panicked = port
        .transaction(move |tx| {
            tx.publish(draft)?;
            panic!("bug in the caller");
            #[allow(unreachable_code)]
            Ok(())
        })
        .await;
    match panicked {
        Err(PhotonError::Handler {
            message, retryable, ..
        }) => {
            assert!(!retryable);
            assert!(message.contains("bug in the caller"), "{message}");
        }
        other => panic!("expected a handler error, got {other:?}"),
    }
    let appended = store
        .publish("orders", None, json!(null), json!({"total": 2}))
        .await
        .unwrap();
    assert_eq!(appended.seq, 1);
    assert_eq!(port.head_seq("orders", None).await.unwrap(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_in_tx_on_the_callers_own_connection() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("own.db");
    let (port, store) = open(&db).await;
    let mut connection = Connection::open(&db).unwrap();
    create_orders(&connection).unwrap();

    let draft = store
        .draft("orders", Some("o-1"), json!(null), json!({"total": 1}))
        .unwrap();
    match publish_in_tx(&connection, draft.clone()) {
        Err(PhotonError::InvalidInput(message)) => {
            assert!(message.contains("\"orders\""), "{message}")
        }
        other => panic!("outside a transaction it must be refused, got {other:?}"),
    }

    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO orders (id, total) VALUES ('o-1', 1)", [])
        .unwrap();
    publish_in_tx(&tx, draft).unwrap();
    tx.rollback().unwrap();

    let draft = store
        .draft("orders", Some("o-2"), json!(null), json!({"total": 2}))
        .unwrap();
    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO orders (id, total) VALUES ('o-2', 2)", [])
        .unwrap();
    let appended = publish_in_tx(&tx, draft).unwrap();
    tx.commit().unwrap();
    assert_eq!(appended.seq, 1);

    // The port's next append follows the caller's seq.
    let next = store
        .publish("orders", None, json!(null), json!({"total": 3}))
        .await
        .unwrap();
    assert_eq!(next.seq, 2);
    let events: Vec<Event> = store
        .subscribe("orders", None, StartAt::Beginning)
        .take(2)
        .map(Result::unwrap)
        .collect()
        .await;
    let seen: Vec<(i64, String)> = events.iter().map(|e| (e.seq, e.event_id.clone())).collect();
    assert_eq!(
        seen,
        vec![(1, appended.event_id), (2, next.event_id.clone())]
    );
    assert_eq!(events[0].payload, json!({"total": 2}));
    assert_eq!(order_count(&db), 1);
    drop(port);
}
