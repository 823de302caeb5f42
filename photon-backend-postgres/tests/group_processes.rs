//! Consumer groups across processes sharing one PostgreSQL schema: the multi-process group
//! tests of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen past
//! its lease), the children being this test binary run again. The location handed to the
//! children is the schema's name; the server is the test server of `common::url`.

mod common;

use std::sync::Arc;

use futures::future::BoxFuture;
use photon_core::StoragePort;
use photon_testkit::group_processes::GroupProcesses;

use common::PgFactory;

const ROLE_ENV: &str = "PHOTON_POSTGRES_TEST_GROUP_ROLE";

fn open(schema: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move {
        let port = photon_backend_postgres::PostgresStoragePort::builder()
            .url(common::url())
            .schema(schema)
            .pool_size(4)
            .build()
            .await
            .unwrap();
        Arc::new(port) as Arc<dyn StoragePort>
    })
}

/// A child process of the tests below.
#[test]
#[ignore = "child process of the group process tests"]
fn group_child() {
    GroupProcesses::child(ROLE_ENV, open);
}

/// The harness on a fresh schema (created before the children race to open it), with
/// the factory that drops the schema at the end.
async fn harness(directory: &tempfile::TempDir) -> Option<(GroupProcesses, PgFactory)> {
    let factory = PgFactory::new().await?;
    drop(factory.port().await.unwrap());
    let harness = GroupProcesses {
        role_env: ROLE_ENV,
        location: factory.schema.clone(),
        open,
        dir: directory.path().to_owned(),
    };
    Some((harness, factory))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_survive_kills() {
    let directory = tempfile::tempdir().unwrap();
    if let Some((harness, _factory)) = harness(&directory).await {
        harness.members_survive_kills().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_member_is_fenced() {
    let directory = tempfile::tempdir().unwrap();
    if let Some((harness, _factory)) = harness(&directory).await {
        harness.frozen_member_is_fenced().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_hold_through_joins_kills_and_freezes() {
    let directory = tempfile::tempdir().unwrap();
    if let Some((harness, _factory)) = harness(&directory).await {
        harness
            .handlers_hold_through_joins_kills_and_freezes()
            .await;
    }
}

/// Seeded schedules of joins, SIGKILLs and SIGSTOPs of member and publisher processes
/// (`photon_testkit::composition::ProcessSchedule`), checked from the processes' logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_composition() {
    let directory = tempfile::tempdir().unwrap();
    if let Some((harness, _factory)) = harness(&directory).await {
        harness.composition().await;
    }
}
