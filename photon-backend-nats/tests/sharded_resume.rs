//! A whole-topic durable subscription over 4 stream shards resumes every shard from its own
//! position: nothing lost, nothing replayed; `AfterSeq` is exact per shard
//! (`photon_testkit::sharded_resume`).

mod common;

use common::NatsFactory;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_resumes_from_its_own_position() {
    let Some(factory) = NatsFactory::from_env(4).await else {
        return;
    };
    photon_testkit::sharded_resume::every_shard_resumes_from_its_own_position(&factory).await;
}
