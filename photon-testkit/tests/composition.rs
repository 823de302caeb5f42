//! Composition testing on every port: seeded random schedules of every operation, checked
//! against one model (`photon_testkit::composition`). The in-process port always runs;
//! SQLite, PostgreSQL, NATS and Fluvio run when their backend answers, and fail the test when
//! `PHOTON_TEST_REQUIRE` names them and they do not. Each port opens through the factory of
//! its own conformance test.
//!
//! ```sh
//! PHOTON_COMPOSITION_CASES=1000 cargo test --release -p photon-testkit --test composition -- sqlite
//! ```

#[path = "../../photon-backend-fluvio/tests/common/mod.rs"]
mod fluvio_common;
#[path = "../../photon-backend-nats/tests/common/mod.rs"]
mod nats_common;
#[path = "../../photon-backend-postgres/tests/common/mod.rs"]
mod postgres_common;
#[path = "../../photon-backend-sqlite/tests/common/mod.rs"]
mod sqlite_common;

use std::sync::Arc;

use photon_testkit::composition::run_cases;
use photon_testkit::{MemFactory, PortFactory};

/// Schedules per port when `PHOTON_COMPOSITION_CASES` is not set.
const CASES: usize = 16;

async fn soak(factory: Option<impl PortFactory>) {
    // The ports' warnings (a request given up, a reconnect) go with the test's output: shown
    // beside a failing schedule, or live with `--nocapture`.
    let filter = tracing_subscriber::EnvFilter::try_from_env("PHOTON_TEST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _already_set = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
    if let Some(factory) = factory {
        run_cases(Arc::new(factory), &[], CASES).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem() {
    soak(Some(MemFactory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    soak(sqlite_common::factory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    soak(postgres_common::PgFactory::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats() {
    soak(nats_common::NatsFactory::from_env(1).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fluvio() {
    soak(fluvio_common::FluvioFactory::from_env(1).await).await;
}
