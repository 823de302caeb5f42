//! The multi-process crash test on NATS (photon-testkit's `crash` harness), on a
//! `nats-server` this test runs on a free port with its own store directory: a durable
//! consumer process killed with SIGKILL at 22 random points while a publisher process
//! publishes 6,000 keyed events (itself killed 3 times), the server killed and restarted
//! after the 11th consumer kill; once with one stream per topic, once with 4 shards.
//! Every acknowledged publish is handled, each key in order within each consumer
//! incarnation, repeats within the flush window.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<incarnation>|<log>|<url>#<prefix>#<shards>`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{NatsFactory, OwnServer};
use photon_core::{EventStore, TransportCrypto};
use photon_testkit::crash::{located_role, run_located_crash_test, CrashPlan};

const ROLE_ENV: &str = "PHOTON_NATS_TEST_CRASH_ROLE";

fn plan() -> CrashPlan {
    CrashPlan::kill_loop(Duration::from_secs(60))
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of the crash tests"]
fn crash_role() {
    located_role(ROLE_ENV, &plan(), |location| async move {
        let port = common::builder_at(&location)
            .connect_timeout(Duration::from_secs(30))
            .build()
            .await
            .unwrap();
        EventStore::new(Arc::new(port), TransportCrypto::plaintext())
    });
}

async fn crash_test(shards: u32) {
    let Some(mut server) = OwnServer::start() else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let Some(factory) = NatsFactory::on(server.url(), shards).await else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    let location = factory.location();
    run_located_crash_test(directory.path(), &plan(), ROLE_ENV, &location, || {
        server.restart();
    })
    .await;
}

/// One stream, then four shards, one after the other (each runs its own server and two
/// children: running them side by side would only share the same cores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_points_one_stream_then_four_shards() {
    crash_test(1).await;
    crash_test(4).await;
}
