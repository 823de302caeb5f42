//! The conformance suite against real SQLite files: one fresh temporary database per
//! factory; every `open` opens a new port onto that file (a second `open` is a restart).

mod common;

photon_testkit::conformance_tests!(common::factory());
