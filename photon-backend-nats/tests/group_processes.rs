//! Consumer groups across processes connected to one NATS server: the multi-process group
//! tests of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen past
//! its lease), on 1 and 4 stream shards, each run under its own stream prefix (deleted
//! afterwards). The children are this test binary run again.

mod common;

use std::sync::Arc;

use common::NatsFactory;
use futures::future::BoxFuture;
use photon_backend_nats::NatsStoragePortBuilder;
use photon_core::StoragePort;
use photon_testkit::group_processes::GroupProcesses;

const ROLE_ENV: &str = "PHOTON_NATS_TEST_GROUP_ROLE";

/// `location` is `url#prefix#shards`.
fn open(location: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move {
        let parts: Vec<&str> = location.split('#').collect();
        let port = NatsStoragePortBuilder::new()
            .url(parts[0])
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

fn harness(factory: &NatsFactory, directory: &tempfile::TempDir) -> GroupProcesses {
    GroupProcesses {
        role_env: ROLE_ENV,
        location: format!("{}#{}#{}", factory.url, factory.prefix, factory.shards),
        open,
        dir: directory.path().to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_survive_kills() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory).members_survive_kills().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_survive_kills_four_shards() {
    let Some(factory) = NatsFactory::from_env(4).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory).members_survive_kills().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_member_is_fenced() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory)
        .frozen_member_is_fenced()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_hold_through_joins_kills_and_freezes() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory)
        .handlers_hold_through_joins_kills_and_freezes()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_handlers_hold_through_joins_kills_and_freezes_four_shards() {
    let Some(factory) = NatsFactory::from_env(4).await else {
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
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    harness(&factory, &directory).composition().await;
}
