//! The multi-process crash test on PostgreSQL (photon-testkit's `crash` harness): a durable
//! consumer process killed with SIGKILL at 22 random points while a publisher process
//! publishes 6,000 keyed events (itself killed 3 times), both children of this test
//! writing fsynced logs; every acknowledged publish is handled, each key in order within
//! each consumer incarnation, repeats within the flush window.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<incarnation>|<schema>|<log>`, on the server of `common::url`.

mod common;

use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use photon_backend_postgres::PostgresStoragePort;
use photon_core::{EventStore, TransportCrypto};
use photon_testkit::crash::{run_crash_test_in, run_role, spawn_role, CrashPlan};

use common::PgFactory;

const ROLE_ENV: &str = "PHOTON_POSTGRES_TEST_CRASH_ROLE";

fn plan() -> CrashPlan {
    CrashPlan {
        topic: "crash.loop".into(),
        events: 6_000,
        keys: 32,
        consumer_kills: 22,
        publisher_kills_at: vec![5, 11, 17],
        midpoint: 11,
        drain_deadline: Duration::from_secs(60),
        publish_pause: Duration::from_millis(20),
    }
}

async fn open_store(schema: &str) -> EventStore {
    let port = PostgresStoragePort::builder()
        .url(common::url())
        .schema(schema)
        .pool_size(4)
        .build()
        .await
        .unwrap();
    EventStore::new(Arc::new(port), TransportCrypto::plaintext())
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of consumer_and_publisher_killed_at_random_points"]
fn crash_role() {
    let Ok(spec) = std::env::var(ROLE_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.splitn(4, '|').collect();
    let [role, incarnation, schema, log] = parts[..] else {
        panic!("bad {ROLE_ENV}: {spec}");
    };
    run_role(&plan(), role, incarnation, log, open_store(schema));
}

fn spawn(role: &str, incarnation: usize, schema: &str, log: &Path) -> Child {
    spawn_role(
        ROLE_ENV,
        format!("{role}|{incarnation}|{schema}|{}", log.display()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_and_publisher_killed_at_random_points() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    // The schema exists before the children race to open it.
    drop(factory.port().await.unwrap());
    let directory = tempfile::tempdir().unwrap();
    let schema = factory.schema.clone();
    run_crash_test_in(
        directory.path(),
        &plan(),
        |role, incarnation, log| spawn(role, incarnation, &schema, log),
        || {},
    )
    .await;
}
