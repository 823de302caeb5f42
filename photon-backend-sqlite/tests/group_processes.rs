//! Consumer groups across processes sharing one SQLite file: the multi-process group tests
//! of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen past its
//! lease), the children being this test binary run again.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use photon_backend_sqlite::SqliteStoragePort;
use photon_core::StoragePort;
use photon_testkit::group_processes::GroupProcesses;

const ROLE_ENV: &str = "PHOTON_SQLITE_TEST_GROUP_ROLE";

fn open_port(db: &Path) -> SqliteStoragePort {
    SqliteStoragePort::builder()
        .path(db)
        .poll_interval(Duration::from_millis(10))
        .build_blocking()
        .unwrap()
}

fn open(db: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move { Arc::new(open_port(Path::new(&db))) as Arc<dyn StoragePort> })
}

/// A child process of the tests below.
#[test]
#[ignore = "child process of the group process tests"]
fn group_child() {
    GroupProcesses::child(ROLE_ENV, open);
}

fn harness(directory: &tempfile::TempDir) -> GroupProcesses {
    let db = directory.path().join("group.db");
    // The schema exists before the children race to open the file.
    drop(open_port(&db));
    GroupProcesses {
        role_env: ROLE_ENV,
        location: db.display().to_string(),
        open,
        dir: directory.path().to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_survive_kills() {
    let directory = tempfile::tempdir().unwrap();
    harness(&directory).members_survive_kills().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_member_is_fenced() {
    let directory = tempfile::tempdir().unwrap();
    harness(&directory).frozen_member_is_fenced().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_hold_through_joins_kills_and_freezes() {
    let directory = tempfile::tempdir().unwrap();
    harness(&directory)
        .handlers_hold_through_joins_kills_and_freezes()
        .await;
}

/// Seeded schedules of joins, SIGKILLs and SIGSTOPs of member and publisher processes
/// (`photon_testkit::composition::ProcessSchedule`), checked from the processes' logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_composition() {
    let directory = tempfile::tempdir().unwrap();
    harness(&directory).composition().await;
}
