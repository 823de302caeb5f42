//! The Photon conformance suite against NATS (`PHOTON_NATS_URL`, default the local server),
//! each scenario under its own stream prefix, deleted afterwards.

mod common;

use common::NatsFactory;

photon_testkit::conformance_tests!(NatsFactory::from_env(1));
