//! Consumer groups across processes connected to one Fluvio cluster: the multi-process
//! group tests of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen
//! past its lease), each under its own topic prefix. The children are this test binary run
//! again.

mod common;

use std::sync::Arc;

use common::FluvioFactory;
use futures::future::BoxFuture;
use photon_backend_fluvio::FluvioStoragePortBuilder;
use photon_core::StoragePort;
use photon_testkit::group_processes::GroupProcesses;

const ROLE_ENV: &str = "PHOTON_FLUVIO_TEST_GROUP_ROLE";

/// `location` is `endpoint#prefix`.
fn open(location: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move {
        let parts: Vec<&str> = location.split('#').collect();
        let port = FluvioStoragePortBuilder::new()
            .endpoint(parts[0])
            .prefix(parts[1])
            .shards(parts[2].parse().unwrap())
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

fn harness(factory: &FluvioFactory, directory: &tempfile::TempDir) -> GroupProcesses {
    GroupProcesses {
        role_env: ROLE_ENV,
        location: format!("{}#{}#{}", factory.endpoint, factory.prefix, factory.shards),
        open,
        dir: directory.path().to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_survive_kills() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory).members_survive_kills().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_member_is_fenced() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory)
        .frozen_member_is_fenced()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_survive_kills_three_shards() {
    let Some(factory) = FluvioFactory::from_env(3).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory).members_survive_kills().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_hold_through_joins_kills_and_freezes() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory)
        .handlers_hold_through_joins_kills_and_freezes()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_hold_through_joins_kills_and_freezes_three_shards() {
    let Some(factory) = FluvioFactory::from_env(3).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory)
        .handlers_hold_through_joins_kills_and_freezes()
        .await;
}

/// Seeded schedules of joins, SIGKILLs and SIGSTOPs of member and publisher processes
/// (`photon_testkit::composition::ProcessSchedule`), checked from the processes' logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_composition() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory).composition().await;
}
