//! Every publish acknowledged before a SIGKILL is stored: a child process publishes from
//! 16 tasks and writes each acknowledged `event_id seq` to a file (flushing each line)
//! until it is killed; a new port onto the same file finds every one of them.
//!
//! The child is this test binary run again with `--ignored --exact publish_child` and
//! [`CHILD_ENV`] set.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use photon_backend_sqlite::SqliteStoragePort;
use photon_core::{EventStore, StoragePort, TransportCrypto};
use serde_json::json;

const CHILD_ENV: &str = "PHOTON_SQLITE_TEST_PUBLISH_CHILD";
const TOPIC: &str = "kill.acked";
const TASKS: usize = 16;
const ACKED_BEFORE_KILL: usize = 5_000;

/// The child: publishes until killed, recording each acknowledged publish.
#[test]
#[ignore = "child process of acknowledged_publishes_survive_sigkill"]
fn publish_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (db, out) = spec.split_once('|').unwrap();
    let runtime = photon_testkit::process::child_runtime();
    runtime.block_on(async {
        let port = SqliteStoragePort::builder().path(db).build().await.unwrap();
        let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
        let output = Arc::new(Mutex::new(std::fs::File::create(out).unwrap()));
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let (store, output) = (store.clone(), output.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let key = format!("t{task}");
                    let appended = store
                        .publish(TOPIC, Some(&key), json!(task), json!({"i": i}))
                        .await
                        .unwrap();
                    let mut file = output.lock().unwrap();
                    writeln!(file, "{} {}", appended.event_id, appended.seq).unwrap();
                    file.flush().unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

fn acked(out: &Path) -> Vec<(String, i64)> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            // A line cut by the kill is not counted (its publish may or may not be stored).
            let (id, seq) = line.split_once(' ')?;
            Some((id.to_owned(), seq.parse().ok()?)).filter(|(id, _)| id.len() == 36)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_publishes_survive_sigkill() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("acked.db");
    let out = directory.path().join("acked.txt");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "publish_child",
            "--test-threads=1",
            "--quiet",
        ])
        .env(CHILD_ENV, format!("{}|{}", db.display(), out.display()))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while acked(&out).len() < ACKED_BEFORE_KILL {
        assert!(
            tokio::time::Instant::now() < deadline,
            "child acknowledged only {}",
            acked(&out).len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL, mid-publish
    child.wait().unwrap();

    let acked = acked(&out);
    assert!(acked.len() >= ACKED_BEFORE_KILL);
    let port = SqliteStoragePort::builder()
        .path(&db)
        .build()
        .await
        .unwrap();
    let mut lost = Vec::new();
    for (event_id, seq) in &acked {
        match port.get_record(event_id).await.unwrap() {
            Some(record) => assert_eq!(record.seq, *seq, "seq of {event_id}"),
            None => lost.push(event_id.clone()),
        }
    }
    let head = port.head_seq(TOPIC, None).await.unwrap().unwrap();
    let stored = port.list_by_topic(TOPIC, 0, usize::MAX).await.unwrap();
    println!(
        "acked_survive_kill: {} acknowledged before the kill, {} stored, head seq {head}, lost {}",
        acked.len(),
        stored.len(),
        lost.len()
    );
    assert_eq!(lost, Vec::<String>::new(), "acknowledged publishes lost");
    // Seqs are dense from 1: nothing half-written shows up after the kill.
    assert_eq!(stored.len() as i64, head);
    assert!(stored
        .iter()
        .enumerate()
        .all(|(i, r)| r.seq == i as i64 + 1));
}
