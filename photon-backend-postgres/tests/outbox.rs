//! Transactions on PostgreSQL: an event published inside the caller's own transaction is
//! delivered exactly when it commits, never after a rollback, and a live subscriber of
//! another port is woken by the commit (its recheck interval is far longer than the test's
//! deadline, so only the commit's `NOTIFY` can deliver in time); and the port's
//! transactional handling commits a handler's writes with the checkpoint advance, skips a
//! covered event and rolls back a failing handler.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_backend_postgres::{publish_in_tx, transactional_handler, PostgresStoragePort};
use photon_core::{
    CheckpointKey, Event, EventStore, PhotonError, StartAt, StoragePort, TransactionOutcome,
    TransactionalPort, TransportCrypto,
};
use serde_json::json;
use tokio::sync::Notify;

use common::PgFactory;
use photon_testkit::outbox;

/// Long enough that a delivery within [`DEADLINE`] can only come from the commit's wake.
const RECHECK: Duration = Duration::from_secs(60);
const DEADLINE: Duration = Duration::from_secs(5);

async fn open(factory: &PgFactory) -> (PostgresStoragePort, EventStore) {
    let port = factory
        .builder()
        .recheck_interval(RECHECK)
        .build()
        .await
        .unwrap();
    let store = EventStore::new(Arc::new(port.clone()), TransportCrypto::plaintext());
    (port, store)
}

async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolled_back_publishes_nothing_committed_wakes_another_ports_subscriber_once() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let schema = factory.schema.clone();
    let (writer_port, writer_store) = open(&factory).await;
    let (_reader_port, reader_store) = open(&factory).await;
    let mut client = common::admin(&factory.url).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.orders (id TEXT PRIMARY KEY, total BIGINT)"
        ))
        .await
        .unwrap();

    // Started before both transactions; it must be woken by the commit, not a recheck.
    let first = outbox::first_event(&reader_store, "orders");
    // Let the subscriber reach its wait on the empty topic.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let draft = writer_store
        .draft("orders", Some("o-1"), json!("shop"), json!({"total": 1}))
        .unwrap();
    let tx = client.transaction().await.unwrap();
    tx.execute(
        &format!("INSERT INTO {schema}.orders (id, total) VALUES ('o-1', 1)"),
        &[],
    )
    .await
    .unwrap();
    let appended = publish_in_tx(&tx, &writer_port, draft).await.unwrap();
    assert_eq!(appended.seq, 1);
    tx.rollback().await.unwrap();
    assert_eq!(
        count(&client, &format!("SELECT count(*) FROM {schema}.orders")).await,
        0
    );
    assert_eq!(writer_port.head_seq("orders", None).await.unwrap(), None);

    let draft = writer_store
        .draft("orders", Some("o-2"), json!("shop"), json!({"total": 2}))
        .unwrap();
    let tx = client.transaction().await.unwrap();
    tx.execute(
        &format!("INSERT INTO {schema}.orders (id, total) VALUES ('o-2', 2)"),
        &[],
    )
    .await
    .unwrap();
    let appended = publish_in_tx(&tx, &writer_port, draft).await.unwrap();
    // The rolled-back publish used no seq.
    assert_eq!(appended.seq, 1);
    // Not visible before the commit.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!first.is_finished(), "delivered before the commit");
    assert_eq!(writer_port.head_seq("orders", None).await.unwrap(), None);
    tx.commit().await.unwrap();

    let (_, mut subscriber) = outbox::assert_committed_order(
        first,
        &appended,
        DEADLINE,
        "the commit wakes the other port's subscriber",
    )
    .await;
    assert_eq!(
        count(&client, &format!("SELECT count(*) FROM {schema}.orders")).await,
        1
    );

    // Delivered once: a normal publish after it is the very next event, with the next seq
    // (the port's writer and the caller's transaction share the topic's counter).
    outbox::assert_next_publish_follows(&writer_store, &mut subscriber, DEADLINE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_writes_commit_with_the_checkpoint_and_a_covered_event_is_skipped() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let schema = factory.schema.clone();
    let (port, store) = open(&factory).await;
    let client = common::admin(&factory.url).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.handled (event_id TEXT NOT NULL, seq BIGINT NOT NULL)"
        ))
        .await
        .unwrap();
    for n in 1..=2 {
        store
            .publish("jobs", None, json!(null), json!({"n": n}))
            .await
            .unwrap();
    }
    let events: Vec<Event> = store
        .subscribe("jobs", None, StartAt::Beginning)
        .take(2)
        .map(Result::unwrap)
        .collect()
        .await;
    let key = CheckpointKey::new("jobs-tx", "jobs", None);
    let insert = format!("INSERT INTO {schema}.handled (event_id, seq) VALUES ($1, $2)");
    let done = store
        .draft("jobs.done", None, json!(null), json!(null))
        .unwrap();
    let insert_then_fail = {
        let insert = insert.clone();
        transactional_handler(move |tx, event| {
            let (insert, done) = (insert.clone(), done.clone());
            Box::pin(async move {
                tx.execute(&insert, &[&event.event_id, &event.seq])
                    .await
                    .unwrap();
                assert_eq!(tx.publish(done).await?.seq, 1);
                Err(PhotonError::handler("declined"))
            })
        })
    };
    let inserting = transactional_handler(move |tx, event| {
        let insert = insert.clone();
        Box::pin(async move {
            tx.execute(&insert, &[&event.event_id, &event.seq])
                .await
                .map_err(|e| PhotonError::handler_permanent(e.to_string()))?;
            Ok(())
        })
    });

    // A failing handler rolls back its row, its publish and the checkpoint.
    let failed = port
        .handle_in_transaction(insert_then_fail, events[0].clone(), key.clone())
        .await;
    assert!(
        matches!(&failed, Err(PhotonError::Handler { message, .. }) if message == "declined"),
        "{failed:?}"
    );
    let rows = format!("SELECT count(*) FROM {schema}.handled");
    assert_eq!(count(&client, &rows).await, 0);
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), None);
    assert_eq!(port.head_seq("jobs.done", None).await.unwrap(), None);

    for event in &events {
        let outcome = port
            .handle_in_transaction(Arc::clone(&inserting), event.clone(), key.clone())
            .await
            .unwrap();
        assert_eq!(outcome, TransactionOutcome::Committed);
    }
    assert_eq!(count(&client, &rows).await, 2);
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(2));
    // A redelivered (covered) event: the handler is not called.
    let outcome = port
        .handle_in_transaction(Arc::clone(&inserting), events[0].clone(), key.clone())
        .await
        .unwrap();
    assert_eq!(outcome, TransactionOutcome::AlreadyHandled);
    assert_eq!(count(&client, &rows).await, 2);

    // A dead letter commits with the checkpoint advance, once.
    store
        .publish("jobs", None, json!(null), json!({"n": 3}))
        .await
        .unwrap();
    let letter = store
        .draft("jobs.dead", None, json!(null), json!({"seq": 3}))
        .unwrap();
    let stored = port
        .append_with_checkpoint(letter.clone(), key.clone(), 3)
        .await
        .unwrap();
    assert_eq!(stored.map(|a| a.seq), Some(1));
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(3));
    assert_eq!(
        port.append_with_checkpoint(letter, key.clone(), 3)
            .await
            .unwrap(),
        None
    );
    assert_eq!(port.head_seq("jobs.dead", None).await.unwrap(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_consumer_waits_for_the_first_and_skips_the_event() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let schema = factory.schema.clone();
    let (first_port, store) = open(&factory).await;
    // Named, so that its lock wait is found among the sessions of the tests beside it.
    let waiter = "photon-outbox-second-consumer";
    let second_port = factory
        .builder()
        .url(common::named(&factory.url, waiter))
        .build()
        .await
        .unwrap();
    let client = common::admin(&factory.url).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.handled (event_id TEXT NOT NULL, port TEXT NOT NULL)"
        ))
        .await
        .unwrap();
    store
        .publish("jobs", None, json!(null), json!({"n": 1}))
        .await
        .unwrap();
    let event = store
        .subscribe("jobs", None, StartAt::Beginning)
        .next()
        .await
        .unwrap()
        .unwrap();
    let key = CheckpointKey::new("jobs-tx", "jobs", None);
    let insert = format!("INSERT INTO {schema}.handled (event_id, port) VALUES ($1, $2)");
    // The first handler says when it runs (its transaction then holds the checkpoint
    // row) and holds its transaction open until released.
    let (running, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let first_handler = {
        let (insert, running, release) = (insert.clone(), running.clone(), release.clone());
        transactional_handler(move |tx, event| {
            let (insert, running, release) = (insert.clone(), running.clone(), release.clone());
            Box::pin(async move {
                tx.execute(&insert, &[&event.event_id, &"first"])
                    .await
                    .map_err(|e| PhotonError::handler_permanent(e.to_string()))?;
                running.notify_one();
                release.notified().await;
                Ok(())
            })
        })
    };
    let second_handler = transactional_handler(move |tx, event| {
        let insert = insert.clone();
        Box::pin(async move {
            tx.execute(&insert, &[&event.event_id, &"second"])
                .await
                .map_err(|e| PhotonError::handler_permanent(e.to_string()))?;
            Ok(())
        })
    });
    let first = {
        let (event, key) = (event.clone(), key.clone());
        tokio::spawn(async move {
            first_port
                .handle_in_transaction(first_handler, event, key)
                .await
        })
    };
    tokio::time::timeout(DEADLINE, running.notified())
        .await
        .expect("the first handler runs");
    let second = {
        let (port, key) = (second_port.clone(), key.clone());
        tokio::spawn(async move { port.handle_in_transaction(second_handler, event, key).await })
    };
    // The second consumer waits for the first one's checkpoint row.
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{waiter}' \
         AND wait_event_type = 'Lock'"
    );
    let seen = async {
        while count(&client, &waiting).await == 0 {
            // Polls the server's view; the pause only spaces the queries.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(DEADLINE, seen)
        .await
        .expect("the second consumer waits for the first");
    assert!(!second.is_finished(), "the second consumer did not wait");
    release.notify_one();
    let first = tokio::time::timeout(DEADLINE, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.unwrap(), TransactionOutcome::Committed);
    let second = tokio::time::timeout(DEADLINE, second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.unwrap(), TransactionOutcome::AlreadyHandled);
    let rows: Vec<(String, String)> = client
        .query(&format!("SELECT event_id, port FROM {schema}.handled"), &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, "first");
    assert_eq!(second_port.load_checkpoint(&key).await.unwrap(), Some(1));
}
