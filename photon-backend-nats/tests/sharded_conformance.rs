//! The whole conformance suite with 4 stream shards per topic: order holds per key (each
//! key lives in one shard), which is all the suite asserts.

mod common;

use std::sync::Arc;

use common::NatsFactory;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_with_four_shards() {
    for scenario in photon_testkit::SCENARIOS {
        let name = scenario.name;
        let Some(factory) = NatsFactory::from_env(4).await else {
            return;
        };
        println!("scenario {name}");
        photon_testkit::run_scenario(name, Arc::new(factory)).await;
    }
}
