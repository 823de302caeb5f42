//! The multi-process crash test on PostgreSQL (photon-testkit's `crash` harness): a durable
//! consumer process killed with SIGKILL at 22 random points while a publisher process
//! publishes 6,000 keyed events (itself killed 3 times), both children of this test
//! writing fsynced logs; every acknowledged publish is handled, each key in order within
//! each consumer incarnation, repeats within the flush window.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<incarnation>|<log>|<schema>`, on the server of `common::url`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use photon_core::{EventStore, TransportCrypto};
use photon_testkit::crash::{located_role, run_located_crash_test, CrashPlan};

use common::PgFactory;

const ROLE_ENV: &str = "PHOTON_POSTGRES_TEST_CRASH_ROLE";

fn plan() -> CrashPlan {
    CrashPlan::kill_loop(Duration::from_secs(60))
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of consumer_and_publisher_killed_at_random_points"]
fn crash_role() {
    located_role(ROLE_ENV, &plan(), |schema| async move {
        let port = common::port_on(&schema).await;
        EventStore::new(Arc::new(port), TransportCrypto::plaintext())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_and_publisher_killed_at_random_points() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    // The schema exists before the children race to open it.
    drop(factory.port().await.unwrap());
    let directory = tempfile::tempdir().unwrap();
    run_located_crash_test(directory.path(), &plan(), ROLE_ENV, &factory.schema, || {}).await;
}
