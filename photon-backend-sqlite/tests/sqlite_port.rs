//! Behaviour specific to the SQLite port: several ports (processes) on one file,
//! idempotent appends, paged replay, retention sweeps, the keyed index.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use photon_backend_sqlite::SqliteStoragePort;
use photon_core::{Body, CheckpointKey, RecordDraft, StartAt, StoragePort, SubscribeRequest};
use serde_json::json;

async fn port(path: &Path) -> SqliteStoragePort {
    SqliteStoragePort::builder()
        .path(path)
        .poll_interval(Duration::from_millis(20))
        .page_size(7)
        .build()
        .await
        .unwrap()
}

fn draft(topic: &str, key: Option<&str>, i: i64) -> RecordDraft {
    photon_testkit::plain_draft(topic, key, json!({ "i": i }))
}

fn request(topic: &str, key: Option<&str>, start: StartAt) -> SubscribeRequest {
    SubscribeRequest {
        topic: topic.to_owned(),
        key: key.map(str::to_owned),
        start,
        durable: None,
    }
}

async fn take(stream: &mut photon_core::RecordStream, count: usize) -> Vec<i64> {
    let mut seqs = Vec::new();
    while seqs.len() < count {
        let next = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
        let record = next
            .unwrap_or_else(|_| panic!("deadline after {seqs:?}"))
            .unwrap()
            .unwrap();
        seqs.push(record.seq);
    }
    seqs
}

/// Appends through a second port (another process's writer) reach a live subscriber of
/// the first within the poll interval, and both ports share one seq sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ports_share_seqs_and_live_tail() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("shared.db");
    let (reader, writer) = (port(&db).await, port(&db).await);
    let mut stream = reader.subscribe(request("t", None, StartAt::Tail));
    // The tail position is taken by the subscribing port's writer; across processes the
    // subscription is established once polled (nothing is there yet).
    assert!(
        tokio::time::timeout(Duration::from_millis(100), stream.next())
            .await
            .is_err()
    );
    let mut appended = Vec::new();
    for i in 0..20 {
        let port = if i % 2 == 0 { &writer } else { &reader };
        appended.push(port.append(draft("t", Some("k"), i)).await.unwrap().seq);
    }
    assert_eq!(appended, (1..=20).collect::<Vec<_>>());
    assert_eq!(take(&mut stream, 20).await, (1..=20).collect::<Vec<_>>());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), stream.next())
            .await
            .is_err()
    );
}

/// A row written before headers existed (its body column exactly as that version wrote it)
/// reads as an event without headers; a row with headers keeps them; and an event without
/// headers is still stored in the old form, so that an older reader reads it.
#[tokio::test]
async fn rows_stored_before_headers_read_as_without_headers() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("old.db");
    let port = port(&db).await;
    let old = port.append(draft("t", None, 0)).await.unwrap();
    let stored_before_headers = r#"{"form":"plain","actor":"u","payload":{"n":1}}"#;
    let connection = rusqlite::Connection::open(&db).unwrap();
    let rewritten = connection
        .execute(
            "UPDATE events SET body = ?1 WHERE event_id = ?2",
            rusqlite::params![stored_before_headers, old.event_id],
        )
        .unwrap();
    assert_eq!(rewritten, 1);
    let mut with_headers = draft("t", None, 2);
    let headers = photon_core::Headers::from([("traceparent".to_owned(), "00-t-s-01".to_owned())]);
    if let Body::Plain { headers: h, .. } = &mut with_headers.body {
        *h = headers.clone();
    }
    let new = port.append(with_headers).await.unwrap();
    let without = port.append(draft("t", None, 3)).await.unwrap();

    let store =
        photon_core::EventStore::new(Arc::new(port), photon_core::TransportCrypto::plaintext());
    let mut events = store.subscribe("t", None, StartAt::Beginning);
    let mut read = Vec::new();
    for _ in 0..3 {
        let next = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        read.push(next.unwrap().unwrap().unwrap());
    }
    let seen: Vec<_> = read
        .iter()
        .map(|e| (e.seq, e.actor.clone(), e.payload.clone(), e.headers.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                old.seq,
                json!("u"),
                json!({"n": 1}),
                photon_core::Headers::new()
            ),
            (new.seq, json!(null), json!({"i": 2}), headers),
            (
                without.seq,
                json!(null),
                json!({"i": 3}),
                photon_core::Headers::new()
            ),
        ]
    );
    let body: String = connection
        .query_row(
            "SELECT body FROM events WHERE event_id = ?1",
            [&without.event_id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(body, r#"{"form":"plain","actor":null,"payload":{"i":3}}"#);
}

/// Appending the same draft twice stores it once and returns the same seq.
#[tokio::test]
async fn retried_append_is_idempotent() {
    let directory = tempfile::tempdir().unwrap();
    let port = port(&directory.path().join("dup.db")).await;
    let first = draft("t", None, 1);
    let a = port.append(first.clone()).await.unwrap();
    let b = port.append(draft("t", None, 2)).await.unwrap();
    let again = port.append(first).await.unwrap();
    assert_eq!((a.seq, b.seq), (1, 2));
    assert_eq!(again, a);
    assert_eq!(port.list_by_topic("t", 0, 100).await.unwrap().len(), 2);
    assert_eq!(port.append(draft("t", None, 3)).await.unwrap().seq, 3);
}

/// Replay crosses many pages (page size 7) in order, with and without a key filter.
#[tokio::test]
async fn replay_pages_through_history() {
    let directory = tempfile::tempdir().unwrap();
    let port = port(&directory.path().join("pages.db")).await;
    for i in 0..100 {
        let key = format!("k{}", i % 3);
        port.append(draft("t", Some(&key), i)).await.unwrap();
    }
    let mut all = port.subscribe(request("t", None, StartAt::AfterSeq(40)));
    assert_eq!(take(&mut all, 60).await, (41..=100).collect::<Vec<_>>());
    let mut keyed = port.subscribe(request("t", Some("k1"), StartAt::Beginning));
    assert_eq!(
        take(&mut keyed, 33).await,
        (0..100)
            .filter(|i| i % 3 == 1)
            .map(|i| i + 1)
            .collect::<Vec<_>>()
    );
    assert_eq!(port.head_seq("t", Some("k2")).await.unwrap(), Some(99));
    assert_eq!(port.head_seq("t", None).await.unwrap(), Some(100));
    assert_eq!(port.head_seq("none", None).await.unwrap(), None);
}

/// Checkpoints written by two ports racing end at the highest value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_never_regress_across_ports() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("ckpt.db");
    let ports: Vec<Arc<dyn StoragePort>> =
        vec![Arc::new(port(&db).await), Arc::new(port(&db).await)];
    let key = CheckpointKey::new("sub", "t", Some("k"));
    let mut tasks = Vec::new();
    for (n, port) in ports.iter().enumerate() {
        let (port, key) = (port.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            for seq in (1..=500).map(|s| if n == 0 { s } else { 501 - s }) {
                port.commit_checkpoint(&key, seq).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(ports[0].load_checkpoint(&key).await.unwrap(), Some(500));
    assert_eq!(
        ports[1]
            .load_checkpoint(&CheckpointKey::new("sub", "t", None))
            .await
            .unwrap(),
        None
    );
}

/// The count sweep keeps the newest events per topic; the age sweep drops old ones.
#[tokio::test]
async fn retention_sweeps_by_count_and_age() {
    let directory = tempfile::tempdir().unwrap();
    let port = SqliteStoragePort::builder()
        .path(directory.path().join("retention.db"))
        .retention_max_events(10)
        .retention_max_age(Duration::from_secs(60))
        .retention_interval(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    // A dead-letter topic of another suffix is kept once marked.
    port.declare_dead_letter_topic("count.failed")
        .await
        .unwrap();
    for i in 0..30 {
        port.append(draft("count", None, i)).await.unwrap();
        port.append(draft("count.dlq", None, i)).await.unwrap();
        port.append(draft("count.failed", None, i)).await.unwrap();
        port.append(draft("count.unmarked", None, i)).await.unwrap();
    }
    for i in 0..6 {
        let mut old = draft("age", None, i);
        if i < 4 {
            old.created_at = Utc::now() - chrono::Duration::hours(1);
        }
        port.append(old).await.unwrap();
    }
    until_seqs(&port, "count", (21..=30).collect()).await;
    until_seqs(&port, "count.unmarked", (21..=30).collect()).await;
    until_seqs(&port, "age", vec![5, 6]).await;
    let kept = seqs(&port, "age").await;
    assert_eq!(kept, vec![5, 6]);
    assert_eq!(port.append(draft("count", None, 30)).await.unwrap().seq, 31);
    // Dead letters are not swept unless asked for.
    let dead = seqs(&port, "count.dlq").await;
    assert_eq!(dead, (1..=30).collect::<Vec<_>>());
    let dead = seqs(&port, "count.failed").await;
    assert_eq!(dead, (1..=30).collect::<Vec<_>>());
}

/// Waits (bounded) until `topic` holds exactly `expected`: the sweep runs on its own timer.
async fn until_seqs(port: &SqliteStoragePort, topic: &str, expected: Vec<i64>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let kept = seqs(port, topic).await;
        if kept == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic} holds {kept:?}, expected {expected:?}"
        );
        // Spaces the reads while the sweep's timer runs.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// With `retention_dead_letters`, dead-letter topics are swept like the others.
#[tokio::test]
async fn retention_sweeps_dead_letters_only_when_asked() {
    let directory = tempfile::tempdir().unwrap();
    let port = SqliteStoragePort::builder()
        .path(directory.path().join("retention-dlq.db"))
        .retention_max_events(10)
        .retention_dead_letters(true)
        .retention_interval(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    port.declare_dead_letter_topic("orders.failed")
        .await
        .unwrap();
    for i in 0..30 {
        port.append(draft("orders.dlq", None, i)).await.unwrap();
        port.append(draft("orders.failed", None, i)).await.unwrap();
    }
    until_seqs(&port, "orders.dlq", (21..=30).collect()).await;
    until_seqs(&port, "orders.failed", (21..=30).collect()).await;
}

/// A subscriber resuming after seq 5 of a topic the count sweep cut to its newest 10 gets
/// one gap naming 6..21, then events 21..=30; one from the beginning gets no gap.
#[tokio::test]
async fn a_swept_range_is_reported_as_a_gap() {
    let directory = tempfile::tempdir().unwrap();
    let port = SqliteStoragePort::builder()
        .path(directory.path().join("gap.db"))
        .retention_max_events(10)
        .retention_interval(Duration::from_millis(50))
        .poll_interval(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    for i in 0..30 {
        port.append(draft("swept", None, i)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut stream = port.subscribe(request("swept", None, StartAt::AfterSeq(5)));
    match stream.next().await.unwrap() {
        Err(photon_core::PhotonError::Gap { topic, from, to }) => {
            assert_eq!((topic.as_str(), from, to), ("swept", 6, 21));
        }
        other => panic!("expected a gap, got {other:?}"),
    }
    let mut seqs = Vec::new();
    for _ in 0..10 {
        seqs.push(stream.next().await.unwrap().unwrap().seq);
    }
    assert_eq!(seqs, (21..=30).collect::<Vec<_>>());
    let mut stream = port.subscribe(request("swept", None, StartAt::Beginning));
    assert_eq!(stream.next().await.unwrap().unwrap().seq, 21);
}

/// A rare key behind many records of other keys is found in bounded scan steps, and a
/// keyed subscriber that has scanned past them then sees only its key's new records.
#[tokio::test]
async fn rare_key_behind_a_long_history() {
    let directory = tempfile::tempdir().unwrap();
    let port = port(&directory.path().join("rare.db")).await;
    for i in 0..10_000 {
        port.append(draft("t", Some("busy"), i)).await.unwrap();
    }
    port.append(draft("t", Some("rare"), 0)).await.unwrap();
    let mut rare = port.subscribe(request("t", Some("rare"), StartAt::Beginning));
    assert_eq!(take(&mut rare, 1).await, vec![10_001]);
    port.append(draft("t", Some("busy"), 1)).await.unwrap();
    port.append(draft("t", Some("rare"), 1)).await.unwrap();
    assert_eq!(take(&mut rare, 1).await, vec![10_003]);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), rare.next())
            .await
            .is_err()
    );
    assert_eq!(
        port.head_seq("t", Some("rare")).await.unwrap(),
        Some(10_003)
    );
    assert_eq!(port.head_seq("t", Some("none")).await.unwrap(), None);
}

#[tokio::test]
async fn an_open_failure_keeps_sqlites_description_and_source() {
    let directory = tempfile::tempdir().unwrap();
    let missing = directory.path().join("no-such-dir").join("x.db");
    let error = SqliteStoragePort::builder()
        .path(&missing)
        .build()
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "sqlite storage error: cannot open the database for writing: unable to open database file: "
            .to_owned() + &missing.display().to_string()
    );
    assert!(std::error::Error::source(&error).is_some());
}

/// The seqs `port` lists for `topic` (up to 100), oldest first.
async fn seqs(port: &SqliteStoragePort, topic: &str) -> Vec<i64> {
    port.list_by_topic(topic, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect()
}

/// An executor with another dead-letter suffix marks its dead-letter topic in the
/// database: the count sweep of another port on the same file (another process's) cuts
/// the event topic and leaves every letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn letters_of_another_suffix_outlive_the_sweep() {
    use photon_runtime::{Event, ExecutorConfig, Photon, PhotonError};

    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("letters.db");
    let port = SqliteStoragePort::builder()
        .path(&path)
        .build()
        .await
        .unwrap();
    let photon = Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(photon_core::TransportCrypto::plaintext())
        .executor_config(
            ExecutorConfig::builder()
                .dead_letter_suffix(".failed")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let executor = photon
        .executor()
        .handler("refuser", "orders", |_event: Event| async {
            Err::<(), _>(PhotonError::handler_permanent("refused"))
        })
        .start()
        .unwrap();
    for i in 0..6 {
        photon
            .publish("orders", None, json!(null), json!(i))
            .await
            .unwrap();
    }
    tokio::time::timeout(Duration::from_secs(60), executor.wait_idle())
        .await
        .expect("the executor goes idle")
        .unwrap();
    let sweeping = SqliteStoragePort::builder()
        .path(&path)
        .retention_max_events(2)
        .retention_interval(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    until_seqs(&sweeping, "orders", vec![5, 6]).await;
    assert_eq!(
        seqs(&port, "orders.failed").await,
        (1..=6).collect::<Vec<_>>()
    );
    let letters = photon.dead_letters("orders").await.unwrap();
    let payloads: Vec<_> = letters.iter().map(|l| l.original.payload.clone()).collect();
    assert_eq!(payloads, (0..6).map(|i| json!(i)).collect::<Vec<_>>());
    executor.shutdown().await.unwrap();
}
