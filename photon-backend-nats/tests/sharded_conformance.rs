//! The conformance scenarios that hold with 4 stream shards per topic.
//!
//! Not run here: `live_delivery`, `subscriber_error_resume` and `payload_shapes`, which
//! expect one total order across keys; with shards, order holds per key (each key lives in one shard) but
//! not across shards. Every other scenario runs.

mod common;

use std::sync::Arc;

use common::NatsFactory;

const CROSS_KEY_ORDER: [&str; 3] = ["live_delivery", "subscriber_error_resume", "payload_shapes"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_with_four_shards() {
    for (name, _) in photon_testkit::SCENARIOS {
        if CROSS_KEY_ORDER.contains(name) {
            continue;
        }
        let Some(factory) = NatsFactory::from_env(4).await else {
            return;
        };
        println!("scenario {name}");
        photon_testkit::run_scenario(name, Arc::new(factory)).await;
    }
}
