//! Lock waits on PostgreSQL (issue 23): a transactional handler that publishes through its
//! transaction and through `Photon::publish` never waits on its own process, an open
//! transaction holding one topic's row holds up only that topic, and a lock held past the
//! port's `lock_timeout` fails the waiting operation with a retryable error instead of a
//! hang.
//!
//! Nothing here sleeps to synchronise: each step waits for an event (a lock wait seen in
//! `pg_stat_activity`, a publish answered), and every wait is bounded by a timeout so that
//! a regression fails the test instead of hanging it.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use photon_backend_postgres::{publish_in_tx, transactional_handler, PostgresStoragePort};
use photon_core::{
    CheckpointKey, EventStore, PhotonError, StoragePort, TransactionalPort, TransportCrypto,
};
use photon_runtime::{HandlerOptions, Photon};
use serde_json::json;
use tokio::time::timeout;

use common::PgFactory;

/// Bound of every wait that should end at once (or after a short lock timeout).
const BOUND: Duration = Duration::from_secs(10);
/// Bound of `wait_idle` and `shutdown` of the executor test.
const IDLE_BOUND: Duration = Duration::from_secs(60);
const EVENTS: usize = 100;
const KEYS: usize = 8;

async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// Waits (bounded) until a session named `name` waits for a lock.
async fn lock_wait_seen(client: &tokio_postgres::Client, name: &str) {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}' \
         AND wait_event_type = 'Lock'"
    );
    let seen = async {
        while count(client, &sql).await == 0 {
            // Polls the server's view; the pause only spaces the queries.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    timeout(BOUND, seen)
        .await
        .unwrap_or_else(|_| panic!("no session of {name} waited for a lock within {BOUND:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_handler_publishing_both_ways_goes_idle_and_shuts_down() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let schema = factory.schema.clone();
    let port = factory.port().await.unwrap();
    let client = common::admin(&factory.url).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.effects (event_id TEXT NOT NULL, seq BIGINT NOT NULL)"
        ))
        .await
        .unwrap();
    let photon = Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(TransportCrypto::plaintext())
        .build()
        .unwrap();

    // Each event: an effect row and an event on `side.tx` through the transaction (both
    // commit with the checkpoint), and an event on `side.direct` through the port's
    // writer, while the transaction holds the checkpoint row and the `side.tx` row. Both
    // side events carry the handled event's id as their key.
    let insert = format!("INSERT INTO {schema}.effects (event_id, seq) VALUES ($1, $2)");
    let handler = {
        let photon = photon.clone();
        transactional_handler(move |tx, event| {
            let (insert, photon) = (insert.clone(), photon.clone());
            Box::pin(async move {
                tx.execute(&insert, &[&event.event_id, &event.seq])
                    .await
                    .map_err(|e| PhotonError::handler(format!("insert an effect: {e}")))?;
                let source = Some(event.event_id.as_str());
                let draft = photon.store().draft(
                    "side.tx",
                    source,
                    json!(null),
                    json!({"seq": event.seq}),
                )?;
                tx.publish(draft).await?;
                photon
                    .publish(
                        "side.direct",
                        source,
                        json!(null),
                        json!({"seq": event.seq}),
                    )
                    .await?;
                Ok(())
            })
        })
    };
    let executor = photon
        .executor()
        .transactional_handler(
            HandlerOptions::new("effects", "orders"),
            Arc::new(port.clone()),
            handler,
        )
        .start()
        .unwrap();
    let publishing = async {
        for n in 0..EVENTS {
            let key = format!("k-{}", n % KEYS);
            photon
                .publish("orders", Some(&key), json!(null), json!({"n": n}))
                .await
                .unwrap();
        }
    };
    // Before the fix, the port's one writer hung here too, behind the checkpoint commit
    // that waited for a handler's transaction.
    timeout(IDLE_BOUND, publishing)
        .await
        .expect("the events are published");

    timeout(IDLE_BOUND, executor.wait_idle())
        .await
        .expect("wait_idle returns")
        .expect("every event handled");
    timeout(IDLE_BOUND, photon.shutdown())
        .await
        .expect("shutdown returns")
        .unwrap();

    let per_event: BTreeMap<String, i64> = common::query_pairs(
        &client,
        &format!("SELECT event_id, count(*) FROM {schema}.effects GROUP BY event_id"),
    )
    .await;
    assert_eq!(per_event.len(), EVENTS, "every event handled");
    assert!(
        per_event.values().all(|rows| *rows == 1),
        "an event handled twice: {per_event:?}"
    );
    // Exactly once with the checkpoint through the transaction; at least once (here: no
    // retry happened, so once) through the writer.
    assert_eq!(
        common::events_and_keys(&client, &schema, "side.tx").await,
        (EVENTS as i64, EVENTS as i64)
    );
    let (direct, direct_sources) = common::events_and_keys(&client, &schema, "side.direct").await;
    assert_eq!(direct_sources, EVENTS as i64);
    assert!(direct >= EVENTS as i64);
    // The handler's transactions alone moved the checkpoint, to the last event.
    let key = CheckpointKey::new("effects", "orders", None);
    assert_eq!(
        port.load_checkpoint(&key).await.unwrap(),
        Some(EVENTS as i64)
    );
}

/// A port whose sessions are named `name`, with a lock timeout that outlasts the test's
/// steps (only a commit ends a wait), its store, and two outside connections: one that
/// watches the port's sessions, one whose transaction holds the locks.
async fn lanes(
    factory: &PgFactory,
    name: &str,
) -> (
    PostgresStoragePort,
    EventStore,
    tokio_postgres::Client,
    tokio_postgres::Client,
) {
    let port = factory
        .builder()
        .url(common::named(&factory.url, name))
        .lock_timeout(Duration::from_secs(120))
        .build()
        .await
        .unwrap();
    let store = EventStore::new(Arc::new(port.clone()), TransportCrypto::plaintext());
    let observer = common::admin(&factory.url).await.unwrap();
    let caller = common::admin(&factory.url).await.unwrap();
    (port, store, observer, caller)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_on_one_topic_holds_up_only_that_topic() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let name = "photon-lanes-open-tx";
    // The wait on topic `a` must outlast the test's steps: only the commit ends it.
    let (port, store, observer, mut caller) = lanes(&factory, name).await;

    let tx = caller.transaction().await.unwrap();
    let draft = store
        .draft("a", None, json!(null), json!({"in": "tx"}))
        .unwrap();
    assert_eq!(publish_in_tx(&tx, &port, draft).await.unwrap().seq, 1);

    // A publish to `a` waits for the transaction (seen as a lock wait of the port).
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .publish("a", None, json!(null), json!({"in": "writer"}))
                .await
        })
    };
    lock_wait_seen(&observer, name).await;

    // A publish to `b` and a checkpoint commit are answered meanwhile.
    let b = timeout(
        BOUND,
        store.publish("b", None, json!(null), json!({"in": "writer"})),
    )
    .await
    .expect("a publish to b is not held up by the transaction on a")
    .unwrap();
    assert_eq!(b.seq, 1);
    let key = CheckpointKey::new("reader", "b", None);
    timeout(BOUND, port.commit_checkpoint(&key, 1))
        .await
        .expect("a checkpoint commit is not held up by the transaction on a")
        .unwrap();
    // ... while the transaction is still open and the publish to `a` still waits for it.
    assert!(!waiting.is_finished(), "the publish to a did not wait");
    assert_eq!(port.head_seq("a", None).await.unwrap(), None);
    tx.commit().await.unwrap();

    let a = timeout(BOUND, waiting)
        .await
        .expect("the commit ends the wait")
        .unwrap()
        .unwrap();
    assert_eq!(a.seq, 2, "after the transaction's event");
    assert_eq!(port.head_seq("a", None).await.unwrap(), Some(2));
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_past_lock_timeout_fails_with_a_retryable_error() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let schema = factory.schema.clone();
    let port: PostgresStoragePort = factory
        .builder()
        .lock_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let store = EventStore::new(Arc::new(port.clone()), TransportCrypto::plaintext());
    let mut holder = common::admin(&factory.url).await.unwrap();
    store
        .publish("held", None, json!(null), json!(1))
        .await
        .unwrap();
    let key = CheckpointKey::new("held-tx", "held", None);
    port.commit_checkpoint(&key, 0).await.unwrap();

    // Another session holds the topic's row and the checkpoint's row.
    let tx = holder.transaction().await.unwrap();
    tx.query_one(
        &format!("SELECT last_seq FROM {schema}.topics WHERE name = 'held' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();
    tx.query_one(
        &format!("SELECT seq FROM {schema}.checkpoints WHERE subscription = 'held-tx' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();

    let failed = timeout(BOUND, store.publish("held", None, json!(null), json!(2)))
        .await
        .expect("the append fails instead of hanging")
        .unwrap_err();
    assert!(failed.is_retryable(), "{failed}");
    assert!(
        matches!(failed, PhotonError::Unavailable { .. }),
        "{failed:?}"
    );
    let text = failed.to_string();
    assert!(text.contains("append to topic \"held\""), "{text}");
    assert!(text.contains("lock_timeout"), "{text}");

    // A transactional handler whose checkpoint row is held: the same, before it runs.
    let event = store
        .open_record(port.list_by_topic("held", 0, 1).await.unwrap().remove(0))
        .unwrap();
    let handler = transactional_handler(|_tx, _event| {
        Box::pin(async { panic!("the handler runs only once the checkpoint is locked") })
    });
    let failed = timeout(
        BOUND,
        port.handle_in_transaction(handler, event, key.clone()),
    )
    .await
    .expect("the handling fails instead of hanging")
    .unwrap_err();
    assert!(failed.is_retryable(), "{failed}");
    let text = failed.to_string();
    assert!(text.contains("lock checkpoint \"held-tx\""), "{text}");
    assert!(text.contains("lock_timeout"), "{text}");

    // Once the lock is released, both go through.
    tx.rollback().await.unwrap();
    let appended = timeout(BOUND, store.publish("held", None, json!(null), json!(2)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(appended.seq, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_across_topics_waits_for_the_earlier_writes_of_each_topic() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let name = "photon-lanes-across";
    let (port, store, observer, mut caller) = lanes(&factory, name).await;

    // Topic `y`'s lane waits for the caller's transaction with a publish.
    let tx = caller.transaction().await.unwrap();
    let draft = store.draft("y", None, json!(null), json!("tx")).unwrap();
    assert_eq!(publish_in_tx(&tx, &port, draft).await.unwrap().seq, 1);
    let first = {
        let store = store.clone();
        tokio::spawn(async move { store.publish("y", None, json!(null), json!("first")).await })
    };
    lock_wait_seen(&observer, name).await;

    // A batch across `x` and `y`, sent (its first poll sends it) while that publish waits.
    let drafts = vec![
        store.draft("x", None, json!(null), json!("batch")).unwrap(),
        store.draft("y", None, json!(null), json!("batch")).unwrap(),
    ];
    let mut batch = port.append_batch(drafts);
    assert!(futures::poll!(&mut batch).is_pending());
    tx.commit().await.unwrap();

    // The batch ran after the publish sent to `y` before it, whatever the lock's order.
    let first = timeout(BOUND, first).await.unwrap().unwrap().unwrap();
    assert_eq!(first.seq, 2);
    let batch = timeout(BOUND, batch)
        .await
        .expect("the batch is answered")
        .unwrap();
    let seqs: Vec<i64> = batch.iter().map(|appended| appended.seq).collect();
    assert_eq!(seqs, [1, 3]);
    // And `y`'s lane goes on after it.
    let next = timeout(BOUND, store.publish("y", None, json!(null), json!("next")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.seq, 4);
}
