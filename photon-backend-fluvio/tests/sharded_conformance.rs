//! The conformance suite, one test per scenario, with 4 Fluvio topic shards per Photon topic: order
//! holds per key (each key lives in one shard), which is all the suite asserts.

mod common;

use common::FluvioFactory;

photon_testkit::conformance_tests!(scenarios: FluvioFactory::from_env(4));
