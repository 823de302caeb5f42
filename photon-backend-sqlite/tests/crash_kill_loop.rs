//! The multi-process crash test on SQLite (photon-testkit's `crash` harness): a durable
//! consumer process killed with SIGKILL at 22 random points while a publisher process
//! publishes 6,000 keyed events (itself killed 3 times), both children of this test
//! writing fsynced logs; every acknowledged publish is handled, each key in order within
//! each consumer incarnation, repeats within the flush window.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<incarnation>|<db>|<log>`.

use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use photon_backend_sqlite::SqliteStoragePort;
use photon_core::{EventStore, TransportCrypto};
use photon_testkit::crash::{run_crash_test_in, run_role, spawn_role, CrashPlan};

const ROLE_ENV: &str = "PHOTON_SQLITE_TEST_CRASH_ROLE";

fn plan() -> CrashPlan {
    CrashPlan {
        topic: "crash.loop".into(),
        events: 6_000,
        keys: 32,
        consumer_kills: 22,
        publisher_kills_at: vec![5, 11, 17],
        midpoint: 11,
        drain_deadline: Duration::from_secs(60),
        publish_pause: Duration::from_millis(20),
    }
}

fn open_store(db: &Path) -> EventStore {
    let port = SqliteStoragePort::builder()
        .path(db)
        .poll_interval(Duration::from_millis(10))
        .build_blocking()
        .unwrap();
    EventStore::new(Arc::new(port), TransportCrypto::plaintext())
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of consumer_and_publisher_killed_at_random_points"]
fn crash_role() {
    let Ok(spec) = std::env::var(ROLE_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.splitn(4, '|').collect();
    let [role, incarnation, db, log] = parts[..] else {
        panic!("bad {ROLE_ENV}: {spec}");
    };
    run_role(&plan(), role, incarnation, log, async {
        open_store(Path::new(db))
    });
}

fn spawn(role: &str, incarnation: usize, db: &Path, log: &Path) -> Child {
    spawn_role(
        ROLE_ENV,
        format!("{role}|{incarnation}|{}|{}", db.display(), log.display()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_and_publisher_killed_at_random_points() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("crash.db");
    run_crash_test_in(
        directory.path(),
        &plan(),
        |role, incarnation, log| spawn(role, incarnation, &db, log),
        || {},
    )
    .await;
}
