//! The multi-process crash test on SQLite (photon-testkit's `crash` harness): a durable
//! consumer process killed with SIGKILL at 22 random points while a publisher process
//! publishes 6,000 keyed events (itself killed 3 times), both children of this test
//! writing fsynced logs; every acknowledged publish is handled, each key in order within
//! each consumer incarnation, repeats within the flush window.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<incarnation>|<log>|<db>`.

mod common;

use std::path::Path;
use std::time::Duration;

use photon_testkit::crash::{located_role, run_located_crash_test, CrashPlan};

const ROLE_ENV: &str = "PHOTON_SQLITE_TEST_CRASH_ROLE";

fn plan() -> CrashPlan {
    CrashPlan::kill_loop(Duration::from_secs(60))
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of consumer_and_publisher_killed_at_random_points"]
fn crash_role() {
    located_role(ROLE_ENV, &plan(), |db| async move {
        common::open_store(Path::new(&db))
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_and_publisher_killed_at_random_points() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("crash.db");
    let db = db.display().to_string();
    run_located_crash_test(directory.path(), &plan(), ROLE_ENV, &db, || {}).await;
}
