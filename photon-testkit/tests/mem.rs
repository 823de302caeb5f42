//! The conformance suite against the in-process port.

photon_testkit::conformance_tests!(async { Some(photon_testkit::MemFactory::new()) });
