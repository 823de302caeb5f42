//! Processes opening one new database file at the same instant all succeed: opening waits
//! for the other processes' locks (switching to WAL, creating the schema) within the busy
//! timeout instead of failing with "database is locked".
//!
//! Each round starts [`CHILDREN`] copies of this test binary (role [`CHILD_ENV`]) that
//! sleep until the same wall-clock instant, then open the port on a file none of them has
//! created yet, publish one event and exit 0; a child that cannot open prints the error
//! and exits 1.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use photon_backend_sqlite::SqliteStoragePort;
use std::sync::Arc;

use photon_core::{EventStore, StoragePort, TransportCrypto};
use serde_json::json;

const CHILD_ENV: &str = "PHOTON_SQLITE_TEST_OPEN_CHILD";
const CHILDREN: usize = 4;
const ROUNDS: usize = 40;

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// The child: `<db>|<start micros>|<index>`.
#[test]
#[ignore = "child process of simultaneous_opens_of_a_new_file_all_succeed"]
fn open_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split('|');
    let db = parts.next().unwrap().to_owned();
    let start: u128 = parts.next().unwrap().parse().unwrap();
    let index = parts.next().unwrap().to_owned();
    let wait = start.saturating_sub(now_micros());
    std::thread::sleep(Duration::from_micros(u64::try_from(wait).unwrap()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(async {
        let port = SqliteStoragePort::builder().path(&db).build().await?;
        let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
        store
            .publish(
                "open.race",
                Some(&index),
                json!(index),
                json!({"child": index}),
            )
            .await
    });
    if let Err(error) = outcome {
        eprintln!("OPEN-FAILED {error}");
        std::process::exit(1);
    }
}

#[test]
fn simultaneous_opens_of_a_new_file_all_succeed() {
    let directory = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let db = directory.path().join(format!("race-{round}.db"));
        // Far enough ahead that every child has started and is sleeping.
        let start = now_micros() + 300_000;
        let children: Vec<_> = (0..CHILDREN)
            .map(|index| {
                Command::new(&exe)
                    .args([
                        "--ignored",
                        "--exact",
                        "open_child",
                        "--test-threads=1",
                        "--quiet",
                        "--nocapture",
                    ])
                    .env(CHILD_ENV, format!("{}|{start}|{index}", db.display()))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            if !output.status.success() {
                let stderr = String::from_utf8_lossy(&output.stderr);
                let line = stderr
                    .lines()
                    .find(|line| line.contains("OPEN-FAILED"))
                    .map_or_else(|| stderr.trim().to_owned(), str::to_owned);
                failures.push(format!("round {round}: {line}"));
            }
        }
        // Every child that succeeded stored its event: the file holds one per child.
        let port = SqliteStoragePort::builder()
            .path(&db)
            .build_blocking()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let stored = runtime
            .block_on(port.list_by_topic("open.race", 0, 100))
            .unwrap();
        if failures.is_empty() {
            assert_eq!(stored.len(), CHILDREN, "round {round}");
        }
    }
    assert_eq!(failures, Vec::<String>::new(), "opens failed");
}
