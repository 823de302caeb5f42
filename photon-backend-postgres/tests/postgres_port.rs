//! What the PostgreSQL port promises beyond the conformance suite: wake-ups of other
//! ports (processes) through `NOTIFY`, gapless seqs under concurrent ports, deduplication
//! of a retried append, a listener that reconnects, retention held back by checkpoints,
//! isolated schemas, and typed errors on open.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_backend_postgres::PostgresStoragePort;
use photon_core::{
    CheckpointKey, EventStore, PhotonError, StartAt, StoragePort, SubscribeRequest, TransportCrypto,
};
use photon_testkit::{assert_quiet, take_exact, DEADLINE};
use serde_json::json;

use common::PgFactory;

/// Longer than any test: a subscriber configured with it is woken only by notifications.
const NEVER: Duration = Duration::from_secs(3600);

fn store(port: PostgresStoragePort) -> EventStore {
    EventStore::new(Arc::new(port), TransportCrypto::plaintext())
}

fn tail(topic: &str) -> SubscribeRequest {
    SubscribeRequest {
        topic: topic.into(),
        key: None,
        start: StartAt::Tail,
        durable: None,
    }
}

/// A port that never rechecks: only a notification wakes its subscribers.
async fn listening(factory: &PgFactory) -> PostgresStoragePort {
    factory
        .builder()
        .recheck_interval(NEVER)
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_ports_appends_wake_subscribers_through_notify() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let listening = listening(&factory).await;
    let publisher = store(factory.port().await.unwrap());
    let mut stream = listening.subscribe(tail("notify.orders"));
    // Nothing is stored yet: the first poll resolves the tail and waits.
    assert_quiet(&mut stream, Duration::from_millis(300)).await;
    for i in 0..50 {
        publisher
            .publish("notify.orders", None, json!(null), json!({ "i": i }))
            .await
            .unwrap();
    }
    let records = take_exact(&mut stream, 50).await;
    let seqs: Vec<i64> = records.into_iter().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, (1..=50).collect::<Vec<i64>>());
    assert_quiet(&mut stream, Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ports_assign_gapless_seqs() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let mut tasks = Vec::new();
    for port_index in 0..4 {
        let store = store(factory.port().await.unwrap());
        for task in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..50 {
                    let key = format!("p{port_index}t{task}");
                    let appended = store
                        .publish("gapless", Some(&key), json!(null), json!({ "i": i }))
                        .await
                        .unwrap();
                    seqs.push(appended.seq);
                }
                seqs
            }));
        }
    }
    let mut all = Vec::new();
    for task in tasks {
        let seqs = task.await.unwrap();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        all.extend(seqs);
    }
    all.sort_unstable();
    assert_eq!(all, (1..=1600).collect::<Vec<i64>>());
    let port = factory.port().await.unwrap();
    assert_eq!(port.head_seq("gapless", None).await.unwrap(), Some(1600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_append_is_stored_once() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let first = store(factory.port().await.unwrap());
    let second = factory.port().await.unwrap();
    first
        .publish("dedup", None, json!(null), json!("before"))
        .await
        .unwrap();
    let draft = first
        .draft("dedup", None, json!(null), json!("once"))
        .unwrap();
    // The same draft through two ports at once, then again through the first.
    let (a, b) = tokio::join!(
        first.port().append(draft.clone()),
        second.append(draft.clone())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let again = first.port().append(draft.clone()).await.unwrap();
    assert_eq!((a.seq, b.seq, again.seq), (2, 2, 2));
    assert_eq!(a.event_id, draft.envelope_id);
    let after = first
        .publish("dedup", None, json!(null), json!("after"))
        .await
        .unwrap();
    assert_eq!(after.seq, 3);
    let listed = second.list_by_topic("dedup", 0, 10).await.unwrap();
    let seqs: Vec<i64> = listed.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_after_its_connection_is_killed() {
    let application = format!("photon_listen_{}", &common::fresh_schema()[9..]);
    let url = common::named(&common::url(), &application);
    let Some(factory) = PgFactory::on(url).await else {
        return;
    };
    let listening = listening(&factory).await;
    let mut stream = listening.subscribe(tail("reconnect"));
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
    let admin = common::admin(&common::url()).await.unwrap();
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND query ILIKE 'LISTEN%'",
            &[&application],
        )
        .await
        .unwrap();
    assert_eq!(
        killed.len(),
        1,
        "exactly the listener's connection is killed"
    );
    // Give the listener time to reconnect, then publish from another port.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let publisher = store(
        PostgresStoragePort::builder()
            .url(common::url())
            .schema(factory.schema.clone())
            .build()
            .await
            .unwrap(),
    );
    for i in 0..5 {
        publisher
            .publish("reconnect", None, json!(null), json!({ "i": i }))
            .await
            .unwrap();
    }
    let records = take_exact(&mut stream, 5).await;
    let seqs: Vec<i64> = records.into_iter().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
}

/// The seqs of `topic` still stored.
async fn stored(port: &PostgresStoragePort, topic: &str) -> Vec<i64> {
    let records = port.list_by_topic(topic, 0, 1000).await.unwrap();
    records.iter().map(|r| r.seq).collect()
}

/// Waits (within the suite's deadline) until `topic` holds exactly `expected`.
async fn until_stored(port: &PostgresStoragePort, topic: &str, expected: Vec<i64>) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let now = stored(port, topic).await;
        if now == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic} holds {:?}..{:?} ({} records)",
            now.first(),
            now.last(),
            now.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_what_checkpoints_still_need() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let port = factory
        .builder()
        .retention_max_events(10)
        .retention_interval(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let publisher = store(port.clone());
    let held = CheckpointKey::new("billing", "held", None);
    port.commit_checkpoint(&held, 40).await.unwrap();
    // A dead-letter topic of another suffix is kept once marked.
    port.declare_dead_letter_topic("held.failed").await.unwrap();
    for topic in ["held", "free", "held.dlq", "held.failed"] {
        for i in 0..100 {
            publisher
                .publish(topic, None, json!(null), json!({ "i": i }))
                .await
                .unwrap();
        }
    }
    until_stored(&port, "free", (91..=100).collect()).await;
    until_stored(&port, "held", (41..=100).collect()).await;
    // Dead letters are kept without `retention_dead_letters`.
    assert_eq!(
        stored(&port, "held.dlq").await,
        (1..=100).collect::<Vec<i64>>()
    );
    assert_eq!(
        stored(&port, "held.failed").await,
        (1..=100).collect::<Vec<i64>>()
    );
    port.reset_checkpoint(&held, None).await.unwrap();
    until_stored(&port, "held", (91..=100).collect()).await;
    // Passes over every topic ran since: the marked topic is still whole.
    assert_eq!(
        stored(&port, "held.failed").await,
        (1..=100).collect::<Vec<i64>>()
    );
    // Deleting keeps the seqs: the next append continues.
    let next = publisher
        .publish("held", None, json!(null), json!("next"))
        .await
        .unwrap();
    assert_eq!(next.seq, 101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_are_isolated() {
    let (Some(first), Some(second)) = (PgFactory::new().await, PgFactory::new().await) else {
        return;
    };
    let one = first.port().await.unwrap();
    let two = second.port().await.unwrap();
    store(one.clone())
        .publish("shared.name", None, json!(null), json!(1))
        .await
        .unwrap();
    let names: BTreeSet<String> = one
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .map(|topic| topic.name)
        .collect();
    assert_eq!(names, BTreeSet::from(["shared.name".to_owned()]));
    assert_eq!(two.list_topics().await.unwrap(), Vec::new());
    assert_eq!(two.head_seq("shared.name", None).await.unwrap(), None);
    let appended = store(two.clone())
        .publish("shared.name", None, json!(null), json!(2))
        .await
        .unwrap();
    assert_eq!(appended.seq, 1);
}

#[tokio::test]
async fn an_unreachable_server_is_a_retryable_error_without_the_password() {
    let error = PostgresStoragePort::builder()
        .url("postgres://app:hunter2@127.0.0.1:1/none")
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            PhotonError::Unavailable {
                backend: "postgres",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
}

#[tokio::test]
async fn a_bad_schema_name_is_refused_before_connecting() {
    let error = PostgresStoragePort::builder()
        .url("postgres://app@127.0.0.1:1/none")
        .schema("public; DROP TABLE x")
        .build()
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with(
            "invalid configuration schema=\"public; DROP TABLE x\": expected lowercase letters"
        ),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_outlives_its_port_for_reads() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let port = factory.port().await.unwrap();
    let publisher = store(port.clone());
    for i in 0..3 {
        publisher
            .publish("outlive", None, json!(null), json!({ "i": i }))
            .await
            .unwrap();
    }
    let mut stream = port.subscribe(SubscribeRequest {
        topic: "outlive".into(),
        key: None,
        start: StartAt::Beginning,
        durable: None,
    });
    drop(publisher);
    drop(port);
    let mut seqs = Vec::new();
    for _ in 0..3 {
        seqs.push(stream.next().await.unwrap().unwrap().seq);
    }
    assert_eq!(seqs, vec![1, 2, 3]);
}
