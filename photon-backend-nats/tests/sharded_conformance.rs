//! The conformance suite, one test per scenario, with 4 stream shards per topic: order holds per
//! key (each key lives in one shard), which is all the suite asserts.

mod common;

use common::NatsFactory;

photon_testkit::conformance_tests!(scenarios: NatsFactory::from_env(4));
