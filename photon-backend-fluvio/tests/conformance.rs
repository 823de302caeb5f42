//! The Photon conformance suite against Fluvio (`PHOTON_FLUVIO_ENDPOINT`), each scenario
//! under its own topic prefix.

mod common;

use common::FluvioFactory;

photon_testkit::conformance_tests!(FluvioFactory::from_env(1));
