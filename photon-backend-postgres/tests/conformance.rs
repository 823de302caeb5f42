//! The conformance suite against the test PostgreSQL server: one fresh schema per
//! factory (dropped after); every `open` opens a new port onto that schema (a second
//! `open` is a restart, or another process).

mod common;

photon_testkit::conformance_tests!(common::PgFactory::new());
